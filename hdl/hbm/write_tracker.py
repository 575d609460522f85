"""The write tracker of an HBM AXI4 port: one entry per write burst in flight, and the B
channel that answers each burst once all its beats are done.

It sits at the AXI side of an :class:`~hdl.hbm.axi_port.AxiPort`, beside the front end
(``front_end.py``). Each lane (IDs by their low bits) keeps its bursts in a ring of
``write_bursts`` entries in issue order: ID, beats expected, beats done, worst response so far.
Completions come from the pseudo-channels (``bret``, by tag) and from the front end (beats
it answered itself); a lane's oldest burst is answered when all its beats are done, lanes round
robin, so responses of one ID are in order and IDs in different lanes pass each other.
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.arbiter import RoundRobin
from ..lib.axi import AxiResp
from .front_end import Lanes, write_burst_signature, write_local_signature
from .interface import bresp_layout

__all__ = ["WriteTracker"]


class WriteTracker(wiring.Component):
    """Write burst entries per lane and the B channel.

    Latency: a burst whose last completion arrives in cycle ``t`` can be answered on B from
    ``t + 2`` (the entry updates at ``t + 1``, B is a register). Throughput: one B response
    per cycle. Backpressure: ``bready`` low holds B; a lane with every entry in use refuses
    new bursts of its IDs (``wburst.room`` low); completions are always taken.

    Members
    -------
    wburst : In(write_burst_signature), wlocal : In(write_local_signature)
        From the front end: a burst accepted; a beat answered there.
    bret : In(stream of bresp_layout)
        Completions from the pseudo-channels (``err``: SLVERR); always ready.
    bid, bresp, bvalid : Out, bready : In
        The AXI B channel.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "wburst": In(write_burst_signature(cfg)), "wlocal": In(write_local_signature(cfg)),
            "bret": In(stream.Signature(bresp_layout(cfg))),
            "bid": Out(cfg.id_width), "bresp": Out(AxiResp), "bvalid": Out(1), "bready": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, lanes = self._cfg, Lanes(self._cfg)
        L, WB = cfg.id_lanes, cfg.write_bursts

        def per_entry(name, shape):
            return [[Signal(shape, name=f"b{lane}_{k}_{name}") for k in range(WB)]
                    for lane in range(L)]

        ids, need, done, resp = (per_entry("id", cfg.id_width), per_entry("need", 9),
                                 per_entry("done", 9), per_entry("resp", 2))
        head = [Signal(range(WB), name=f"b{lane}_head") for lane in range(L)]
        tail = [Signal(range(WB), name=f"b{lane}_tail") for lane in range(L)]
        count = [Signal(range(WB + 1), name=f"b{lane}_count") for lane in range(L)]
        burst, local = self.wburst, self.wlocal
        new_lane = lanes.of(burst.id)
        m.d.comb += [burst.room.eq(Array(c < WB for c in count)[new_lane]),
                     burst.slot.eq(Array(tail)[new_lane]), self.bret.ready.eq(1)]

        ret_lane, ret_slot = lanes.untag(self.bret.payload.tag, (WB - 1).bit_length())
        for lane in range(L):
            for k in range(WB):
                from_xbar = self.bret.valid & (ret_lane == lane) & (ret_slot == k)
                from_here = local.valid & (lanes.of(local.id) == lane) & (local.slot == k)
                with m.If(burst.valid & (new_lane == lane) & (tail[lane] == k)):
                    m.d.sync += [ids[lane][k].eq(burst.id), need[lane][k].eq(burst.len + 1),
                                 done[lane][k].eq(0), resp[lane][k].eq(AxiResp.OKAY)]
                with m.Else():
                    m.d.sync += done[lane][k].eq(done[lane][k] + from_xbar + from_here)
                    err = Mux(from_here, local.resp,
                              Mux(from_xbar & self.bret.payload.err, AxiResp.SLVERR, 0))
                    m.d.sync += resp[lane][k].eq(Mux(err > resp[lane][k], err, resp[lane][k]))

        # B channel: lanes whose oldest burst is complete, round robin.
        m.submodules.pick = pick = RoundRobin(L)
        complete = Cat(*[(count[lane] != 0)
                         & (Array(need[lane])[head[lane]] == Array(done[lane])[head[lane]])
                         for lane in range(L)])
        send = pick.valid & (~self.bvalid | self.bready)
        m.d.comb += [pick.requests.eq(complete), pick.advance.eq(send)]
        with m.If(self.bvalid & self.bready):
            m.d.sync += self.bvalid.eq(0)
        with m.If(send):
            at = Array(head)[pick.grant]
            m.d.sync += [self.bvalid.eq(1),
                         self.bid.eq(Array(Array(row) for row in ids)[pick.grant][at]),
                         self.bresp.eq(Array(Array(row) for row in resp)[pick.grant][at])]
        for lane in range(L):
            alloc = burst.valid & (new_lane == lane)
            free = send & (pick.grant == lane)
            m.d.sync += count[lane].eq(count[lane] + alloc - free)
            with m.If(alloc):
                m.d.sync += tail[lane].eq(Mux(tail[lane] == WB - 1, 0, tail[lane] + 1))
            with m.If(free):
                m.d.sync += head[lane].eq(Mux(head[lane] == WB - 1, 0, head[lane] + 1))
        return m
