"""One pseudo-channel of the HBM controller: its parts composed.

It sits between the crossbar (``controller.py``), which hands it requests already decoded to
(bank, row, column), and its channel: it offers row and column commands to the channel's
command arbiter (``arbiter.py``), which grants the shared buses, and owns its data bus. Every
pseudo-channel is this same module, emitted once as Verilog and instantiated by name. Its parts,
in the LiteDRAM manner:

    req ─► CommandQueue ──entries──► Scheduler ── row, col offers ─► arbiter (grants)
              │   ▲                    ▲    ▲          │ granted commands
              │   └──── merge ─────┐   │    └── Refresher ◄── status ──┐
              └─► WriteBuffer ◄────┤   └───────── status ◄── BankMachines
                       │           ReadReturn ◄── rddata ◄──────────── data bus
                       └── wrdata (CWL after a granted WR) ──────────► data bus
    rresp ◄── ReadReturn;   bresp ◄── completions Queue ◄── posted writes, partial writes' WRs

* :class:`~hdl.hbm.command_queue.CommandQueue`: the collapsing queue (slot 0 oldest) and the
  same-address hazards.
* :class:`~hdl.hbm.scheduler.Scheduler`: read/write mode, column command and row command
  choice (FR-FCFS with a starvation cap, or FCFS), auto-precharge with the closed-page policy.
* :class:`~hdl.hbm.bank.BankMachines`: open rows and every timing constraint.
* :class:`~hdl.hbm.refresher.Refresher`: when to refresh (all-bank or per bank); asks for the
  refresh commands.
* :class:`~hdl.hbm.write_path.WriteBuffer`: write data and strobes, merges, ECC encoding,
  codewords CWL cycles after WR.
* :class:`~hdl.hbm.read_return.ReadReturn`: ECC decoding, read responses, merge data.

Only granted commands take effect: the bank machines, the refresher's owed count, the queue
and the data paths all watch the granted ones.

Responses: read data goes out on ``rresp`` with its tag (``err`` for an uncorrectable word).
Write completions go out on ``bresp``: a full write (every strobe set) is posted, answered as
it enters the queue, since from then on every later request to its address is ordered behind it
(the queue's hazards); a partial write is answered when its WR issues or it is dropped, because
its merge read may find an uncorrectable word. A read is only issued when its response has
room, so responses never back up into the device's fixed-latency data path.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.counter import COUNTER_WIDTH, count_events
from ..lib.queue import Queue
from .bank import BankMachines
from .command_queue import CommandQueue
from .interface import (
    DataSignature,
    RowOp,
    bresp_layout,
    col_command_layout,
    request_layout,
    row_command_layout,
    rresp_layout,
)
from .read_return import ReadReturn
from .refresher import Refresher
from .scheduler import LEAVE_LIMIT, Scheduler
from .write_path import WriteBuffer

__all__ = ["PseudoChannel", "CHANNEL_COUNTERS", "LEAVE_LIMIT"]

CHANNEL_COUNTERS = ("data_busy", "reads", "writes", "acts", "pres", "auto_pres", "refs",
                    "refsbs", "refresh_busy", "sbe", "dbe", "rmw", "queue_full", "forced_refs")
BRESP_DEPTH = 8


class PseudoChannel(wiring.Component):
    """Controller of one pseudo-channel.

    Latency: a request taken in cycle ``t`` is seen by the scheduler from ``t + 1``; a row
    hit's column command can be offered then. Throughput: one request in, one row command and
    one column command offered per cycle. Backpressure: ``req.ready`` is low while the queue or
    (for a write) the write buffer is full, or a posted write's completion has no room;
    ``rresp`` and ``bresp`` may stall freely (reads then stop issuing once their queue is
    spoken for); an offer the arbiter does not grant is made afresh.

    Members
    -------
    req : In(stream of request_layout)
        Decoded requests; a write carries its data and strobes.
    rresp : Out(stream of rresp_layout)
        Read data, corrected, with the request's tag and ``err`` (uncorrectable word).
    bresp : Out(stream of bresp_layout)
        One completion per write: a full write as it is queued (posted), a partial write when
        its WR issues, ``err`` when its merge read met an uncorrectable word.
    row, col : Out(row_command_layout / col_command_layout)
        This cycle's command offers to the channel's arbiter.
    row_grant, col_grant : In(1)
        The offers have the buses (combinational, in the same cycle).
    data : Out(DataSignature)
        The pseudo-channel's data bus.
    idle : Out(1)
        No request queued and no read in flight.
    data_busy, reads, writes, acts, pres, auto_pres, refs, refsbs, refresh_busy, sbe, dbe,
    rmw, queue_full, forced_refs : Out(32)
        Counters: cycles with data on the bus; RD/RDA (including read-modify-write reads),
        WR/WRA, ACT, PRE (a PREA counts one), RDA/WRA, REF, REFSB commands; cycles an all-bank
        refresh was in progress; words corrected; words found uncorrectable; writes that needed
        a read-modify-write; cycles a request was offered and refused (queue or write buffer
        full); refreshes forced ahead of traffic (``refresh_postpone`` owed).
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "req": In(stream.Signature(request_layout(cfg))),
            "rresp": Out(stream.Signature(rresp_layout(cfg))),
            "bresp": Out(stream.Signature(bresp_layout(cfg))),
            "row": Out(row_command_layout(cfg)), "row_grant": In(1),
            "col": Out(col_command_layout(cfg)), "col_grant": In(1),
            "data": Out(DataSignature(cfg)),
            "idle": Out(1),
            **{name: Out(COUNTER_WIDTH) for name in CHANNEL_COUNTERS},
        })

    def elaborate(self, platform):
        m = Module()
        cfg, data = self._cfg, self.data
        m.submodules.queue = queue = CommandQueue(cfg)
        m.submodules.scheduler = sched = Scheduler(cfg)
        m.submodules.banks = banks = BankMachines(cfg)
        m.submodules.write_buffer = wbuf = WriteBuffer(cfg)
        m.submodules.read_return = ret = ReadReturn(cfg)
        m.submodules.completions = done = Queue(bresp_layout(cfg), BRESP_DEPTH)
        wiring.connect(m, wiring.flipped(self.req), queue.req)
        wiring.connect(m, ret.rresp, wiring.flipped(self.rresp))
        wiring.connect(m, done.o, wiring.flipped(self.bresp))

        row, col = Signal(row_command_layout(cfg)), Signal(col_command_layout(cfg))
        m.d.comb += [self.row.eq(sched.row), self.col.eq(sched.col),
                     row.eq(sched.row), row.valid.eq(sched.row.valid & self.row_grant),
                     col.eq(sched.col), col.valid.eq(sched.col.valid & self.col_grant)]
        refresh_active, forced = self._refresher(m, banks, sched, queue, row)

        r, served = self.req.payload, sched.entry
        take = self.req.valid & self.req.ready
        post = r.write & r.strb.all()
        issue_wr = col.valid & col.op.as_value()[0]
        issue_rd = col.valid & ~col.op.as_value()[0]
        m.d.comb += [
            queue.admit.eq((~r.write | wbuf.free_any) & (~post | (done.i.ready & ~sched.complete))),
            queue.wslot.eq(wbuf.free_slot), queue.served_index.eq(sched.index),
            queue.served_read.eq(issue_rd), queue.served_remove.eq(sched.remove),
            queue.merge.eq(ret.merge), queue.merge_slot.eq(ret.merge_slot),
            queue.merge_double.eq(ret.merge_double),
            sched.entries.eq(queue.entries), sched.valid.eq(queue.valid),
            sched.blocked.eq(queue.blocked), sched.rd_room.eq(ret.rd_room),
            sched.b_room.eq(done.i.ready), sched.col_grant.eq(self.col_grant),
            banks.row.eq(row), banks.col.eq(col),
            wbuf.alloc.eq(take & r.write), wbuf.alloc_data.eq(r.data),
            wbuf.alloc_strb.eq(r.strb), wbuf.issue.eq(issue_wr), wbuf.issue_slot.eq(served.wslot),
            wbuf.merge.eq(ret.merge), wbuf.merge_slot.eq(ret.merge_slot),
            wbuf.merge_data.eq(ret.merge_data), wbuf.cancel.eq(sched.cancel),
            wbuf.cancel_slot.eq(served.wslot),
            ret.issue.eq(issue_rd), ret.rmw.eq(served.write), ret.tag.eq(served.tag),
            ret.wslot.eq(served.wslot), ret.rddata.eq(data.rddata),
            ret.rddata_valid.eq(data.rddata_valid),
            done.i.valid.eq(sched.complete | (take & post)),
            done.i.payload.eq(Mux(sched.complete, Cat(served.tag, sched.cancel), Cat(r.tag, 0))),
            data.wrdata.eq(wbuf.wrdata), data.wrdata_valid.eq(wbuf.wrdata_valid),
            self.idle.eq((queue.level == 0) & ~ret.busy & ~done.o.valid),
        ]
        count_events(m, self, {
            "data_busy": data.wrdata_valid | data.rddata_valid,
            "reads": issue_rd, "writes": issue_wr,
            "acts": row.valid & (row.op == RowOp.ACT),
            "pres": row.valid & ((row.op == RowOp.PRE) | (row.op == RowOp.PREA)),
            "auto_pres": col.valid & col.op.as_value()[1],
            "refs": row.valid & (row.op == RowOp.REF),
            "refsbs": row.valid & (row.op == RowOp.REFSB),
            "refresh_busy": refresh_active, "sbe": ret.sbe, "dbe": ret.dbe,
            "rmw": take & r.write & ~r.strb.all(),
            "queue_full": self.req.valid & ~self.req.ready,
            "forced_refs": forced,
        })
        return m

    def _refresher(self, m, banks, sched, queue, row):
        """The refresher, wired to the bank machines, the scheduler and the granted row
        command; returns its ``active`` and ``forced`` (constant low without refresh)."""
        cfg = self._cfg
        if not cfg.refresh:
            wiring.connect(m, banks.status, sched.status)
            return Const(0), Const(0)
        m.submodules.refresher = refresh = Refresher(cfg)
        wiring.connect(m, banks.status, sched.status, refresh.status)
        m.d.comb += [refresh.idle.eq((queue.level == 0) & ~self.req.valid),
                     refresh.wanted.eq(queue.wanted), refresh.row.eq(row),
                     sched.refresh.eq(refresh.cmd), sched.block.eq(refresh.block),
                     sched.refresh_active.eq(refresh.active)]
        return refresh.active, refresh.forced
