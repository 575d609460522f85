"""The golden ISA simulator (podium/isasim.py) against docs/tensorcore.md: every instruction
with expected values computed here by hand or with plain numpy, every reachable error code
with its ERROR_PC, deadlock, queue-full stalls, and programs whose result depends on
semaphores (checked under many random interleavings)."""

import ml_dtypes
import numpy as np
import pytest

from podium.asm import assemble
from podium.isasim import TensorCoreSim
from spec.isa import Error, Op, encode
from spec.mxu import MXUConfig
from spec.tensorcore import TensorCoreConfig

CFG = TensorCoreConfig()        # 8x8 int8 MXU, 64 KiB VMEM, 32-byte rows and beats
BF16 = TensorCoreConfig(mxu=MXUConfig(fmt="bfloat16"))
BF16_OUT = TensorCoreConfig(mxu=MXUConfig(fmt="bfloat16", out_fmt="bfloat16"))


def sim_run(text, config=CFG, hbm=None, seed=None, capacity=1 << 20, max_steps=100_000):
    sim = TensorCoreSim(config, hbm_capacity=capacity, seed=seed)
    for address, data in (hbm or {}).items():
        sim.hbm.write(address, data)
    sim.load(assemble(text))
    return sim.run(max_steps=max_steps)


def done(text, **kw):
    result = sim_run(text, **kw)
    assert result.status == "done", (result.error, result.error_pc)
    return result


def li(reg, value):
    return f"li r{reg}, {value:#x}\n"


# ---------------------------------------------------------------------------------------
# Scalar instructions


def test_scalar_arithmetic():
    r = done("""
        li r1, 0xFFFFFFFF
        addi r2, r1, 2          # wraps to 1
        li r3, 7
        add r4, r1, r3          # 6
        sub r5, r0, r3          # -7 mod 2**32
        mul r6, r1, r1          # (2**32-1)**2 mod 2**32 = 1
        li r7, 0x12345678
        mul r8, r7, r7
        slli r9, r3, 29         # 7 << 29 mod 2**32
        srli r10, r1, 28        # logical: 0xF
        li r0, 5                # ignored
        addi r11, r0, -1
        halt
    """)
    regs = r.registers
    assert regs[0] == 0
    assert regs[2] == 1 and regs[4] == 6 and regs[5] == 2**32 - 7 and regs[6] == 1
    assert regs[8] == (0x12345678**2) % 2**32
    assert regs[9] == (7 << 29) % 2**32 and regs[10] == 0xF and regs[11] == 2**32 - 1
    assert r.counters["retired"] == 13
    assert r.pc == 12, "the PC stays on the halt"


def test_branches_and_loops():
    r = done("""
        li r1, 10
        li r2, 0
    loop:
        addi r2, r2, 3
        addi r1, r1, -1
        bne r1, r0, loop        # 10 iterations
        li r3, -1
        li r4, 1
        blt r3, r4, signed      # -1 < 1 signed: taken
        li r5, 99
    signed:
        blt r4, r3, bad         # 1 < -1: not taken
        beq r4, r4, skip
    bad:
        li r6, 99
    skip:
        jmp end
        li r7, 99
    end:
        halt
    """)
    assert r.registers[2] == 30
    assert r.registers[5] == 0 and r.registers[6] == 0 and r.registers[7] == 0
    assert r.counters["retired"] == 2 + 30 + 3 + 2 + 1 + 1


# ---------------------------------------------------------------------------------------
# DMA


def _dma_program(load, run, counts, hstrides, vstrides, hbm_base, vmem_base, sem="s0"):
    text = li(1, run) + "dma.shape 0, r1, r0, r0\n"
    for d, (c, h, v) in enumerate(zip(counts, hstrides, vstrides, strict=True), 1):
        text += li(1, c) + li(2, h) + li(3, v) + f"dma.shape {d}, r1, r2, r3\n"
    text += li(4, hbm_base) + li(5, vmem_base)
    text += f"dma.{'load' if load else 'store'} r4, r5, {sem}\nwait dma, s0\nhalt\n"
    return text


