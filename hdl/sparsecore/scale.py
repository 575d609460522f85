"""The scale unit: the combiner's per-bag output scale, from the bag's weights.

It adds, in token order, the denominator of the combiner into an fp32 register
(``mean``: ``w``; ``sqrtn``: ``fp32(w * w)``; ``sqrtn_count``: 1.0, all from +0), and at the bag's
end computes ``scale = fp32(1 / den)`` (``sqrtn``, ``sqrtn_count``: ``fp32(1 / fp32(sqrt(den)))``),
each step rounded to nearest even, and 0 when ``den`` is zero. ``sum``: the scale is 1.0 at once.
The square root is digit by digit (one result bit a cycle, 28 cycles); the reciprocal is one
division of significands. ``valid`` rises when the scale is ready and falls at the next bag's
end.
"""

import enum

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from spec.formats import FP32, FP32_NAN

from ..lib.fp import _clz, _decode, _normalize_round, add_fp32, mul_fp32
from .walker import ONE

__all__ = ["ScaleUnit", "Combine"]


class Combine(enum.IntEnum):
    """The combiner codes of the MODE register."""

    SUM = 0
    MEAN = 1
    SQRTN = 2
    SQRTN_COUNT = 3


def _normalized(m, x, name):
    """Sign, biased exponent (of bit 23, may be < 1 for a subnormal), 24-bit significand with
    its leading one at bit 23, and the nan / inf / zero flags of fp32 ``x``."""
    sign, exp, sig, nan, inf, zero = _decode(m, FP32, x, name)
    lz = _clz(sig, 24)
    norm = Signal(24, name=f"{name}_norm")
    m.d.comb += norm.eq((sig << lz)[:24])
    e = Signal(range(-32, 256), name=f"{name}_e")
    m.d.comb += e.eq(exp - lz)
    return sign, e, norm, nan, inf, zero


class ScaleUnit(wiring.Component):
    """See the module docstring.

    Members
    -------
    start : In(1), kind : In(2)
    took : In(1), weight : In(32), bag_end : In(1)
    scale : Out(32), valid : Out(1)
    """

    def __init__(self):
        super().__init__({"start": In(1), "kind": In(2), "took": In(1), "weight": In(32),
                          "bag_end": In(1), "scale": Out(32), "valid": Out(1)})

    def elaborate(self, platform):
        m = Module()
        kind = self.kind
        den = Signal(32)
        addend = Mux(kind == Combine.MEAN, self.weight,
                     Mux(kind == Combine.SQRTN, mul_fp32(m, self.weight, self.weight, "w2"),
                         ONE))
        grown = add_fp32(m, den, addend, "den")
        with m.If(self.took):
            m.d.sync += den.eq(grown)
        d = Signal(32)          # the denominator being worked on, then its square root
        ready = Signal()
        scale = Signal(32)
        m.d.comb += [self.valid.eq(ready | (kind == Combine.SUM)),
                     self.scale.eq(Mux(kind == Combine.SUM, ONE, scale))]

        # Square root, digit by digit: N = even-exponent significand << 30, 28 root bits.
        sign, e, sig, nan, inf, zero = _normalized(m, d, "d")
        odd = e[0]                          # the exponent of bit 0, e - 150, is odd
        n_bits = Signal(56)
        m.d.comb += n_bits.eq(Mux(odd, Cat(Const(0, 31), sig), Cat(Const(0, 30), sig)))
        k2 = Signal(range(-200, 200))        # k' / 2
        m.d.comb += k2.eq(Mux(odd, e - 151, e - 150) >> 1)
        rem = Signal(30)
        root = Signal(29)
        step = Signal(range(29))
        trial = Cat(Const(1, 1), Const(0, 1), root)[:31]
        pair = (n_bits << (step << 1))[54:56]
        cur = Cat(pair, rem)
        take = cur >= trial

        # Reciprocal of d: Q = 2**50 // significand, E = 253 - e.
        q = Signal(28)
        r = Signal(24)
        m.d.comb += [q.eq(Const(1 << 50, 51) // sig), r.eq(Const(1 << 50, 51) % sig)]
        recip = _normalize_round(m, "recip", sign, 253 - e, Cat(q[0] | (r != 0), q[1:28]),
                                 -1, 285, carry=True)

        with m.FSM():
            with m.State("ADD"):
                with m.If(self.bag_end):
                    m.d.sync += [d.eq(Mux(self.took, grown, den)), den.eq(0), ready.eq(0)]
                    with m.If(kind[1]):
                        m.d.sync += [rem.eq(0), root.eq(0), step.eq(0)]
                        m.next = "SQRT"
                    with m.Else():
                        m.next = "RECIP"
            with m.State("SQRT"):
                with m.If(nan | inf | zero | sign):
                    m.next = "RECIP"        # sqrt(+-0) = +-0, sqrt(inf) = inf, NaN stays
                with m.Else():
                    m.d.sync += [rem.eq(Mux(take, cur - trial, cur)), root.eq(Cat(take, root)),
                                 step.eq(step + 1)]
                    with m.If(step == 27):
                        m.next = "ROUND"
            with m.State("ROUND"):
                # After 28 steps root has 28 bits, leading one at 26 or 27; value
                # root * 2**-26 * 2**(E - 127) with E = 138 + k' / 2.
                m.d.sync += d.eq(_normalize_round(m, "sqrt", 0, 138 + k2,
                                                  Cat(root[0] | (rem != 0), root[1:28]), 0, 300,
                                                  carry=True))
                m.next = "RECIP"
            with m.State("RECIP"):
                m.d.sync += [scale.eq(Mux(nan | (sign & kind[1] & ~zero), FP32_NAN,
                                          Mux(zero, 0,
                                              Mux(inf, Cat(Const(0, 31), sign), recip)))),
                             ready.eq(1)]
                m.next = "ADD"
        with m.If(self.start):
            m.d.sync += [den.eq(0), ready.eq(0)]
        return m
