"""FlashAttention (podium/attention.py) on the golden ISA simulator against the float64
reference of verification/models/transformer.py, within the documented tolerance
(docs/tensorcore.md, "Compiler: attention"): sequences that are and are not a multiple of
the blocks, causal and not, head_dim 16, 32, 64 and 128, several heads and batches; every run
also under a seeded random interleaving of the engines (bit-identical). Then a NaN in Q,
the refusals, and the RTL chip, bit-exact with the golden simulator."""

import json

import ml_dtypes
import numpy as np
import pytest

from podium.attention import TOLERANCE, attention, useful_macs
from podium.compiler import CompileError
from podium.runner import run
from podium.workloads import vit
from spec.mxu import MXUConfig
from spec.tensorcore import TensorCoreConfig
from verification.models import transformer as ref

WIDE = TensorCoreConfig(mxu=MXUConfig(rows=16, cols=16, fmt="bfloat16"), vmem_bytes=1 << 17)
CHIP = vit.TENSORCORE
"""The ViT's TensorCore (16 x 16 bfloat16 MXU, 512 KiB VMEM, 64-entry queues): the RTL chip
of the attention and encoder tests, of ``make bench transformer`` and of ``make demo
ARGS="--model vit"`` (one build for all)."""


def inputs(seq, d, bh, rng, scale=1.0):
    return {n: (rng.standard_normal((bh * seq, d)) * scale).astype(ml_dtypes.bfloat16)
            for n in "QKV"}


def error(out, x, seq, bh, causal):
    """max over the heads of ``max |O - ref| / max |V|`` (the documented measure)."""
    worst = 0.0
    for h in range(bh):
        rows = slice(h * seq, (h + 1) * seq)
        expect = ref.attention(x["Q"][rows], x["K"][rows], x["V"][rows], causal)
        v = np.max(np.abs(x["V"][rows].astype(np.float64)))
        worst = max(worst, float(np.max(np.abs(out[rows] - expect)) / v))
    return worst


SHAPES = [
    # seq, head_dim, heads, batch, causal, kv_block, q_block
    (32, 16, 1, 1, False, None, None),
    (100, 64, 1, 1, False, None, None),       # padding keys and queries
    (100, 64, 1, 1, True, None, None),
    (64, 32, 2, 1, False, 32, 16),            # several key and query blocks, scale in fp32
    (70, 16, 2, 2, False, 32, 16),            # heads and batches, padding
    (96, 32, 1, 2, True, 32, 32),             # causal over three blocks a head
    (77, 16, 3, 1, True, 32, 32),
    (48, 128, 1, 1, False, None, None),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:4]))
                         + ("-causal" if s[4] else "") + (f"-kv{s[5]}q{s[6]}" if s[5] else ""))
def test_against_float64(shape, seed):
    seq, d, heads, batch, causal, kv, qb = shape
    rng = np.random.default_rng(seed)
    program = attention(WIDE, seq, d, heads, batch, causal, kv_block=kv, q_block=qb)
    if kv:
        assert (program.metadata["kv_block"], program.metadata["q_block"]) == (kv, qb)
    x = inputs(seq, d, heads * batch, rng, scale=rng.choice([0.5, 1.0, 3.0]))
    result, out = run(program, x)
    assert result.status == "done", (result.error, result.error_pc)
    again, out2 = run(program, x, seed=seed)
    assert again.status == "done"
    assert np.array_equal(out["O"].view(np.uint32), out2["O"].view(np.uint32)), \
        "a random interleaving of the engines changed the result"
    err = error(out["O"], x, seq, heads * batch, causal)
    print(f"error {err:.2e} (tolerance {TOLERANCE:.2e})")
    assert err <= TOLERANCE


def test_causal_ignores_future_keys(seed):
    """Changing keys and values after query ``i`` leaves row ``i`` bit for bit the same."""
    seq, d = 96, 32
    rng = np.random.default_rng(seed)
    program = attention(WIDE, seq, d, causal=True, kv_block=32)
    x = inputs(seq, d, 1, rng)
    _, out = run(program, x)
    y = {k: v.copy() for k, v in x.items()}
    y["K"][50:] = rng.standard_normal((seq - 50, d)).astype(ml_dtypes.bfloat16)
    y["V"][50:] = rng.standard_normal((seq - 50, d)).astype(ml_dtypes.bfloat16)
    _, out2 = run(program, y)
    assert np.array_equal(out["O"][:50].view(np.uint32), out2["O"][:50].view(np.uint32))
    assert not np.array_equal(out["O"][50:], out2["O"][50:])


def test_nan_query_row(seed):
    """A NaN in a query row makes that row of O NaN; every other row (also of the same Q
    block) is unchanged, bit for bit."""
    seq, d = 64, 64
    rng = np.random.default_rng(seed)
    program = attention(WIDE, seq, d, kv_block=32, q_block=16)
    x = inputs(seq, d, 1, rng)
    _, out = run(program, x)
    x["Q"][5, 7] = np.nan
    _, bad = run(program, x)
    assert np.isnan(bad["O"][5]).all()
    keep = np.arange(seq) != 5
    assert np.array_equal(out["O"][keep].view(np.uint32), bad["O"][keep].view(np.uint32))


def test_useful_macs():
    assert useful_macs(4, 16) == 2 * 16 * 16
    assert useful_macs(4, 16, heads=2, batch=3, causal=True) == 2 * 10 * 16 * 6


