"""The pod chip's local memory (docs/pod.md, "Pod top"): the VMEM of a simulation chip, one
flit per word, shared by the endpoint, the collective engine, the message unit and the host.

    writers[i] ─► round robin ─► SRAM write port
    readers[i] ─► round robin ─► SRAM read port ─► read_data[i] (a queue per reader)

Every cycle the memory takes one write and one read. A reader is granted only while its
response queue has room for every read it has in flight, so its reads are answered in order
and never lost whatever its ``read_data`` backpressure; the others go on meanwhile. A write
taken in one cycle is seen by every read granted in a later cycle (the SRAM is read-first
within a cycle, and a client that needs its own write back, the Receiver's add, reads only
after its write is taken). An access outside the memory (``space`` HBM, an address that is
not a multiple of the flit bytes, or past ``words`` flits) is counted in ``errors``: a write
is dropped, a read answered with zeros.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.arbiter import RoundRobin
from ..lib.counter import COUNTER_WIDTH, count_events
from ..lib.queue import Queue
from .endpoint import Space, read_beat_layout, write_beat_layout

__all__ = ["LocalMemory", "RESPONSE_DEPTH"]

RESPONSE_DEPTH = 4
"""Entries of each reader's response queue: a reader taking one flit per cycle is granted a
read every cycle."""


class LocalMemory(wiring.Component):
    """``words`` flits of memory with ``writers`` write clients and ``readers`` read clients.

    ``sram`` is the :class:`~hdl.lib.sram.SRAM` macro to instantiate (``byte_enable``, one
    read port, ``words`` deep, a flit wide), emitted once by the top.

    Members
    -------
    write : In(stream of write_beat_layout).array(writers)
    read : In(stream of read_beat_layout).array(readers)
    read_data : Out(stream of flit_bits).array(readers)
    errors : Out(32)
        Accesses outside the memory.
    """

    def __init__(self, cfg, sram, *, words, writers, readers):
        self._cfg, self._sram, self._words = cfg, sram, words
        self._writers, self._readers = writers, readers
        super().__init__({
            "write": In(stream.Signature(write_beat_layout(cfg))).array(writers),
            "read": In(stream.Signature(read_beat_layout(cfg))).array(readers),
            "read_data": Out(stream.Signature(cfg.ici.flit_bits)).array(readers),
            "errors": Out(COUNTER_WIDTH),
        })

    def _word(self, m, beat, name):
        """(word index, whether the access is inside the memory) of ``beat``."""
        shift = (self._cfg.flit_bytes - 1).bit_length()
        word = Signal(range(self._words), name=f"{name}_word")
        ok = Signal(name=f"{name}_ok")
        m.d.comb += [
            word.eq(beat.address >> shift),
            ok.eq((beat.space == Space.VMEM) & (beat.address[:shift] == 0)
                  & ((beat.address >> shift) < self._words)),
        ]
        return word, ok

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        width = cfg.ici.flit_bits

        # Writes: one per cycle, round robin.
        m.submodules.warb = warb = RoundRobin(self._writers)
        m.d.comb += [warb.requests.eq(Cat(*(w.valid for w in self.write))), warb.advance.eq(1)]
        wbeat = Signal(write_beat_layout(cfg))
        for i, w in enumerate(self.write):
            with m.If(warb.grant == i):
                m.d.comb += [wbeat.eq(w.payload), w.ready.eq(1)]
        waddr, wok = self._word(m, wbeat, "w")

        # Reads: one per cycle among the readers whose queues have room.
        queues = [Queue(width, RESPONSE_DEPTH) for _ in range(self._readers)]
        inflight = [Signal(name=f"inflight{i}") for i in range(self._readers)]
        can = Signal(self._readers)
        for i, (q, r) in enumerate(zip(queues, self.read, strict=True)):
            m.submodules[f"rq{i}"] = q
            wiring.connect(m, q.o, wiring.flipped(self.read_data[i]))
            m.d.comb += can[i].eq(r.valid & (q.level + inflight[i] < RESPONSE_DEPTH))
        m.submodules.rarb = rarb = RoundRobin(self._readers)
        m.d.comb += [rarb.requests.eq(can), rarb.advance.eq(1)]
        rbeat = Signal(read_beat_layout(cfg))
        for i, r in enumerate(self.read):
            granted = rarb.valid & (rarb.grant == i)
            with m.If(granted):
                m.d.comb += [rbeat.eq(r.payload), r.ready.eq(1)]
            m.d.sync += inflight[i].eq(granted)
        raddr, rok = self._word(m, rbeat, "r")
        rdata = Signal(width)
        valid_data = Signal()
        m.d.sync += valid_data.eq(rok)
        self._sram.instance(m, "mem", we=warb.valid & wok, waddr=waddr,
                            wdata=wbeat.data, wstrb=wbeat.strobe, raddr=[raddr], rdata=[rdata])
        for i, q in enumerate(queues):
            m.d.comb += [q.i.valid.eq(inflight[i]), q.i.payload.eq(Mux(valid_data, rdata, 0))]

        count_events(m, self, {"errors": (warb.valid & ~wok) + (rarb.valid & ~rok)})
        return m
