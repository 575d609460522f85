"""Number formats of the MXU: operand and accumulator shapes and the arithmetic on them.

A format is the one place that knows how a processing element multiplies and accumulates, how
the accumulator memory adds, what a padded weight is and how results leave the unit; the array,
the matrix unit and the golden model name a format and never look inside it.

* ``int8``: int8 x int8 products, int32 sums that wrap modulo 2**32.
* ``bfloat16``, ``float8_e4m3fn``, ``float8_e5m2`` (the ml_dtypes names): products rounded to
  fp32 (exact except where a bfloat16 product leaves fp32's normal range) and **fp32 sums inside
  every PE**, rounded to nearest even, subnormals kept, one canonical NaN (hdl/lib/fp.py).
  Results leave as fp32 or, optionally, rounded to bfloat16.
"""

from dataclasses import dataclass

from amaranth.hdl import signed, unsigned

from ..lib.fp import FLOAT_FORMATS, add_fp32, fp32_to_bf16, multiply_fp32

__all__ = ["Format", "FORMATS", "get_format"]

_OUT_WIDTH = {"int32": 32, "float32": 32, "bfloat16": 16}


@dataclass(frozen=True)
class Format:
    """An MXU number format.

    Attributes
    ----------
    name : str
        The name used in configurations and on the command line.
    in_width : int
        Bits of one activation or weight.
    outputs : tuple of str
        Result formats the unit can send; the first is the accumulator's own.
    """

    name: str
    in_width: int
    outputs: tuple

    @property
    def is_float(self):
        return self.name in FLOAT_FORMATS

    @property
    def in_shape(self):
        return unsigned(self.in_width) if self.is_float else signed(self.in_width)

    @property
    def acc_shape(self):
        return unsigned(32) if self.is_float else signed(32)

    def out_shape(self, output):
        return unsigned(_OUT_WIDTH[output]) if self.is_float else signed(32)

    @property
    def pad_weight(self):
        """The weight of a padded tile row or lane: an additive identity for every product.
        For floats that is -0: ``a * -0`` is a zero that leaves any sum, -0 included, as it is
        (with +0, a column whose products are all -0 would sum to +0)."""
        return 1 << (self.in_width - 1) if self.is_float else 0

    @property
    def psum_init(self):
        """The partial sum entering the first array row: 0, or -0 for floats, so a column
        sums its products exactly (-0 is the identity of IEEE addition, +0 is not)."""
        return 1 << 31 if self.is_float else 0

    def mac(self, m, psum, a, w, name="mac"):
        """``psum + a * w`` in the accumulator format."""
        if self.is_float:
            product = multiply_fp32(m, FLOAT_FORMATS[self.name], a, w, name=f"{name}_mul")
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


FORMATS = {
    "int8": Format("int8", 8, ("int32",)),
    "bfloat16": Format("bfloat16", 16, ("float32", "bfloat16")),
    "float8_e4m3fn": Format("float8_e4m3fn", 8, ("float32", "bfloat16")),
    "float8_e5m2": Format("float8_e5m2", 8, ("float32", "bfloat16")),
}


def get_format(name):
    return FORMATS[name]
