"""One AXI4 slave port of the HBM controller: burst splitting, address decoding, DECERR, and
the reorder buffers that return responses in order per ID and in any order across IDs.

It sits between an AXI4 master and the controller's crossbar (``controller.py``). Every AXI
beat becomes one request for the access (``access_bytes`` wide, the width of the data bus) that
holds its address; the request carries the pseudo-channel, bank, row and column of the mapping
and a tag naming its response slot. A beat whose address is past the capacity is not sent: it is
answered here with DECERR (read data zero). FIXED and WRAP bursts are answered with SLVERR on
every beat and touch nothing (only INCR is supported).

Ordering: IDs map to ``id_lanes`` lanes by their low bits. Each lane keeps its read beats (the
reorder buffer, ``rob_depth / id_lanes`` slots) and its write bursts (``write_bursts``) in issue
order and answers from its head, so responses of one ID are in order; lanes are served round
robin as soon as their head is complete, so responses of IDs in different lanes pass each other
(read beats of different IDs may interleave, which AXI4 allows). A burst's beats issue one per
cycle, and only while its lane has room: a full lane holds its channel, not the others. The
next burst is accepted in the cycle the previous one's last beat leaves, so single-beat bursts
also flow at one beat per cycle.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.arbiter import RoundRobin
from ..lib.axi import AXI4Signature, AxiBurst, AxiResp
from .channel import bresp_layout, request_layout, rresp_layout, tag_bits

__all__ = ["AxiPort", "axi_signature", "port_request_layout", "local_tag_bits", "PORT_COUNTERS"]

OUT_DEPTH = 4
PORT_COUNTERS = ("decerr", "slverr")


def axi_signature(cfg):
    """The AXI4 bus of one port (the controller is its subordinate: ``In(axi_signature)``)."""
    return AXI4Signature(addr_width=cfg.addr_width, data_width=cfg.access_bytes * 8,
                         id_width=cfg.id_width)


def local_tag_bits(cfg):
    """Tag bits a port uses (lane and slot); the crossbar puts the port number above them."""
    return tag_bits(cfg) - (cfg.ports - 1).bit_length()


def port_request_layout(cfg):
    return data.StructLayout({"pc": max(1, cfg.pc_bits), "req": request_layout(cfg)})


class _Burst:
    """The burst being split: address of the next beat, beats left, lane, and checks."""

    def __init__(self, cfg, prefix):
        self.busy = Signal(name=f"{prefix}_busy")
        self.addr = Signal(cfg.addr_width, name=f"{prefix}_addr")
        self.left = Signal(8, name=f"{prefix}_left")
        self.size = Signal(3, name=f"{prefix}_size")
        self.bad = Signal(name=f"{prefix}_bad")
        self.id = Signal(cfg.id_width, name=f"{prefix}_id")
        self.slot = Signal(8, name=f"{prefix}_slot")   # write burst entry (writes only)
        self._cfg = cfg

    def in_range(self):
        cfg = self._cfg
        if cfg.addr_width == cfg.capacity_bits:
            return Const(1)
        return self.addr[cfg.capacity_bits:] == 0

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


class AxiPort(wiring.Component):
    """AXI4 slave port: AXI in, requests to the crossbar out, responses back in.

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

    Throughput: one read beat and one write beat per cycle.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "axi": In(axi_signature(cfg)),
            "wreq": Out(stream.Signature(port_request_layout(cfg))),
            "rreq": Out(stream.Signature(port_request_layout(cfg))),
            "rret": In(stream.Signature(rresp_layout(cfg))),
            "bret": In(stream.Signature(bresp_layout(cfg))),
            **{name: Out(32) for name in PORT_COUNTERS},
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        axi = self.axi
        L = cfg.id_lanes
        S = cfg.rob_depth // L
        WB = cfg.write_bursts
        nbits = cfg.access_bytes * 8
        lane_bits = (L - 1).bit_length()
        slot_bits = (S - 1).bit_length()
        wslot_bits = (WB - 1).bit_length()

        def lane_of(ident):
            return ident[:lane_bits] if lane_bits else Const(0, 1)

        def tag(lane, slot, bits):
            return Cat(slot[:bits], lane[:lane_bits]) if lane_bits else slot[:bits]

        def untag(value, bits):
            slot = value[:bits] if bits else Const(0, 1)
            lane = value[bits:bits + lane_bits] if lane_bits else Const(0, 1)
            return lane, slot

        aw, ar = _Burst(cfg, "aw"), _Burst(cfg, "ar")

        # --- Write bursts: per lane a ring of entries {id, beats expected, beats done, resp}
        b_id = [[Signal(cfg.id_width, name=f"b{lane}_{k}_id") for k in range(WB)]
                for lane in range(L)]
        b_need = [[Signal(9, name=f"b{lane}_{k}_need") for k in range(WB)] for lane in range(L)]
        b_done = [[Signal(9, name=f"b{lane}_{k}_done") for k in range(WB)] for lane in range(L)]
        b_resp = [[Signal(2, name=f"b{lane}_{k}_resp") for k in range(WB)] for lane in range(L)]
        b_head = [Signal(range(WB), name=f"b{lane}_head") for lane in range(L)]
        b_tail = [Signal(range(WB), name=f"b{lane}_tail") for lane in range(L)]
        b_count = [Signal(range(WB + 1), name=f"b{lane}_count") for lane in range(L)]

        w_pc, w_bank, w_row, w_col = _decode(m, cfg, aw.addr, "w")
        w_local = aw.bad | ~aw.in_range()
        w_resp = Mux(aw.bad, AxiResp.SLVERR, AxiResp.DECERR)
        w_beat = aw.busy & axi.wvalid
        w_lane = lane_of(aw.id)
        m.d.comb += axi.wready.eq(aw.busy & (w_local | self.wreq.ready))
        w_take = axi.wvalid & axi.wready
        with m.If(w_take):
            aw.advance(m)

        # The next burst may start in the cycle the last beat of this one leaves.
        aw_lane = lane_of(axi.awid)
        aw_room = Array(c < WB for c in b_count)[aw_lane]
        m.d.comb += axi.awready.eq((~aw.busy | ((aw.left == 0) & w_take)) & aw_room)
        aw_take = axi.awvalid & axi.awready
        with m.If(aw_take):
            aw.start(m, axi.awaddr, axi.awlen, axi.awsize, axi.awburst, axi.awid)
            m.d.sync += aw.slot.eq(Array(b_tail)[aw_lane])

        # --- Read bursts: per lane a ring of beat slots, data in one memory -----------------
        r_filled = Signal(L * S)
        r_resp = Array(Signal(2, name=f"r{i}_resp") for i in range(L * S))
        r_local = Signal(L * S)
        r_id = Array(Signal(cfg.id_width, name=f"r{i}_id") for i in range(L * S))
        r_last = Signal(L * S)
        r_head = [Signal(range(S), name=f"r{lane}_head") for lane in range(L)]
        r_tail = [Signal(range(S), name=f"r{lane}_tail") for lane in range(L)]
        r_count = [Signal(range(S + 1), name=f"r{lane}_count") for lane in range(L)]

        r_pc, r_bank, r_row, r_col = _decode(m, cfg, ar.addr, "r")
        r_local_beat = ar.bad | ~ar.in_range()
        r_lane = lane_of(ar.id)
        r_room = Array(c < S for c in r_count)[r_lane]
        r_slot = Signal(range(S))
        m.d.comb += r_slot.eq(Array(r_tail)[r_lane])
        r_beat = ar.busy & r_room
        r_take = r_beat & (r_local_beat | self.rreq.ready)
        with m.If(r_take):
            ar.advance(m)
        m.d.comb += axi.arready.eq(~ar.busy | ((ar.left == 0) & r_take))
        with m.If(axi.arvalid & axi.arready):
            ar.start(m, axi.araddr, axi.arlen, axi.arsize, axi.arburst, axi.arid)

        wreq, rreq = self.wreq.payload.req, self.rreq.payload.req
        m.d.comb += [
            self.wreq.valid.eq(w_beat & ~w_local),
            self.wreq.payload.pc.eq(w_pc),
            wreq.write.eq(1), wreq.bank.eq(w_bank), wreq.row.eq(w_row), wreq.col.eq(w_col),
            wreq.tag.eq(tag(w_lane, aw.slot, wslot_bits)),
            wreq.data.eq(axi.wdata), wreq.strb.eq(axi.wstrb),
            self.rreq.valid.eq(r_beat & ~r_local_beat),
            self.rreq.payload.pc.eq(r_pc),
            rreq.write.eq(0), rreq.bank.eq(r_bank), rreq.row.eq(r_row), rreq.col.eq(r_col),
            rreq.tag.eq(tag(r_lane, r_slot, slot_bits)),
        ]

        # --- Write completions -------------------------------------------------------------
        m.d.comb += self.bret.ready.eq(1)
        bc_lane, bc_slot = untag(self.bret.payload.tag, wslot_bits)
        bc = self.bret.valid
        local_w = w_take & w_local
        for lane in range(L):
            for k in range(WB):
                from_xbar = bc & (bc_lane == lane) & (bc_slot == k)
                from_here = local_w & (w_lane == lane) & (aw.slot == k)
                with m.If(aw_take & (aw_lane == lane) & (b_tail[lane] == k)):
                    m.d.sync += [b_id[lane][k].eq(axi.awid), b_need[lane][k].eq(axi.awlen + 1),
                                 b_done[lane][k].eq(0), b_resp[lane][k].eq(AxiResp.OKAY)]
                with m.Else():
                    m.d.sync += b_done[lane][k].eq(b_done[lane][k] + from_xbar + from_here)
                    err = Mux(from_here, w_resp,
                              Mux(from_xbar & self.bret.payload.err, AxiResp.SLVERR, 0))
                    m.d.sync += b_resp[lane][k].eq(Mux(err > b_resp[lane][k], err,
                                                       b_resp[lane][k]))

        # B channel: lanes whose oldest burst is complete, round robin.
        m.submodules.b_pick = b_pick = RoundRobin(L)
        b_ready = Cat(*[(b_count[lane] != 0)
                        & (Array(b_need[lane])[b_head[lane]] == Array(b_done[lane])[b_head[lane]])
                        for lane in range(L)])
        b_send = b_pick.valid & (~axi.bvalid | axi.bready)
        m.d.comb += [b_pick.requests.eq(b_ready), b_pick.advance.eq(b_send)]
        with m.If(axi.bvalid & axi.bready):
            m.d.sync += axi.bvalid.eq(0)
        with m.If(b_send):
            lane_id = Array(Array(row) for row in b_id)
            lane_resp = Array(Array(row) for row in b_resp)
            head = Array(b_head)[b_pick.grant]
            m.d.sync += [axi.bvalid.eq(1), axi.bid.eq(lane_id[b_pick.grant][head]),
                         axi.bresp.eq(lane_resp[b_pick.grant][head])]
        for lane in range(L):
            alloc = aw_take & (aw_lane == lane)
            free = b_send & (b_pick.grant == lane)
            m.d.sync += b_count[lane].eq(b_count[lane] + alloc - free)
            with m.If(alloc):
                m.d.sync += b_tail[lane].eq(Mux(b_tail[lane] == WB - 1, 0, b_tail[lane] + 1))
            with m.If(free):
                m.d.sync += b_head[lane].eq(Mux(b_head[lane] == WB - 1, 0, b_head[lane] + 1))

        # --- Read beats: allocate, fill, send ----------------------------------------------
        m.submodules.rob = rob = memory.Memory(shape=nbits, depth=max(2, L * S), init=[])
        rob_wr = rob.write_port()
        rob_rd = rob.read_port()
        rc_lane, rc_slot = untag(self.rret.payload.tag, slot_bits)
        m.d.comb += [
            self.rret.ready.eq(1),
            rob_wr.addr.eq(Cat(rc_slot[:slot_bits], rc_lane[:lane_bits])
                           if slot_bits + lane_bits else 0),
            rob_wr.data.eq(self.rret.payload.data),
            rob_wr.en.eq(self.rret.valid),
        ]
        alloc_at = Signal(range(max(2, L * S)))
        m.d.comb += alloc_at.eq(Cat(r_slot[:slot_bits], r_lane[:lane_bits])
                                if slot_bits + lane_bits else 0)
        fill_at = rob_wr.addr

        m.submodules.out = out = fifo.SyncFIFO(width=cfg.id_width + nbits + 3, depth=OUT_DEPTH)
        m.submodules.r_pick = r_pick = RoundRobin(L)
        head_at = [Signal(range(max(2, L * S)), name=f"r{lane}_head_at") for lane in range(L)]
        for lane in range(L):
            m.d.comb += head_at[lane].eq(Cat(r_head[lane][:slot_bits], Const(lane, lane_bits))
                                         if slot_bits + lane_bits else 0)
        r_ready = Cat(*[(r_count[lane] != 0) & r_filled.bit_select(head_at[lane], 1)
                        for lane in range(L)])
        pending = Signal()      # a ROB read whose data enters `out` next cycle
        r_send = r_pick.valid & (out.level + pending < OUT_DEPTH - 1)
        send_at = Signal.like(alloc_at)
        m.d.comb += [
            r_pick.requests.eq(r_ready), r_pick.advance.eq(r_send),
            send_at.eq(Array(head_at)[r_pick.grant]),
            rob_rd.addr.eq(send_at),
        ]
        s_id = Signal(cfg.id_width)
        s_resp = Signal(2)
        s_last = Signal()
        s_zero = Signal()
        m.d.sync += [pending.eq(r_send), s_id.eq(r_id[send_at]), s_resp.eq(r_resp[send_at]),
                     s_last.eq(r_last.bit_select(send_at, 1)),
                     s_zero.eq(r_local.bit_select(send_at, 1))]
        m.d.comb += [
            out.w_en.eq(pending),
            out.w_data.eq(Cat(s_id, Mux(s_zero, 0, rob_rd.data), s_resp, s_last)),
            axi.rvalid.eq(out.r_rdy),
            out.r_en.eq(axi.rready),
            Cat(axi.rid, axi.rdata, axi.rresp, axi.rlast).eq(out.r_data),
        ]
        r_local_take = r_take & r_local_beat
        r_resp_local = Mux(ar.bad, AxiResp.SLVERR, AxiResp.DECERR)
        for i in range(L * S):
            with m.If(r_take & (alloc_at == i)):
                m.d.sync += [r_id[i].eq(ar.id), r_last[i].eq(ar.left == 0),
                             r_local[i].eq(r_local_beat), r_filled[i].eq(r_local_beat),
                             r_resp[i].eq(Mux(r_local_beat, r_resp_local, AxiResp.OKAY))]
            with m.Elif(self.rret.valid & (fill_at == i)):
                m.d.sync += [r_filled[i].eq(1),
                             r_resp[i].eq(Mux(self.rret.payload.err, AxiResp.SLVERR,
                                              AxiResp.OKAY))]
            with m.Elif(r_send & (send_at == i)):
                m.d.sync += r_filled[i].eq(0)
        for lane in range(L):
            alloc = r_take & (r_lane == lane)
            free = r_send & (r_pick.grant == lane)
            m.d.sync += r_count[lane].eq(r_count[lane] + alloc - free)
            with m.If(alloc):
                m.d.sync += r_tail[lane].eq(r_tail[lane] + 1 if S > 1 else 0)
            with m.If(free):
                m.d.sync += r_head[lane].eq(r_head[lane] + 1 if S > 1 else 0)

        # --- Counters ----------------------------------------------------------------------
        rc_err = self.rret.valid & self.rret.payload.err
        bc_err = bc & self.bret.payload.err
        m.d.sync += [
            self.decerr.eq(self.decerr + (local_w & ~aw.bad) + (r_local_take & ~ar.bad)),
            self.slverr.eq(self.slverr + (local_w & aw.bad) + (r_local_take & ar.bad)
                           + rc_err + bc_err),
        ]
        return m
