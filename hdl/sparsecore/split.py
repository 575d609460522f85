"""The SparseCore's 4 KiB splitter: between the core and its AXI4 port, every INCR burst that
would cross a 4 KiB boundary (AXI forbids it) leaves as two bursts, the second starting at the
boundary on the same ID, so a table row may sit anywhere in HBM.

    core ─► mgr ─► Split4K ─► bus (the SparseCore's ``axi``)

A burst is at most 4 KiB (a row of ``max_dim`` fp32 elements), so it crosses one boundary at
most. What it splits are row bursts: the list readers already end their bursts at 4 KiB
boundaries, so theirs pass through whole. Reads: the two parts' R beats come back in order
on the ID; ``rlast`` passes through as the bus gives it (the core counts beats, never
``rlast``). Writes (the core writes on ID 0
only, so their responses come back in order): ``wlast`` is raised at the end of each part, and
a split write's two B responses are merged into one (the first non-OKAY of them), so the
core sees one B per burst it issued. A burst's W beats wait until its first part's AW is
taken (the HBM controller's port and cocotbext-axi's memories take AW without W).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..lib.axi import AxiResp, axi4_signature
from ..lib.queue import Queue

__all__ = ["Split4K", "WRITES_IN_FLIGHT"]

WRITES_IN_FLIGHT = 8
"""Write bursts the splitter tracks between their AW and their B (AW waits beyond it)."""


def _part(m, shift, addr, length, second, name):
    """(address, len) of the part of the burst ``(addr, length)`` on the bus, and whether the
    burst crosses a 4 KiB boundary: its first part up to the boundary, or with ``second``
    the rest from the boundary."""
    to_4k = Signal(range((4096 >> shift) + 1), name=f"{name}_to_4k")
    m.d.comb += to_4k.eq((4096 - addr[:12]) >> shift)
    crosses = length + 1 > to_4k
    boundary = (addr >> 12) + 1 << 12
    return (Mux(second, boundary, addr), Mux(second, length - to_4k,
                                             Mux(crosses, to_4k - 1, length)), crosses, to_4k)


class Split4K(wiring.Component):
    """See the module docstring.

    Members
    -------
    mgr : In(AXI4Signature)
        The core's bus.
    bus : Out(AXI4Signature)
        The SparseCore's AXI4 port.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({"mgr": In(axi4_signature(cfg)),
                          "bus": Out(axi4_signature(cfg))})

    def elaborate(self, platform):
        m = Module()
        cfg, mgr, bus = self._cfg, self.mgr, self.bus
        shift = (cfg.beat_bytes - 1).bit_length()

        # AR: a crossing burst's first part, then (the manager still waiting) its second.
        ar_second = Signal()
        addr, length, crosses, _ = _part(m, shift, mgr.araddr, mgr.arlen, ar_second, "ar")
        m.d.comb += [bus.arvalid.eq(mgr.arvalid), bus.araddr.eq(addr), bus.arlen.eq(length),
                     bus.arid.eq(mgr.arid), bus.arsize.eq(mgr.arsize),
                     bus.arburst.eq(mgr.arburst),
                     mgr.arready.eq(bus.arready & (ar_second | ~crosses))]
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += ar_second.eq(crosses & ~ar_second)
        m.d.comb += [mgr.rdata.eq(bus.rdata), mgr.rresp.eq(bus.rresp), mgr.rid.eq(bus.rid),
                     mgr.rlast.eq(bus.rlast), mgr.rvalid.eq(bus.rvalid),
                     bus.rready.eq(mgr.rready)]

        # AW: likewise, each burst queued for its W beats (where the first part ends) and for
        # its B responses (whether two come).
        layout = data.StructLayout({"crosses": 1, "first": range((4096 >> shift) + 1)})
        m.submodules.wq = wq = Queue(layout, WRITES_IN_FLIGHT)
        m.submodules.bq = bq = Queue(1, WRITES_IN_FLIGHT)
        aw_second = Signal()
        addr, length, crosses, to_4k = _part(m, shift, mgr.awaddr, mgr.awlen, aw_second, "aw")
        # A burst is queued as its first part leaves, so its W beats can follow at once (a
        # subordinate may want the first part's data before it takes the second part).
        room = aw_second | (wq.i.ready & bq.i.ready)
        m.d.comb += [bus.awvalid.eq(mgr.awvalid & room), bus.awaddr.eq(addr),
                     bus.awlen.eq(length), bus.awid.eq(mgr.awid), bus.awsize.eq(mgr.awsize),
                     bus.awburst.eq(mgr.awburst),
                     mgr.awready.eq(bus.awready & room & (aw_second | ~crosses))]
        taken = bus.awvalid & bus.awready & ~aw_second
        m.d.comb += [wq.i.valid.eq(taken), wq.i.payload.crosses.eq(crosses),
                     wq.i.payload.first.eq(to_4k), bq.i.valid.eq(taken),
                     bq.i.payload.eq(crosses)]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += aw_second.eq(crosses & ~aw_second)

        # W: the beats of the burst at the head of ``wq`` (a beat waits for its first AW).
        beat = Signal(range((4096 >> shift) + 1))
        head = wq.o.payload
        m.d.comb += [bus.wvalid.eq(mgr.wvalid & wq.o.valid), bus.wdata.eq(mgr.wdata),
                     bus.wstrb.eq(mgr.wstrb),
                     bus.wlast.eq(mgr.wlast | (head.crosses & (beat == head.first - 1))),
                     mgr.wready.eq(bus.wready & wq.o.valid)]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += beat.eq(Mux(mgr.wlast, 0, beat + 1))
            m.d.comb += wq.o.ready.eq(mgr.wlast)

        # B: a split burst's first response is held back, merged into its second.
        first_seen, first_resp = Signal(), Signal(AxiResp)
        absorb = bq.o.payload & ~first_seen
        m.d.comb += [mgr.bvalid.eq(bus.bvalid & ~absorb), mgr.bid.eq(bus.bid),
                     mgr.bresp.eq(Mux(first_seen & (first_resp != AxiResp.OKAY), first_resp,
                                      bus.bresp)),
                     bus.bready.eq(absorb | mgr.bready)]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += [first_seen.eq(absorb), first_resp.eq(bus.bresp)]
            m.d.comb += bq.o.ready.eq(~absorb)
        return m
