"""Codes of fixed-width fields (opcodes, formats, packet kinds): the base of every enumeration
the RTL, the software and the golden models share.

A :class:`Code` is a Python ``IntEnum`` that knows the width of the field it is carried in::

    class Queue(Code, width=2):
        DMA = 0
        ...

Software and golden models use the members as integers; the RTL turns a code into an
Amaranth enumeration of the same name, members and width (``hdl/lib/codes.py``), so a
signal, a struct field and the sidecar of a generated top carry the same names and values.
"""

import enum

__all__ = ["Code"]


class Code(enum.IntEnum):
    """An enumeration carried in a field of ``width`` bits (a class keyword)."""

    def __init_subclass__(cls, *, width=None, **kwargs):
        super().__init_subclass__(**kwargs)
        if width is not None:
            cls._width = width

    @classmethod
    def width(cls):
        """Bits of the field that carries this code."""
        return cls._width