def _expected_copy(src, dst, src_base, dst_base, run, counts, sstrides, dstrides):
    dst = dst.copy()
    for i3 in range(counts[2]):
        for i2 in range(counts[1]):
            for i1 in range(counts[0]):
                s = src_base + i1 * sstrides[0] + i2 * sstrides[1] + i3 * sstrides[2]
                d = dst_base + i1 * dstrides[0] + i2 * dstrides[1] + i3 * dstrides[2]
                dst[d:d + run] = src[s:s + run]
    return dst


def test_dma_load_store_4d(seed):
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 256, 1 << 16, dtype=np.uint8)
    shape = dict(run=64, counts=(3, 2, 2), hstrides=(256, 1024, 4096),
                 vstrides=(64, 224, 512))
    r = done(_dma_program(True, hbm_base=0x2020, vmem_base=0x400, **shape),
             hbm={0: image.tobytes()})
    zeros = np.zeros(CFG.vmem_bytes, dtype=np.uint8)
    expect = _expected_copy(image, zeros, 0x2020, 0x400, 64, shape["counts"],
                            shape["hstrides"], shape["vstrides"])
    assert np.array_equal(r.vmem, expect)
    assert r.counters["bytes_read"] == 64 * 12 and r.semaphores[0] == 0
    # and back: store VMEM (filled by a load of the whole image) to another HBM region
    text = (_dma_program(True, 4096, (16, 1, 1), (4096, 0, 0), (4096, 0, 0), 0, 0)
            .replace("halt\n", "")
            + _dma_program(False, hbm_base=0x20000, vmem_base=0x400, **shape))
    r = done(text, hbm={0: image.tobytes()})
    out = np.frombuffer(r.hbm.read(0, 1 << 18), dtype=np.uint8)
    expect = _expected_copy(image[: 1 << 16], np.zeros(1 << 18, dtype=np.uint8), 0x400,
                            0x20000, 64, shape["counts"], shape["vstrides"],
                            shape["hstrides"])
    expect[: 1 << 16] = image
    assert np.array_equal(out, expect)
    assert r.counters["bytes_written"] == 64 * 12


def test_dma_hbm_addresses_wrap():
    """HBM addresses are 32-bit: a stride of 2**32 - 64 steps back by 64 bytes."""
    image = np.arange(256, dtype=np.uint8)
    r = done(_dma_program(True, 32, (2, 1, 1), (2**32 - 64, 0, 0), (32, 0, 0), 0x80, 0),
             hbm={0: image.tobytes()})
    assert list(r.vmem[:64]) == list(image[0x80:0xA0]) + list(image[0x40:0x60])


# ---------------------------------------------------------------------------------------
# MXU


def _matmul_text(m, k, n, a, b, c, sa, sb, sc, acc=0, flags="emit"):
    return (li(1, m) + li(2, k) + li(3, n) + "mxu.shape r1, r2, r3\n"
            + li(1, sa) + li(2, sb) + li(3, sc) + "mxu.stride r1, r2, r3\n"
            + li(4, a) + li(5, b) + li(6, c)
            + f"matmul r4, r5, r6, {acc}{', ' + flags if flags else ''}\n")


