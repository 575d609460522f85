"""The MXU's arithmetic on each number format (spec/formats.py): operand and accumulator
shapes, the PE's multiply-accumulate, the accumulator memory's add and the cast of a result
on its way out. The array, the matrix unit and the accumulator call :func:`arithmetic` of
their configuration's format and never look inside it.

Float formats: products rounded to fp32 (exact except where a bfloat16 product leaves fp32's
normal range) and **fp32 sums inside every PE**, rounded to nearest even, subnormals kept,
one canonical NaN (hdl/lib/fp.py); int8: int32 sums that wrap modulo 2**32.
"""

from dataclasses import dataclass
from functools import cache

from amaranth.hdl import signed, unsigned

from spec.formats import FLOAT_FORMATS, OUT_WIDTH, MXUFormat

from ..lib.fp import add_fp32, fp32_to_bf16, multiply_fp32

__all__ = ["Arithmetic", "arithmetic"]


@dataclass(frozen=True)
class Arithmetic:
    """The gateware of one :class:`~spec.formats.MXUFormat`."""

    format: MXUFormat

    @property
    def is_float(self):
        return self.format.is_float

    @property
    def pad_weight(self):
        return self.format.pad_weight

    @property
    def psum_init(self):
        return self.format.psum_init

    @property
    def in_shape(self):
        width = self.format.in_width
        return unsigned(width) if self.is_float else signed(width)

    @property
    def acc_shape(self):
        return unsigned(32) if self.is_float else signed(32)

    def out_shape(self, output):
        return unsigned(OUT_WIDTH[output]) if self.is_float else signed(32)

    def mac(self, m, psum, a, w, name="mac"):
        """``psum + a * w`` in the accumulator format."""
        if self.is_float:
            product = multiply_fp32(m, FLOAT_FORMATS[self.format.name], a, w,
                                    name=f"{name}_mul")
            return add_fp32(m, psum, product, name=f"{name}_add")
        return (psum + a * w)[:32].as_signed()

    def add(self, m, x, y, name="add"):
        """``x + y`` of two accumulator values."""
        if self.is_float:
            return add_fp32(m, x, y, name=name)
        return (x + y)[:32].as_signed()

    def cast(self, output, x):
        """An accumulator value as it leaves the unit in format ``output``."""
        return fp32_to_bf16(x) if output == "bfloat16" else x


@cache
def arithmetic(fmt):
    """The :class:`Arithmetic` of MXU format ``fmt`` (a spec format)."""
    return Arithmetic(fmt)
