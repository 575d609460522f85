"""The compiler (podium/compiler.py) through the golden ISA simulator: GEMMs of many shapes
(dimensions of 1, not multiples of the array, operands larger than VMEM) on several
configurations give numpy's int8 results exactly and, for the float formats, exactly what
the MXU golden model computes for the whole GEMM; MLPs match a numpy reference; programs
do not grow with the GEMM's size; buffers sit in distinct VMEM banks; bad requests are
refused by name. Every run also checks the program under random interleavings of the
engines (a missing semaphore would show as a different result)."""

import ml_dtypes
import numpy as np
import pytest

from podium.compiler import CompileError, GemmTiling, gemm, gemm_reference, mlp, result_bits
from podium.runner import run
from podium.workloads.digits import infer_bf16
from spec.mxu import MXUConfig
from spec.tensorcore import TensorCoreConfig
from verification.models import fp

DEFAULT = TensorCoreConfig()
CONFIGS = {
    "int8": DEFAULT,
    "bf16": TensorCoreConfig(mxu=MXUConfig(fmt="bfloat16")),
    "bf16_to_bf16": TensorCoreConfig(mxu=MXUConfig(fmt="bfloat16", out_fmt="bfloat16")),
    "e5m2": TensorCoreConfig(mxu=MXUConfig(fmt="float8_e5m2")),
    "e4m3_16x16": TensorCoreConfig(mxu=MXUConfig(rows=16, cols=16, fmt="float8_e4m3fn"),
                                   row_bytes=64),
    "int8_16x8_small": TensorCoreConfig(mxu=MXUConfig(rows=16, cols=8, acc_depth=128),
                                        row_bytes=64, vmem_bytes=8192, vmem_banks=2,
                                        queue_depth=2, axi_data_width=64),
    "int8_one_bank": TensorCoreConfig(vmem_bytes=4096, vmem_banks=1),
}
SHAPES = [(1, 1, 1), (1, 40, 1), (9, 1, 33), (8, 8, 8), (7, 9, 10), (33, 65, 17),
          (64, 200, 40), (100, 300, 70)]


def operands(config, M, K, N, rng):
    fmt = config.mxu.fmt
    if fmt == "int8":
        return (rng.integers(-128, 128, (M, K), dtype=np.int8),
                rng.integers(-128, 128, (K, N), dtype=np.int8))
    dtype = fp.DTYPES[fmt]
    return (rng.standard_normal((M, K)).astype(dtype),
            rng.standard_normal((K, N)).astype(dtype))


def check_gemm(config, M, K, N, rng, seeds=(None,), tiling=None):
    program = gemm(config, M, K, N, tiling=tiling)
    a, b = operands(config, M, K, N, rng)
    expect = gemm_reference(config, a, b)
    for seed in seeds:
        result, out = run(program, {"A": a, "B": b}, seed=seed)
        assert result.status == "done", (result.error, result.error_pc, seed)
        assert np.array_equal(result_bits(config, out["C"]), expect), (M, K, N, seed)
        assert result.counters["bytes_written"] == M * program.outputs["C"].row_bytes
    return program


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gemm_shapes(name, shape, seed):
    rng = np.random.default_rng(seed)
    check_gemm(CONFIGS[name], *shape, rng, seeds=(None, seed))


@pytest.mark.parametrize("name", ["int8", "bf16"])
def test_gemm_larger_than_vmem(name, seed):
    """A and B of 96 KiB or more each on a 64 KiB VMEM: K split into chunks that
    accumulate in the MXU accumulator, every block index changing."""
    config = CONFIGS[name]
    M, K, N = 96, 1000, 110
    program = check_gemm(config, M, K, N, np.random.default_rng(seed), seeds=(None, seed))
    assert M * K * config.esize > config.vmem_bytes
    assert program.metadata["grid"][2] > 1, "K must be split"


def test_gemm_tilings_agree(seed):
    """Every legal tiling computes the same result, float sums included."""
    config = CONFIGS["bf16"]
    rng = np.random.default_rng(seed)
    for tiling in (GemmTiling(8, 16, 16), GemmTiling(5, 32, 16), GemmTiling(32, 48, 32)):
        check_gemm(config, 30, 50, 40, rng, tiling=tiling)


def test_program_size_independent_of_gemm_size():
    """Identical for every grid with all extents above 1; otherwise a few branches (one per
    grid index a block's reuse depends on) fewer or more."""
    sizes = [(512, 512, 512), (1024, 1024, 1024), (3000, 700, 2000), (4096, 8192, 4096)]
    lengths = {len(gemm(DEFAULT, *s).words) for s in sizes}
    assert len(lengths) == 1, lengths
    every = [len(gemm(DEFAULT, *s).words) for s in SHAPES] + list(lengths)
    assert max(every) - min(every) <= 8, every


