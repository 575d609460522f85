"""The bag walker: CSR offsets, ids and weights (streams of 32-bit words) in, one token per id
out (its weight, whether it is skipped, whether it ends its bag), one token for an empty bag.

A token is offered when its id (and weight, ``weighted``) has arrived; an id equal to the
padding id (``pad_en``) or outside the table (``id >= rows``: only reached with the drop
policy, the stop policy refuses the operation first) is a skipped token. An empty bag gives
one skipped token marked last, which makes the combiner write a zero row. One token per cycle.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["BagWalker", "token_layout", "ONE"]

ONE = 0x3F800000
"""fp32 1.0: the weight of every id of an unweighted batch."""

token_layout = data.StructLayout({"id": 32, "weight": 32, "bag": 32, "skip": 1, "last": 1,
                                  "padding": 1, "bad": 1, "update": 1})
"""A token: the row to read (``id``), its weight, its bag's index; ``skip``: nothing to read;
``last``: it ends its bag (a scatter's update token: it ends its unique id's contributions);
``padding`` / ``bad``: why it is skipped; ``update``: a scatter's read-modify-write of table row
``id``."""


class BagWalker(wiring.Component):
    """See the module docstring.

    Members
    -------
    start : In(1), bags : In(32), rows : In(32), weighted : In(1), pad_en : In(1), pad : In(32)
    update : In(1)
        Copied into every token's ``update`` bit (tied to 0: the walker's tokens read rows).
    offsets, ids, weights : In(stream of 32 bits)
    token : Out(stream of token_layout)
    busy : Out(1)
    """

    def __init__(self):
        super().__init__({
            "start": In(1), "bags": In(32), "rows": In(32), "weighted": In(1),
            "pad_en": In(1), "pad": In(32), "update": In(1),
            "offsets": In(stream.Signature(32)), "ids": In(stream.Signature(32)),
            "weights": In(stream.Signature(32)),
            "token": Out(stream.Signature(token_layout)), "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        bags_left = Signal(32)
        bag = Signal(32)
        prev = Signal(32)
        remaining = Signal(32)       # ids of the current bag still to walk
        in_bag = Signal()            # the current bag's end offset has been taken
        have_first = Signal()
        active = Signal()
        m.d.comb += self.busy.eq(active)

        with m.If(self.start):
            m.d.sync += [active.eq(1), bags_left.eq(self.bags), have_first.eq(0),
                         in_bag.eq(0), bag.eq(0)]

        with m.If(active & ~have_first):
            m.d.comb += self.offsets.ready.eq(1)
            with m.If(self.offsets.valid):
                m.d.sync += [prev.eq(self.offsets.payload), have_first.eq(1)]
                with m.If(bags_left == 0):
                    m.d.sync += active.eq(0)
        with m.Elif(active & ~in_bag):
            m.d.comb += self.offsets.ready.eq(1)
            with m.If(self.offsets.valid):
                m.d.sync += [remaining.eq(self.offsets.payload - prev),
                             prev.eq(self.offsets.payload), in_bag.eq(1)]
        with m.Elif(active):
            t = self.token.payload
            empty = remaining == 0
            weight_ok = self.weights.valid | ~self.weighted
            ident = self.ids.payload
            m.d.comb += [
                self.token.valid.eq(empty | (self.ids.valid & weight_ok)),
                t.id.eq(ident), t.bag.eq(bag),
                t.weight.eq(Mux(self.weighted, self.weights.payload, ONE)),
                t.update.eq(self.update),
                t.padding.eq(~empty & self.pad_en & (ident == self.pad)),
                t.bad.eq(~empty & (ident >= self.rows)),
                t.skip.eq(empty | t.padding | t.bad),
                t.last.eq(empty | (remaining == 1)),
            ]
            with m.If(self.token.valid & self.token.ready):
                with m.If(~empty):
                    m.d.comb += [self.ids.ready.eq(1), self.weights.ready.eq(self.weighted)]
                    m.d.sync += remaining.eq(remaining - 1)
                with m.If(t.last):
                    m.d.sync += [in_bag.eq(0), bags_left.eq(bags_left - 1), bag.eq(bag + 1)]
                    with m.If(bags_left == 1):
                        m.d.sync += active.eq(0)
        return m
