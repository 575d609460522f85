"""VPU regression: the cocotb bench (verification/tb/vpu.py) in Verilator on VPUs of 2 to 16
lanes, and the golden model (verification/models/vpu.py) against hand-worked cases of the
specification (docs/tensorcore.md, "VPU")."""

import numpy as np
import pytest

from hdl.generate import generate, make_config
from sim.runner import lint
from spec.config import ConfigError
from spec.isa import Cast, DType, ROp, VOp
from spec.mxu import MXUConfig
from spec.tensorcore import TensorCoreConfig, VPUTopConfig
from verification.models.vpu import vcast_rows, vop_rows, vred_rows, vtrans_rows
from verification.tests.suite import cases

TB = "verification.tb.vpu"

CONFIGS = {
    "2l": VPUTopConfig(TensorCoreConfig(mxu=MXUConfig(rows=2, cols=2), row_bytes=8,
                                        axi_data_width=64, vmem_bytes=1024, vmath=False)),
    "4l": VPUTopConfig(TensorCoreConfig(mxu=MXUConfig(rows=4, cols=4), row_bytes=16,
                                        axi_data_width=128, vmem_bytes=1024)),
    "8l": VPUTopConfig(TensorCoreConfig(vmem_bytes=4096)),
    "16l": VPUTopConfig(TensorCoreConfig(row_bytes=64, vmem_bytes=8192, vmath=False)),
}


@pytest.mark.parametrize("shape, test", cases(TB, CONFIGS))
def test_vpu(cocotb_run, shape, test):
    cocotb_run("vpu", CONFIGS[shape], TB, test)


# The golden model against hand-worked cases of docs/tensorcore.md ("VPU"), on rows of 4
# lanes (16 bytes).

def rows32(*rows):
    return np.array(rows, dtype=np.int64).astype(np.uint32).view(np.uint8).reshape(len(rows), 16)


def rows16(*rows):
    return np.array(rows, dtype=np.int64).astype(np.uint16).view(np.uint8).reshape(len(rows), 16)


def words(rows):
    return rows.view(np.uint32).tolist()


def f32(x):
    return int(np.float32(x).view(np.uint32))


NAN = 0x7FC00000


@pytest.mark.parametrize("op, x, y, want", [
    (VOp.ADD, [2**31 - 1, -1, 5, 0], [1, -1, -7, 0], [0x80000000, 0xFFFFFFFE, 0xFFFFFFFE, 0]),
    (VOp.SUB, [-2**31, 0, 3, 7], [1, -2**31, 5, 7], [0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0]),
    (VOp.MUL, [2**16, -3, 46341, 7], [2**16, 5, 46341, -1],
     [0, 0xFFFFFFF1, 46341 * 46341, 0xFFFFFFF9]),
    (VOp.MAX, [-1, -2**31, 3, 0], [1, 2**31 - 1, -3, -1], [1, 0x7FFFFFFF, 3, 0]),
    (VOp.MIN, [-1, -2**31, 3, 0], [1, 2**31 - 1, -3, -1], [0xFFFFFFFF, 0x80000000,
                                                            0xFFFFFFFD, 0xFFFFFFFF]),
    (VOp.RELU, [-1, -2**31, 3, 0], [9, 9, 9, 9], [0, 0, 3, 0]),
    (VOp.ABS, [-1, -2**31, 2**31 - 1, 0], [9, 9, 9, 9], [1, 0x80000000, 0x7FFFFFFF, 0]),
])
def test_model_int32(op, x, y, want):
    """int32 wraps modulo 2^32, compares signed, and relu is max(x, 0)."""
    assert words(vop_rows(op, DType.INT32, rows32(x), rows32(y))) == [want]


@pytest.mark.parametrize("op, x, y, want", [
    (VOp.MAX, [0x80000000, 0, NAN | 1, f32(1)], [0, 0x80000000, f32(1), 0xFF800001],
     [0, 0, NAN, NAN]),
    (VOp.MIN, [0x80000000, 0, f32(-1), 0x7F800000], [0, 0x80000000, f32(1), f32(2)],
     [0x80000000, 0x80000000, f32(-1), f32(2)]),
    (VOp.RELU, [0x80000000, 0xFFC00001, f32(-3), 1], [0, 0, 0, 0], [0, NAN, 0, 1]),
    (VOp.COPY, [0xFFC00001, 0x7F800001, 0x80000001, 0xFF800000], [0, 0, 0, 0],
     [NAN, NAN, 0x80000001, 0xFF800000]),
    (VOp.ABS, [0x80000000, 0xFFC00001, 0x80000001, 0xFF800000], [0, 0, 0, 0],
     [0, NAN, 1, 0x7F800000]),
    (VOp.ADD, [f32(1), 0x7F800000, 0x80000000, 1], [f32(2.0**-24), 0xFF800000, 0x80000000, 1],
     [f32(1), NAN, 0x80000000, 2]),
    (VOp.SUB, [f32(1), 0, 0x80000000, f32(3)], [f32(1), 0, 0, f32(3)],
     [0, 0, 0x80000000, 0]),
    (VOp.MUL, [0x7F800000, 0x00000001, 0x3F000000, 0x1F800000], [0, 0x3F800000, 0x00000001,
                                                                 0x1F800000],
     [NAN, 1, 0, f32(2.0**-128)]),
])
def test_model_fp32(op, x, y, want):
    """fp32: NaN canonical, -0 < +0 for max and min, relu(-0) = +0, x - x = +0, subnormals
    kept, ties to even (2^-150 rounds to 0)."""
    assert words(vop_rows(op, DType.FP32, rows32(x), rows32(y))) == [want]