def test_buffers_in_distinct_banks():
    program = gemm(DEFAULT, 512, 512, 512)
    bank = DEFAULT.vmem_bytes // DEFAULT.vmem_banks
    tm, tk, tn = program.metadata["tiling"]
    sizes = {"A": tm * tk, "B": tk * tn, "C": tm * tn * 4}
    used = []
    for name, address in program.metadata["vmem"].items():
        first, last = address // bank, (address + sizes[name[0]] - 1) // bank
        used += list(range(first, last + 1))
    assert len(used) == len(set(used))


# ---------------------------------------------------------------------------------------
# MLP


def mlp_int8_reference(x, layers, requant, activation):
    a = x.astype(np.int64)
    for n, (w, b) in enumerate(layers):
        h = a @ w.astype(np.int64) + b
        if n == len(layers) - 1:
            return h
        if activation == "relu":
            h = np.maximum(h, 0)
        mult, shift = requant[n]
        a = np.clip((h * mult + (1 << (shift - 1))) >> shift, -128, 127)


def random_int8_mlp(widths, rng):
    layers = [(rng.integers(-128, 128, (widths[i], widths[i + 1]), dtype=np.int8),
               rng.integers(-20000, 20000, widths[i + 1]).astype(np.int32))
              for i in range(len(widths) - 1)]
    requant = [(int(rng.integers(1, 40000)), int(rng.integers(16, 24))) for _ in layers[1:]]
    return layers, requant


@pytest.mark.parametrize("widths, batch, activation", [
    ([64, 32, 10], 450, "relu"), ([5, 3], 1, "relu"), ([20, 70, 33, 9], 37, "relu"),
    ([8, 8], 8, "none"), ([100, 17, 40], 130, "none")])
def test_mlp_int8(widths, batch, activation, seed):
    rng = np.random.default_rng(seed)
    layers, requant = random_int8_mlp(widths, rng)
    x = rng.integers(-128, 128, (batch, widths[0]), dtype=np.int8)
    program = mlp(DEFAULT, layers, batch, activation, requant)
    expect = mlp_int8_reference(x, layers, requant, activation)
    for s in (None, seed):
        result, out = run(program, {"X": x}, seed=s)
        assert result.status == "done", (result.error, result.error_pc)
        assert np.array_equal(out["Y"], expect)


@pytest.mark.parametrize("widths, batch", [([64, 32, 10], 77), ([12, 20, 16, 3], 9)])
def test_mlp_bf16(widths, batch, seed):
    config = CONFIGS["bf16"]
    rng = np.random.default_rng(seed)
    layers = [(rng.standard_normal((widths[i], widths[i + 1])).astype(ml_dtypes.bfloat16),
               rng.standard_normal(widths[i + 1]).astype(np.float32))
              for i in range(len(widths) - 1)]
    x = rng.standard_normal((batch, widths[0])).astype(ml_dtypes.bfloat16)
    program = mlp(config, layers, batch, "relu")
    result, out = run(program, {"X": x}, seed=seed)
    assert result.status == "done"
    expect = infer_bf16(layers, x.astype(np.float32), config)
    assert np.array_equal(out["Y"].view(np.uint32), expect.view(np.uint32))


@pytest.mark.parametrize("widths, batch", [([20, 70, 33, 9], 300), ([1000, 8], 50)])
def test_mlp_shallow_queues(widths, batch, seed):
    """Queues of two entries: the VPU's groups (several per hidden layer, the next layer
    waiting for each), the previous tile's output behind the next tile's first matmuls and a
    partial last tile still run without a deadlock, since every ``wait`` is dispatched after
    the ``signal`` it needs."""
    config = TensorCoreConfig(queue_depth=2)
    rng = np.random.default_rng(seed)
    layers, requant = random_int8_mlp(widths, rng)
    x = rng.integers(-128, 128, (batch, widths[0]), dtype=np.int8)
    program = mlp(config, layers, batch, "relu", requant)
    assert program.metadata["tm"] < batch
    for s in (None, seed):
        result, out = run(program, {"X": x}, seed=s)
        assert result.status == "done", (result.error, result.error_pc)
        assert np.array_equal(out["Y"], mlp_int8_reference(x, layers, requant, "relu"))


