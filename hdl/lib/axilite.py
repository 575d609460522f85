"""AXI4-Lite subordinate: turns the bus into one register access per transaction, the
control and status port of every engine (TensorCore, SparseCore).

A write is taken when its address and data have both arrived (AW and W in any order); it
appears as a one-cycle ``write`` strobe with ``waddr``, ``wdata`` and ``wstrb``, and is
answered OKAY on B. A read appears as a one-cycle ``read`` strobe with ``raddr``; the owner
drives ``rdata`` in that same cycle (combinationally), and it is answered OKAY on R the next
cycle. One transaction of each kind is in flight at a time: AWREADY, WREADY and ARREADY stay
low while the previous response waits for the manager, so backpressure on B or R holds the bus
and nothing is lost.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .axi import AXI4LiteSignature, AxiResp

__all__ = ["AxiLiteRegisters"]


class AxiLiteRegisters(wiring.Component):
    """An AXI4-Lite subordinate as register strobes (see the module docstring).

    Parameters (keyword-only)
    -------------------------
    addr_width : int
    data_width : int
        32 or 64.

    Members
    -------
    bus : In(AXI4LiteSignature)
    write : Out(1), waddr : Out(addr_width), wdata : Out(data_width), wstrb : Out(bytes)
    read : Out(1), raddr : Out(addr_width), rdata : In(data_width)
    """

    def __init__(self, *, addr_width, data_width=32):
        sig = AXI4LiteSignature(addr_width=addr_width, data_width=data_width)
        super().__init__({
            "bus": In(sig),
            "write": Out(1), "waddr": Out(addr_width), "wdata": Out(data_width),
            "wstrb": Out(data_width // 8),
            "read": Out(1), "raddr": Out(addr_width), "rdata": In(data_width),
        })

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        have_aw, have_w = Signal(), Signal()
        m.d.comb += [bus.awready.eq(~have_aw & ~bus.bvalid),
                     bus.wready.eq(~have_w & ~bus.bvalid)]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += [have_aw.eq(1), self.waddr.eq(bus.awaddr)]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += [have_w.eq(1), self.wdata.eq(bus.wdata), self.wstrb.eq(bus.wstrb)]
        m.d.comb += self.write.eq(have_aw & have_w)
        with m.If(self.write):
            m.d.sync += [have_aw.eq(0), have_w.eq(0), bus.bvalid.eq(1)]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)
        m.d.comb += bus.bresp.eq(AxiResp.OKAY)

        m.d.comb += [bus.arready.eq(~bus.rvalid), self.raddr.eq(bus.araddr),
                     self.read.eq(bus.arvalid & bus.arready), bus.rresp.eq(AxiResp.OKAY)]
        with m.If(self.read):
            m.d.sync += [bus.rvalid.eq(1), bus.rdata.eq(self.rdata)]
        with m.Elif(bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        return m
