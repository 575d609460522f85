"""The floating-point units of the MXU's PEs and accumulator and the VPU's lanes (hdl/lib/fp.py)
alone on ports (block ``fp_units``), so they can be tested on millions of operand pairs
without an array around them."""

from amaranth.hdl import Module
from amaranth.lib.wiring import In, Out

from spec.formats import FLOAT_FORMATS

from .lib.fp import add_fp32, fp32_to_bf16, minmax_fp32, mul_fp32, multiply_fp32
from .top import Top

__all__ = ["FloatUnits"]


class FloatUnits(Top):
    """Combinational: ``product = a * b`` (fp32), ``total = x + y`` (fp32), ``narrow = bf16(x)``,
    ``x_times_y = x * y`` (fp32), ``smaller`` / ``larger`` = min / max of ``x`` and ``y``.

    The exact units the MXU's PEs and accumulator and the VPU's lanes use, on ports, so they
    can be tested on millions of operand pairs without an array around them.
    """

    def __init__(self, config):
        fmt = FLOAT_FORMATS[config.fmt]
        super().__init__(config, {
            "a": In(fmt.width), "b": In(fmt.width), "x": In(32), "y": In(32),
            "product": Out(32), "total": Out(32), "narrow": Out(16),
            "x_times_y": Out(32), "smaller": Out(32), "larger": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        fmt = FLOAT_FORMATS[self._config.fmt]
        m.d.comb += [
            self.product.eq(multiply_fp32(m, fmt, self.a, self.b)),
            self.total.eq(add_fp32(m, self.x, self.y)),
            self.narrow.eq(fp32_to_bf16(self.x)),
            self.x_times_y.eq(mul_fp32(m, self.x, self.y)),
        ]
        smaller, larger = minmax_fp32(m, self.x, self.y)
        m.d.comb += [self.smaller.eq(smaller), self.larger.eq(larger)]
        return m
