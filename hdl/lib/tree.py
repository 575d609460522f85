"""Sums as balanced trees. Python's ``sum()`` over many Amaranth values builds a chain of adders
as deep as the list: Amaranth's transformers walk it recursively (a few hundred terms exceed
Python's recursion limit, as the fault counter of an 8x8 torus did) and it synthesizes as one
long carry chain. A tree is log2(n) adders deep."""

from amaranth.hdl import Const

__all__ = ["tree_sum"]


def tree_sum(values):
    """Sum of ``values`` (Amaranth values or ints), added pairwise; 0 for none."""
    values = list(values)
    if not values:
        return Const(0, 1)
    while len(values) > 1:
        pairs = [values[i] + values[i + 1] for i in range(0, len(values) - 1, 2)]
        values = pairs + values[len(values) - len(values) % 2:]
    return values[0]
