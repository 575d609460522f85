"""The VPU's transcendental function unit (hdl/tensorcore/vpu_func.py) bit for bit against its
golden model, and the golden model (verification/models/vmath.py) against float64: the
accuracy docs/vmath.md states, and every special-value rule."""

import numpy as np
import pytest

from spec import vmath as V
from spec.vmath import VMathConfig
from verification.models import fp, vmath
from verification.tests.suite import cases

BOUND_ULP = {"exp": 1.0, "reciprocal": 1.0, "rsqrt": 1.0, "tanh": 1.0, "sigmoid": 1.0,
             "log": 1.0}
"""The documented maximum error of each op in fp32 ULPs (docs/vmath.md; the issue's
target for exp, reciprocal and rsqrt is 2)."""


TB = "verification.tb.vmath"
SLOW = {"test_all_bf16"}
"""The cocotb tests run by make test-all only (all 65,536 bfloat16 inputs of every op: about
20 s); every other test of the bench runs in make test."""


@pytest.mark.parametrize("name, test", cases(TB, {"fp32": VMathConfig()},
                                             lambda _, t: pytest.mark.slow if t in SLOW else ()))
def test_vmath_rtl(cocotb_run, name, test):
    """The RTL bit for bit against the golden model (verification/tb/vmath.py)."""
    cocotb_run("vmath", VMathConfig(), TB, test=test)


def f32(v):
    return int(np.float32(v).view(np.uint32))


@pytest.mark.parametrize("op", V.OPS)
def test_accuracy_bf16(op):
    """Every bfloat16 input (as fp32): within the documented bound of the float64 value."""
    x = np.arange(1 << 16, dtype=np.uint32) << 16
    err = vmath.ulp_error(vmath.compute(op, x), vmath.reference(op, x))
    assert err.max() <= BOUND_ULP[op], f"{op}: {err.max():.3f} ULP at {int(x[err.argmax()]):#x}"


@pytest.mark.parametrize("op", V.OPS)
def test_bf16_results_correctly_rounded(op):
    """Every bfloat16 input, its fp32 result rounded to bfloat16 (as a bfloat16 row holds it):
    the float64 value correctly rounded to bfloat16, for every op."""
    x = np.arange(1 << 16, dtype=np.uint32) << 16
    narrow = fp.to_bf16(vmath.compute(op, x)).astype(np.uint32) << 16
    err = vmath.ulp_error(narrow, vmath.reference(op, x), man_bits=7)
    assert err.max() <= 0.5, f"{op}: {err.max():.3f} bfloat16 ULP at {int(x[err.argmax()]):#x}"


@pytest.mark.parametrize("op", V.OPS)
def test_accuracy_fp32(op, seed):
    """200,000 fp32 inputs of every unsaturated exponent and the exponent boundaries."""
    x = vmath.dense_sample(np.random.default_rng(seed), 200_000)
    err = vmath.ulp_error(vmath.compute(op, x), vmath.reference(op, x))
    assert err.max() <= BOUND_ULP[op], f"{op}: {err.max():.3f} ULP at {int(x[err.argmax()]):#x}"


EVALUATOR_BOUND = {"exp2": 2**-28, "recip": 2**-25.8, "rsqrt_even": 2**-27,
                   "rsqrt_odd": 2**-27, "log_hi": 2**-28, "log_lo": 2**-28}
"""The evaluator's documented absolute error per function (docs/vmath.md, "The evaluator"):
interpolation at the Chebyshev nodes plus about 2**-30 of fixed-point rounding."""


@pytest.mark.parametrize("number", range(len(V.FUNCTIONS)), ids=[n for n, _ in V.FUNCTIONS])
def test_evaluator_within_documented_error(number):
    """The piecewise quadratic against the float64 function on 65,536 points of [0, 1)
    (every segment, 512 points each)."""
    name, f = V.FUNCTIONS[number]
    u = np.arange(1, 1 << 30, 1 << 14, dtype=np.int64)
    p = vmath.evaluate(np.full_like(u, number), u) / 2.0**30
    ref = np.array([f(v) for v in u / 2.0**30])
    err = np.abs(p - ref).max()
    assert err <= EVALUATOR_BOUND[name], f"{name}: 2**{np.log2(err):.2f}"