def test_model_bf16_and_broadcast_scalar():
    """bfloat16 is computed in fp32 and rounded once to nearest even (1 + 2^-8: a tie, to
    1.0; 1 + 3 * 2^-8: a tie, to 1 + 2^-6); a scalar uses its low 16 bits; relu after."""
    x = rows16([0x3F80, 0x3F80, 0xBF80, 0x7F7F, 0x3F80, 0x0001, 0x7FC1, 0x8000])
    y = rows16([0x3B80, 0x3C40, 0x3F80, 0x7F7F, 0xBF80, 0x0001, 0x3F80, 0x0000])
    got = vop_rows(VOp.ADD, DType.BF16, x, y).view(np.uint16).tolist()
    assert got == [[0x3F80, 0x3F82, 0x0000, 0x7F80, 0x0000, 0x0002, 0x7FC0, 0x0000]]
    got = vop_rows(VOp.MUL, DType.BF16, x, scalar=0xABCD4000, relu=True)     # x * 2.0
    assert got.view(np.uint16).tolist() == [[0x4000, 0x4000, 0, 0x7F80, 0x4000, 0x0002,
                                             0x7FC0, 0]]
    bias = rows32([1, 2, 3, 4])
    got = vop_rows(VOp.ADD, DType.INT32, rows32([10, 20, 30, 40], [50, 60, 70, 80]), bias,
                   broadcast=True)
    assert words(got) == [[11, 22, 33, 44], [51, 62, 73, 84]]


def test_model_stat_groups():
    """``src2=stat``: word 0 of statistic row g over the rows of group g; an fp32 statistic
    on bfloat16 rows (the difference computed in fp32, rounded once: 1 - 2^-9 -> 1.0)."""
    stats = rows32([5, 9, 9, 9], [-1, 9, 9, 9])
    got = vop_rows(VOp.SUB, DType.INT32, rows32([10, 20, 30, 40], [1, 2, 3, 4],
                                                [7, 7, 7, 7], [0, 0, 0, 0]), stats, group=2)
    want = [[5, 15, 25, 35], [-4, -3, -2, -1], [8, 8, 8, 8], [1, 1, 1, 1]]
    assert words(got) == [[v & 0xFFFFFFFF for v in row] for row in want]
    stat = np.zeros((1, 16), np.uint8)
    stat[0, :4] = np.frombuffer(np.float32(2.0 ** -9).tobytes(), np.uint8)
    x = rows16([0x3F80, 0x4000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x3F80, 0x0000])
    got = vop_rows(VOp.SUB, DType.BF16, x, stat, group=1).view(np.uint16).tolist()
    assert got == [[0x3F80, 0x4000, 0xBB00, 0x7F80, 0xFF80, 0x7FC0, 0x3F80, 0xBB00]]


def test_model_casts():
    """Packing from the lowest byte, the rest zero; bf16 -> f32 exact (NaN canonical);
    requantization rounds half up and saturates; int8 sign-extended."""
    narrow = vcast_rows(Cast.F32_BF16, rows32([f32(1 + 2.0**-8), 0x7F7FFFFF, 0xFFC00001, 1]))
    assert narrow.view(np.uint16).tolist() == [[0x3F80, 0x7F80, 0x7FC0, 0, 0, 0, 0, 0]]
    wide = vcast_rows(Cast.BF16_F32, rows16([0x3F80, 0xFFC1, 0x0001, 0x8000, 9, 9, 9, 9]))
    assert words(wide) == [[0x3F800000, NAN, 0x00010000, 0x80000000]]
    x = rows32([3, -3, 5, -5])
    assert vcast_rows(Cast.I32_I8, x, scalar=1, shift=1)[0, :4].view(np.int8).tolist() == [
        2, -1, 3, -2]
    big = rows32([2**31 - 1, -2**31, -2**31, 1])
    assert vcast_rows(Cast.I32_I8, big, scalar=2**31 - 1, shift=0)[0, :4].view(
        np.int8).tolist() == [127, -128, -128, 127]
    assert vcast_rows(Cast.I32_I8, big, scalar=-2**31, shift=62)[0].view(np.int8).tolist() == [
        -1, 1, 1, 0] + [0] * 12
    q = np.zeros((1, 16), dtype=np.uint8)
    q[0, :4] = np.array([-128, 127, -1, 5], dtype=np.int8).view(np.uint8)
    q[0, 4:] = 0xAA
    assert vcast_rows(Cast.I8_I32, q).view(np.int32).tolist() == [[-128, 127, -1, 5]]


