"""Floating-point units (hdl/lib/fp.py) against the golden model, and the golden model itself
against hand-worked IEEE cases."""

import numpy as np
import pytest

from spec.formats import FloatUnitsConfig
from verification.models import fp

FORMATS = ["bfloat16", "float8_e4m3fn", "float8_e5m2"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_fp_units(cocotb_run, fmt):
    cocotb_run("fp_units", FloatUnitsConfig(fmt), "verification.tb.fp_units")


def f32(x):
    return int(np.float32(x).view(np.uint32))


@pytest.mark.parametrize("x, y, want", [
    (f32(1.0), f32(2.0**-24), f32(1.0)),                       # tie, to even (down)
    (f32(1.0 + 2.0**-23), f32(2.0**-24), f32(1.0 + 2.0**-22)),  # tie, to even (up)
    (f32(1.0), f32(2.0**-24 + 2.0**-40), f32(1.0 + 2.0**-23)),  # above the tie
    (0x7F800000, 0xFF800000, 0x7FC00000),                      # inf - inf
    (0x7F7FFFFF, 0x7F7FFFFF, 0x7F800000),                      # overflow to inf
    (0x00000001, 0x00000001, 0x00000002),                      # subnormal + subnormal
    (0x007FFFFF, 0x00000001, 0x00800000),                      # into the normal range
    (f32(1.0), f32(-1.0), 0x00000000),                         # exact cancellation: +0
    (0x80000000, 0x80000000, 0x80000000),                      # -0 + -0 = -0
    (0x80000000, 0x00000000, 0x00000000),                      # -0 + +0 = +0
    (0xFFC12345, f32(1.0), 0x7FC00000),                        # NaN in: canonical NaN out
    (f32(1.0 + 2.0**-23), f32(-1.0), f32(2.0**-23)),           # catastrophic cancellation
])
def test_model_add(x, y, want):
    assert int(fp.add([x], [y])[0]) == want


@pytest.mark.parametrize("a, b, fmt, want", [
    (0x7F7F, 0x7F7F, "bfloat16", 0x7F800000),    # max * max overflows fp32
    (0x0001, 0x3F80, "bfloat16", 0x00010000),    # min subnormal bf16 * 1 is an fp32 subnormal
    (0x0001, 0x0001, "bfloat16", 0x00000000),    # 2^-266 underflows to +0
    (0x8001, 0x0001, "bfloat16", 0x80000000),    # ... with the product's sign
    (0x7F80, 0x0000, "bfloat16", 0x7FC00000),    # inf * 0 = NaN
    (0x7E, 0x7E, "float8_e4m3fn", int(np.float32(448.0 * 448.0).view(np.uint32))),
    (0x7F, 0x38, "float8_e4m3fn", 0x7FC00000),   # e4m3fn NaN
    (0x7C, 0xBC, "float8_e5m2", 0xFF800000),     # inf * -1 = -inf
])
def test_model_mul(a, b, fmt, want):
    assert int(fp.mul([a], [b], fmt)[0]) == want


def test_model_bf16_cast():
    assert [int(v) for v in fp.to_bf16([f32(1.0 + 2.0**-8), f32(1.0 + 3 * 2.0**-8),
                                        0x7F7FFFFF, 0x7FC00001, 0x00000001])] == [
        0x3F80, 0x3F82, 0x7F80, 0x7FC0, 0x0000]
