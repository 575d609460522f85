"""cocotb testbench of the VPU's transcendental function unit (hdl/tensorcore/vpu_func.py,
block ``vmath``) against its golden model verification/models/vmath.py, bit for bit.

The unit is a pipeline without backpressure: every cycle the bench may present one
``(op, x)`` (``valid`` high) or idle (``valid`` low, at random); each presented input must come
out exactly ``latency`` cycles later (the sidecar's ``vmath.latency``) with the golden result,
and ``out_valid`` must be low in every other cycle. Ops are interleaved at random, so every
op follows every other in the pipeline. The seed is printed by cocotb and replays a failure
(PODIUM_SEED).
"""

import random

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge

from verification.models import vmath
from verification.tb.bench import start
from verification.tb.packing import load_sidecar

FP32_SPECIALS = [
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001,
    0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000, 0x80800000, 0x7F7FFFFF,
    0xFF7FFFFF, 0x3F800000, 0xBF800000, 0x3F800001, 0x3F7FFFFF, 0x33800000, 0x34000000,
    0x3F000000, 0x40000000, 0x3D000000, 0x3CFFFFFF, 0xBD000000, 0xBCFFFFFF,   # tanh's 2**-5
    0x42B17217, 0x42B17218, 0x42B17219, 0xC2AEAC4F, 0xC2AEAC50, 0xC2CFF1B4,   # exp's edges
    0xC2CFF1B5, 0xC2D00000, 0x42FFFFFF, 0x43000000, 0xC2FFFFFF, 0xC3000000,   # ... 128
    0x7E800000, 0x7EFFFFFF, 0x7F000000, 0xFE800001, 0x00400000, 0x80200000,   # 1/x sub/over
    0x00000002, 0x00300000, 0x41100000, 0x41200000, 0xC1100000, 0x3F800002, 0x3F7FFFFE,
]
"""Zeros, infinities, NaNs, subnormals, the extremes, and the edges of each op's ranges:
exp's overflow (88.72) and underflow (-87.34 to the subnormals, -103.97 to zero), the
saturation at 128, tanh's small path (``2**-5``), reciprocals that overflow or fall into the
subnormals, logarithms next to 1."""


def values(kind, rng, n):
    """``n`` fp32 bit patterns: ``bits`` uniform bit patterns, ``bf16`` bfloat16 values,
    ``dense`` values where the ops are not saturated (|x| < 128, every exponent), or
    ``specials``."""
    if kind == "bits":
        return rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    if kind == "bf16":
        return rng.integers(0, 2**16, size=n).astype(np.uint32) << 16
    if kind == "dense":
        field = rng.integers(0, 134, size=n).astype(np.uint32)
        return ((rng.integers(0, 2, size=n).astype(np.uint32) << 31) | (field << 23)
                | rng.integers(0, 1 << 23, size=n).astype(np.uint32))
    return np.resize(np.array(FP32_SPECIALS, dtype=np.uint32), n)


async def run(dut, ops, xs, rng, idle=0.3):
    """Present ``(ops[i], xs[i])`` in order with idle cycles (probability ``idle``) in
    between; check every result and the cycles it comes out in."""
    side = load_sidecar()["vmath"]
    names, latency = side["ops"], side["latency"]
    want = np.zeros(len(xs), dtype=np.uint32)
    for code, name in enumerate(names):
        sel = ops == code
        want[sel] = vmath.compute(name, xs[sel])
    dut.valid.value = 0
    await start(dut)
    due = {}                # cycle -> index of the input whose result comes out then
    cycle, i, checked = 0, 0, 0
    while checked < len(xs):
        await FallingEdge(dut.clk)
        out_valid = int(dut.out_valid.value)
        j = due.pop(cycle, None)
        if (j is not None) != bool(out_valid):
            raise AssertionError(f"cycle {cycle}: out_valid {out_valid}, expected "
                                 f"{int(j is not None)} (latency {latency})")
        if j is not None:
            got = int(dut.result.value)
            if got != int(want[j]):
                raise AssertionError(f"{names[ops[j]]}({int(xs[j]):#010x}) = {got:#010x}, "
                                     f"golden {int(want[j]):#010x} (input {j})")
            checked += 1
        if i < len(xs) and rng.random() >= idle:
            dut.valid.value = 1
            dut.op.value = int(ops[i])
            dut.x.value = int(xs[i])
            due[cycle + latency] = i
            i += 1
        else:
            dut.valid.value = 0
            dut.op.value = int(rng.integers(0, 8))       # garbage while idle
            dut.x.value = int(rng.integers(0, 2**32))
        cycle += 1
    dut._log.info(f"{checked} results bit-exact in {cycle} cycles")


def _mixed(rng, n_per_kind):
    side = load_sidecar()["vmath"]
    xs = np.concatenate([values(k, rng, n_per_kind) for k in ("bits", "bf16", "dense")]
                        + [np.tile(np.array(FP32_SPECIALS, dtype=np.uint32),
                                   len(side["ops"]))])
    ops = np.concatenate([rng.integers(0, len(side["ops"]), size=3 * n_per_kind),
                          np.repeat(np.arange(len(side["ops"])), len(FP32_SPECIALS))])
    order = rng.permutation(len(xs))
    return ops[order], xs[order]


@cocotb.test()
async def test_sample(dut):
    """Every op on 4000 uniform bit patterns, 4000 bfloat16 values, 4000 values in the ops'
    unsaturated range (ops drawn at random) and every special, with random idle cycles."""
    rng = np.random.default_rng(random.getrandbits(64))
    ops, xs = _mixed(rng, 4000)
    await run(dut, ops, xs, rng)


@cocotb.test()
async def test_all_bf16(dut):
    """Every op on all 65,536 bfloat16 inputs, then 100,000 mixed fp32 inputs and every
    special (slow)."""
    rng = np.random.default_rng(random.getrandbits(64))
    count = len(load_sidecar()["vmath"]["ops"])
    bf = np.arange(1 << 16, dtype=np.uint32) << 16
    ops = np.repeat(np.arange(count), len(bf))
    xs = np.tile(bf, count)
    more_ops, more_xs = _mixed(rng, 33334)
    await run(dut, np.concatenate([ops, more_ops]), np.concatenate([xs, more_xs]), rng,
              idle=0.1)
