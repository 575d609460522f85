"""One pseudo-channel of the HBM controller: its parts composed, and the command/data interface
a PHY implements.

It sits between the crossbar (``controller.py``), which hands it requests already decoded to
(bank, row, column), and one HBM pseudo-channel. Every pseudo-channel is this same module, emitted
once as Verilog and instantiated by name. Its parts, in the LiteDRAM manner:

    req ─► CommandQueue ──entries──► Scheduler ── row, col ──┬──────────────────────► dfi
              │   ▲                    ▲    ▲                 ├─► BankMachines ─ status ┘(to
              │   └──── merge ─────┐   │    └── Refresher ◄───┘    Scheduler, Refresher)
              └─► WriteBuffer ◄────┤   │                      └─► WriteBuffer ─ wrdata ─► dfi
                                   ReadReturn ◄── rddata ◄────────────────────────────── dfi
    rresp ◄── ReadReturn;   bresp ◄── completions Queue ◄── posted writes, partial writes' WRs

* :class:`~hdl.hbm.command_queue.CommandQueue`: the collapsing queue (slot 0 oldest) and the
  same-address hazards.
* :class:`~hdl.hbm.scheduler.Scheduler`: read/write mode, column command and row command
  choice (FR-FCFS with a starvation cap, or FCFS).
* :class:`~hdl.hbm.bank.BankMachines`: open rows and every timing constraint.
* :class:`~hdl.hbm.refresher.Refresher`: when to refresh; asks for PREA and REF.
* :class:`~hdl.hbm.write_path.WriteBuffer`: write data and strobes, merges, ECC encoding,
  codewords CWL cycles after WR.
* :class:`~hdl.hbm.read_return.ReadReturn`: ECC decoding, read responses, merge data.

Responses: read data goes out on ``rresp`` with its tag (``err`` for an uncorrectable word).
Write completions go out on ``bresp``: a full write (every strobe set) is posted, answered as
it enters the queue, since from then on every later request to its address is ordered behind it
(the queue's hazards); a partial write is answered when its WR issues or it is dropped, because
its merge read may find an uncorrectable word. A read is only issued when its response has
room, so responses never back up into the device's fixed-latency data path.
"""

from amaranth.hdl import Cat, Const, Module, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.counter import COUNTER_WIDTH, count_events
from ..lib.queue import Queue
from .bank import BankMachines
from .command_queue import CommandQueue
from .interface import ColOp, DfiSignature, RowOp, bresp_layout, request_layout, rresp_layout
from .read_return import ReadReturn
from .refresher import Refresher
from .scheduler import LEAVE_LIMIT, Scheduler
from .write_path import WriteBuffer

__all__ = ["PseudoChannel", "CHANNEL_COUNTERS", "LEAVE_LIMIT"]

CHANNEL_COUNTERS = ("data_busy", "reads", "writes", "acts", "pres", "refs", "refresh_busy",
                    "sbe", "dbe", "rmw", "queue_full", "forced_refs")
BRESP_DEPTH = 8


