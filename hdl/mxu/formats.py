"""Number formats of the MXU: operand width, accumulator width and the arithmetic on them.

A format is the one place that knows how a processing element multiplies and accumulates and how
the accumulator memory adds; the array, the matrix unit and the golden model name a format and
never look inside it.
"""

from dataclasses import dataclass

from amaranth.hdl import signed

__all__ = ["Format", "FORMATS", "get_format"]


@dataclass(frozen=True)
class Format:
    """An MXU number format.

    Attributes
    ----------
    name : str
        The name used in configurations and on the command line.
    in_width : int
        Bits of one activation or weight.
    acc_width : int
        Bits of one partial sum and accumulator lane.
    """

    name: str
    in_width: int
    acc_width: int

    @property
    def in_shape(self):
        return signed(self.in_width)

    @property
    def acc_shape(self):
        return signed(self.acc_width)

    def mac(self, psum, a, w):
        """``psum + a * w`` in the accumulator format (int: wraps modulo 2**acc_width)."""
        return (psum + a * w)[: self.acc_width].as_signed()

    def add(self, x, y):
        """``x + y`` of two accumulator values (int: wraps modulo 2**acc_width)."""
        return (x + y)[: self.acc_width].as_signed()


FORMATS = {
    "int8": Format("int8", in_width=8, acc_width=32),
}


def get_format(name):
    return FORMATS[name]
