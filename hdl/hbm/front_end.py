"""The front end of an HBM AXI4 port: burst splitting, address decoding, and the beats the
port answers itself (DECERR past the capacity, SLVERR for FIXED and WRAP bursts).

It sits at the AXI side of an :class:`~hdl.hbm.axi_port.AxiPort`, on the AW, W and AR
channels. Every AXI beat becomes one request for the access (``access_bytes`` wide, the width
of the data bus) that holds its address, with the pseudo-channel, bank, row and column of the
mapping and a tag naming its response slot, which the write tracker (``write_tracker.py``, per
write burst) and the reorder buffer (``reorder.py``, per read beat) hand out.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.axi import AxiBurst, AxiResp
from .interface import request_layout

__all__ = ["FrontEnd", "Lanes", "port_request_layout", "write_burst_signature",
           "write_local_signature", "read_beat_signature"]


def port_request_layout(cfg):
    """A request and the pseudo-channel it goes to."""
    return data.StructLayout({"pc": max(1, cfg.pc_bits), "req": request_layout(cfg)})


class Lanes:
    """How a port's AXI IDs map to its ``id_lanes`` reorder lanes (by their low bits), and how
    a request's tag names the lane and the slot of its response."""

    def __init__(self, cfg):
        self.bits = (cfg.id_lanes - 1).bit_length()

    def of(self, ident):
        """The lane of AXI ID ``ident``."""
        return ident[:self.bits] if self.bits else Const(0, 1)

    def tag(self, lane, slot, slot_bits):
        """The tag of slot ``slot`` (``slot_bits`` wide) of lane ``lane``."""
        return Cat(slot[:slot_bits], lane[:self.bits]) if self.bits else slot[:slot_bits]

    def untag(self, value, slot_bits):
        """``(lane, slot)`` of a tag."""
        slot = value[:slot_bits] if slot_bits else Const(0, 1)
        lane = value[slot_bits:slot_bits + self.bits] if self.bits else Const(0, 1)
        return lane, slot


def write_burst_signature(cfg):
    """A write burst entry asked for (``valid``) by the front end for a burst of ID ``id`` and
    ``len + 1`` beats; the tracker says whether the ID's lane has ``room`` and which ``slot``
    the burst gets (combinational from ``id``)."""
    return wiring.Signature({"valid": Out(1), "id": Out(cfg.id_width), "len": Out(8),
                             "room": In(1), "slot": In(range(cfg.write_bursts))})


def write_local_signature(cfg):
    """A write beat answered by the front end (``resp``) for the burst in ``slot`` of the lane
    of ``id``."""
    return wiring.Signature({"valid": Out(1), "id": Out(cfg.id_width), "slot": Out(8),
                             "resp": Out(AxiResp)})