class PseudoChannel(wiring.Component):
    """Controller of one pseudo-channel.

    Latency: a request taken in cycle ``t`` is seen by the scheduler from ``t + 1``; a row
    hit's column command can issue then. Throughput: one request in, one row command and one
    column command per cycle. Backpressure: ``req.ready`` is low while the queue or (for a
    write) the write buffer is full, or a posted write's completion has no room; ``rresp`` and
    ``bresp`` may stall freely (reads then stop issuing once their queue is spoken for).

    Members
    -------
    req : In(stream of request_layout)
        Decoded requests; a write carries its data and strobes.
    rresp : Out(stream of rresp_layout)
        Read data, corrected, with the request's tag and ``err`` (uncorrectable word).
    bresp : Out(stream of bresp_layout)
        One completion per write: a full write as it is queued (posted), a partial write when
        its WR issues, ``err`` when its merge read met an uncorrectable word.
    dfi : Out(DfiSignature)
        The device side.
    idle : Out(1)
        No request queued and no read in flight.
    data_busy, reads, writes, acts, pres, refs, refresh_busy, sbe, dbe, rmw, queue_full,
    forced_refs : Out(32)
        Counters: cycles with data on the bus; RD (including read-modify-write reads), WR, ACT,
        PRE (a PREA counts one), REF commands; cycles with a refresh in progress; words
        corrected; words found uncorrectable; writes that needed a read-modify-write; cycles a
        request was offered and refused (queue or write buffer full); refreshes forced ahead of
        traffic (``refresh_postpone`` owed).
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "req": In(stream.Signature(request_layout(cfg))),
            "rresp": Out(stream.Signature(rresp_layout(cfg))),
            "bresp": Out(stream.Signature(bresp_layout(cfg))),
            "dfi": Out(DfiSignature(cfg)),
            "idle": Out(1),
            **{name: Out(COUNTER_WIDTH) for name in CHANNEL_COUNTERS},
        })

    def elaborate(self, platform):
        m = Module()
        cfg, dfi = self._cfg, self.dfi
        m.submodules.queue = queue = CommandQueue(cfg)
        m.submodules.scheduler = sched = Scheduler(cfg)
        m.submodules.banks = banks = BankMachines(cfg)
        m.submodules.write_buffer = wbuf = WriteBuffer(cfg)
        m.submodules.read_return = ret = ReadReturn(cfg)
        m.submodules.completions = done = Queue(bresp_layout(cfg), BRESP_DEPTH)
        wiring.connect(m, wiring.flipped(self.req), queue.req)
        wiring.connect(m, ret.rresp, wiring.flipped(self.rresp))
        wiring.connect(m, done.o, wiring.flipped(self.bresp))
        refresh_active, forced = self._refresher(m, banks, sched, queue)

        r, served = self.req.payload, sched.entry
        take = self.req.valid & self.req.ready
        post = r.write & r.strb.all()
        issue_rd = sched.col.valid & (sched.col.op == ColOp.RD)
        issue_wr = sched.col.valid & (sched.col.op == ColOp.WR)
        m.d.comb += [
            queue.admit.eq((~r.write | wbuf.free_any) & (~post | (done.i.ready & ~sched.complete))),
            queue.wslot.eq(wbuf.free_slot), queue.served_index.eq(sched.index),
            queue.served_read.eq(issue_rd), queue.served_remove.eq(sched.remove),
            queue.merge.eq(ret.merge), queue.merge_slot.eq(ret.merge_slot),
            queue.merge_double.eq(ret.merge_double),
            sched.entries.eq(queue.entries), sched.valid.eq(queue.valid),
            sched.blocked.eq(queue.blocked), sched.rd_room.eq(ret.rd_room),
            sched.b_room.eq(done.i.ready),
            banks.row.eq(sched.row), banks.col.eq(sched.col),
            wbuf.alloc.eq(take & r.write), wbuf.alloc_data.eq(r.data),
            wbuf.alloc_strb.eq(r.strb), wbuf.issue.eq(issue_wr), wbuf.issue_slot.eq(served.wslot),
            wbuf.merge.eq(ret.merge), wbuf.merge_slot.eq(ret.merge_slot),
            wbuf.merge_data.eq(ret.merge_data), wbuf.cancel.eq(sched.cancel),
            wbuf.cancel_slot.eq(served.wslot),
            ret.issue.eq(issue_rd), ret.rmw.eq(served.write), ret.tag.eq(served.tag),
            ret.wslot.eq(served.wslot), ret.rddata.eq(dfi.rddata),
            ret.rddata_valid.eq(dfi.rddata_valid),
            done.i.valid.eq(sched.complete | (take & post)),
            done.i.payload.eq(Mux(sched.complete, Cat(served.tag, sched.cancel), Cat(r.tag, 0))),
            dfi.row_valid.eq(sched.row.valid), dfi.row_op.eq(sched.row.op),
            dfi.row_bank.eq(sched.row.bank), dfi.row_addr.eq(sched.row.row),
            dfi.col_valid.eq(sched.col.valid), dfi.col_op.eq(sched.col.op),
            dfi.col_bank.eq(sched.col.bank), dfi.col_addr.eq(sched.col.col),
            dfi.wrdata.eq(wbuf.wrdata), dfi.wrdata_valid.eq(wbuf.wrdata_valid),
            self.idle.eq((queue.level == 0) & ~ret.busy & ~done.o.valid),
        ]
        row = sched.row
        count_events(m, self, {
            "data_busy": dfi.wrdata_valid | dfi.rddata_valid,
            "reads": issue_rd, "writes": issue_wr,
            "acts": row.valid & (row.op == RowOp.ACT),
            "pres": row.valid & ((row.op == RowOp.PRE) | (row.op == RowOp.PREA)),
            "refs": row.valid & (row.op == RowOp.REF),
            "refresh_busy": refresh_active, "sbe": ret.sbe, "dbe": ret.dbe,
            "rmw": take & r.write & ~r.strb.all(),
            "queue_full": self.req.valid & ~self.req.ready,
            "forced_refs": forced,
        })
        return m

    def _refresher(self, m, banks, sched, queue):
        """The refresher, wired to the bank machines and the scheduler; returns its ``active``
        and ``forced`` (constant low without refresh)."""
        cfg = self._cfg
        if not cfg.refresh:
            wiring.connect(m, banks.status, sched.status)
            return Const(0), Const(0)
        m.submodules.refresher = refresh = Refresher(cfg)
        wiring.connect(m, banks.status, sched.status, refresh.status)
        m.d.comb += [refresh.idle.eq((queue.level == 0) & ~self.req.valid),
                     sched.refresh_active.eq(refresh.active), sched.refresh_prea.eq(refresh.prea),
                     sched.refresh_ref.eq(refresh.ref)]
        return refresh.active, refresh.forced
