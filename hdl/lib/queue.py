"""Stream buffers: a FIFO queue and a skid buffer between valid/ready streams.

Every block that buffers a stream uses one of these instead of wiring a FIFO to a stream by
hand: a :class:`Queue` where beats must wait (result FIFOs, per-destination queues, ejection
buffers), a :class:`SkidBuffer` where a long combinational ``ready`` path must be cut at full
throughput.
"""

from amaranth.hdl import Module, Mux, Shape, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.config import check_int

__all__ = ["Queue", "SkidBuffer"]


class Queue(wiring.Component):
    """A first-in first-out queue of ``depth`` beats of ``shape``.

    A beat taken on ``i`` is offered on ``o`` from the next cycle (no fall-through); ``i.ready``
    is high while there is room, ``o.valid`` while a beat waits. Both sides run at one beat per
    cycle, also when full: a read frees room only in the next cycle.

    Members
    -------
    i : In(stream of shape)
    o : Out(stream of shape)
    level : Out(range(depth + 1))
        Beats stored.
    """

    def __init__(self, shape, depth):
        self._shape = shape
        self._depth = check_int("depth", depth, 1)
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
            "level": Out(range(depth + 1)),
        })

    @property
    def depth(self):
        return self._depth

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = f = fifo.SyncFIFO(width=Shape.cast(self._shape).width,
                                              depth=self._depth)
        m.d.comb += [
            f.w_data.eq(self.i.payload), f.w_en.eq(self.i.valid), self.i.ready.eq(f.w_rdy),
            self.o.payload.eq(f.r_data), self.o.valid.eq(f.r_rdy), f.r_en.eq(self.o.ready),
            self.level.eq(f.level),
        ]
        return m


class SkidBuffer(wiring.Component):
    """A register stage with a two-beat skid: full throughput, and ``i.ready`` is a register,
    so no combinational path runs from ``o.ready`` back to ``i.ready``. Latency one cycle.

    Members
    -------
    i : In(stream of shape)
    o : Out(stream of shape)
    """

    def __init__(self, shape):
        self._shape = shape
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        main = Signal(self._shape, reset_less=True)
        skid = Signal(self._shape, reset_less=True)
        main_full = Signal()
        skid_full = Signal()
        m.d.comb += [self.i.ready.eq(~skid_full), self.o.valid.eq(main_full),
                     self.o.payload.eq(main)]
        take = self.i.valid & self.i.ready
        leave = self.o.valid & self.o.ready
        with m.If(leave | ~main_full):
            # The main register is free next cycle: refill it from the skid, else the input.
            m.d.sync += [main_full.eq(skid_full | take),
                         main.eq(Mux(skid_full, skid, self.i.payload))]
            with m.If(skid_full):
                m.d.sync += skid_full.eq(take)
                with m.If(take):
                    m.d.sync += skid.eq(self.i.payload)
        with m.Elif(take):
            m.d.sync += [skid_full.eq(1), skid.eq(self.i.payload)]
        return m
