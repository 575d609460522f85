"""The transformer operations of the compiler (podium/transformer.py) on the golden ISA
simulator: softmax, LayerNorm, RMSNorm, GELU (tanh and erf forms), SiLU and residual adds in
fp32 and bfloat16, on shapes of one and several row tiles with features that span several
VMEM rows and leave padding, against the float64 references of
verification/models/transformer.py within the documented tolerances (docs/tensorcore.md,
"Compiler: transformer operations"); every run also under a seeded random interleaving of
the engines. Then the special inputs (NaN, inf, an all -inf row, a zero-variance row), an
operation composed from VMEM-resident pieces, the pass counts the docs give, and refusals."""

import math
import re

import ml_dtypes
import numpy as np
import pytest

from podium import transformer as tf
from podium.compiler import CompileError, _Asm, _assemble_checked
from podium.program import Program, Tensor
from podium.runner import run
from spec.mxu import MXUConfig
from spec.tensorcore import TensorCoreConfig
from verification.models import transformer as ref

DEFAULT = TensorCoreConfig()
SMALL = TensorCoreConfig(vmem_bytes=16384, vmem_banks=4)
WIDE = TensorCoreConfig(mxu=MXUConfig(rows=16, cols=16, fmt="bfloat16"), vmem_bytes=1 << 17)
NP = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}

TOLERANCE = tf.TOLERANCE
"""(fp32, bfloat16) bounds on ``|y - ref| / max(1, |ref|)``. Measured maxima over 36 seeded
runs per cell (shapes 40 x 200, 9 x 64, 17 x 17, inputs N(0, 3^2)): softmax 2.6e-7 /
2.2e-3, layernorm 3.2e-7 / 1.3e-2, rmsnorm 2.3e-7 / 1.1e-2, gelu tanh 1.2e-7 / 5.9e-3, gelu
erf 2.1e-7 / 4.5e-3, silu 1.0e-7 / 5.0e-3, add 6.0e-8 / 3.9e-3 (one bfloat16 rounding)."""


def compile_op(config, op, rows, features, dtype, rng):
    """(program, inputs, float64 reference) of ``op`` on seeded random data."""
    x = (rng.standard_normal((rows, features)) * 3).astype(NP[dtype])
    inputs = {"X": x}
    if op in ("layernorm", "rmsnorm"):
        gamma = (1 + 0.1 * rng.standard_normal(features)).astype(NP[dtype])
        beta = (0.1 * rng.standard_normal(features)).astype(NP[dtype])
        program = getattr(tf, op)(config, rows, features, gamma, beta, dtype=dtype)
        expect = getattr(ref, op)(x, gamma, beta, eps=program.metadata["eps"])
    elif op.startswith("gelu"):
        program = tf.gelu(config, rows, features, form=op[5:], dtype=dtype)
        expect = getattr(ref, op)(x)
    elif op == "add":
        inputs["R"] = (rng.standard_normal((rows, features)) * 3).astype(NP[dtype])
        program = tf.residual_add(config, rows, features, dtype=dtype)
        expect = ref.add(x, inputs["R"])
    else:
        program = getattr(tf, op)(config, rows, features, dtype=dtype)
        expect = getattr(ref, op)(x)
    return program, inputs, expect


def error(y, expect):
    return float(np.max(np.abs(y.astype(np.float64) - expect) / np.maximum(1, np.abs(expect))))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("op", tf.OPS)
def test_against_float64(op, dtype, seed):
    """Three shapes: 40 rows of 200 features on a 16 KiB VMEM (at least three row tiles of
    rows of 25 (fp32) / 13 (bf16) VMEM rows, the last padded), rows of exactly 64
    features, short rows of 7; each result within the tolerance, the same under a random
    interleaving of the engines."""
    rng = np.random.default_rng(seed)
    worst = 0.0
    for rows, features in ((40, 200), (9, 64), (3, 7)):
        config = SMALL if rows == 40 else DEFAULT
        program, inputs, expect = compile_op(config, op, rows, features, dtype, rng)
        result, out = run(program, inputs)
        assert result.status == "done", (result.error, result.error_pc)
        again, out2 = run(program, inputs, seed=seed)
        assert again.status == "done" and np.array_equal(
            out["Y"].view(np.uint8), out2["Y"].view(np.uint8)), "interleaving changed it"
        worst = max(worst, error(out["Y"], expect))
        if (rows, features) == (40, 200):
            assert program.metadata["tm"] * 2 < rows, "expected three row tiles or more"
    print(f"{op} {dtype}: max error {worst:.3g}")
    assert worst <= TOLERANCE[op][dtype == "bfloat16"]


