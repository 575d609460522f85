"""Bit-vector helpers shared by the blocks' choosers: the index of the first set bit (a
priority encoder), used for oldest-first choices in the HBM scheduler and to turn one-hot
arbiter grants into indices in the ICI router; and the selection of a value by a one-hot
grant (the ICI router's crossbar)."""

from functools import reduce
from operator import or_

from amaranth.hdl import Mux, Signal

__all__ = ["first_set", "one_hot_select"]


def first_set(m, bits, *, name):
    """``(index, any)``: the index of the lowest set bit of ``bits`` (0 when none) and whether
    one is set, as signals named ``<name>_idx`` / ``<name>_any`` in module ``m``. On a one-hot
    value it is the one-hot's index."""
    n = len(bits)
    index = Signal(range(max(2, n)), name=f"{name}_idx")
    for i in reversed(range(n)):
        with m.If(bits[i]):
            m.d.comb += index.eq(i)
    found = Signal(name=f"{name}_any")
    m.d.comb += found.eq(bits.any())
    return index, found


def one_hot_select(onehot, values):
    """The value of ``values`` whose bit of ``onehot`` is set (0 when none): an OR of masked
    values, no priority chain, so it is shallow in gates and cheap to simulate."""
    return reduce(or_, [Mux(onehot[i], value, 0) for i, value in enumerate(values)])
