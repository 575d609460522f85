"""cocotb testbench of the floating-point units (hdl/lib/fp.py) against verification/models/fp.py.

The units are combinational: each check sets the operands, lets the logic settle and compares
the product, the sum, the bfloat16 cast, the fp32 product and the min / max bit for bit.
Operands mix uniformly random bit patterns (every class: zeros, subnormals, normals,
infinities, NaNs) with values built to hit the hard cases: cancellation, ties to even,
overflow, underflow into subnormals, equal values and signed zeros.
"""

import random

import cocotb
import numpy as np
from cocotb.triggers import Timer

from verification.models import fp
from verification.tb.packing import load_sidecar

SPECIAL32 = [0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000,
             0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
             0x3F800000, 0xBF800000, 0x33800000, 0x33800001, 0x34000000, 0x3F800001]


def interesting_fp32(rng, n):
    """fp32 operand pairs that exercise every path of an adder."""
    x = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    kind = rng.integers(0, 6, size=n)
    near = (x ^ 0x80000000) + rng.integers(-4, 5, size=n).astype(np.int64)   # cancellation
    y = np.where(kind == 1, near.astype(np.uint32), y)
    shift = rng.integers(0, 30, size=n).astype(np.uint32) << 23               # close exponents
    y = np.where(kind == 2, (x & 0x807FFFFF) | ((x & 0x7F800000) - np.minimum(
        shift, x & 0x7F800000)), y)
    x = np.where(kind == 3, x & 0x807FFFFF, x)                                # subnormals
    y = np.where(kind == 3, y & 0x807FFFFF, y)
    tie = (x & 0xFF800000) - (24 << 23)                                       # half an ulp
    y = np.where((kind == 4) & ((x & 0x7F800000) > (25 << 23)), tie, y)
    specials = np.array(SPECIAL32, dtype=np.uint32)
    x = np.where(kind == 5, specials[rng.integers(0, len(specials), size=n)], x)
    return x.astype(np.uint32), y.astype(np.uint32)


def interesting_products(rng, n):
    """fp32 operand pairs that exercise every path of a multiplier: products near the bottom
    of the normal range and deep in the subnormals, near overflow, subnormal operands, sparse
    significands (exact products and ties to even), equal magnitudes (for min / max)."""
    sign = rng.integers(0, 2, size=(2, n)).astype(np.uint32) << 31
    man = rng.integers(0, 1 << 23, size=(2, n)).astype(np.uint32)
    ex = rng.integers(0, 256, size=n)
    kind = rng.integers(0, 6, size=n)
    target = np.select([kind == 1, kind == 2], [rng.integers(-30, 6, size=n),
                                                rng.integers(248, 258, size=n)],
                       rng.integers(0, 256, size=n))
    ey = np.clip(target + 127 - ex, 0, 255)                # ex + ey - 127 = product exponent
    ey = np.where(kind == 0, rng.integers(0, 256, size=n), ey)
    ex = np.where(kind == 3, 0, ex)                         # a subnormal (or zero) operand
    sparse = rng.integers(0, 1 << 6, size=(2, n)).astype(np.uint32)
    man = np.where(kind == 4, (sparse << rng.integers(0, 18, size=(2, n)).astype(np.uint32))
                   & 0x7FFFFF, man)
    x = sign[0] | (ex.astype(np.uint32) << 23) | man[0]
    y = sign[1] | (ey.astype(np.uint32) << 23) | man[1]
    y = np.where(kind == 5, x ^ (rng.integers(0, 2, size=n).astype(np.uint32) << 31), y)
    return x.astype(np.uint32), y.astype(np.uint32)


async def check(dut, a, b, x, y, fmt):
    """Every output for every operand set, against the golden model."""
    want = {"product": fp.mul(a, b, fmt), "total": fp.add(x, y), "narrow": fp.to_bf16(x),
            "x_times_y": fp.mul32(x, y), "smaller": fp.min32(x, y), "larger": fp.max32(x, y)}
    outputs = [(getattr(dut, name), values) for name, values in want.items()]
    for i in range(len(a)):
        dut.a.value, dut.b.value = int(a[i]), int(b[i])
        dut.x.value, dut.y.value = int(x[i]), int(y[i])
        await Timer(1, unit="ns")
        if any(int(port.value) != int(values[i]) for port, values in outputs):
            report = ", ".join(f"{name} {int(getattr(dut, name).value):#x} (want "
                               f"{int(values[i]):#x})" for name, values in want.items())
            raise AssertionError(f"{fmt}: a={int(a[i]):#x} b={int(b[i]):#x} "
                                 f"x={int(x[i]):#010x} y={int(y[i]):#010x} -> {report}")


@cocotb.test()
async def test_random_operands(dut):
    """Random and constructed operands, 20000 pairs."""
    fmt = load_sidecar()["parameters"]["fmt"]
    rng = np.random.default_rng(random.getrandbits(64))
    width = 16 if fmt == "bfloat16" else 8
    n = 20000
    a = rng.integers(0, 2**width, size=n)
    b = rng.integers(0, 2**width, size=n)
    x, y = interesting_fp32(rng, n)
    await check(dut, a, b, x, y, fmt)


@cocotb.test()
async def test_all_products(dut):
    """Every product of the format, for 8-bit formats (65536 pairs); bfloat16: every product of
    an operand with the extremes and with every exponent at random significands."""
    fmt = load_sidecar()["parameters"]["fmt"]
    rng = np.random.default_rng(random.getrandbits(64))
    if fmt == "bfloat16":
        a = rng.integers(0, 2**16, size=8192)
        edges = np.array([0x0001, 0x8001, 0x007F, 0x0080, 0x7F7F, 0xFF7F, 0x3F80, 0x0000,
                          0x8000, 0x7F80, 0xFF80, 0x7FC1], dtype=np.int64)
        b = np.concatenate([np.resize(edges, 4096), rng.integers(0, 2**16, size=4096)])
    else:
        a, b = (g.ravel() for g in np.meshgrid(np.arange(256), np.arange(256)))
    x, y = interesting_fp32(rng, len(a))
    await check(dut, a, b, x, y, fmt)


@cocotb.test()
async def test_fp32_products(dut):
    """The fp32 multiplier and min / max on 30000 constructed pairs (the other outputs are
    checked on the same operands as well)."""
    fmt = load_sidecar()["parameters"]["fmt"]
    rng = np.random.default_rng(random.getrandbits(64))
    width = 16 if fmt == "bfloat16" else 8
    n = 30000
    x, y = interesting_products(rng, n)
    await check(dut, rng.integers(0, 2**width, size=n), rng.integers(0, 2**width, size=n),
                x, y, fmt)
