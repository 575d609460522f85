"""The VPU's transcendental functions: the operations, the constants and the coefficient
tables of their documented algorithms (docs/vmath.md), read by both the RTL
(hdl/tensorcore/vpu_func.py) and the golden model (verification/models/vmath.py), which agree
on nothing else.

Every function is evaluated in fixed point. The core is a piecewise quadratic: ``u`` in
``[0, 1)`` with ``U_BITS`` fraction bits splits into ``SEGMENTS`` segments (the index is
``u``'s top ``INDEX_BITS`` bits); on a segment the function is the quadratic through its values
at the three Chebyshev nodes of the segment (within a quarter of the Taylor bound of the
segment, near minimax), written in the offset ``t`` of ``u`` from the segment's midpoint::

    p = C0 + (((C1 + ((C2 * t) >> C2_SHIFT)) * t) >> C1_SHIFT)

with ``C0`` in units of ``2**-30``, ``C1`` of ``2**-24``, ``C2`` of ``2**-16`` and ``t`` of
``2**-30``; ``>>`` is an arithmetic shift (floor). The result is clamped to ``P_MAX``.
"""

import math
from dataclasses import dataclass

from .config import Config, check_choice

__all__ = ["OPS", "OP_CODES", "U_BITS", "INDEX_BITS", "SEGMENTS", "C2_SHIFT", "C1_SHIFT",
           "P_MAX", "FUNCTIONS", "TABLES", "LOG2E", "LOG2E_BITS", "LN2_54", "THIRD",
           "TWO_15", "TANH_SMALL_E", "SATURATE_E", "LATENCY", "VMathConfig"]

OPS = ("exp", "reciprocal", "rsqrt", "tanh", "sigmoid", "log")
"""The operations, by their code (the unit's ``op`` input)."""
OP_CODES = {name: code for code, name in enumerate(OPS)}

U_BITS = 30
"""Fraction bits of an evaluator's argument ``u`` and of its result ``p`` (``p`` in [0, 2))."""
INDEX_BITS = 7
SEGMENTS = 1 << INDEX_BITS
T_BITS = U_BITS - INDEX_BITS
"""``t = (u mod 2**T_BITS) - 2**(T_BITS - 1)``: the offset from the segment's midpoint."""
C0_FRAC, C1_FRAC, C2_FRAC = 30, 24, 16
C2_SHIFT = C2_FRAC + U_BITS - C1_FRAC       # (C2 * t) in units of 2**-46 -> 2**-24
C1_SHIFT = C1_FRAC + U_BITS - C0_FRAC       # (b * t) in units of 2**-54 -> 2**-30
P_MAX = (1 << (U_BITS + 1)) - 1
"""The largest evaluator result (just below 2): ``2**u`` near ``u = 1`` never reaches 2."""


def _q_log_hi(u):
    d = u / 2
    return math.log1p(d) / d


def _q_log_lo(u):
    d = (u - 1) / 4
    return math.log1p(d) / d


FUNCTIONS = (
    ("exp2", lambda u: 2.0 ** u),                          # 2**f, exp / sigmoid / tanh
    ("recip", lambda u: 1 / (1 + u)),                      # 1/m, m = 1 + u
    ("rsqrt_even", lambda u: 1 / math.sqrt(1 + u)),        # 1/sqrt(m)
    ("rsqrt_odd", lambda u: 1 / math.sqrt(2 * (1 + u))),   # 1/sqrt(2 m)
    ("log_hi", _q_log_hi),                                 # ln(1+d)/d, d = u/2
    ("log_lo", _q_log_lo),                                 # ln(1+d)/d, d = (u-1)/4
)
"""The evaluator's functions of ``u`` in [0, 1), by their number (``FUNC``)."""
FUNC = {name: i for i, (name, _) in enumerate(FUNCTIONS)}


def _segment(f, j):
    """``(C0, C1, C2)`` of segment ``j`` of ``f``: the quadratic in ``tau = u - mid`` through
    ``f`` at the three Chebyshev nodes ``mid - delta, mid, mid + delta``."""
    half = 0.5 / SEGMENTS
    mid = (j + 0.5) / SEGMENTS
    delta = half * math.sqrt(3) / 2
    lo, f0, hi = f(mid - delta), f(mid), f(mid + delta)
    c1 = (hi - lo) / (2 * delta)
    c2 = (hi + lo - 2 * f0) / (2 * delta * delta)
    return (round(f0 * 2 ** C0_FRAC), round(c1 * 2 ** C1_FRAC), round(c2 * 2 ** C2_FRAC))


TABLES = tuple(tuple(_segment(f, j) for j in range(SEGMENTS)) for _, f in FUNCTIONS)
"""``TABLES[func][segment] = (C0, C1, C2)``, integers (C0 unsigned, C1 and C2 signed)."""
C0_WIDTH = max(c0 for t in TABLES for c0, _, _ in t).bit_length()
C1_WIDTH = max(abs(c1) for t in TABLES for _, c1, _ in t).bit_length() + 1
C2_WIDTH = max(abs(c2) for t in TABLES for _, _, c2 in t).bit_length() + 1

LOG2E_BITS = 34
LOG2E = round(math.log2(math.e) * 2 ** LOG2E_BITS)
"""``log2(e)`` in units of ``2**-34``: exp's ``y = x * log2(e)`` is ``(sig * LOG2E)`` shifted by
the exponent, in units of ``2**-30``."""
Y_SHIFT = LOG2E_BITS + 23 - U_BITS          # y = (sig * LOG2E) >> (Y_SHIFT - e)
LN2_54 = round(math.log(2) * 2 ** 54)
"""``ln 2`` in units of ``2**-54``: log's ``e * ln 2``."""
THIRD = round(2 ** 32 / 3)
"""``1/3`` in units of ``2**-32`` (tanh's small path)."""
TWO_15 = round(2 / 15 * 2 ** 20)
"""``2/15`` in units of ``2**-20`` (tanh's small path)."""
TANH_SMALL_E = -6
"""tanh takes its small path (``x (1 - x**2/3 + 2 x**4/15)``) when the unbiased exponent of
``|x|`` is at most this (``|x| < 2**-5``)."""
SATURATE_E = 7
"""exp, tanh and sigmoid saturate when the unbiased exponent of ``|x|`` is at least this
(``|x| >= 128``): exp to inf or +0, tanh to +-1, sigmoid to 1 or +0."""
LATENCY = 9
"""Cycles from an input (``valid``, ``op``, ``x``) to its result, the same for every op."""


@dataclass(frozen=True)
class VMathConfig(Config):
    """The standalone transcendental function unit of the VPU (a test and reference top).

    Parameters
    ----------
    variant : str
        Only ``"fp32"``: fp32 in, fp32 out.
    """

    KIND = "vmath"

    variant: str = "fp32"

    def validate(self):
        check_choice("variant", self.variant, ("fp32",))

    @property
    def name(self):
        return f"podium_vmath_{self.variant}"
