"""One lane of the VPU: the 32-bit ALU that every elementwise operation, cast and reduction
step runs through (docs/tensorcore.md, "VPU"). A VPU has ``lanes`` of them, one per 32-bit
word of a VMEM row; the lane is emitted once as its own Verilog module and instantiated
``lanes`` times.

int32 arithmetic wraps; fp32 arithmetic is IEEE binary32, round to nearest even, subnormals
kept, every NaN result canonical (hdl/lib/fp.py). bfloat16 reaches the lane already widened to
fp32 and leaves it as fp32 (the VPU rounds it). One 33 x 33 signed multiplier serves the int32
product (its low 32 bits), the requantization product (all 64) and the fp32 significand product.
"""

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

from spec.formats import FP32_NAN

from ..lib.fp import Fp32Multiplier, add_fp32, fp32_is_nan, minmax_fp32

__all__ = ["AluOp", "LaneALU"]


class AluOp(enum.Enum, shape=4):
    """What a lane computes: each VOP operation (spec/isa.py ``VOPS``) as the lane operation
    of the same name (the issue stage maps one to the other by name, so the codes need not
    agree), and the lane's own for casts."""

    ADD = 0
    SUB = 1
    MUL = 2
    MAX = 3
    MIN = 4
    RELU = 5        # max(x, 0): -0 and negative values become +0, NaN stays NaN
    COPY = 6        # x (fp32: a NaN becomes the canonical NaN)
    REQUANT = 7     # int32 -> int8: clamp((x * y + 2^(shift-1)) >> shift), sign-extended
    ABS = 8         # |x|: int32 wraps (-2^31 stays -2^31); fp32 sign cleared, NaN canonical


class LaneALU(wiring.Component):
    """Combinational: ``result = op(x, y)`` in int32 (``fp`` low) or fp32 (``fp`` high).

    Members
    -------
    op : In(AluOp)
    fp : In(1)
        fp32 arithmetic; ignored by REQUANT (always int32).
    x, y : In(32)
        Operands (y: ignored by RELU, COPY and ABS; the multiplier of REQUANT).
    shift : In(range(63))
        REQUANT's right shift.
    result : Out(32)
    """

    op: In(AluOp)
    fp: In(1)
    x: In(32)
    y: In(32)
    shift: In(range(63))
    result: Out(32)

    def elaborate(self, platform):
        m = Module()
        x, y, op = self.x, self.y, self.op
        is_float = self.fp & (op != AluOp.REQUANT)

        fmul = Fp32Multiplier(m, x, y)
        mul_x = Signal(signed(33))
        mul_y = Signal(signed(33))
        product = Signal(signed(66))
        m.d.comb += [
            mul_x.eq(Mux(is_float, fmul.sig_x, x.as_signed())),
            mul_y.eq(Mux(is_float, fmul.sig_y, y.as_signed())),
            product.eq(mul_x * mul_y),
        ]

        negate = Mux(op == AluOp.SUB, 0x80000000, 0)
        fp_sum = add_fp32(m, x, y ^ negate)
        int_sum = Mux(op == AluOp.SUB, x - y, x + y)[:32]

        other = Mux(op == AluOp.RELU, 0, y)     # relu(x) = max(x, 0), also for fp32 (+0)
        fp_min, fp_max = minmax_fp32(m, x, other)
        int_less = Signal()
        m.d.comb += int_less.eq(x.as_signed() < other.as_signed())
        int_min, int_max = Mux(int_less, x, other), Mux(int_less, other, x)

        with m.Switch(op):
            with m.Case(AluOp.ADD, AluOp.SUB):
                m.d.comb += self.result.eq(Mux(is_float, fp_sum, int_sum))
            with m.Case(AluOp.MUL):
                m.d.comb += self.result.eq(Mux(is_float, fmul.result(product[:48]),
                                               product[:32]))
            with m.Case(AluOp.MAX, AluOp.RELU):
                m.d.comb += self.result.eq(Mux(is_float, fp_max, int_max))
            with m.Case(AluOp.MIN):
                m.d.comb += self.result.eq(Mux(is_float, fp_min, int_min))
            with m.Case(AluOp.COPY):
                m.d.comb += self.result.eq(Mux(is_float & fp32_is_nan(x), FP32_NAN, x))
            with m.Case(AluOp.ABS):
                int_abs = Mux(x[31], -x.as_signed(), x)[:32]
                m.d.comb += self.result.eq(Mux(is_float, Mux(fp32_is_nan(x), FP32_NAN, x[:31]),
                                               int_abs))
            with m.Case(AluOp.REQUANT):
                m.d.comb += self.result.eq(self._requantize(m, product[:64].as_signed()))
        return m

    def _requantize(self, m, product):
        """``clamp((product + 2^(shift-1)) >> shift, -128, 127)``, the shift arithmetic (so the
        rounding is half up), ``2^(shift-1)`` zero for ``shift = 0``."""
        half = Signal(64, name="rq_half")
        total = Signal(signed(65), name="rq_total")
        shifted = Signal(signed(65), name="rq_shifted")
        m.d.comb += [
            half.eq((Const(1, 64) << self.shift)[1:]),
            total.eq(product + half),
            shifted.eq(total >> self.shift),
        ]
        return Mux(shifted > 127, 127, Mux(shifted < -128, -128, shifted))[:8].as_signed()
