"""The reorder buffer of an HBM AXI4 port: one slot per read beat in flight, and the R channel
that returns beats in order per ID and in any order across IDs.

It sits at the AXI side of an :class:`~hdl.hbm.axi_port.AxiPort`, beside the front end
(``front_end.py``). Each lane (IDs by their low bits) keeps its read beats in a ring of
``rob_depth / id_lanes`` slots in issue order; the data of every slot is in one memory. The
pseudo-channels fill slots in any order (``rret``, by tag); a lane's oldest beat goes out on R
when it is filled, lanes round robin, so read beats of IDs in different lanes interleave, which
AXI4 allows.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.arbiter import RoundRobin
from ..lib.axi import AxiResp
from ..lib.queue import Queue
from .front_end import Lanes, read_beat_signature
from .interface import rresp_layout

__all__ = ["ReorderBuffer", "OUT_DEPTH"]

OUT_DEPTH = 4


class ReorderBuffer(wiring.Component):
    """Read beat slots per lane and the R channel.

    Latency: a beat filled in cycle ``t`` (and at the head of its lane) is read from the data
    memory in ``t + 1`` and offered on R from ``t + 3`` (through an ``OUT_DEPTH``-beat output
    queue). Throughput: one beat per cycle. Backpressure: ``rready`` low fills the output queue,
    then holds the slots; a lane with every slot in use refuses new beats of its IDs
    (``rbeat.room`` low); fills are always taken.

    Members
    -------
    rbeat : In(read_beat_signature)
        From the front end: a beat's slot taken (a local beat is filled at once).
    rret : In(stream of rresp_layout)
        Read data from the pseudo-channels (``err``: SLVERR); always ready.
    rid, rdata, rresp, rlast, rvalid : Out, rready : In
        The AXI R channel.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "rbeat": In(read_beat_signature(cfg)),
            "rret": In(stream.Signature(rresp_layout(cfg))),
            "rid": Out(cfg.id_width), "rdata": Out(cfg.access_bytes * 8), "rresp": Out(AxiResp),
            "rlast": Out(1), "rvalid": Out(1), "rready": In(1),
        })

    def _shape(self):
        cfg = self._cfg
        L, S = cfg.id_lanes, cfg.rob_depth // cfg.id_lanes
        return L, S, (S - 1).bit_length(), Lanes(cfg)

    def _address(self, lane, slot):
        """Memory address of ``slot`` of ``lane``."""
        L, S, slot_bits, lanes = self._shape()
        return Cat(slot[:slot_bits], lane[:lanes.bits]) if slot_bits + lanes.bits else 0

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        L, S, slot_bits, lanes = self._shape()
        N, beat = L * S, self.rbeat
        filled, local, last = Signal(N), Signal(N), Signal(N)
        resp = Array(Signal(2, name=f"r{i}_resp") for i in range(N))
        ids = Array(Signal(cfg.id_width, name=f"r{i}_id") for i in range(N))
        head = [Signal(range(S), name=f"r{lane}_head") for lane in range(L)]
        tail = [Signal(range(S), name=f"r{lane}_tail") for lane in range(L)]
        count = [Signal(range(S + 1), name=f"r{lane}_count") for lane in range(L)]
        new_lane = lanes.of(beat.id)
        m.d.comb += [beat.room.eq(Array(c < S for c in count)[new_lane]),
                     beat.slot.eq(Array(tail)[new_lane])]

        m.submodules.rob = rob = memory.Memory(shape=cfg.access_bytes * 8, depth=max(2, N),
                                               init=[])
        rob_wr, rob_rd = rob.write_port(), rob.read_port()
        ret_lane, ret_slot = lanes.untag(self.rret.payload.tag, slot_bits)
        m.d.comb += [self.rret.ready.eq(1), rob_wr.addr.eq(self._address(ret_lane, ret_slot)),
                     rob_wr.data.eq(self.rret.payload.data), rob_wr.en.eq(self.rret.valid)]
        alloc_at = Signal(range(max(2, N)))
        m.d.comb += alloc_at.eq(self._address(new_lane, beat.slot))

        head_at = [Signal(range(max(2, N)), name=f"r{lane}_head_at") for lane in range(L)]
        for lane in range(L):
            m.d.comb += head_at[lane].eq(self._address(Const(lane, lanes.bits), head[lane]))
        m.submodules.pick = pick = RoundRobin(L)
        m.d.comb += pick.requests.eq(Cat(*[(count[lane] != 0) & filled.bit_select(head_at[lane], 1)
                                           for lane in range(L)]))
        send, send_at = self._send(m, pick, head_at, rob_rd, ids, resp, last, local)

        for i in range(N):
            with m.If(beat.valid & (alloc_at == i)):
                m.d.sync += [ids[i].eq(beat.id), last[i].eq(beat.last), local[i].eq(beat.local),
                             filled[i].eq(beat.local),
                             resp[i].eq(Mux(beat.local, beat.resp, AxiResp.OKAY))]
            with m.Elif(self.rret.valid & (rob_wr.addr == i)):
                m.d.sync += [filled[i].eq(1), resp[i].eq(Mux(self.rret.payload.err,
                                                             AxiResp.SLVERR, AxiResp.OKAY))]
            with m.Elif(send & (send_at == i)):
                m.d.sync += filled[i].eq(0)
        for lane in range(L):
            alloc = beat.valid & (new_lane == lane)
            free = send & (pick.grant == lane)
            m.d.sync += count[lane].eq(count[lane] + alloc - free)
            with m.If(alloc):
                m.d.sync += tail[lane].eq(tail[lane] + 1 if S > 1 else 0)
            with m.If(free):
                m.d.sync += head[lane].eq(head[lane] + 1 if S > 1 else 0)
        return m

    def _send(self, m, pick, head_at, rob_rd, ids, resp, last, local):
        """The chosen lane's head beat, read from the memory into the output queue and out on
        R; returns (a beat is sent this cycle, its slot)."""
        cfg = self._cfg
        out_layout = data.StructLayout({"id": cfg.id_width, "data": cfg.access_bytes * 8,
                                        "resp": AxiResp, "last": 1})
        m.submodules.out = out = Queue(out_layout, OUT_DEPTH)
        pending = Signal()      # a memory read whose data enters `out` next cycle
        send = pick.valid & (out.level + pending < OUT_DEPTH - 1)
        send_at = Signal.like(head_at[0])
        m.d.comb += [pick.advance.eq(send), send_at.eq(Array(head_at)[pick.grant]),
                     rob_rd.addr.eq(send_at)]
        s_id, s_resp, s_last, s_zero = (Signal(cfg.id_width), Signal(2), Signal(), Signal())
        m.d.sync += [pending.eq(send), s_id.eq(ids[send_at]), s_resp.eq(resp[send_at]),
                     s_last.eq(last.bit_select(send_at, 1)),
                     s_zero.eq(local.bit_select(send_at, 1))]
        m.d.comb += [
            out.i.valid.eq(pending),
            out.i.payload.eq(Cat(s_id, Mux(s_zero, 0, rob_rd.data), s_resp, s_last)),
            self.rvalid.eq(out.o.valid), out.o.ready.eq(self.rready),
            self.rid.eq(out.o.payload.id), self.rdata.eq(out.o.payload.data),
            self.rresp.eq(out.o.payload.resp), self.rlast.eq(out.o.payload.last),
        ]
        return send, send_at