NAN, INF, NINF = 0x7FC00000, 0x7F800000, 0xFF800000
SMALLEST = 0x00000001
SPECIALS = [
    # NaN in (quiet, signalling, negative): the canonical NaN out, for every op
    *[(op, x, NAN) for op in V.OPS for x in (0x7FC00000, 0x7F800001, 0xFFC12345)],
    ("exp", INF, INF), ("exp", NINF, 0), ("exp", 0, f32(1)), ("exp", 0x80000000, f32(1)),
    ("exp", f32(88.8), INF),                      # overflow to inf
    ("exp", f32(200.0), INF), ("exp", f32(-200.0), 0),
    ("exp", f32(-104.0), 0),                      # underflow to +0
    ("exp", f32(-100.0), 0x0000001B),            # a subnormal result (exp(-100) = 3.72e-44)
    ("exp", SMALLEST, f32(1)), ("exp", 0x80000001, f32(1)),  # subnormal inputs
    ("reciprocal", 0, INF), ("reciprocal", 0x80000000, NINF),
    ("reciprocal", INF, 0), ("reciprocal", NINF, 0x80000000),
    ("reciprocal", SMALLEST, INF), ("reciprocal", 0x80200000, NINF),  # overflow to inf
    ("reciprocal", f32(2.0**127), 0x00400000),   # a subnormal result
    ("reciprocal", 0x7F7FFFFF, 0x00200000),      # 1/max: subnormal, rounded
    ("reciprocal", 0x00400000, 0x7F000000),      # 1/2**-127 = 2**127 (subnormal input)
    ("reciprocal", f32(4.0), f32(0.25)), ("reciprocal", f32(-0.5), f32(-2.0)),
    ("rsqrt", 0, INF), ("rsqrt", 0x80000000, NINF), ("rsqrt", INF, 0),
    ("rsqrt", NINF, NAN), ("rsqrt", f32(-1.0), NAN), ("rsqrt", 0x80000001, NAN),
    ("rsqrt", f32(4.0), f32(0.5)), ("rsqrt", SMALLEST, f32(2.0**74.5)),
    ("rsqrt", f32(2.0**-148), f32(2.0**74)),     # subnormal input
    ("tanh", 0, 0), ("tanh", 0x80000000, 0x80000000), ("tanh", INF, f32(1)),
    ("tanh", NINF, f32(-1)), ("tanh", f32(20.0), f32(1)), ("tanh", f32(-300.0), f32(-1)),
    ("tanh", SMALLEST, SMALLEST), ("tanh", 0x80000005, 0x80000005),  # subnormal in = out
    ("tanh", f32(2.0**-20), f32(2.0**-20)),
    ("sigmoid", 0, f32(0.5)), ("sigmoid", 0x80000000, f32(0.5)), ("sigmoid", INF, f32(1)),
    ("sigmoid", NINF, 0), ("sigmoid", f32(200.0), f32(1)), ("sigmoid", f32(-200.0), 0),
    ("sigmoid", f32(-110.0), 0),                  # underflow to +0
    ("sigmoid", f32(-100.0), 0x0000001B),        # a subnormal result
    ("sigmoid", SMALLEST, f32(0.5)),
    ("log", 0, NINF), ("log", 0x80000000, NINF), ("log", INF, INF), ("log", NINF, NAN),
    ("log", f32(-1.0), NAN), ("log", 0x80000001, NAN), ("log", f32(1.0), 0),
    ("log", SMALLEST, f32(np.log(2.0**-149))),    # subnormal input
    ("log", 0x7F7FFFFF, f32(np.log(float(np.finfo(np.float32).max)))),
]


@pytest.mark.parametrize("op, x, want", SPECIALS)
def test_special_values(op, x, want):
    """The documented rule of each special input (docs/vmath.md, "Special values")."""
    got = int(vmath.compute(op, [x])[0])
    assert got == want, f"{op}({x:#010x}) = {got:#010x}, want {want:#010x}"


def test_subnormal_results_are_correct():
    """Results in the subnormal range, to the ULP of the smallest subnormal, for the ops that
    produce them (exp, sigmoid of large negatives; reciprocal of the largest values)."""
    x = np.concatenate([np.float32(np.linspace(-103.9, -87.4, 4001)).view(np.uint32),
                        np.arange(0x7E800000, 0x7F800000, 4099, dtype=np.uint32)])
    for op in ("exp", "sigmoid", "reciprocal"):
        got = vmath.compute(op, x)
        ref = vmath.reference(op, x)
        sub = (got & 0x7F800000) == 0
        assert sub.sum() > 100, op
        assert vmath.ulp_error(got, ref)[sub].max() <= 0.75, op