@pytest.mark.parametrize("op", ["softmax", "layernorm", "gelu_erf"])
def test_wide_rows_16x16(op, seed):
    """A 16 x 16 bfloat16 chip (64-byte rows): 197 rows of 768 features (ViT-B's width)."""
    program, inputs, expect = compile_op(WIDE, op, 197, 768, "bfloat16",
                                         np.random.default_rng(seed))
    result, out = run(program, inputs)
    assert result.status == "done", (result.error, result.error_pc)
    assert error(out["Y"], expect) <= TOLERANCE[op][1]


@pytest.mark.parametrize("op", ["layernorm", "add"])
def test_shallow_queues_one_bank(op, seed):
    """Queues of two entries and a VMEM of one bank: every ``wait`` is dispatched after the
    ``signal`` it needs, so the double-buffered loop cannot deadlock the front end; several
    tiles, three interleavings."""
    config = TensorCoreConfig(vmem_bytes=8192, vmem_banks=1, queue_depth=2)
    program, inputs, expect = compile_op(config, op, 30, 50, "float32",
                                         np.random.default_rng(seed))
    assert program.metadata["tm"] * 2 < 30
    for s in (None, seed, seed + 1):
        result, out = run(program, inputs, seed=s)
        assert result.status == "done", (result.error, result.error_pc, s)
        assert error(out["Y"], expect) <= TOLERANCE[op][0]


# ---------------------------------------------------------------------------------------
# special inputs

INF, NAN = np.inf, np.nan


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_softmax_special_rows(dtype):
    """A NaN or +inf anywhere: the row is NaN. -inf entries: probability exactly 0, the
    others a softmax of the rest. All -inf (fully masked): zeros. Values near the fp32
    range do not overflow (the max is subtracted first). Other rows are not affected."""
    x = np.array([
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
        [1, NAN, 3, 4, 5, 6, 7, 8, 9, 10, 11],
        [1, INF, 3, 4, 5, 6, 7, 8, 9, 10, 11],
        [-INF] * 11,
        [0, -INF, 1, -INF, 2, -INF, 3, 4, 5, 6, 7],
        [1e30, -1e30, 0, 0, 0, 0, 0, 0, 0, 0, -INF],
        [-1e30] * 11,
    ]).astype(NP[dtype])
    result, out = run(tf.softmax(DEFAULT, len(x), 11, dtype=dtype), {"X": x})
    assert result.status == "done"
    y = out["Y"].astype(np.float64)
    expect = ref.softmax(x)
    assert np.isnan(y[1]).all() and np.isnan(y[2]).all()
    assert np.array_equal(y[3], np.zeros(11))
    assert np.all(y[4][[1, 3, 5]] == 0)
    assert y[5][0] == 1 and np.all(y[5][1:] == 0)
    ok = [0, 3, 4, 5, 6]
    assert error(y[ok], expect[ok]) <= TOLERANCE["softmax"][dtype == "bfloat16"]
    assert not np.isnan(y[ok]).any()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_norm_zero_variance(dtype, seed):
    """A constant row has variance 0: LayerNorm gives beta, exactly when the fp32 mean is
    exact (zeros, small integers), otherwise within ulp(c) * 4 * |gamma| / sqrt(eps) (the
    mean's rounding, scaled by 1/sqrt(eps)). RMSNorm of a zero row gives beta exactly."""
    rng = np.random.default_rng(seed)
    features = 11
    gamma = (1 + 0.1 * rng.standard_normal(features)).astype(NP[dtype])
    beta = (0.1 * rng.standard_normal(features)).astype(NP[dtype])
    consts = rng.uniform(-100, 100, 6).astype(NP[dtype]).astype(np.float64)
    x = np.array([[0.0] * features, [3.0] * features, [-2.0] * features]
                 + [[c] * features for c in consts]).astype(NP[dtype])
    program = tf.layernorm(DEFAULT, len(x), features, gamma, beta, dtype=dtype)
    result, out = run(program, {"X": x})
    assert result.status == "done"
    y, b = out["Y"].astype(np.float64), beta.astype(np.float64)
    assert np.array_equal(y[:3], np.broadcast_to(b, (3, features)))
    eps = program.metadata["eps"]
    for row, c in zip(y[3:], consts, strict=True):
        bound = np.spacing(np.float32(abs(c))) * 4 * np.abs(gamma.astype(np.float64)).max()
        assert np.abs(row - b).max() <= bound / math.sqrt(eps) + np.spacing(
            np.abs(b).max().astype(NP[dtype])), c
    program = tf.rmsnorm(DEFAULT, 1, features, gamma, beta, dtype=dtype)
    result, out = run(program, {"X": np.zeros((1, features), NP[dtype])})
    assert np.array_equal(out["Y"][0].astype(np.float64), b)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_elementwise_special_values(dtype):
    """NaN gives NaN; +inf gives +inf for GELU (tanh) and SiLU, NaN for GELU (erf); -inf
    gives NaN for all three (``-inf * 0``); large finite values saturate correctly (x for
    large x, -0 / 0 for large negative x)."""
    x = np.array([[INF, -INF, NAN, 0, -0.0, 1e30, -1e30, 100, -100, 3, -3]]).astype(NP[dtype])
    expect_head = {"gelu_tanh": [INF, NAN, NAN], "gelu_erf": [NAN, NAN, NAN],
                   "silu": [INF, NAN, NAN]}
    for op, head in expect_head.items():
        program = (tf.silu(DEFAULT, 1, 11, dtype=dtype) if op == "silu"
                   else tf.gelu(DEFAULT, 1, 11, form=op[5:], dtype=dtype))
        result, out = run(program, {"X": x})
        y = out["Y"][0].astype(np.float64)
        np.testing.assert_array_equal(y[:3], head, err_msg=op)
        expect = getattr(ref, op)(x[:, 3:])[0]
        assert error(y[3:], expect) <= TOLERANCE[op][dtype == "bfloat16"], op


