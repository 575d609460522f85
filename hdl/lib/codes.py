"""The RTL's view of the shared codes (spec/codes.py): each :class:`~spec.codes.Code` as an
Amaranth enumeration of the same name, members and width, so signals and struct fields carry
it and the sidecar of a generated top lists its members by name.

    from spec.isa import Op as SpecOp
    Op = hw(SpecOp)          # Signal(Op), Op.HALT, m.Case(Op.HALT)

Members of the Amaranth enumeration compare with signals of it; the spec's members are plain
integers for everything else (instruction fields, constants).
"""

import types
from functools import cache

from amaranth.lib import enum

__all__ = ["hw"]


@cache
def hw(code):
    """The Amaranth enumeration of ``code`` (one class per code, so signals of it compare)."""

    def members(namespace):
        namespace["__module__"] = code.__module__
        namespace["__qualname__"] = code.__qualname__
        namespace["__doc__"] = code.__doc__
        for member in code:
            namespace[member.name] = member.value

    return types.new_class(code.__name__, (enum.Enum,), {"shape": code.width()}, members)
