"""Number formats, defined once: the binary floating-point formats (their fields and
canonical NaNs) and the MXU's operand formats (operand width, result formats, the bit
patterns a padded weight and the first partial sum take).

The MXU's arithmetic on these formats is hdl/mxu/formats.py (RTL) and
verification/models/mxu.py (golden); both name a format here and agree on nothing else.
"""

from dataclasses import dataclass

from .config import Config, check_choice

__all__ = ["FloatFormat", "FP32", "BF16", "FP8_E4M3FN", "FP8_E5M2", "FLOAT_FORMATS",
           "FP32_NAN", "BF16_NAN", "FP32_INF", "MXUFormat", "FORMATS", "get_format",
           "FloatUnitsConfig"]

FP32_NAN = 0x7FC00000
"""The one NaN every fp32 operation produces (docs/conventions.md, "Floating point")."""
BF16_NAN = 0x7FC0
"""The one NaN every bfloat16 result carries."""
FP32_INF = 0x7F800000


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format: sign, ``exp_bits`` exponent, ``man_bits`` fraction.

    ``ieee`` formats have infinities (exponent all ones, fraction zero) and NaNs (exponent all
    ones, fraction non-zero). ``fn`` formats (float8_e4m3fn) have no infinities and one NaN
    pattern per sign (all exponent and fraction bits set).
    """

    name: str
    exp_bits: int
    man_bits: int
    ieee: bool = True

    @property
    def width(self):
        return 1 + self.exp_bits + self.man_bits

    @property
    def bias(self):
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def max_exp_field(self):
        """Largest exponent field of a finite value."""
        return (1 << self.exp_bits) - (2 if self.ieee else 1)


FP32 = FloatFormat("float32", 8, 23)
BF16 = FloatFormat("bfloat16", 8, 7)
FP8_E4M3FN = FloatFormat("float8_e4m3fn", 4, 3, ieee=False)
FP8_E5M2 = FloatFormat("float8_e5m2", 5, 2)
FLOAT_FORMATS = {f.name: f for f in (BF16, FP8_E4M3FN, FP8_E5M2)}
"""The small float formats an MXU multiplies (products rounded to fp32)."""


@dataclass(frozen=True)
class MXUFormat:
    """An MXU number format.

    * ``int8``: int8 x int8 products, int32 sums that wrap modulo 2**32.
    * ``bfloat16``, ``float8_e4m3fn``, ``float8_e5m2`` (the ml_dtypes names): products rounded
      to fp32 and fp32 sums inside every PE, rounded to nearest even, subnormals kept, one
      canonical NaN. Results leave as fp32 or, optionally, rounded to bfloat16.

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


OUT_WIDTH = {"int32": 32, "float32": 32, "bfloat16": 16}
"""Bits of one result of each MXU output format."""

FORMATS = {
    "int8": MXUFormat("int8", 8, ("int32",)),
    "bfloat16": MXUFormat("bfloat16", 16, ("float32", "bfloat16")),
    "float8_e4m3fn": MXUFormat("float8_e4m3fn", 8, ("float32", "bfloat16")),
    "float8_e5m2": MXUFormat("float8_e5m2", 8, ("float32", "bfloat16")),
}


def get_format(name):
    return FORMATS[name]


@dataclass(frozen=True)
class FloatUnitsConfig(Config):
    """The standalone floating-point units of one input format (a test and reference top).

    Parameters
    ----------
    fmt : str
        The input format, one of ``FLOAT_FORMATS``: ``"bfloat16"``, ``"float8_e4m3fn"``,
        ``"float8_e5m2"``.
    """

    KIND = "fp_units"

    fmt: str = "bfloat16"

    def validate(self):
        check_choice("fmt", self.fmt, tuple(FLOAT_FORMATS))

    @property
    def name(self):
        return f"podium_fp_units_{self.fmt}"