def read_beat_signature(cfg):
    """A read beat slot taken (``valid``) by the front end for ID ``id``; ``last``: the
    burst's last beat; ``local``: answered here with ``resp`` (no data from memory). The
    reorder buffer says whether the ID's lane has ``room`` and which ``slot`` the beat gets
    (combinational from ``id``)."""
    return wiring.Signature({
        "valid": Out(1), "id": Out(cfg.id_width), "last": Out(1), "local": Out(1),
        "resp": Out(AxiResp), "room": In(1), "slot": In(range(cfg.rob_depth // cfg.id_lanes)),
    })


class _Burst:
    """The burst being split: address of the next beat, beats left, and checks."""

    def __init__(self, cfg, prefix):
        self.busy = Signal(name=f"{prefix}_busy")
        self.addr = Signal(cfg.addr_width, name=f"{prefix}_addr")
        self.left = Signal(8, name=f"{prefix}_left")
        self.size = Signal(3, name=f"{prefix}_size")
        self.bad = Signal(name=f"{prefix}_bad")
        self.id = Signal(cfg.id_width, name=f"{prefix}_id")
        self.slot = Signal(8, name=f"{prefix}_slot")   # write burst entry (writes only)
        self._cfg = cfg

    def local(self):
        """The beat is answered here: an unsupported burst type, or past the capacity."""
        cfg = self._cfg
        if cfg.addr_width == cfg.capacity_bits:
            return self.bad
        return self.bad | (self.addr[cfg.capacity_bits:] != 0)

    def resp(self):
        """The answer to a local beat."""
        return Mux(self.bad, AxiResp.SLVERR, AxiResp.DECERR)

    def start(self, m, addr, length, size, burst, ident):
        m.d.sync += [self.busy.eq(1), self.addr.eq(addr), self.left.eq(length),
                     self.size.eq(size), self.bad.eq(burst != AxiBurst.INCR), self.id.eq(ident)]

    def advance(self, m):
        """Next beat: INCR from the aligned address (AXI: only the first beat may be
        unaligned)."""
        step = Signal.like(self.addr, name=f"{self.busy.name}_step")
        m.d.comb += step.eq(Const(1, self.addr.shape()) << self.size)
        m.d.sync += [self.addr.eq((self.addr & ~(step - 1)) + step),
                     self.left.eq(self.left - 1)]
        with m.If(self.left == 0):
            m.d.sync += self.busy.eq(0)


def _decode(m, cfg, addr, prefix):
    """(pc, bank, row, col) signals of ``addr`` under the configured mapping."""
    offsets, widths = cfg.field_offsets(), cfg.field_widths()
    f = {n: (addr[offsets[n]:offsets[n] + widths[n]] if widths[n] else Const(0, 1))
         for n in widths}
    bg, ba = f["Bg"], f["Ba"]
    if cfg.xor_bank:
        if cfg.bg_bits:
            bg = bg ^ f["Ro"][:cfg.bg_bits]
        if cfg.ba_bits:
            ba = ba ^ f["Ro"][cfg.bg_bits:cfg.bg_bits + cfg.ba_bits]
    bank = Signal(cfg.bank_bits, name=f"{prefix}_bank")
    if cfg.bg_bits and cfg.ba_bits:
        m.d.comb += bank.eq(Cat(ba, bg))
    elif cfg.bg_bits:
        m.d.comb += bank.eq(bg)
    elif cfg.ba_bits:
        m.d.comb += bank.eq(ba)
    return f["Pc"], bank, f["Ro"], f["Co"]


class FrontEnd(wiring.Component):
    """Splits AXI bursts into one request per beat.

    Throughput: one write beat and one read beat per cycle; the next AR or AW is accepted in
    the cycle the previous burst's last beat leaves, so single-beat bursts also go at one per
    cycle. Backpressure: a burst is accepted only when its lane has a free write burst entry
    (AW); a read beat goes only when its lane has a free read slot, a beat for memory only
    when its request stream is ready, so a full lane holds its channel, not the other.

    Members
    -------
    awid ... awvalid, awready, wdata, wstrb, wvalid, wready, arid ... arvalid, arready
        The AW, W and AR channels of the port's AXI4 bus (``wlast`` is not needed: the burst
        length counts the beats).
    wreq, rreq : Out(stream of port_request_layout)
        One request per write / read beat for memory.
    wburst : Out(write_burst_signature), wlocal : Out(write_local_signature)
        To the write tracker: a burst accepted; a write beat answered here.
    rbeat : Out(read_beat_signature)
        To the reorder buffer: a read beat sent (or answered here).
    """

    def __init__(self, cfg):
        self._cfg = cfg
        a, i, d = cfg.addr_width, cfg.id_width, cfg.access_bytes * 8
        members = {}
        for ch in ("aw", "ar"):
            members.update({f"{ch}id": In(i), f"{ch}addr": In(a), f"{ch}len": In(8),
                            f"{ch}size": In(3), f"{ch}burst": In(AxiBurst), f"{ch}valid": In(1),
                            f"{ch}ready": Out(1)})
        super().__init__({
            **members, "wdata": In(d), "wstrb": In(d // 8), "wvalid": In(1), "wready": Out(1),
            "wreq": Out(stream.Signature(port_request_layout(cfg))),
            "rreq": Out(stream.Signature(port_request_layout(cfg))),
            "wburst": Out(write_burst_signature(cfg)),
            "wlocal": Out(write_local_signature(cfg)),
            "rbeat": Out(read_beat_signature(cfg)),
        })

    def elaborate(self, platform):
        m = Module()
        self._writes(m)
        self._reads(m)
        return m

    def _writes(self, m):
        cfg, lanes = self._cfg, Lanes(self._cfg)
        aw = _Burst(cfg, "aw")
        pc, bank, row, col = _decode(m, cfg, aw.addr, "w")
        local = aw.local()
        m.d.comb += self.wready.eq(aw.busy & (local | self.wreq.ready))
        take = self.wvalid & self.wready
        with m.If(take):
            aw.advance(m)
        # The next burst may start in the cycle the last beat of this one leaves.
        m.d.comb += [self.wburst.id.eq(self.awid), self.wburst.len.eq(self.awlen),
                     self.awready.eq((~aw.busy | ((aw.left == 0) & take)) & self.wburst.room),
                     self.wburst.valid.eq(self.awvalid & self.awready)]
        with m.If(self.wburst.valid):
            aw.start(m, self.awaddr, self.awlen, self.awsize, self.awburst, self.awid)
            m.d.sync += aw.slot.eq(self.wburst.slot)
        req = self.wreq.payload.req
        m.d.comb += [
            self.wreq.valid.eq(aw.busy & self.wvalid & ~local), self.wreq.payload.pc.eq(pc),
            req.write.eq(1), req.bank.eq(bank), req.row.eq(row), req.col.eq(col),
            req.tag.eq(lanes.tag(lanes.of(aw.id), aw.slot, (cfg.write_bursts - 1).bit_length())),
            req.data.eq(self.wdata), req.strb.eq(self.wstrb),
            self.wlocal.valid.eq(take & local), self.wlocal.id.eq(aw.id),
            self.wlocal.slot.eq(aw.slot), self.wlocal.resp.eq(aw.resp()),
        ]

    def _reads(self, m):
        cfg, lanes, beat = self._cfg, Lanes(self._cfg), self.rbeat
        ar = _Burst(cfg, "ar")
        pc, bank, row, col = _decode(m, cfg, ar.addr, "r")
        local = ar.local()
        go = ar.busy & beat.room
        take = go & (local | self.rreq.ready)
        with m.If(take):
            ar.advance(m)
        m.d.comb += self.arready.eq(~ar.busy | ((ar.left == 0) & take))
        with m.If(self.arvalid & self.arready):
            ar.start(m, self.araddr, self.arlen, self.arsize, self.arburst, self.arid)
        req = self.rreq.payload.req
        slot_bits = (cfg.rob_depth // cfg.id_lanes - 1).bit_length()
        m.d.comb += [
            self.rreq.valid.eq(go & ~local), self.rreq.payload.pc.eq(pc),
            req.write.eq(0), req.bank.eq(bank), req.row.eq(row), req.col.eq(col),
            req.tag.eq(lanes.tag(lanes.of(ar.id), beat.slot, slot_bits)),
            beat.valid.eq(take), beat.id.eq(ar.id), beat.last.eq(ar.left == 0),
            beat.local.eq(local), beat.resp.eq(ar.resp()),
        ]