def test_model_reductions():
    """Rows first, in order, then the lanes as a pairwise tree: (1e8 + 1) + (-1e8 + 1) is 0 in
    fp32 (left to right it would be 1); bfloat16 sums in fp32; max propagates NaN."""
    x = rows32([f32(1e8), f32(1), f32(-1e8), f32(1)])
    assert words(vred_rows(ROp.SUM, DType.FP32, x, 1)) == [[0, 0, 0, 0]]
    two = rows32([1, 2, 3, 4], [10, 20, 30, 2**31 - 10])     # 33 + (33 + 2^31 - 6) wraps
    assert words(vred_rows(ROp.SUM, DType.INT32, two, 2)) == [[0x8000003C, 0, 0, 0]]
    assert words(vred_rows(ROp.MAX, DType.INT32, two, 1)) == [[4, 0, 0, 0],
                                                             [2**31 - 10, 0, 0, 0]]
    b = rows16([0x3F80] + [0x3B80] * 7)      # 1 + 7 * 2^-8, exact in fp32, not in bfloat16
    assert words(vred_rows(ROp.SUM, DType.BF16, b, 1)) == [[f32(1 + 7 * 2.0**-8), 0, 0, 0]]
    n = rows32([f32(1), NAN | 5, f32(3), 0x80000000])
    assert words(vred_rows(ROp.MAX, DType.FP32, n, 1)) == [[NAN, 0, 0, 0]]


def test_model_vtrans():
    """A tile of 4 x 4 32-bit elements (16-byte rows) and one of 8 x 8 bfloat16 ones: element
    j of row i to element i of row j, bits unchanged (a NaN payload too); tiles one by one."""
    a = rows32([0, 1, 2, 3], [10, 11, 12, 13], [20, 21, 22, 23], [30, 31, 32, NAN | 5])
    assert words(vtrans_rows(DType.FP32, a)) == [[0, 10, 20, 30], [1, 11, 21, 31],
                                                 [2, 12, 22, 32], [3, 13, 23, NAN | 5]]
    two = np.concatenate([a, a[::-1]])
    assert words(vtrans_rows(DType.INT32, two))[4] == [30, 20, 10, 0]
    b = rows16(*[[16 * i + j for j in range(8)] for i in range(8)])
    got = vtrans_rows(DType.BF16, b).view(np.uint16)
    assert got.tolist() == [[16 * i + j for i in range(8)] for j in range(8)]


def test_generate_lint_random(seed, tmp_path):
    """Random accepted TensorCore shapes give a VPU top that Verilator lints clean."""
    rng = np.random.default_rng(seed)
    for _ in range(2):
        row_bytes = int(2 ** rng.integers(3, 7))
        banks = int(2 ** rng.integers(0, 4))
        vmem = int(2 ** rng.integers(max(10, (banks * row_bytes).bit_length()), 18))
        cols = min(8, row_bytes // 4)
        tc = TensorCoreConfig(mxu=MXUConfig(rows=cols, cols=cols), row_bytes=row_bytes,
                              axi_data_width=min(256, 8 * row_bytes), vmem_bytes=vmem,
                              vmem_banks=banks)
        design = generate("vpu", VPUTopConfig(tc))
        lint(design.write(tmp_path), design.name)


@pytest.mark.slow
@pytest.mark.parametrize("row_bytes, vmath", [(1024, False), (512, True), (128, True)])
def test_generate_lint_widest(row_bytes, vmath, tmp_path):
    """The widest VPU (1 KiB rows: 256 lanes), the widest with the transcendental units
    (512-byte rows: 128 lanes) and the widest with the transpose unit (128-byte rows: 32 lanes,
    both units) on the largest VMEM lint clean; wider with the units is refused
    (``test_config_refused``)."""
    tc = TensorCoreConfig(row_bytes=row_bytes, vmem_bytes=16 << 20, vmath=vmath)
    assert tc.vtrans == (row_bytes <= 128)
    design = generate("vpu", VPUTopConfig(tc))
    lint(design.write(tmp_path), design.name)


def test_config_refused():
    with pytest.raises(ConfigError) as info:
        make_config("vpu", {"tensorcore": {"row_bytes": 12}})
    assert "vpu.tensorcore.row_bytes must be one of 32, 64" in str(info.value)
    with pytest.raises(ConfigError) as info:
        make_config("vpu", {"tensorcore": {"row_bytes": 1024, "vmem_bytes": 1 << 20}})
    assert "vpu.tensorcore.vmath must be False for row_bytes 1024" in str(info.value)
    with pytest.raises(ConfigError) as info:
        make_config("vpu", {"tensorcore": {"row_bytes": 256, "vmem_bytes": 1 << 20,
                                           "vmath": False, "vtrans": True}})
    assert "vpu.tensorcore.vtrans must be False for row_bytes 256" in str(info.value)