def _load_all(nbytes):
    """Copy HBM [0, nbytes) to VMEM [0, nbytes) (multiples of 1 KiB)."""
    return (li(1, 1024) + "dma.shape 0, r1, r0, r0\n" + li(1, nbytes // 1024) + li(2, 1024)
            + "dma.shape 1, r1, r2, r2\ndma.load r0, r0, s0\nwait mxu, s0\n")


def _place(image, base, stride, matrix):
    raw = np.ascontiguousarray(matrix).view(np.uint8).reshape(matrix.shape[0], -1)
    for i, row in enumerate(raw):
        image[base + i * stride: base + i * stride + len(row)] = row


def test_matmul_int8_strides_and_accumulate(seed):
    rng = np.random.default_rng(seed)
    m, k, n = 5, 19, 13
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    b2 = rng.integers(-128, 128, (k, n), dtype=np.int8)
    image = np.zeros(8192, dtype=np.uint8)
    _place(image, 0x0, 32, a)           # A rows padded to 24 (3 k-tiles) within 32
    _place(image, 0x400, 16, b)         # B rows of 13 within 16 (2 column tiles)
    _place(image, 0x800, 16, b2)
    text = (_load_all(8192)
            + _matmul_text(m, k, n, 0x0, 0x400, 0x1000, 32, 16, 64, acc=4, flags="")
            + _matmul_text(m, k, n, 0x0, 0x800, 0x1000, 32, 16, 64, acc=4,
                           flags="accumulate, emit")
            + _matmul_text(m, k, n, 0x0, 0x800, 0x1400, 32, 16, 64, acc=100)
            + "halt\n")
    r = done(text, hbm={0: image.tobytes()})
    c = r.vmem[0x1000:0x1000 + m * 64].reshape(m, 64)[:, :4 * n].copy().view(np.int32)
    assert np.array_equal(c, a.astype(np.int64) @ b + a.astype(np.int64) @ b2)
    c2 = r.vmem[0x1400:0x1400 + m * 64].reshape(m, 64)[:, :4 * n].copy().view(np.int32)
    assert np.array_equal(c2, a.astype(np.int64) @ b2)
    assert not r.vmem[0x1000 + 4 * n: 0x1000 + 64].any(), "nothing written past n"


@pytest.mark.parametrize("config", [BF16, BF16_OUT], ids=["fp32_out", "bf16_out"])
def test_matmul_bfloat16(config, seed):
    """Small integers: every product and sum is exact in fp32, so numpy is the reference."""
    rng = np.random.default_rng(seed)
    m, k, n = 3, 10, 9
    a = rng.integers(-8, 8, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-8, 8, (k, n)).astype(ml_dtypes.bfloat16)
    image = np.zeros(4096, dtype=np.uint8)
    _place(image, 0x0, 32, a)
    _place(image, 0x400, 32, b)
    text = _load_all(4096) + _matmul_text(m, k, n, 0, 0x400, 0x800, 32, 32, 64) + "halt\n"
    r = done(text, config=config, hbm={0: image.tobytes()})
    width = config.osize * n
    raw = r.vmem[0x800:0x800 + m * 64].reshape(m, 64)[:, :width].copy()
    got = raw.view(np.float32 if config.osize == 4 else ml_dtypes.bfloat16)
    expect = a.astype(np.float32) @ b.astype(np.float32)
    assert np.array_equal(got.astype(np.float32), expect)


# ---------------------------------------------------------------------------------------
# VPU


def _vpu_setup(count, scalar=0, shift=0):
    return li(1, count) + li(2, scalar) + li(3, shift) + "vpu.cfg r1, r2, r3\n"


def _rows_image(values, dtype=np.int32):
    return np.ascontiguousarray(np.asarray(values, dtype=dtype)).view(np.uint8).ravel()


def _vmem_rows(r, base, count, dtype=np.int32):
    return r.vmem[base:base + count * 32].copy().view(dtype).reshape(count, -1)


def test_vop_int32_broadcast_relu_scalar(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-1000, 1000, (4, 8), dtype=np.int32)
    y = rng.integers(-1000, 1000, (4, 8), dtype=np.int32)
    bias = rng.integers(-1000, 1000, (1, 8), dtype=np.int32)
    image = np.zeros(1024, dtype=np.uint8)
    image[0:128] = _rows_image(x)
    image[128:256] = _rows_image(y)
    image[256:288] = _rows_image(bias)
    text = (_load_all(1024).replace("wait mxu", "wait vpu") + _vpu_setup(4, scalar=-3)
            + li(4, 0) + li(5, 128) + li(6, 256) + li(7, 512) + li(8, 640) + li(9, 768)
            + "vop add.int32 r7, r4, r6, src2=broadcast, relu\n"
            + "vop sub.int32 r8, r4, r5\n"
            + "vop mul.int32 r9, r4, r0, src2=scalar\n"
            + "vop max.int32 r4, r4, r5\n"          # in place
            + "halt\n")
    r = done(text, hbm={0: image.tobytes()})
    assert np.array_equal(_vmem_rows(r, 512, 4), np.maximum(x + bias, 0))
    assert np.array_equal(_vmem_rows(r, 640, 4), x - y)
    assert np.array_equal(_vmem_rows(r, 768, 4), x * -3)
    assert np.array_equal(_vmem_rows(r, 0, 4), np.maximum(x, y))


def test_vcast_requantize_and_bf16(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-2**20, 2**20, (2, 8), dtype=np.int32)
    f = rng.standard_normal((2, 8)).astype(np.float32)
    image = np.zeros(1024, dtype=np.uint8)
    image[0:64] = _rows_image(x)
    image[64:128] = _rows_image(f, np.float32)
    scalar, shift = 77, 12
    text = (_load_all(1024).replace("wait mxu", "wait vpu") + _vpu_setup(2, scalar, shift)
            + li(4, 0) + li(5, 64) + li(6, 256) + li(7, 320)
            + "vcast i32_i8 r6, r4\nvcast f32_bf16 r7, r5\nhalt\n")
    r = done(text, hbm={0: image.tobytes()})
    q = _vmem_rows(r, 256, 2, np.int8)
    expect = np.clip((x.astype(np.int64) * scalar + (1 << (shift - 1))) >> shift, -128, 127)
    assert np.array_equal(q[:, :8], expect) and not q[:, 8:].any()
    h = _vmem_rows(r, 320, 2, ml_dtypes.bfloat16)
    assert np.array_equal(h[:, :8], f.astype(ml_dtypes.bfloat16)) and not _vmem_rows(
        r, 320, 2, np.uint16)[:, 8:].any()


def test_vred_sum_max(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-1000, 1000, (6, 8), dtype=np.int32)
    image = np.zeros(1024, dtype=np.uint8)
    image[:192] = _rows_image(x)
    text = (_load_all(1024).replace("wait mxu", "wait vpu") + _vpu_setup(2)
            + li(4, 0) + li(5, 512) + li(6, 576) + li(7, 3)
            + "vred sum.int32 r5, r4, r7\nvred max.int32 r6, r4, r7\nhalt\n")
    r = done(text, hbm={0: image.tobytes()})
    sums = _vmem_rows(r, 512, 2)
    maxs = _vmem_rows(r, 576, 2)
    assert list(sums[:, 0]) == [x[:3].sum(), x[3:].sum()] and not sums[:, 1:].any()
    assert list(maxs[:, 0]) == [x[:3].max(), x[3:].max()]


def test_vtrans_tiles(seed):
    """``vtrans``: two fp32 tiles of 8 x 8 (32-byte rows) and one bfloat16 tile of 16 x 16,
    each transposed bit for bit; a tile transposed in place."""
    rng = np.random.default_rng(seed)
    f = rng.integers(0, 2**32, (16, 8), dtype=np.uint32)
    h = rng.integers(0, 2**16, (16, 16), dtype=np.uint16)
    image = np.zeros(1024, dtype=np.uint8)
    image[0:512] = f.view(np.uint8).reshape(-1)
    image[512:1024] = h.view(np.uint8).reshape(-1)
    text = (_load_all(1024).replace("wait mxu", "wait vpu") + _vpu_setup(2)
            + li(4, 0) + li(5, 1024) + li(6, 512) + li(7, 1536)
            + "vtrans fp32 r5, r4\n" + _vpu_setup(1) + "vtrans bf16 r7, r6\n"
            + "vtrans int32 r4, r4\nhalt\n")
    r = done(text, hbm={0: image.tobytes()})
    assert np.array_equal(_vmem_rows(r, 1024, 16, np.uint32),
                          np.concatenate([f[:8].T, f[8:].T]))
    assert np.array_equal(_vmem_rows(r, 1536, 16, np.uint16), h.T)
    assert np.array_equal(_vmem_rows(r, 0, 8, np.uint32), f[:8].T)       # in place
    no_unit = TensorCoreConfig(vtrans=False)
    assert error_of(_vpu_setup(1) + "vtrans fp32 r0, r0\nhalt\n", config=no_unit) == (
        Error.ILLEGAL_INSTRUCTION, 4)


def test_row_statistics_broadcast(seed):
    """The shift of a numerically stable softmax: ``vred max`` over groups of 3 rows (one
    logical row of 24 fp32 elements each), then ``vop sub`` with ``src2=stat`` (``scalar`` =
    3 rows per group) subtracts each group's maximum from its own rows."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((6, 8)).astype(np.float32) * 10
    image = np.zeros(1024, dtype=np.uint8)
    image[:192] = _rows_image(x, np.float32)
    text = (_load_all(1024).replace("wait mxu", "wait vpu") + _vpu_setup(2, scalar=3)
            + li(4, 0) + li(5, 512) + li(7, 3)
            + "vred max.fp32 r5, r4, r7\nvop sub.fp32 r4, r4, r5, src2=stat\nhalt\n")
    r = done(text, hbm={0: image.tobytes()})
    want = x.reshape(2, 24) - x.reshape(2, 24).max(axis=1, keepdims=True)
    assert np.array_equal(_vmem_rows(r, 0, 6, np.float32).reshape(2, 24), want)
    bad = _vpu_setup(2, scalar=0) + "vop sub.fp32 r0, r0, r0, src2=stat\nhalt\n"
    assert error_of(bad)[0] == Error.VMEM_RANGE     # a group of 0 rows


def test_softmax_rows_with_functions(seed):
    """A numerically stable softmax of two logical rows of 24 fp32 elements (3 VMEM rows each)
    from the VPU's functions and row statistics: max, subtract, exp, sum, reciprocal,
    multiply; within fp32's error of float64 (below); a TensorCore without ``vmath`` refuses
    ``exp`` as an illegal instruction."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((6, 8)) * 8).astype(np.float32)
    image = np.zeros(1024, dtype=np.uint8)
    image[:192] = _rows_image(x, np.float32)
    text = (_load_all(1024).replace("wait mxu", "wait vpu") + li(4, 0) + li(5, 512) + li(7, 3)
            + _vpu_setup(2) + "vred max.fp32 r5, r4, r7\n"
            + _vpu_setup(2, scalar=3) + "vop sub.fp32 r4, r4, r5, src2=stat\n"
            + _vpu_setup(6) + "vop exp.fp32 r4, r4, r0\n"
            + _vpu_setup(2) + "vred sum.fp32 r5, r4, r7\nvop reciprocal.fp32 r5, r5, r0\n"
            + _vpu_setup(2, scalar=3) + "vop mul.fp32 r4, r4, r5, src2=stat\nhalt\n")
    r = done(text, hbm={0: image.tobytes()})
    z = x.reshape(2, 24).astype(np.float64)
    want = np.exp(z - z.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    got = _vmem_rows(r, 0, 6, np.float32).reshape(2, 24)
    # fp32's rounding of x - max (relative 2^-24 of |x - max|) is amplified by exp into a
    # relative error of the same size; the rest (exp, sum, reciprocal, products) a few ULP
    bound = 2.0 ** -23 * (np.abs(z - z.max(axis=1, keepdims=True)) + 4)
    assert (np.abs(got / want - 1) <= bound).all(), (np.abs(got / want - 1) / bound).max()
    no_unit = TensorCoreConfig(vmath=False)
    assert error_of(_vpu_setup(1) + "vop exp.fp32 r0, r0, r0\nhalt\n", config=no_unit)[0] == (
        Error.ILLEGAL_INSTRUCTION)


# ---------------------------------------------------------------------------------------
# Errors


def error_of(text, **kw):
    r = sim_run(text, **kw)
    assert r.status == "error"
    return r.error, r.error_pc


def test_illegal_instructions():
    cases = [
        0x3F << 58,                                        # unknown opcode
        encode(Op.NOP) | 1,                                # reserved bit
        encode(Op.ADD, a=1, b=2, c=3) | 1 << 5,            # immediate bit of a RRR op
        encode(Op.WAIT, queue=3, sem=0),                   # no such queue
        encode(Op.VOP, vop=9, dtype=0),                    # no such VPU operation
        encode(Op.SIGNAL, queue=0, sem=CFG.semaphores),    # semaphore past the last
        encode(Op.DMA_LOAD, b=0, c=0, sem=20),             # ... and not SEM_NONE
    ]
    for word in cases:
        sim = TensorCoreSim(CFG)
        sim.load([encode(Op.NOP), encode(Op.LI, a=1, imm32=1), word, encode(Op.HALT)])
        r = sim.run()
        assert (r.status, r.error, r.error_pc) == ("error", Error.ILLEGAL_INSTRUCTION, 2)
        assert r.registers[1] == 1


def test_pc_range():
    cfg = TensorCoreConfig(imem_depth=16)
    assert error_of("nop\njmp 16\n", config=cfg) == (Error.PC_RANGE, 1)
    assert error_of("li r1, 1\nbne r1, r0, 40000\n", config=cfg) == (Error.PC_RANGE, 1)
    assert sim_run("bne r0, r0, 40000\nhalt\n", config=cfg).status == "done"
    assert error_of("nop\n", config=cfg) == (Error.PC_RANGE, 15), "fell off the end"


VMEM_END = CFG.vmem_bytes


@pytest.mark.parametrize("body", [
    # DMA footprint: the last run ends one beat past VMEM
    li(1, 64) + "dma.shape 0, r1, r0, r0\n" + li(1, 2) + li(2, 64)
    + "dma.shape 1, r1, r2, r2\n" + li(3, VMEM_END - 96) + "dma.load r0, r3, none\n",
    # matmul: A base not a multiple of rows * esize; refused shape; C past VMEM
    _matmul_text(1, 8, 8, 4, 0, 0, 8, 8, 32),
    _matmul_text(0, 8, 8, 0, 0, 0, 8, 8, 32),
    _matmul_text(128, 8, 16, 0, 0, 0, 8, 8, 32, acc=800),
    _matmul_text(2, 8, 8, 0, 0, VMEM_END - 32, 8, 8, 32),
    # VPU rows: misaligned, past VMEM, vred span 0
    _vpu_setup(1) + li(4, 16) + "vop copy.int32 r4, r0, r0\n",
    _vpu_setup(2) + li(4, VMEM_END - 32) + "vcast i8_i32 r0, r4\n",
    _vpu_setup(1) + "vred sum.int32 r0, r0, r0\n",
    # vtrans: two bfloat16 tiles of 16 rows end a row past VMEM; a misaligned destination
    _vpu_setup(2) + li(4, VMEM_END - 31 * 32) + "vtrans bf16 r0, r4\n",
    _vpu_setup(1) + li(4, 8) + "vtrans fp32 r4, r0\n",
])
def test_vmem_range(body):
    text = "nop\n" + body + "halt\n"
    assert error_of(text) == (Error.VMEM_RANGE, len(assemble(text)) - 2)


def test_unused_operands_are_not_checked():
    """``rD`` of a unary or scalar ``vop`` is ignored; C of a matmul without ``emit``."""
    done(_vpu_setup(1) + li(4, 16) + "vop relu.int32 r0, r0, r4\n"
         + "vop add.int32 r0, r0, r4, src2=scalar\n"
         + _matmul_text(1, 8, 8, 0, 0, 4, 8, 8, 32, flags="") + "halt\n")


@pytest.mark.parametrize("shape", [
    "dma.load r0, r0, none\n",                                       # run 0 at start
    li(1, 16) + "dma.shape 0, r1, r0, r0\ndma.load r0, r0, none\n",    # run not a beat
    li(1, 32) + "dma.shape 0, r1, r0, r0\n" + li(2, 8) + "dma.load r2, r0, none\n",
    li(1, 32) + "dma.shape 0, r1, r0, r0\n" + li(2, 8) + "dma.store r0, r2, none\n",
    li(1, 32) + "dma.shape 0, r1, r0, r0\n" + li(2, 2) + li(3, 40)
    + "dma.shape 2, r2, r3, r0\ndma.load r0, r0, none\n",            # HBM stride
    li(1, 32) + "dma.shape 0, r1, r0, r0\ndma.shape 3, r0, r0, r0\n"
    + "dma.load r0, r0, none\n",                                     # count 0
    li(1, 32) + "dma.shape 0, r1, r0, r0\n" + li(2, 65536)
    + "dma.shape 1, r2, r0, r0\ndma.load r0, r0, none\n",            # count too large
])
def test_dma_align(shape):
    text = "nop\n" + shape + "halt\n"
    pc = len(assemble(text)) - 2
    assert error_of(text) == (Error.DMA_ALIGN, pc)


def test_dma_response():
    """A load from the last beat before the capacity works; one past it is refused."""
    capacity = 1 << 16
    ok = (li(1, 32) + "dma.shape 0, r1, r0, r0\n" + li(2, capacity - 32)
          + "dma.load r2, r0, s1\nwait dma, s1\n")
    r = done(ok + "halt\n", capacity=capacity)
    assert r.counters["bytes_read"] == 32
    bad = ok + li(3, capacity) + "dma.store r3, r0, s1\nli r9, 9\nhalt\n"
    r = sim_run(bad, capacity=capacity)
    assert (r.status, r.error, r.error_pc) == ("error", Error.DMA_RESPONSE, 6)
    assert r.semaphores[1] == 0 and r.counters["bytes_written"] == 0


def test_sem_overflow():
    loop = "loop:\nsignal vpu, s2\naddi r1, r1, -1\nbne r1, r0, loop\nhalt\n"
    r = sim_run(li(1, 256) + loop)
    assert (r.error, r.error_pc) == (Error.SEM_OVERFLOW, 1)
    assert r.semaphores[2] == 255
    assert done(li(1, 255) + loop).semaphores[2] == 255


def test_deadlock():
    assert error_of("nop\nwait mxu, s3\nhalt\n") == (Error.DEADLOCK, 2)
    # the front end is stuck on a full queue: PC of the instruction it cannot dispatch
    text = "wait vpu, s0\n" + "signal vpu, s1\n" * CFG.queue_depth + "signal dma, s0\nhalt\n"
    assert error_of(text) == (Error.DEADLOCK, CFG.queue_depth)


def test_queue_full_stall_depends_on_depth():
    """A blocked ``wait`` and its queue's later instructions fill the queue: with one entry
    too few the front end never reaches the ``signal`` that unblocks it."""
    text = ("wait vpu, s0\n" + "signal vpu, s1\n" * 5 + "signal dma, s0\n" + "halt\n")
    r = done(text, config=TensorCoreConfig(queue_depth=6))
    assert r.semaphores[:2] == [0, 5] and r.counters["retired"] == 8
    assert error_of(text, config=TensorCoreConfig(queue_depth=5)) == (Error.DEADLOCK, 5)


def test_error_lets_dispatched_work_finish():
    """After an error, instructions dispatched before it still run; nothing after it."""
    text = ("wait vpu, s0\nsignal vpu, s1\nsignal dma, s0\n" + li(1, 4)
            + "dma.load r1, r0, none\nsignal mxu, s2\nhalt\n")
    r = sim_run(text)
    assert (r.error, r.error_pc) == (Error.DMA_ALIGN, 4)
    assert r.semaphores[:3] == [0, 1, 0]


def test_timeout():
    r = sim_run("loop: jmp loop\n", max_steps=1000)
    assert r.status == "timeout" and r.steps == 1000


# ---------------------------------------------------------------------------------------
# Semaphores order engines


_PIPE = """
    li r1, 32
    dma.shape 0, r1, r0, r0
    li r2, 0x100            # HBM source
    li r3, 0x200            # HBM destination
    li r4, 0                # VMEM row x
    li r5, 32               # VMEM row y
    li r6, 1
    vpu.cfg r6, r6, r0
    dma.load r2, r4, s0     # x = HBM[0x100]
    WAIT_X
    vop add.int32 r5, r4, r4     # y = 2x
    SIGNAL_Y
    WAIT_Y
    dma.store r3, r5, s2
    wait dma, s2
    halt
"""


def test_semaphores_order_engines(seed):
    """DMA -> VPU -> DMA through semaphores: the same HBM result under every interleaving.
    Without them, some interleavings read VMEM before it is written."""
    x = np.arange(1, 9, dtype=np.int32)
    image = {0x100: x.tobytes()}
    synced = (_PIPE.replace("WAIT_X", "wait vpu, s0").replace("SIGNAL_Y", "signal vpu, s1")
              .replace("WAIT_Y", "wait dma, s1"))
    racy = _PIPE.replace("WAIT_X", "").replace("SIGNAL_Y", "").replace("WAIT_Y", "")
    outcomes = set()
    for s in range(seed, seed + 20):
        r = done(synced, hbm=image, seed=s)
        assert np.array_equal(np.frombuffer(r.hbm.read(0x200, 32), np.int32), 2 * x)
        outcomes.add(done(racy, hbm=image, seed=s).hbm.read(0x200, 32))
    assert len(outcomes) > 1, "the racy program should depend on the interleaving"


def test_documented_example():
    """The assembly example of docs/tensorcore.md runs and computes what it says."""
    doc = open(__file__.rsplit("/verification/", 1)[0] + "/docs/tensorcore.md").read()
    start = doc.index("    # 4 rows of int32 and a bias row")
    text = "\n".join(line[4:] for line in doc[start:doc.index("\n\n", start)].splitlines())
    x = np.arange(-16, 16, dtype=np.int32).reshape(4, 8) * 100
    bias = np.arange(8, dtype=np.int32) * 10
    r = done(text, hbm={0x1000: x.tobytes() + bias.tobytes()})
    got = np.frombuffer(r.hbm.read(0x2000, 128), np.int8).reshape(4, 32)
    assert np.array_equal(got[:, :8], np.clip((np.maximum(3 * x + bias, 0) * 3 + 128) >> 8,
                                              -128, 127))
    assert not got[:, 8:].any()


def test_vpu_float_ops_and_widening_casts(seed):
    """The remaining operations, dtypes and casts, on values where numpy's float32 and
    ml_dtypes' bfloat16 arithmetic is the doc's (no NaN)."""
    rng = np.random.default_rng(seed)
    f = rng.standard_normal((2, 8)).astype(np.float32)
    g = rng.standard_normal((2, 8)).astype(np.float32)
    h = rng.standard_normal((2, 16)).astype(ml_dtypes.bfloat16)
    k = rng.standard_normal((2, 16)).astype(ml_dtypes.bfloat16)
    q = rng.integers(-128, 128, (2, 32), dtype=np.int8)
    image = np.zeros(1024, dtype=np.uint8)
    for at, values in ((0, f), (64, g), (128, h), (192, k), (256, q)):
        raw = np.ascontiguousarray(values).view(np.uint8).ravel()
        image[at:at + len(raw)] = raw
    text = (_load_all(1024).replace("wait mxu", "wait vpu") + _vpu_setup(2)
            + li(1, 0) + li(2, 64) + li(3, 128) + li(4, 192) + li(5, 256)
            + li(6, 512) + li(7, 576) + li(8, 640) + li(9, 704) + li(10, 768) + li(11, 832)
            + li(12, 896)
            + "vop min.fp32 r6, r1, r2\n"
            + "vop relu.fp32 r7, r1, r0\n"
            + "vop sub.bf16 r8, r3, r4\n"
            + "vop copy.bf16 r9, r3, r0\n"
            + "vcast bf16_f32 r10, r3\n"
            + "vcast i8_i32 r11, r5\n"
            + li(13, 2) + "vred sum.fp32 r12, r1, r13\n"      # spans of 2 rows: f, then g
            + "halt\n")
    r = done(text, hbm={0: image.tobytes()})
    assert np.array_equal(_vmem_rows(r, 512, 2, np.float32), np.minimum(f, g))
    assert np.array_equal(_vmem_rows(r, 576, 2, np.float32), np.where(f > 0, f, 0))
    assert np.array_equal(_vmem_rows(r, 640, 2, np.uint16),
                          (h.astype(np.float32) - k.astype(np.float32))
                          .astype(ml_dtypes.bfloat16).view(np.uint16))
    assert np.array_equal(_vmem_rows(r, 704, 2, np.uint16), h.view(np.uint16))
    assert np.array_equal(_vmem_rows(r, 768, 2, np.float32), h[:, :8].astype(np.float32))
    assert np.array_equal(_vmem_rows(r, 832, 2, np.int32), q[:, :8].astype(np.int32))
    s = f[0] + f[1]                         # rows first, then the pairwise tree
    tree = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
    assert _vmem_rows(r, 896, 1, np.float32)[0, 0] == tree


def test_sem_overflow_on_dma_completion():
    text = (li(1, 255) + "loop:\nsignal dma, s4\naddi r1, r1, -1\nbne r1, r0, loop\n"
            + li(2, 32) + "dma.shape 0, r2, r0, r0\ndma.load r0, r0, s4\nhalt\n")
    r = sim_run(text)
    assert (r.error, r.error_pc) == (Error.SEM_OVERFLOW, len(assemble(text)) - 2)
    assert r.semaphores[4] == 255 and r.counters["bytes_read"] == 32
