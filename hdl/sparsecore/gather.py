"""The gather: tokens in, row reads out on the row IDs, tokens on to the combiner in order.

A token that is not skipped issues one INCR burst for its row (``base + id * pitch``, or for
a scatter's update token ``ubase + id * upitch``; ``row_beats`` beats) on one of the
``row_ids`` row IDs: the next ID in turn whose row buffer has room for all of it (credits:
``inflight_beats / row_ids`` beats per ID, returned as the combiner consumes them), so up to
``inflight_beats / row_beats`` rows are in flight and read data is never refused. Every token
goes on to the combiner through the pending queue, in order, with the address it read (an
update's write address) and the ID it read on; the memory answers each ID in order, so the
combiner finds each token's row at the head of that ID's row buffer. Several IDs let a memory
that answers IDs out of order (an HBM port's reorder lanes) keep more rows in flight. One
token per cycle; ``stall`` is high on cycles a token waits for credits or for AR.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.queue import Queue
from .reader import ar_layout
from .walker import token_layout

__all__ = ["Gather", "pending_layout"]


def pending_layout(cfg):
    """A token on its way to the combiner, with the address of the row it read and the row ID
    it read on."""
    return data.StructLayout({"token": token_layout, "addr": cfg.axi_addr_width, "rid": 2})


class Gather(wiring.Component):
    """See the module docstring.

    Members
    -------
    token : In(stream of token_layout)
    ar : Out(stream of ar_layout)
    ar_id : Out(2)
        The row ID of the request on ``ar``.
    pending : Out(stream of pending_layout)
    base : In(addr_width), pitch : In(32), ubase : In(addr_width), upitch : In(32)
    row_beats, urow_beats : In(range(max_row_beats + 1))
        Beats of a row, and of an update token's row.
    freed : In(row_ids)
        A row beat of that ID left its row buffer.
    stall : Out(1)
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "token": In(stream.Signature(token_layout)),
            "ar": Out(stream.Signature(ar_layout(cfg))), "ar_id": Out(2),
            "pending": Out(stream.Signature(pending_layout(cfg))),
            "base": In(cfg.axi_addr_width), "pitch": In(32),
            "ubase": In(cfg.axi_addr_width), "upitch": In(32),
            "row_beats": In(range(cfg.max_row_beats + 1)),
            "urow_beats": In(range(cfg.max_row_beats + 1)),
            "freed": In(cfg.row_ids), "stall": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        n = cfg.row_ids
        m.submodules.queue = queue = Queue(pending_layout(cfg), cfg.inflight_beats + 2)
        credits = [Signal(range(cfg.id_beats + 1), init=cfg.id_beats, name=f"credits{k}")
                   for k in range(n)]
        t = self.token.payload
        needs_read = ~t.skip
        beats = Signal(range(cfg.max_row_beats + 1))
        m.d.comb += beats.eq(Mux(t.update, self.urow_beats, self.row_beats))

        # The ID: the first from ``turn`` on (cyclically) with room for the row.
        # A request waiting for AR keeps its ID (credits only grow meanwhile).
        turn = Signal(range(n)) if n > 1 else 0
        rid = Signal(2)
        room = Signal()
        hold, held_id = Signal(), Signal(2)
        fits = [c >= beats for c in credits]
        with m.If(hold):
            m.d.comb += [rid.eq(held_id), room.eq(1)]
        with m.Else():
            for j in reversed(range(n)):    # the last assignment wins: j = 0 (``turn``) first
                for k in range(n):          # candidate j is ID (turn + j) % n
                    with m.If(((turn == (k - j) % n) if n > 1 else 1) & fits[k]):
                        m.d.comb += [rid.eq(k), room.eq(1)]
        m.d.sync += [hold.eq(self.ar.valid & ~self.ar.ready), held_id.eq(rid)]

        addr = Signal(cfg.axi_addr_width)
        m.d.comb += addr.eq(Mux(t.update, self.ubase + t.id * self.upitch,
                                self.base + t.id * self.pitch))
        m.d.comb += [
            self.ar.payload.addr.eq(addr),
            self.ar.payload.len.eq(beats - 1),
            self.ar_id.eq(rid),
            self.ar.valid.eq(self.token.valid & needs_read & room & queue.i.ready),
            queue.i.payload.token.eq(t), queue.i.payload.addr.eq(addr),
            queue.i.payload.rid.eq(rid),
            queue.i.valid.eq(self.token.valid & (~needs_read | (room & self.ar.ready))),
            self.token.ready.eq(queue.i.ready & (~needs_read | (room & self.ar.ready))),
        ]
        issued = self.ar.valid & self.ar.ready
        for k in range(n):
            m.d.sync += credits[k].eq(credits[k] - Mux(issued & (rid == k), beats, 0)
                                      + self.freed[k])
        if n > 1:
            with m.If(issued):
                m.d.sync += turn.eq(Mux(rid == n - 1, 0, rid + 1))
        m.d.comb += self.stall.eq(self.token.valid & ~self.token.ready)
        wiring.connect(m, queue.o, wiring.flipped(self.pending))
        return m
