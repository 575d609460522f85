"""The fused encoder compiler (podium/encoder.py; docs/tensorcore.md, "Compiler: encoder")
against the float64 reference (verification/models/encoder.py) on the golden ISA simulator,
for shapes that exercise every layout rule (a sequence shorter than, equal to and longer
than a ``vtrans`` tile, heads of one and two chunks, one to three blocks, several classes
chunks, a last tile with fewer sequences); its refusals; and on the RTL chip, bit-exact with
the golden simulator under random HBM idle and backpressure."""

import numpy as np
import pytest

from podium.compiler import CompileError
from podium.encoder import block_names, encoder
from podium.runner import run
from podium.workloads import vit
from spec.mxu import MXUConfig
from spec.tensorcore import TensorCoreConfig
from verification.models.encoder import encoder as reference
from verification.models.encoder import random_params

CHIP = vit.TENSORCORE
"""The ViT's TensorCore (16 x 16 bfloat16 MXU, 512 KiB VMEM, 64-entry queues): the RTL chip
of the attention and encoder tests, of ``make bench transformer`` and of ``make demo
ARGS="--model vit"`` (one build for all)."""
TOLERANCE = 0.04
"""Bound on ``|logit - ref| / max(1, |ref|)`` against float64: bfloat16 GEMM operands (a
relative rounding of 2^-9 per operand) through up to three blocks; measured at most 0.016 over
the shapes below."""


# (seq, features, width, heads, mlp, classes, blocks, batch)
SHAPES = {
    "vit": (17, 4, 64, 4, 128, 10, 2, 4),
    "tile": (32, 4, 64, 4, 128, 10, 1, 5),
    "two-chunk-heads": (33, 8, 32, 1, 64, 20, 1, 3),
    "three-blocks": (16, 4, 64, 2, 64, 10, 3, 2),
    "long": (50, 40, 64, 2, 32, 40, 1, 2),
    "one-token": (1, 4, 32, 2, 32, 3, 1, 3),
}


def case(name, seed, group=None):
    """(program, inputs, float64 logits) of shape ``name`` with seeded random parameters."""
    seq, features, width, heads, mlp, classes, blocks, batch = SHAPES[name]
    rng = np.random.default_rng(seed)
    params = random_params(rng, features=features, width=width, mlp=mlp, classes=classes,
                           seq=seq, blocks=blocks)
    x = rng.uniform(0, 1, (batch * seq, features)).astype(np.float32)
    program = encoder(CHIP, params, seq=seq, heads=heads, batch=batch, group=group)
    return program, {"X": x}, reference(params, x, seq=seq, heads=heads)


def error(y, expect):
    return float(np.max(np.abs(y - expect) / np.maximum(1, np.abs(expect))))


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", SHAPES)
def test_against_float64(name, seed):
    print(f"seed {seed}")
    program, inputs, expect = case(name, seed)
    result, out = run(program, inputs, seed=seed)
    assert result.status == "done", (result.error, result.error_pc)
    assert error(out["Y"], expect) <= TOLERANCE
    assert all(v == 0 for v in result.semaphores), result.semaphores


def test_group_and_batch_independent():
    """Each sequence's logits do not depend on the tile it shares or its place in it: one
    sequence a tile gives the same bits as the largest group."""
    program, inputs, _ = case("vit", 3)
    one, _, _ = case("vit", 3, group=1)
    assert program.metadata["group"] > 1 and one.metadata["group"] == 1
    _, out = run(program, inputs)
    _, out1 = run(one, inputs)
    assert np.array_equal(out["Y"].view(np.uint32), out1["Y"].view(np.uint32))


def _vit_params():
    return random_params(np.random.default_rng(0), features=4, width=64, mlp=128,
                         classes=10, seq=17, blocks=2)


@pytest.mark.parametrize("change, message", [
    (dict(config=TensorCoreConfig()), "config.mxu must be bfloat16 with float32 results"),
    (dict(config=TensorCoreConfig(mxu=MXUConfig(rows=16, cols=16, fmt="bfloat16"),
                                  vmath=False)), "config.vmath and config.vtrans must be True"),
    (dict(config=CHIP.replace(semaphores=4)),
     "config.semaphores must be at least 10 for an encoder, got 4"),
    (dict(heads=3), "heads must divide width 64 into heads of a multiple of 16 columns"),
    (dict(heads=8), "heads must divide width 64 into heads of a multiple of 16 columns"),
    (dict(seq=0), "seq must be an integer in 1..65535, got 0"),
    (dict(seq=18), r"params\['embed_b'\] must have shape \(18, 64\), got \(17, 64\)"),
    (dict(drop="b1.fc2_b"), r"params must hold 'b1.fc2_b' of shape \(64,\)"),
    (dict(extra="b0.bias"), r"params has unknown names \['b0.bias'\]"),
    (dict(nan="b0.qkv_w"), r"params\['b0.qkv_w'\] must be finite"),
    (dict(config=CHIP.replace(vmem_bytes=1 << 17)),
     r"an encoder of width 64, mlp 128, 2 blocks and seq 17 \(stride 32\) needs \d+ bytes of "
     r"VMEM for 1 sequence\(s\) a tile; config.vmem_bytes is 131072"),
    (dict(config=CHIP.replace(imem_depth=1024)),
     r"the program needs \d+ instructions; config.imem_depth is 1024"),
    (dict(config=CHIP.replace(imem_depth=1024), group=1),
     r"the program needs \d+ instructions; config.imem_depth is 1024"),
])
def test_refused(change, message):
    """Shapes and parameters the compiler cannot run are refused before anything runs,
    naming the dimension and the limit."""
    params = _vit_params()
    if "drop" in change:
        del params[change.pop("drop")]
    if "extra" in change:
        params[change.pop("extra")] = np.zeros(64, np.float32)
    if "nan" in change:
        name = change.pop("nan")
        params[name] = params[name].copy()
        params[name][0, 0] = np.nan
    args = dict(config=CHIP, seq=17, heads=4, batch=4) | change
    with pytest.raises(CompileError, match=message):
        encoder(args.pop("config"), params, **args)


def test_names():
    assert set(block_names(2)) == set(_vit_params())


@pytest.mark.slow
def test_on_the_rtl(seed=5):
    """The ViT's shape on the RTL chip, two tiles (the second one short), random HBM idle and
    backpressure: every logit bit-exact with the golden simulator."""
    from sim.programs import verilator  # noqa: F401  (registers the backend)

    print(f"seed {seed}")
    program, inputs, expect = case("vit", seed)
    result, out = run(program, inputs, sim="verilator", flow="random_random", seed=seed)
    assert result.status == "done", (result.error, result.error_pc)
    _, golden = run(program, inputs)
    assert np.array_equal(out["Y"].view(np.uint32), golden["Y"].view(np.uint32))
    assert error(out["Y"], expect) <= TOLERANCE
