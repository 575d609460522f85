"""The gather: tokens in, row reads out on AXI ID 0, tokens on to the combiner in order.

A token that is not skipped issues one INCR burst for its row (``base + id * pitch``, or for
a scatter's update token ``ubase + id * upitch``; ``row_beats`` beats) when the row buffer has
room for all of it (credits: ``inflight_beats`` beats, returned as the combiner consumes
them), so up to ``inflight_beats / row_beats`` rows are in flight and read data is never
refused. Every token goes on to the combiner through the pending queue, in order, with the
address it read (an update's write address); the memory answers one ID in order, so the
rows arrive in token order. One token per cycle; ``stall`` is high on cycles a token waits
for credits or for AR.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.queue import Queue
from .reader import ar_layout
from .walker import token_layout

__all__ = ["Gather", "pending_layout"]


def pending_layout(cfg):
    """A token on its way to the combiner, with the address of the row it read."""
    return data.StructLayout({"token": token_layout, "addr": cfg.axi_addr_width})


class Gather(wiring.Component):
    """See the module docstring.

    Members
    -------
    token : In(stream of token_layout)
    ar : Out(stream of ar_layout)
    pending : Out(stream of pending_layout)
    base : In(addr_width), pitch : In(32), ubase : In(addr_width), upitch : In(32)
    row_beats, urow_beats : In(range(max_row_beats + 1))
        Beats of a row, and of an update token's row.
    freed : In(1)
        A row beat left the row buffer.
    stall : Out(1)
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "token": In(stream.Signature(token_layout)),
            "ar": Out(stream.Signature(ar_layout(cfg))),
            "pending": Out(stream.Signature(pending_layout(cfg))),
            "base": In(cfg.axi_addr_width), "pitch": In(32),
            "ubase": In(cfg.axi_addr_width), "upitch": In(32),
            "row_beats": In(range(cfg.max_row_beats + 1)),
            "urow_beats": In(range(cfg.max_row_beats + 1)),
            "freed": In(1), "stall": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        m.submodules.queue = queue = Queue(pending_layout(cfg), cfg.inflight_beats + 2)
        credits = Signal(range(cfg.inflight_beats + 1), init=cfg.inflight_beats)
        t = self.token.payload
        needs_read = ~t.skip
        beats = Signal(range(cfg.max_row_beats + 1))
        m.d.comb += beats.eq(Mux(t.update, self.urow_beats, self.row_beats))
        room = credits >= beats
        addr = Signal(cfg.axi_addr_width)
        m.d.comb += addr.eq(Mux(t.update, self.ubase + t.id * self.upitch,
                                self.base + t.id * self.pitch))
        m.d.comb += [
            self.ar.payload.addr.eq(addr),
            self.ar.payload.len.eq(beats - 1),
            self.ar.valid.eq(self.token.valid & needs_read & room & queue.i.ready),
            queue.i.payload.token.eq(t), queue.i.payload.addr.eq(addr),
            queue.i.valid.eq(self.token.valid & (~needs_read | (room & self.ar.ready))),
            self.token.ready.eq(queue.i.ready & (~needs_read | (room & self.ar.ready))),
        ]
        issued = self.ar.valid & self.ar.ready
        m.d.sync += credits.eq(credits - (issued * beats) + self.freed)
        m.d.comb += self.stall.eq(self.token.valid & ~self.token.ready)
        wiring.connect(m, queue.o, wiring.flipped(self.pending))
        return m
