"""The sorter of the scatter path: one minibatch of id tokens in, the same tokens grouped by
id out, ids ascending and each id's tokens in CSR order, each group followed by an update
token for its row.

It collects the tokens that are not skipped (padding and dropped ids are counted upstream)
until it holds ``max_ids`` of them or the walker has finished, then emits one token a cycle:
the lowest id among those not yet sent (a comparator tree over the entries) and, of its
entries, the first in CSR order (a priority encoder), as a token that reads the gradient row of
its bag (``id`` = the bag, the same weight); after the last entry of an id an update token
(``id`` = the table row, ``update``, ``last``). Duplicates are thereby combined in the same order
every time. When a minibatch has been sent it waits for ``drained`` (every row of it written
and acknowledged, so no read of the next minibatch can overtake a write of this one), then
collects the next. ``minibatch`` pulses as each minibatch starts to be sent.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.bits import first_set
from .walker import token_layout

__all__ = ["Sorter"]


class Sorter(wiring.Component):
    """See the module docstring.

    Members
    -------
    i : In(stream of token_layout)
    o : Out(stream of token_layout)
    walker_busy : In(1)
        More tokens may come.
    drained : In(1)
    busy : Out(1), minibatch : Out(1)
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "i": In(stream.Signature(token_layout)), "o": Out(stream.Signature(token_layout)),
            "walker_busy": In(1), "drained": In(1), "busy": Out(1), "minibatch": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = self._cfg.max_ids
        ids = [Signal(32, name=f"id{k}") for k in range(n)]
        weights = [Signal(32, name=f"w{k}") for k in range(n)]
        bags = [Signal(32, name=f"bag{k}") for k in range(n)]
        # The flags of the tokens held (all clear: only tokens not skipped are held), sent on
        # with them so that no output bit is a constant.
        flags = [Signal(3, name=f"flags{k}") for k in range(n)]
        held = Signal(n)            # entries collected
        sent = Signal(n)            # entries emitted
        count = Signal(range(n + 1))
        pend = Signal(n)
        m.d.comb += pend.eq(held & ~sent)

        # The lowest id among the entries not yet sent: a tree of (any, id) pairs.
        level = [(pend[k], ids[k]) for k in range(n)]
        while len(level) > 1:
            nxt = []
            for a, b in zip(level[0::2], level[1::2], strict=False):
                take_b = b[0] & (~a[0] | (b[1] < a[1]))
                nxt.append((a[0] | b[0], Mux(take_b, b[1], a[1])))
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        lowest = Signal(32)
        cur = Signal(32)            # the id whose update token is next
        m.d.comb += lowest.eq(level[0][1])
        same = Signal(n)
        m.d.comb += same.eq(Cat(*[pend[k] & (ids[k] == lowest) for k in range(n)]))
        pick, _ = first_set(m, same, name="pick")
        only = (same & (same - 1)) == 0            # the picked entry is the id's last

        t = self.o.payload
        f = Array(flags)[pick]
        m.d.comb += [t.skip.eq(f[0]), t.padding.eq(f[1]), t.bad.eq(f[2])]
        with m.FSM() as fsm:
            with m.State("COLLECT"):
                m.d.comb += self.i.ready.eq(count < n)
                with m.If(self.i.valid & self.i.ready & ~self.i.payload.skip):
                    for k in range(n):
                        with m.If(count == k):
                            m.d.sync += [ids[k].eq(self.i.payload.id),
                                         weights[k].eq(self.i.payload.weight),
                                         bags[k].eq(self.i.payload.bag),
                                         flags[k].eq(Cat(self.i.payload.skip,
                                                         self.i.payload.padding,
                                                         self.i.payload.bad))]
                    m.d.sync += [held.eq(held | (Const(1, n) << count)[:n]), count.eq(count + 1)]
                full = count == n
                finished = ~self.walker_busy & ~self.i.valid & (count != 0)
                with m.If(full | finished):
                    m.d.comb += self.minibatch.eq(1)
                    m.next = "SEND"
            with m.State("SEND"):
                m.d.comb += [self.o.valid.eq(1), t.id.eq(Array(bags)[pick]),
                             t.weight.eq(Array(weights)[pick]), t.bag.eq(Array(bags)[pick])]
                with m.If(self.o.ready):
                    m.d.sync += sent.eq(sent | (Const(1, n) << pick)[:n])
                    with m.If(only):
                        m.d.sync += cur.eq(lowest)
                        m.next = "UPDATE"
            with m.State("UPDATE"):
                m.d.comb += [self.o.valid.eq(1), t.id.eq(cur), t.update.eq(1), t.last.eq(1)]
                with m.If(self.o.ready):
                    with m.If(pend == 0):
                        m.next = "BARRIER"
                    with m.Else():
                        m.next = "SEND"
            with m.State("BARRIER"):
                with m.If(self.drained):
                    m.d.sync += [held.eq(0), sent.eq(0), count.eq(0)]
                    m.next = "COLLECT"
        m.d.comb += self.busy.eq(~fsm.ongoing("COLLECT") | (count != 0))
        return m
