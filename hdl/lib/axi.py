"""AXI4 and AXI4-Lite interfaces: the memory-mapped buses of the chip.

AXI4 joins every engine that moves data (the TensorCore's DMA, the SparseCore) to the HBM
controller's ports; AXI4-Lite reaches every engine's control and status registers. Both are
described from the manager's side (``Out`` members are driven by the manager), so a manager
holds ``Out(AXI4Signature(...))`` and a subordinate ``In(AXI4Signature(...))``, and the two are
joined with ``wiring.connect``.

Member names are the AXI signal names in lower case (``awid`` ... ``rready``) and the response
and burst codes are shaped enums, so a top's flattened ports (``s0_axi__awid``) are found by
cocotbext-axi's ``AxiBus.from_prefix(dut, "s0_axi_")``. Only the signals Podium uses are
present: no ``awlock``, ``awcache``, ``awprot``, ``awqos``, ``awregion`` or user signals (the
AXI specification gives their defaults, and cocotbext-axi treats them as optional).
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

from spec.config import check, check_int

__all__ = ["AxiResp", "AxiBurst", "AXI4Signature", "AXI4LiteSignature", "engine_members",
           "axi4_signature", "AxiNoMemory"]


class AxiResp(enum.Enum, shape=2):
    """The ``bresp`` / ``rresp`` codes."""

    OKAY = 0
    EXOKAY = 1
    SLVERR = 2
    DECERR = 3


class AxiBurst(enum.Enum, shape=2):
    """The ``awburst`` / ``arburst`` codes."""

    FIXED = 0
    INCR = 1
    WRAP = 2


def _check_data_width(data_width, allowed):
    check("data_width", data_width in allowed, f"one of {', '.join(map(str, allowed))}",
          data_width)


class _BusSignature(wiring.Signature):
    """A signature defined by a few named integer parameters, equal to another of its class
    with the same parameters (``wiring.connect`` compares signatures)."""

    def __init__(self, params, members):
        self._params = params
        super().__init__(members)

    def __getattr__(self, name):
        params = self.__dict__.get("_params", {})
        if name in params:
            return params[name]
        raise AttributeError(name)

    def __eq__(self, other):
        return type(other) is type(self) and other._params == self._params

    def __hash__(self):
        return hash((type(self).__name__, tuple(self._params.items())))

    def __repr__(self):
        args = ", ".join(f"{k}={v}" for k, v in self._params.items())
        return f"{type(self).__name__}({args})"


class AXI4Signature(_BusSignature):
    """An AXI4 bus with IDs and bursts, as its manager drives it.

    Parameters (keyword-only, also readable as attributes)
    ------------------------------------------------------
    addr_width : int
        Address bits, 1..64.
    data_width : int
        Data bits, a power of two from 8 to 1024; ``wstrb`` has one bit per byte.
    id_width : int
        ID bits, 1..32.
    """

    def __init__(self, *, addr_width, data_width, id_width):
        check_int("addr_width", addr_width, 1, 64)
        _check_data_width(data_width, tuple(2**i for i in range(3, 11)))
        check_int("id_width", id_width, 1, 32)
        a, d, i = addr_width, data_width, id_width
        super().__init__(dict(addr_width=a, data_width=d, id_width=i), {
            "awid": Out(i), "awaddr": Out(a), "awlen": Out(8), "awsize": Out(3),
            "awburst": Out(AxiBurst), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(d), "wstrb": Out(d // 8), "wlast": Out(1), "wvalid": Out(1),
            "wready": In(1),
            "bid": In(i), "bresp": In(AxiResp), "bvalid": In(1), "bready": Out(1),
            "arid": Out(i), "araddr": Out(a), "arlen": Out(8), "arsize": Out(3),
            "arburst": Out(AxiBurst), "arvalid": Out(1), "arready": In(1),
            "rid": In(i), "rdata": In(d), "rresp": In(AxiResp), "rlast": In(1),
            "rvalid": In(1), "rready": Out(1),
        })


class AXI4LiteSignature(_BusSignature):
    """An AXI4-Lite bus (single beats, no IDs), as its manager drives it: the control and
    status port of every engine.

    Parameters (keyword-only, also readable as attributes)
    ------------------------------------------------------
    addr_width : int
        Address bits, 1..64.
    data_width : int
        32 or 64.
    """

    def __init__(self, *, addr_width, data_width=32):
        check_int("addr_width", addr_width, 1, 64)
        _check_data_width(data_width, (32, 64))
        a, d = addr_width, data_width
        super().__init__(dict(addr_width=a, data_width=d), {
            "awaddr": Out(a), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(d), "wstrb": Out(d // 8), "wvalid": Out(1), "wready": In(1),
            "bresp": In(AxiResp), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(a), "arvalid": Out(1), "arready": In(1),
            "rdata": In(d), "rresp": In(AxiResp), "rvalid": In(1), "rready": Out(1),
        })


def axi4_signature(cfg):
    """The AXI4 bus a configuration names by its ``axi_data_width``, ``axi_addr_width`` and
    ``axi_id_width``: an engine's manager port, or each port of the HBM controller."""
    return AXI4Signature(addr_width=cfg.axi_addr_width, data_width=cfg.axi_data_width,
                         id_width=cfg.axi_id_width)


def engine_members(cfg, csr_addr_width):
    """The members every engine top shares (the TensorCore, the SparseCore): control and status
    on ``csr`` (AXI4-Lite of ``csr_addr_width`` address bits), its manager port ``axi`` (the
    ``axi_*_width`` fields of ``cfg``) and the STATUS bits ``running``, ``done``, ``error``."""
    return {
        "csr": In(AXI4LiteSignature(addr_width=csr_addr_width)),
        "axi": Out(axi4_signature(cfg)),
        "running": Out(1), "done": Out(1), "error": Out(1),
    }


class AxiNoMemory(wiring.Component):
    """An AXI4 subordinate with no memory behind it: every burst is answered ``DECERR`` (a
    write once its last beat is taken, a read with ``arlen + 1`` beats of zeros), one burst of
    each kind at a time, so a manager's errors are exercised and nothing waits forever. It
    stands where a chip has no HBM (a VMEM-only pod chip's DMA).

    Members
    -------
    axi : In(AXI4Signature)
    """

    def __init__(self, signature):
        super().__init__({"axi": In(signature)})

    def elaborate(self, platform):
        m = Module()
        bus = self.axi
        # Writes: an address, then its data beats up to ``wlast``, then the response.
        aw, b = Signal(), Signal()
        with m.If(~aw & ~b):
            m.d.comb += bus.awready.eq(1)
            with m.If(bus.awvalid):
                m.d.sync += [aw.eq(1), bus.bid.eq(bus.awid)]
        with m.If(aw):
            m.d.comb += bus.wready.eq(1)
            with m.If(bus.wvalid & bus.wlast):
                m.d.sync += [aw.eq(0), b.eq(1)]
        m.d.comb += [bus.bvalid.eq(b), bus.bresp.eq(AxiResp.DECERR)]
        with m.If(b & bus.bready):
            m.d.sync += b.eq(0)
        # Reads: an address, then ``arlen + 1`` beats.
        left = Signal(9)
        with m.If(left == 0):
            m.d.comb += bus.arready.eq(1)
            with m.If(bus.arvalid):
                m.d.sync += [left.eq(bus.arlen + 1), bus.rid.eq(bus.arid)]
        m.d.comb += [bus.rvalid.eq(left != 0), bus.rlast.eq(left == 1),
                     bus.rresp.eq(AxiResp.DECERR), bus.rdata.eq(0)]
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += left.eq(left - 1)
        return m
