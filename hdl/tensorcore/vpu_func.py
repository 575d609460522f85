"""The VPU's transcendental function unit: ``exp``, ``reciprocal``, ``rsqrt``, ``tanh``,
``sigmoid``, ``log`` of one fp32 value per cycle, pipelined (docs/vmath.md).

The algorithm and its constants are spec/vmath.py's; the golden model computing the same bits
is verification/models/vmath.py. The unit has no backpressure: a ``valid`` input gives a
``out_valid`` result exactly ``spec.vmath.LATENCY`` cycles later, for every op.

Stages (one register after each)::

    1 decode: classes, normalise a subnormal, sig * log2(e); the special results
    2 y = +-x log2(e) (or 2x for tanh) in fixed point -> k, f; the evaluator's argument,
      its table row; tanh's x**2
    3 evaluator: C1 + C2 t; tanh's x**2 / 3 and 2 x**4 / 15
    4 evaluator: C0 + (C1 + C2 t) t -> p (2**f, 1/m, 1/sqrt(m) or ln(1+d)/d)
    5 sigmoid / tanh: e**-|x| (or e**-2|x|) = p >> -k; its table row for 1 / (1 + e**-|x|)
    6 evaluator 2: C1 + C2 t
    7 evaluator 2: -> r
    8 the last product and the scale of the result
    9 normalise, round to nearest even into fp32 (subnormal, infinite), the special results
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from spec import vmath as V
from spec.formats import FP32_INF, FP32_NAN

from ..top import Top

__all__ = ["VPUFunc", "VMathTop"]

_ONE, _HALF = 0x3F800000, 0x3F000000
_OP = V.OP_CODES
_ROW_WIDTH = V.C0_WIDTH + V.C1_WIDTH + V.C2_WIDTH


def _clz(value, width):
    """Leading zeros of ``value[:width]`` (``width`` when it is zero), as a tree of muxes."""
    size = 1 << (width - 1).bit_length()
    padded = Cat(Const(0, size - width), value[:width])    # zeros below: same leading count

    def count(v, n):
        if n == 1:
            return ~v[0]
        half = n // 2
        upper, lower = v[half:n], v[:half]
        return Mux(upper != 0, count(upper, half), half + count(lower, half))

    return Mux(value[:width] == 0, width, count(padded, size))


def _row_word(c0, c1, c2):
    return (c0 | ((c1 % (1 << V.C1_WIDTH)) << V.C0_WIDTH)
            | ((c2 % (1 << V.C2_WIDTH)) << (V.C0_WIDTH + V.C1_WIDTH)))


class _Evaluator:
    """The piecewise quadratic of spec/vmath.py in three pieces: ``lookup`` (table row and
    offset ``t``), ``linear`` (``C1 + ((C2 t) >> C2_SHIFT)``) and ``finish`` (the result)."""

    def __init__(self, functions):
        self._functions = functions

    def lookup(self, m, name, func, u):
        """``(row, t)`` of ``u`` on function ``func`` (an index into ``self._functions``)."""
        row = Signal(_ROW_WIDTH, name=f"{name}_row")
        index = Cat(u[V.T_BITS:V.U_BITS], func) if len(self._functions) > 1 else \
            u[V.T_BITS:V.U_BITS]
        with m.Switch(index):
            for i, number in enumerate(self._functions):
                for j, coeffs in enumerate(V.TABLES[number]):
                    with m.Case(i * V.SEGMENTS + j):
                        m.d.comb += row.eq(_row_word(*coeffs))
        t = Signal(signed(V.T_BITS + 1), name=f"{name}_t")
        m.d.comb += t.eq(u[:V.T_BITS] - (1 << (V.T_BITS - 1)))
        return row, t

    @staticmethod
    def linear(row, t):
        c1 = row[V.C0_WIDTH:V.C0_WIDTH + V.C1_WIDTH].as_signed()
        c2 = row[V.C0_WIDTH + V.C1_WIDTH:].as_signed()
        return c1 + ((c2 * t) >> V.C2_SHIFT)

    @staticmethod
    def finish(row, b, t):
        p = row[:V.C0_WIDTH] + ((b * t) >> V.C1_SHIFT)
        return Mux(p > V.P_MAX, V.P_MAX, p)[:V.U_BITS + 1]


class VPUFunc(wiring.Component):
    """``result = op(x)`` for fp32 ``x``, ``LATENCY`` cycles after ``valid``; one per cycle.

    Ports: ``valid``, ``op`` (a code of ``spec.vmath.OPS``), ``x`` in; ``out_valid``,
    ``result`` out (meaningless while ``out_valid`` is low).
    """

    valid: In(1)
    op: In(3)
    x: In(32)
    out_valid: Out(1)
    result: Out(32)

    def elaborate(self, platform):
        m = Module()

        def reg(name, shape, value):
            s = Signal(shape, name=name)
            m.d.sync += s.eq(value)
            return s

        def wire(name, shape, value):
            s = Signal(shape, name=name)
            m.d.comb += s.eq(value)
            return s

        def stage(n, before, keep, **new):
            """Stage ``n``'s registers: ``keep`` (names) of the stage ``before`` (a namespace)
            carried unchanged, and ``new`` ones (``name=(shape, value)``)."""
            regs = {name: reg(f"{name}{n}", getattr(before, name).shape(),
                              getattr(before, name)) for name in keep}
            regs.update({name: reg(f"{name}{n}", shape, value)
                         for name, (shape, value) in new.items()})
            return SimpleNamespace(**regs)

        # ---- stage 1: decode
        x, op = self.x, self.op
        sign = x[31]
        field, man = x[23:31], x[:23]
        nan = (field == 255) & (man != 0)
        inf = (field == 255) & (man == 0)
        zero = (field == 0) & (man == 0)
        raw = wire("raw", 24, Cat(man, field != 0))
        lz = wire("lz", range(25), _clz(raw, 24))
        up = Mux(zero, 0, lz)
        sig0 = wire("sig0", 24, (raw << up)[:24])
        e0 = wire("e0", signed(10), Mux(field == 0, -126, field - 127) - up)
        big = e0 >= V.SATURATE_E
        neg_nonzero = sign & ~zero
        special = Signal(32, name="special_value")
        is_special = Signal(name="is_special")
        with m.Switch(op):
            with m.Case(_OP["exp"]):
                m.d.comb += is_special.eq(zero | big | inf)
                m.d.comb += special.eq(Mux(zero, _ONE, Mux(sign, 0, FP32_INF)))
            with m.Case(_OP["reciprocal"]):
                m.d.comb += is_special.eq(zero | inf)
                m.d.comb += special.eq(Cat(Const(0, 23), Mux(zero, 255, 0), sign))
            with m.Case(_OP["rsqrt"]):
                m.d.comb += is_special.eq(zero | inf | neg_nonzero)
                m.d.comb += special.eq(Mux(neg_nonzero, FP32_NAN,
                                       Cat(Const(0, 23), Mux(zero, 255, 0), sign)))
            with m.Case(_OP["log"]):
                m.d.comb += is_special.eq(zero | inf | neg_nonzero)
                m.d.comb += special.eq(Mux(neg_nonzero, FP32_NAN,
                                       Mux(zero, 0xFF800000, FP32_INF)))
            with m.Case(_OP["sigmoid"]):
                m.d.comb += is_special.eq(zero | big | inf)
                m.d.comb += special.eq(Mux(zero, _HALF, Mux(sign, 0, _ONE)))
            with m.Case(_OP["tanh"]):
                m.d.comb += is_special.eq(zero | big | inf)
                m.d.comb += special.eq(Mux(zero, Cat(Const(0, 31), sign),
                                       Cat(Const(_ONE, 31), sign)))
        s1 = stage(1, None, (), v=(1, self.valid), op=(3, op), sign=(1, sign), sig=(24, sig0),
                   e=(signed(10), e0), spec=(32, Mux(nan, FP32_NAN, special)),
                   isspec=(1, nan | is_special),
                   prod=(24 + V.LOG2E.bit_length(), sig0 * V.LOG2E))
        op1, sign1, sig1, e1, prod1 = s1.op, s1.sign, s1.sig, s1.e, s1.prod

        # ---- stage 2: y = +-x log2(e) -> k, f; the evaluator's argument and table row
        is_tanh1 = op1 == _OP["tanh"]
        es = wire("es", signed(11), e1 + is_tanh1)
        yshift = wire("yshift", signed(12), V.Y_SHIFT - es)
        yshift_c = Mux(yshift < 0, 0, Mux(yshift > 63, 63, yshift)).as_unsigned()[:6]
        mag = wire("ymag", len(prod1), prod1 >> yshift_c)
        negative = Mux(op1 == _OP["exp"], sign1, 1)
        y = wire("y", signed(len(prod1) + 1), Mux(negative, -1 - mag, mag))
        k = y >> V.U_BITS
        frac1 = sig1[:23]
        func = Signal(3, name="func1")
        u = Signal(V.U_BITS, name="u1")
        with m.Switch(op1):
            with m.Case(_OP["exp"], _OP["sigmoid"], _OP["tanh"]):
                m.d.comb += [func.eq(V.FUNC["exp2"]), u.eq(y[:V.U_BITS])]
            with m.Case(_OP["reciprocal"]):
                m.d.comb += [func.eq(V.FUNC["recip"]), u.eq(frac1 << 7)]
            with m.Case(_OP["rsqrt"]):
                m.d.comb += [func.eq(V.FUNC["rsqrt_even"] + e1[0]), u.eq(frac1 << 7)]
            with m.Case(_OP["log"]):
                m.d.comb += [func.eq(Mux(frac1[22], V.FUNC["log_lo"], V.FUNC["log_hi"])),
                         u.eq(frac1 << 8)]
        ev1 = _Evaluator(tuple(range(len(V.FUNCTIONS))))
        row, t = ev1.lookup(m, "ev1", func, u)
        # tanh's x**2 in units of 2**-40 (only used when e <= TANH_SMALL_E, so shift >= 18)
        sqshift = wire("sqshift", signed(12), 6 - 2 * e1)
        sqshift_c = Mux(sqshift > 63, 63, sqshift).as_unsigned()[:6]
        square = wire("square", 48, sig1 * sig1)

        common = ("v", "op", "sign", "sig", "e", "spec", "isspec")
        s2 = stage(2, s1, common, k=(signed(12), k), row=(_ROW_WIDTH, row),
                   t=(signed(V.T_BITS + 1), t), a2_=(30, (square >> sqshift_c)[:30]))

        # ---- stage 3: C1 + C2 t; tanh's x**2/3 - 2 x**4/15
        a2h = s2.a2_[12:30]
        s3 = stage(3, s2, (*common, "k", "row", "t"),
                   b=(signed(V.C1_WIDTH + 1), _Evaluator.linear(s2.row, s2.t)),
                   third=(31, (s2.a2_ * V.THIRD) >> 32),
                   fourth=(31, (a2h * a2h * V.TWO_15) >> 36))

        # ---- stage 4: p
        s4 = stage(4, s3, (*common, "k"),
                   p=(V.U_BITS + 1, _Evaluator.finish(s3.row, s3.b, s3.t)),
                   c=(31, s3.third - s3.fourth))

        # ---- stage 5: e**-|x| = p >> -k; the reciprocal's table row
        kneg = wire("kneg", signed(13), -s4.k)
        kneg_c = Mux(kneg > 63, 63, Mux(kneg < 0, 0, kneg)).as_unsigned()[:6]
        small = wire("small", V.U_BITS, (s4.p >> kneg_c)[:V.U_BITS])
        ev2 = _Evaluator((V.FUNC["recip"],))
        row_r, t_r = ev2.lookup(m, "ev2", None, small)
        s5 = stage(5, s4, (*common, "k", "p", "c"), small=(V.U_BITS, small),
                   row=(_ROW_WIDTH, row_r), t=(signed(V.T_BITS + 1), t_r))

        # ---- stage 6: evaluator 2, C1 + C2 t
        s6 = stage(6, s5, (*common, "k", "p", "c", "small", "row", "t"),
                   b=(signed(V.C1_WIDTH + 1), _Evaluator.linear(s5.row, s5.t)))

        # ---- stage 7: r = 1 / (1 + small)
        s7 = stage(7, s6, (*common, "k", "p", "c", "small"),
                   r=(V.U_BITS + 1, _Evaluator.finish(s6.row, s6.b, s6.t)))
        op7, sign7, sig7, e7, k7, p7 = s7.op, s7.sign, s7.sig, s7.e, s7.k, s7.p
        c7, small7, r7 = s7.c, s7.small, s7.r

        # ---- stage 8: the last product and the result's scale
        frac7 = sig7[:23]
        hi7 = ~frac7[22]
        mul_a = Signal(37, name="mul_a")
        mul_b = Signal(31, name="mul_b")
        out_sign = Signal(name="out_sign")
        scale = Signal(signed(12), name="scale")
        mag8 = Signal(63, name="mag8")
        m.d.comb += [mul_a.eq(p7), mul_b.eq(r7)]
        product = wire("product", 63, mul_a * mul_b)
        with m.Switch(op7):
            with m.Case(_OP["exp"]):
                m.d.comb += [mag8.eq(p7), scale.eq(k7 - 30)]
            with m.Case(_OP["reciprocal"]):
                m.d.comb += [mag8.eq(p7), scale.eq(-30 - e7), out_sign.eq(sign7)]
            with m.Case(_OP["rsqrt"]):
                m.d.comb += [mag8.eq(p7), scale.eq(-30 - (e7 >> 1))]
            with m.Case(_OP["log"]):
                # d = 2 frac (hi) or frac - 2**23 (lo), in units of 2**-24; |d| * q on the
                # shared multiplier
                ee = Mux(hi7, e7, e7 + 1)
                m.d.comb += [mul_a.eq(Mux(hi7, Cat(Const(0, 1), frac7), (1 << 23) - frac7)),
                             mul_b.eq(p7)]
                dq = Mux(hi7, product, -product)
                total = wire("log_total", signed(64), ee * V.LN2_54 + dq)
                m.d.comb += [mag8.eq(Mux(total < 0, -total, total)), scale.eq(-54),
                         out_sign.eq(total < 0)]
            with m.Case(_OP["sigmoid"]):
                m.d.comb += [mag8.eq(Mux(sign7, product, r7)),
                         scale.eq(Mux(sign7, k7 - 60, -30))]
            with m.Case(_OP["tanh"]):
                tiny = e7 <= V.TANH_SMALL_E
                m.d.comb += [mul_a.eq(Mux(tiny, (1 << 36) - (c7 >> 4), (1 << V.U_BITS) - small7)),
                         mul_b.eq(Mux(tiny, sig7, r7)), out_sign.eq(sign7),
                         mag8.eq(product), scale.eq(Mux(tiny, e7 - 59, -60))]
        s8 = stage(8, s7, ("v", "spec", "isspec"), sign=(1, out_sign), mag=(63, mag8),
                   scale=(signed(12), scale))
        mag8r, scale8 = s8.mag, s8.scale

        # ---- stage 9: normalise and round to nearest even into fp32
        lz8 = wire("lz8", range(64), _clz(mag8r, 63))
        norm = wire("norm", 63, (mag8r << lz8)[:63])         # leading one at bit 62
        biased = wire("biased", signed(13), scale8 + (62 + 127) - lz8)
        under = wire("under", signed(14), 1 - biased)
        under_c = Mux(biased >= 1, 0, Mux(under > 63, 63, under)).as_unsigned()[:6]
        shifted = (norm >> under_c)[:63]
        lost = ((shifted << under_c)[:63] != norm) | (under > 63)
        keep = wire("keep", 24, shifted[39:63])
        guard = shifted[38]
        sticky = (shifted[:38] != 0) | lost
        round_up = guard & (sticky | keep[0])
        base = Mux(biased >= 1, biased - 1, 0)
        total_bits = wire("total_bits", 40, (base << 23) + keep + round_up)
        packed = Mux(total_bits >= FP32_INF, FP32_INF, total_bits)[:31]
        packed = Mux(mag8r == 0, 0, packed)
        s9 = stage(9, s8, ("v",), res=(32, Mux(s8.isspec, s8.spec, Cat(packed, s8.sign))))
        m.d.comb += [self.out_valid.eq(s9.v), self.result.eq(s9.res)]
        return m


class VMathTop(Top):
    """The function unit alone on ports (block ``vmath``), for its testbench
    (verification/tb/vmath.py): ``valid``, ``op``, ``x`` in; ``out_valid``, ``result`` out."""

    def __init__(self, config):
        self._unit = VPUFunc()
        super().__init__(config, dict(self._unit.signature.members))

    @property
    def extras(self):
        return {"vmath": {"ops": list(V.OPS), "latency": V.LATENCY}}

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = unit = self._unit
        for name, member in self.signature.members.items():
            if member.flow == wiring.Out:
                m.d.comb += getattr(self, name).eq(getattr(unit, name))
            else:
                m.d.comb += getattr(unit, name).eq(getattr(self, name))
        return m