@pytest.mark.parametrize("call, message", [
    (lambda: attention(TensorCoreConfig(), 64, 16), "config.mxu.fmt must be bfloat16"),
    (lambda: attention(TensorCoreConfig(mxu=MXUConfig(rows=16, cols=16, fmt="bfloat16",
                                                      out_fmt="bfloat16")), 64, 16),
     "config.mxu.out_fmt must be float32"),
    (lambda: attention(TensorCoreConfig(mxu=MXUConfig(rows=16, cols=16, fmt="bfloat16"),
                                        vmath=False), 64, 16), "config.vmath must be True"),
    (lambda: attention(TensorCoreConfig(mxu=MXUConfig(rows=16, cols=16, fmt="bfloat16"),
                                        row_bytes=256), 64, 16),
     "config.vtrans must be True .* config.row_bytes <= 128, got 256"),
    (lambda: attention(WIDE, 64, 24), "head_dim must be a multiple of 16 up to 32 or a "
                                      "multiple of 32 .* got 24"),
    (lambda: attention(WIDE, 64, 48), "head_dim must be .* got 48"),
    (lambda: attention(WIDE, 0, 16), "seq must be an integer in 1..65535, got 0"),
    (lambda: attention(WIDE, 65536, 16), "seq must be an integer in 1..65535, got 65536"),
    (lambda: attention(WIDE, 64, 16, heads=0), "heads must be an integer in 1..65535"),
    (lambda: attention(WIDE, 64, 2048), "head_dim 2048 does not fit vmem_bytes 131072 .*"
                                        "at most head_dim 192"),
    (lambda: attention(WIDE, 64, 16, kv_block=48), "kv_block must be a multiple of 32"),
    (lambda: attention(WIDE, 64, 16, causal=True, kv_block=64, q_block=32),
     "q_block must equal kv_block for causal attention"),
    (lambda: attention(WIDE, 64, 16, causal=1), "causal must be True or False"),
    (lambda: attention(WIDE, 65535, 64, heads=100, batch=10),
     "need .* bytes of HBM, past the 32-bit address space"),
])
def test_refusals(call, message):
    with pytest.raises(CompileError, match=message):
        call()


@pytest.mark.slow
def test_rtl_matches_golden(seed):
    """On the RTL chip in Verilator (16 x 16 bfloat16 MXU, random idle and backpressure on
    HBM): two heads of 72 keys (two key blocks, padded), causal, bit for bit the golden
    simulator's O and within the tolerance of float64."""
    from sim.programs import verilator  # noqa: F401  (registers the backend)

    seq, d, heads = 72, 32, 2
    program = attention(CHIP, seq, d, heads, causal=True, kv_block=32)
    x = inputs(seq, d, heads, np.random.default_rng(seed))
    golden, want = run(program, x)
    result, out = run(program, x, sim="verilator", flow="random_random", seed=seed)
    assert result.status == "done", (result.error, result.error_pc)
    assert np.array_equal(out["O"].view(np.uint32), want["O"].view(np.uint32))
    assert error(out["O"], x, seq, heads, True) <= TOLERANCE


def test_refusal_limit_is_the_limit():
    """The head_dim a refusal names compiles; the next allowed one is refused."""
    assert attention(WIDE, 64, 192).metadata["head_dim"] == 192
    with pytest.raises(CompileError, match="at most head_dim 192"):
        attention(WIDE, 64, 224)


def test_command_line(tmp_path):
    """``podium compile attention`` and ``podium run`` (checked against float64 within the
    tolerance); a bad head_dim is one line naming it, exit status 2."""
    from verification.tests.test_tools import podium

    r = podium("compile", "attention", "--seq", 50, "--head-dim", 32, "--heads", 2,
               "--causal", "-o", "a.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = podium("run", "a.json", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["within_tolerance"] is True and report["max_error"] <= TOLERANCE
    r = podium("compile", "attention", "--seq", 50, "--head-dim", 24, "-o", "b.json",
               cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "podium: error: head_dim must be a multiple of 16 (the AXI beat, the MXU and the "
        "16-element transpose tile of config.row_bytes 32), got 24"]


@pytest.mark.parametrize("config, seq, d, heads, batch, causal", [
    (TensorCoreConfig(mxu=MXUConfig(fmt="bfloat16")), 50, 32, 2, 1, True),   # 8 x 8, 32-byte rows
    (TensorCoreConfig(mxu=MXUConfig(fmt="bfloat16")), 40, 16, 1, 1, False),
    (WIDE, 1, 64, 3, 2, True),                  # one query: every block is padding but one row
    (WIDE, 1, 16, 1, 1, False),
], ids=["8x8-causal", "8x8", "seq1-causal", "seq1"])
def test_small_shapes_and_configs(config, seq, d, heads, batch, causal, seed):
    """The default TensorCore with a bfloat16 MXU (16-element transpose tiles) and a
    sequence of one: within the tolerance, also under a random interleaving."""
    program = attention(config, seq, d, heads, batch, causal)
    x = inputs(seq, d, heads * batch, np.random.default_rng(seed))
    result, out = run(program, x, seed=seed)
    assert result.status == "done", (result.error, result.error_pc)
    assert error(out["O"], x, seq, heads * batch, causal) <= TOLERANCE
