"""One AXI4 slave port of the HBM controller: its parts composed.

It sits between an AXI4 master and the controller's crossbar (``controller.py``):

    AW, W, AR ─► FrontEnd ─ wreq, rreq ─► crossbar ─► pseudo-channels
                   │ wburst, wlocal                       │
                   ├─► WriteTracker ◄─ bret ◄─────────────┤
         B ◄───────┘                                      │
                   └─► ReorderBuffer ◄─ rret ◄────────────┘
         R ◄───────────────┘

* :class:`~hdl.hbm.front_end.FrontEnd`: burst splitting (one request per beat), address
  decoding, DECERR past the capacity, SLVERR for FIXED and WRAP bursts.
* :class:`~hdl.hbm.write_tracker.WriteTracker`: write burst entries per lane, the B channel.
* :class:`~hdl.hbm.reorder.ReorderBuffer`: read beat slots per lane, the R channel.

Ordering: IDs map to ``id_lanes`` lanes by their low bits. Each lane keeps its read beats and its
write bursts in issue order and answers from its head, so responses of one ID are in order;
lanes are served round robin as soon as their head is complete, so responses of IDs in
different lanes pass each other.
"""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.axi import AxiResp, axi4_signature
from ..lib.counter import COUNTER_WIDTH, count_events
from .front_end import FrontEnd, port_request_layout
from .interface import bresp_layout, rresp_layout, tag_bits
from .reorder import ReorderBuffer
from .write_tracker import WriteTracker

__all__ = ["AxiPort", "local_tag_bits", "PORT_COUNTERS"]

PORT_COUNTERS = ("decerr", "slverr")


def local_tag_bits(cfg):
    """Tag bits a port uses (lane and slot); the crossbar puts the port number above them."""
    return tag_bits(cfg) - (cfg.ports - 1).bit_length()


class AxiPort(wiring.Component):
    """AXI4 slave port: AXI in, requests to the crossbar out, responses back in.

    Throughput: one read beat and one write beat per cycle in, one R beat and one B response
    per cycle out. Backpressure: see the parts; responses from the crossbar are always taken.

    Members
    -------
    axi : In(AXI4Signature)
        The port's AXI4 bus.
    wreq, rreq : Out(stream of port_request_layout)
        One request per in-range write / read beat, tagged with the lane and slot of its
        response; separate, so that a write the memory cannot take yet never holds up reads.
    rret, bret : In(stream of rresp_layout / bresp_layout)
        Responses for this port (tags as sent); always accepted.
    decerr, slverr : Out(32)
        Beats answered DECERR (past the capacity) and SLVERR (unsupported burst type, or an
        uncorrectable ECC error), reads and writes.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "axi": In(axi4_signature(cfg)),
            "wreq": Out(stream.Signature(port_request_layout(cfg))),
            "rreq": Out(stream.Signature(port_request_layout(cfg))),
            "rret": In(stream.Signature(rresp_layout(cfg))),
            "bret": In(stream.Signature(bresp_layout(cfg))),
            **{name: Out(COUNTER_WIDTH) for name in PORT_COUNTERS},
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        m.submodules.front_end = front = FrontEnd(cfg)
        m.submodules.write_tracker = writes = WriteTracker(cfg)
        m.submodules.reorder = reads = ReorderBuffer(cfg)
        for name, member in self.axi.signature.members.items():
            # AW, W and AR to the front end, B from the write tracker, R from the reorder
            # buffer, by the AXI signal names those parts use.
            part = {"b": writes, "r": reads}.get(name[0], front)
            if not hasattr(part, name):
                continue
            if member.flow == In:       # driven by the manager
                m.d.comb += getattr(part, name).eq(getattr(self.axi, name))
            else:
                m.d.comb += getattr(self.axi, name).eq(getattr(part, name))
        wiring.connect(m, front.wreq, wiring.flipped(self.wreq))
        wiring.connect(m, front.rreq, wiring.flipped(self.rreq))
        wiring.connect(m, front.wburst, writes.wburst)
        wiring.connect(m, front.wlocal, writes.wlocal)
        wiring.connect(m, front.rbeat, reads.rbeat)
        wiring.connect(m, wiring.flipped(self.bret), writes.bret)
        wiring.connect(m, wiring.flipped(self.rret), reads.rret)

        wl, rb = front.wlocal, front.rbeat
        local_r = rb.valid & rb.local
        count_events(m, self, {
            "decerr": ((wl.valid & (wl.resp == AxiResp.DECERR))
                       + (local_r & (rb.resp == AxiResp.DECERR))),
            "slverr": ((wl.valid & (wl.resp == AxiResp.SLVERR))
                       + (local_r & (rb.resp == AxiResp.SLVERR))
                       + (self.rret.valid & self.rret.payload.err)
                       + (self.bret.valid & self.bret.payload.err)),
        })
        return m
