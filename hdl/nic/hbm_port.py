"""A pod chip's HBM as its ICI endpoint sees it (docs/pod.md, "HBM"): the endpoint's memory
clients' accesses to ``space`` HBM, on an AXI4 manager port to the chip's memory controller.

    clients ─► SpaceSplit ─┬─► LocalMemory (space VMEM)
                           └─► HbmPort ─► axi (space HBM)

Every access is one single-beat INCR burst of a flit (a flit is the port's data width). The
memory contract of the endpoint holds across the two memories: a client's reads are answered
in the order it issued them whichever memory answers (:class:`SpaceSplit` keeps the order of
each reader's outstanding reads), and a write is visible when its completion is seen: the
Receivers hold a message's completion, and an add's first read, while ``pending`` (a write
issued on the AXI port and not yet answered) is set.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec import protocol
from spec.protocol import ADDR_BITS

from ..lib.arbiter import RoundRobin
from ..lib.axi import AXI4Signature, AxiBurst, AxiResp
from ..lib.codes import hw
from ..lib.counter import COUNTER_WIDTH, count_events
from ..lib.queue import Queue
from .endpoint import read_beat_layout, write_beat_layout

__all__ = ["HbmPort", "SpaceSplit", "hbm_signature", "HBM_DEPTH", "WRITES_IN_FLIGHT"]

IciSpace = hw(protocol.IciSpace)

HBM_DEPTH = 4
"""Reads in flight per client on the AXI port (each client's response queue)."""
WRITES_IN_FLIGHT = 16
"""Writes issued and not yet answered, at most."""


def hbm_signature(cfg, readers, *, addr_width=ADDR_BITS, id_width=None):
    """The AXI4 bus of a chip's HBM port: flit-wide data, an ID per reader (``id_width``
    bits, at least enough for them), ``addr_width`` address bits (at least the messages'
    ``ADDR_BITS``: the port of an HBM controller may be wider)."""
    need = max(1, (readers - 1).bit_length())
    return AXI4Signature(addr_width=addr_width, data_width=cfg.ici.flit_bits,
                         id_width=need if id_width is None else id_width)


class HbmPort(wiring.Component):
    """The accesses of ``writers`` and ``readers`` clients to HBM, on ``axi``.

    Writes are taken one per cycle, round robin, while fewer than ``WRITES_IN_FLIGHT`` are
    unanswered; each is an AW and a W of one beat (its strobe the client's). Reads are taken
    round robin among the readers whose response queue has room for every read they have in
    flight; reader ``i``'s go out with ID ``i``, so the memory answers each reader in order,
    into its queue (``rready`` is always high). A response other than OKAY is counted in
    ``errors``; its read data is zeros.

    Members
    -------
    write : In(stream of write_beat_layout).array(writers)
    read : In(stream of read_beat_layout).array(readers)
    read_data : Out(stream of flit_bits).array(readers)
    axi : Out(bus)
        ``bus``: an ``hbm_signature`` (by default its narrowest).
    pending : Out(1)
        A write is issued and not yet answered.
    errors : Out(32)
    """

    def __init__(self, cfg, *, writers, readers, bus=None):
        self._cfg, self._writers, self._readers = cfg, writers, readers
        super().__init__({
            "write": In(stream.Signature(write_beat_layout(cfg))).array(writers),
            "read": In(stream.Signature(read_beat_layout(cfg))).array(readers),
            "read_data": Out(stream.Signature(cfg.ici.flit_bits)).array(readers),
            "axi": Out(bus or hbm_signature(cfg, readers)),
            "pending": Out(1),
            "errors": Out(COUNTER_WIDTH),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, bus = self._cfg, self.axi
        size = (cfg.flit_bytes - 1).bit_length()

        # Writes: a beat held until both its AW and its W are taken.
        m.submodules.warb = warb = RoundRobin(self._writers)
        held = Signal(write_beat_layout(cfg))
        aw_due, w_due = Signal(), Signal()
        outstanding = Signal(range(WRITES_IN_FLIGHT + 1))
        free = ~aw_due & ~w_due & (outstanding < WRITES_IN_FLIGHT)
        m.d.comb += [warb.requests.eq(Cat(*(w.valid for w in self.write))),
                     warb.advance.eq(free)]
        for i, w in enumerate(self.write):
            with m.If(warb.grant == i):
                m.d.comb += w.ready.eq(free)
                with m.If(free & w.valid):
                    m.d.sync += [held.eq(w.payload), aw_due.eq(1), w_due.eq(1)]
        m.d.comb += [
            bus.awid.eq(0), bus.awaddr.eq(held.address), bus.awlen.eq(0), bus.awsize.eq(size),
            bus.awburst.eq(AxiBurst.INCR), bus.awvalid.eq(aw_due),
            bus.wdata.eq(held.data), bus.wstrb.eq(held.strobe), bus.wlast.eq(1),
            bus.wvalid.eq(w_due), bus.bready.eq(1),
        ]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += aw_due.eq(0)
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += w_due.eq(0)
        issued = free & warb.valid
        answered = bus.bvalid & bus.bready
        m.d.sync += outstanding.eq(outstanding + issued - answered)
        m.d.comb += self.pending.eq((outstanding != 0) | aw_due | w_due)

        # Reads: one AR per cycle for a reader with room; the answers into its queue.
        queues = [Queue(cfg.ici.flit_bits, HBM_DEPTH) for _ in range(self._readers)]
        inflight = [Signal(range(HBM_DEPTH + 1), name=f"inflight{i}")
                    for i in range(self._readers)]
        can = Signal(self._readers)
        m.submodules.rarb = rarb = RoundRobin(self._readers)
        m.d.comb += [rarb.requests.eq(can), rarb.advance.eq(bus.arready),
                     bus.arvalid.eq(rarb.valid), bus.arid.eq(rarb.grant), bus.arlen.eq(0),
                     bus.arsize.eq(size), bus.arburst.eq(AxiBurst.INCR), bus.rready.eq(1)]
        for i, (q, read) in enumerate(zip(queues, self.read, strict=True)):
            m.submodules[f"rq{i}"] = q
            wiring.connect(m, q.o, wiring.flipped(self.read_data[i]))
            m.d.comb += can[i].eq(read.valid & (q.level + inflight[i] < HBM_DEPTH))
            taken = rarb.valid & (rarb.grant == i) & bus.arready
            with m.If(rarb.grant == i):
                m.d.comb += [bus.araddr.eq(read.payload.address), read.ready.eq(taken)]
            back = bus.rvalid & (bus.rid == i)
            m.d.comb += [q.i.valid.eq(back),
                         q.i.payload.eq(Mux(bus.rresp == AxiResp.OKAY, bus.rdata, 0))]
            m.d.sync += inflight[i].eq(inflight[i] + taken - back)
        count_events(m, self, {"errors": (answered & (bus.bresp != AxiResp.OKAY))
                               + (bus.rvalid & (bus.rresp != AxiResp.OKAY))})
        return m


class SpaceSplit(wiring.Component):
    """Steers the endpoint's memory clients by ``space``: HBM accesses at a flit address to
    ``hbm_*``, the others to ``vmem_*``. A reader's reads may go to both; each reader's
    answers come back in the order of its reads (a queue of ``depth`` entries holds the
    memory each outstanding read went to, and a read waits for room in it).

    Members
    -------
    write : In(stream of write_beat_layout).array(writers)
    read : In(stream of read_beat_layout).array(readers)
    read_data : Out(stream of flit_bits).array(readers)
    vmem_write, hbm_write : Out(stream of write_beat_layout).array(writers)
    vmem_read, hbm_read : Out(stream of read_beat_layout).array(readers)
    vmem_read_data, hbm_read_data : In(stream of flit_bits).array(readers)
    """

    def __init__(self, cfg, *, writers, readers, depth):
        self._cfg, self._depth = cfg, depth
        w = stream.Signature(write_beat_layout(cfg))
        r = stream.Signature(read_beat_layout(cfg))
        d = stream.Signature(cfg.ici.flit_bits)
        super().__init__({
            "write": In(w).array(writers), "read": In(r).array(readers),
            "read_data": Out(d).array(readers),
            "vmem_write": Out(w).array(writers), "hbm_write": Out(w).array(writers),
            "vmem_read": Out(r).array(readers), "hbm_read": Out(r).array(readers),
            "vmem_read_data": In(d).array(readers), "hbm_read_data": In(d).array(readers),
        })

    def _to_hbm(self, beat):
        """An access for the HBM port: space HBM at a flit address (the local memory drops a
        misaligned one and counts it)."""
        return (beat.space == IciSpace.HBM) & (beat.address[:(self._cfg.flit_bytes - 1)
                                                          .bit_length()] == 0)

    def join(self, m, side, memory):
        """Connect this split's ``side`` (``"vmem"`` or ``"hbm"``) clients to ``memory``'s
        ``write``, ``read`` and ``read_data`` in module ``m``."""
        for a, b in zip(getattr(self, f"{side}_write"), memory.write, strict=True):
            wiring.connect(m, a, b)
        for a, b in zip(getattr(self, f"{side}_read"), memory.read, strict=True):
            wiring.connect(m, a, b)
        for a, b in zip(memory.read_data, getattr(self, f"{side}_read_data"), strict=True):
            wiring.connect(m, a, b)

    def elaborate(self, platform):
        m = Module()
        for w, vmem, hbm in zip(self.write, self.vmem_write, self.hbm_write, strict=True):
            to_hbm = self._to_hbm(w.payload)
            m.d.comb += [vmem.payload.eq(w.payload), hbm.payload.eq(w.payload),
                         vmem.valid.eq(w.valid & ~to_hbm), hbm.valid.eq(w.valid & to_hbm),
                         w.ready.eq(Mux(to_hbm, hbm.ready, vmem.ready))]
        for i, (r, data) in enumerate(zip(self.read, self.read_data, strict=True)):
            m.submodules[f"order{i}"] = order = Queue(1, self._depth)
            vmem, hbm = self.vmem_read[i], self.hbm_read[i]
            to_hbm = self._to_hbm(r.payload)
            m.d.comb += [vmem.payload.eq(r.payload), hbm.payload.eq(r.payload),
                         vmem.valid.eq(r.valid & ~to_hbm & order.i.ready),
                         hbm.valid.eq(r.valid & to_hbm & order.i.ready),
                         r.ready.eq(order.i.ready & Mux(to_hbm, hbm.ready, vmem.ready)),
                         order.i.payload.eq(to_hbm), order.i.valid.eq(r.valid & r.ready)]
            from_hbm = order.o.payload
            m.d.comb += [data.payload.eq(Mux(from_hbm, self.hbm_read_data[i].payload,
                                             self.vmem_read_data[i].payload)),
                         data.valid.eq(order.o.valid & Mux(from_hbm,
                                                           self.hbm_read_data[i].valid,
                                                           self.vmem_read_data[i].valid)),
                         self.hbm_read_data[i].ready.eq(order.o.valid & from_hbm & data.ready),
                         self.vmem_read_data[i].ready.eq(order.o.valid & ~from_hbm
                                                         & data.ready),
                         order.o.ready.eq(data.valid & data.ready)]
        return m