@pytest.mark.parametrize("rows, n", [(8, 128), (16, 512)])
def test_mlp_benchmark_layer(rows, n, seed):
    """The epilogue benchmark's hidden layer (sim/tensorcore_perf.py): exact, and the
    buffers streamed at the same time in different banks: the weights apart from the input,
    the packed activations and H (the VPU's reads), H apart from the MXU's operands, the
    output apart from the weights and the input."""
    config = TensorCoreConfig(mxu=MXUConfig(rows=rows, cols=rows), vmem_bytes=512 * 1024,
                              row_bytes=4 * rows)
    rng = np.random.default_rng(seed)
    layers, requant = random_int8_mlp([n, n, rows], rng)
    x = rng.integers(-128, 128, (n, n), dtype=np.int8)
    program = mlp(config, layers, n, "relu", requant)
    result, out = run(program, {"X": x}, seed=seed)
    assert result.status == "done", (result.error, result.error_pc)
    assert np.array_equal(out["Y"], mlp_int8_reference(x, layers, requant, "relu"))
    bank = config.vmem_bytes // config.vmem_banks
    vmem = sorted(program.metadata["vmem"].items(), key=lambda item: item[1])
    ends = [address for _, address in vmem[1:]] + [config.vmem_bytes]
    banks = {}
    for (name, address), end in zip(vmem, ends, strict=True):
        banks.setdefault(name[0], set()).update(range(address // bank, (end - 1) // bank + 1))
    for a, b in ("WX", "WP", "WH", "XH", "PH", "OX", "OW"):
        assert not banks[a] & banks[b], (a, b, program.metadata["vmem"])


def test_mlp_program_size_independent_of_batch():
    rng = np.random.default_rng(0)
    layers, requant = random_int8_mlp([64, 32, 10], rng)
    lengths = {len(mlp(DEFAULT, layers, batch, "relu", requant).words)
               for batch in (100, 1000, 60000)}
    assert len(lengths) == 1


# ---------------------------------------------------------------------------------------
# Refusals


@pytest.mark.parametrize("call, message", [
    (lambda: gemm(DEFAULT, 0, 4, 4), "M must be an integer in 1..65535, got 0"),
    (lambda: gemm(DEFAULT, 4, 70000, 4), "K must be an integer in 1..65535"),
    (lambda: gemm(DEFAULT, 4, 4, 4, dtype="bfloat16"),
     "dtype must be the MXU's format 'int8' of this configuration, got 'bfloat16'"),
    (lambda: gemm(DEFAULT, 4, 4, 4, tiling=GemmTiling(4, 8, 32)),
     r"tiling GemmTiling\(tm=4, tk=8, tn=32\) must have tk a multiple of 32"),
    (lambda: gemm(DEFAULT, 65535, 65535, 65535), "past the 32-bit address space"),
    (lambda: gemm(TensorCoreConfig(semaphores=4), 4, 4, 4),
     "config.semaphores must be at least 6"),
    (lambda: gemm(TensorCoreConfig(imem_depth=128), 4, 4, 4),
     "config.imem_depth is 128"),
    (lambda: gemm({"rows": 8}, 4, 4, 4), "config must be a TensorCoreConfig"),
    (lambda: mlp(DEFAULT, [(np.zeros((4, 3), np.int8), np.zeros(3, np.int32))], 2,
                 "tanh"), "activation must be one of relu, none, got 'tanh'"),
    (lambda: mlp(DEFAULT, [(np.zeros((4, 3), np.int8), np.zeros(2, np.int32))], 2),
     r"layers\[0\] must be weights of shape \(4, N\) and a bias of shape \(N,\)"),
    (lambda: mlp(DEFAULT, [(np.zeros((4, 3), np.int8), np.zeros(3, np.int32))] * 2, 2),
     r"layers\[1\] must be weights of shape \(3, N\)"),
    (lambda: mlp(DEFAULT, [(np.zeros((4, 4), np.int8), np.zeros(4, np.int32))] * 2, 2),
     "requant must give"),
    (lambda: mlp(DEFAULT, [(np.zeros((4, 4), np.int8), np.zeros(4, np.int32))] * 2, 2,
                 requant=[(1, 70)]), r"requant\[0\] must be"),
    (lambda: mlp(DEFAULT, [(np.zeros((4000, 40), np.int8), np.zeros(40, np.int32))], 2),
     "do not fit vmem_bytes 65536"),
    (lambda: mlp(CONFIGS["e5m2"], [(np.zeros((4, 4)), np.zeros(4))], 2),
     "config.mxu must be int8"),
])
def test_refusals(call, message):
    with pytest.raises(CompileError, match=message):
        call()