# ---------------------------------------------------------------------------------------
# composition, pass counts, refusals


def test_composed_block(seed):
    """``y = x + GELU(LayerNorm(x))`` from the VMEM-resident pieces in one program (what an
    encoder block's compiler does between its matmuls): a load, a copy of x for the residual,
    LayerNorm, GELU (erf), the residual add, a store."""
    config, rows, features = DEFAULT, 12, 40
    rb, span = config.row_bytes, -(-features * 4 // config.row_bytes)
    n, ld = rows * span, span * config.row_bytes
    x_at, r_at, s_at, t_at = 0, n * rb, 2 * n * rb, 2 * n * rb + rows * rb
    e = _Asm()
    e.dma_shape(n * rb, [], ("r12", "r13", "r14"))
    e.li("r1", 0)
    e("dma.load r1, r1, s0")
    e("wait vpu, s0")
    e.li("r4", rows)
    e.li("r5", n)
    ops, block = tf.VpuOps(e), tf.Block("r4", "r5", span, "fp32")
    ops.cfg("r5")
    ops.vop("copy", "fp32", r_at, x_at)
    ops.layernorm(block, x_at, s_at, t_at, features, 1e-5)
    ops.gelu_erf(block, x_at, (t_at, t_at + n * rb, t_at + 2 * n * rb))
    ops.add(block, x_at, r_at)
    e("signal vpu, s1")
    e("wait dma, s1")
    e.li("r2", 0x10000)
    e("dma.store r2, r1, s2")
    e("wait dma, s2")
    e("halt")
    program = Program(words=_assemble_checked(config, e.text()), config=config,
                      hbm_capacity=0x20000, inputs={"X": Tensor(0, (rows, features),
                                                                "float32", ld)},
                      outputs={"Y": Tensor(0x10000, (rows, features), "float32", ld)})
    x = np.random.default_rng(seed).standard_normal((rows, features)).astype(np.float32)
    result, out = run(program, {"X": x}, seed=seed)
    assert result.status == "done", (result.error, result.error_pc)
    expect = x + ref.gelu_erf(ref.layernorm(x))
    assert error(out["Y"], expect) <= 2e-6


def test_online_softmax(seed):
    """FlashAttention's running softmax over three key blocks, from the VMEM-resident
    pieces: per block the running max and sum, the block's probabilities, and an output
    rescaled by ``alpha`` and added to (here ``P @ V`` with V the identity, so the output
    sums each block's probabilities elementwise), divided by the sum at the end. Against the
    float64 two-pass result; a row masked in every block gives zeros, a row masked in its
    first block only the softmax of the others."""
    config, rows, width, blocks = DEFAULT, 10, 16, 3
    rb = config.row_bytes
    span = width * 4 // rb
    n = rows * span
    rng = np.random.default_rng(seed)
    scores = (rng.standard_normal((blocks, rows, width)) * 4).astype(np.float32)
    scores[:, 0] = -np.inf                      # masked in every block
    scores[0, 1] = -np.inf                      # masked in the first block only
    scores[2, 2, :5] = -np.inf                  # a causal-style partial mask
    ld = span * rb
    at = {"S": 0, "O": blocks * n * rb}
    at["m"], at["l"] = at["O"] + n * rb, at["O"] + n * rb + rows * rb
    at["alpha"], at["tmp"] = at["l"] + rows * rb, at["l"] + 2 * rows * rb
    e = _Asm()
    e.dma_shape(blocks * n * rb, [], ("r12", "r13", "r14"))
    e("dma.load r0, r0, s0")
    e("wait vpu, s0")
    e.li("r4", rows)
    e.li("r5", n)
    ops, block = tf.VpuOps(e), tf.Block("r4", "r5", span, "fp32")
    ops.online_start(block, at["m"], at["l"])
    ops.cfg("r5")
    ops.vop("mul", "int32", at["O"], at["O"], mode="scalar")     # O = 0
    for j in range(blocks):
        x = at["S"] + j * n * rb
        ops.online_softmax(block, x, at["m"], at["l"], at["alpha"], at["tmp"])
        ops.apply_stat("mul", block, at["O"], at["alpha"])
        ops.add(block, at["O"], x)
    ops.divide_by_sum(block, at["O"], at["l"])
    e("signal vpu, s1")
    e("wait dma, s1")
    e.dma_shape(n * rb, [], ("r12", "r13", "r14"))
    e.li("r1", at["O"])
    e.li("r2", 0x10000)
    e("dma.store r2, r1, s2")
    e.dma_shape(rows * rb, [], ("r12", "r13", "r14"))
    e.li("r1", at["m"])
    e.li("r2", 0x18000)
    e("dma.store r2, r1, s2")
    e("wait dma, s2")
    e("wait dma, s2")
    e("halt")
    program = Program(
        words=_assemble_checked(config, e.text()), config=config, hbm_capacity=0x20000,
        inputs={"S": Tensor(0, (blocks * rows, width), "float32", ld)},
        outputs={"O": Tensor(0x10000, (rows, width), "float32", ld),
                 "m": Tensor(0x18000, (rows, 1), "float32", rb)})
    result, out = run(program, {"S": scores.reshape(blocks * rows, width)}, seed=seed)
    assert result.status == "done", (result.error, result.error_pc)
    s64 = scores.astype(np.float64)
    m = np.maximum(s64.max(axis=(0, 2)), -np.finfo(np.float32).max)
    p = np.exp(s64 - m[None, :, None])
    expect = p.sum(axis=0) / np.maximum(p.sum(axis=(0, 2)), 2.0**-126)[:, None]
    assert np.array_equal(out["m"][:, 0], m.astype(np.float32))
    assert np.array_equal(out["O"][0], np.zeros(width))
    assert error(out["O"], expect) <= 1e-6


@pytest.mark.parametrize("op", tf.OPS)
def test_pass_counts(op):
    """The pass counts of :func:`vpu_passes` (the docs' cycle estimate) are those of the
    emitted code: each ``vop`` over the data block (``vrows`` rows, or ``stat`` groups) is a
    row pass, each over the statistic rows a statistic pass, each ``vred`` a reduction."""
    e = _Asm()
    ops, b = tf.VpuOps(e), tf.Block("r4", "r5", 3, "fp32")
    call = {"softmax": lambda: ops.softmax(b, "r2", 100),
            "layernorm": lambda: ops.layernorm(b, "r2", 100, 200, 8, 1e-5, 300, 400),
            "rmsnorm": lambda: ops.rmsnorm(b, "r2", 100, 200, 8, 1e-5, 300, 400),
            "gelu_tanh": lambda: ops.gelu_tanh(b, "r2", 100),
            "gelu_erf": lambda: ops.gelu_erf(b, "r2", (100, 200, 300)),
            "silu": lambda: ops.silu(b, "r2", 100),
            "add": lambda: ops.add(b, "r2", "r3")}[op]
    call()
    counts, count = [0, 0, 0], None
    for line in e.lines:
        if m := re.match(r"\s+vpu.cfg (\w+)", line):
            count = m.group(1)
        elif re.match(r"\s+vred ", line):
            counts[2] += 1
        elif re.match(r"\s+vop ", line):
            counts[0 if count == "r5" or "src2=stat" in line else 1] += 1
    assert tuple(counts) == tf.vpu_passes(op, 3, "fp32")


@pytest.mark.parametrize("call, message", [
    (lambda: tf.softmax(DEFAULT, 0, 8), "rows must be an integer in 1..65535, got 0"),
    (lambda: tf.softmax(DEFAULT, 4, 70000), "features must be an integer in 1..65535"),
    (lambda: tf.softmax(DEFAULT, 4, 8, dtype="int8"),
     "dtype must be one of float32, bfloat16, got 'int8'"),
    (lambda: tf.softmax(DEFAULT, 4, 9000),
     r"features 9000 of a float32 softmax do not fit vmem_bytes 65536: one row needs 72032 "
     r"bytes \(2 blocks of 1125 rows of 32 bytes, a statistic row\); at most \d+ features"),
    (lambda: tf.gelu(DEFAULT, 4, 8000, form="erf", dtype="bfloat16"),
     "features 8000 of a bfloat16 gelu_erf do not fit vmem_bytes 65536"),
    (lambda: tf.gelu(DEFAULT, 4, 8, form="exact"), "form must be one of tanh, erf"),
    (lambda: tf.layernorm(DEFAULT, 4, 8, gamma=np.ones(7)),
     r"gamma must be a numeric vector of shape \(8,\), got \(7,\)"),
    (lambda: tf.layernorm(DEFAULT, 4, 8, eps=-1), "eps must be a number in"),
    (lambda: tf.silu(TensorCoreConfig(vmath=False), 4, 8), "config.vmath must be True"),
    (lambda: tf.silu({"rows": 8}, 4, 8), "config must be a TensorCoreConfig"),
    (lambda: tf.residual_add(TensorCoreConfig(vmem_bytes=1 << 22), 65535, 20000),
     "rows 65535 x features 20000 need .* bytes of HBM, past the 32-bit address space"),
    (lambda: tf.softmax(TensorCoreConfig(semaphores=3), 4, 8),
     "config.semaphores must be at least 4"),
])
def test_refusals(call, message):
    with pytest.raises(CompileError, match=message):
        call()


def test_refusal_limit_is_the_limit():
    """The limit a refusal names compiles; one more feature is refused."""
    with pytest.raises(CompileError) as info:
        tf.softmax(DEFAULT, 4, 9000)
    limit = int(re.search(r"at most (\d+) features", str(info.value)).group(1))
    assert tf.softmax(DEFAULT, 1, limit).metadata["tm"] >= 1
    with pytest.raises(CompileError):
        tf.softmax(DEFAULT, 1, limit + 1)


# ---------------------------------------------------------------------------------------
# the RTL chip


RTL_FAST = (("softmax", "float32"), ("layernorm", "bfloat16"))
"""The RTL cases in `make test`, on the default chip (the regression's shared build); the rest
run in `make test-all` on the small-VMEM chip, where the rows take several tiles."""


@pytest.mark.parametrize("op, dtype", [
    pytest.param(op, dtype, marks=[] if (op, dtype) in RTL_FAST else [pytest.mark.slow])
    for op in tf.OPS for dtype in ("float32", "bfloat16")])
def test_rtl_matches_golden(op, dtype, seed):
    """Each operation on the RTL chip in Verilator (random idle and backpressure on HBM):
    bit for bit the golden simulator's outputs, and within the tolerance of float64. On the
    small-VMEM chip several row tiles of 25 / 13 VMEM rows with padding on a 16 KiB VMEM."""
    from sim.programs import verilator  # noqa: F401  (registers the backend)

    config = DEFAULT if (op, dtype) in RTL_FAST else SMALL
    program, inputs, expect = compile_op(config, op, 24, 200, dtype,
                                         np.random.default_rng(seed))
    golden, want = run(program, inputs)
    result, out = run(program, inputs, sim="verilator", flow="random_random", seed=seed)
    assert result.status == "done", (result.error, result.error_pc)
    assert np.array_equal(out["Y"].view(np.uint8), want["Y"].view(np.uint8))
    assert error(out["Y"], expect) <= TOLERANCE[op][dtype == "bfloat16"]
