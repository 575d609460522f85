"""One pseudo-channel of the HBM controller: command queue, bank machines, FR-FCFS scheduler,
refresher, write buffer, ECC, and the command/data interface a PHY implements.

It sits between the crossbar (``controller.py``), which hands it requests already decoded to
(bank, row, column), and one HBM pseudo-channel. Every pseudo-channel is this same module, emitted
once as Verilog and instantiated by name.

Queue. Up to ``queue_depth`` requests wait in a collapsing queue: slot 0 is the oldest, a served
request leaves and the younger ones move down, so age order is slot order. A write also holds a
write buffer slot with its data and byte strobes until its data has gone to the device.

Scheduling (each cycle, one row command and one column command, on HBM's separate row and
column buses):
  * Column command: the oldest request whose row is open and whose every timing counter is
    ready (FR-FCFS: a row hit goes ahead of older misses). Reads and writes are served in
    batches: the queue is in read mode until ``write_high`` writes wait (or no read can go),
    then in write mode until ``write_low`` remain and a read waits. When requests starve (see
    below), the mode of the oldest starving one is taken, so a lone write is not held back by
    reads forever, nor reads by a steady stream of writes. A switch is made in two steps:
    first the row commands turn to the next mode while the old mode's requests whose rows are
    open still get their column commands (at most ``LEAVE_LIMIT`` cycles); then the column
    commands follow. The new mode's ACTs so overlap the bus turnaround, and rows opened for
    the old mode are not closed before they are used.
  * Row command: ACT for the oldest request of the (row commands') mode whose bank is closed;
    PRE for the oldest whose bank is open on another row, unless a request of that mode (while
    switching: of either) still hits the row; with the closed-page policy, PRE of any open row
    that no queued request hits.
  * Starvation cap: a request that has waited ``starvation_cap`` cycles goes first in both
    choices, and nobody else may use its bank until its row is open, so row hits to another row
    cannot pass it forever.
  * FCFS (for comparison): only the oldest request is considered, reads and writes alike.
  * Hazards: a request is not served while an older request to the same address, one of the two
    a write, is queued, so a read never returns stale data and writes land in order.
  * Partial writes: ECC covers whole 64-bit words, so a write whose strobes are not all set reads
    the access first (RD, the data corrected), merges it under the strobes, then writes it. If
    that read finds an uncorrectable word, the write is dropped and answered with an error.

Refresh: every tREFI one refresh becomes owed. Owed refreshes are done when the queue has been
empty for 16 cycles, or forced when ``refresh_postpone`` are owed (JEDEC allows 8): ACTs stop,
column commands to open rows go on only while they do not delay the PREA, PREA closes the banks
when their timing allows, and REF issues when tRP has passed.

Responses: read data goes out on ``rresp`` with its tag (``err`` for an uncorrectable word).
Write completions go out on ``bresp``: a full write (every strobe set) is posted, answered as
it enters the queue, since from then on every later request to its address is ordered behind it
(hazards above); a partial write is answered when its WR issues or it is dropped, because its
merge read may find an uncorrectable word. A read is only issued when its response has room,
so responses never back up into the device's fixed-latency data path.
"""



from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import CHECK_BITS, WORD_BITS
from .ecc import decode, encode
from .timing import ActivateWindow, Countdown

__all__ = ["PseudoChannel", "DfiSignature", "RowOp", "ColOp", "request_layout",
           "rresp_layout", "bresp_layout", "tag_bits", "CHANNEL_COUNTERS"]

COUNTER_WIDTH = 32
CHANNEL_COUNTERS = ("data_busy", "reads", "writes", "acts", "pres", "refs", "refresh_busy",
                    "sbe", "dbe", "rmw", "queue_full", "forced_refs")
TAG_FIFO_DEPTH = 16
RRESP_DEPTH = 16
BRESP_DEPTH = 8
IDLE_REFRESH = 16       # empty-queue cycles before an owed refresh is done early
LEAVE_LIMIT = 32        # cycles a mode switch waits for the old mode's row hits at most


class RowOp(enum.Enum, shape=2):
    ACT = 0
    PRE = 1
    PREA = 2
    REF = 3


class ColOp(enum.Enum, shape=1):
    RD = 0
    WR = 1


def tag_bits(cfg):
    """Bits of the opaque tag a request carries back in its response (port, lane, slot)."""
    lanes = (cfg.id_lanes - 1).bit_length()
    slots = max((cfg.rob_depth // cfg.id_lanes - 1).bit_length(),
                (cfg.write_bursts - 1).bit_length())
    return max(1, (cfg.ports - 1).bit_length() + lanes + slots)


def request_layout(cfg):
    return data.StructLayout({
        "write": 1,
        "bank": cfg.bank_bits,
        "row": cfg.row_bits,
        "col": cfg.col_bits,
        "tag": tag_bits(cfg),
        "data": cfg.access_bytes * 8,
        "strb": cfg.access_bytes,
    })


def rresp_layout(cfg):
    return data.StructLayout({"tag": tag_bits(cfg), "data": cfg.access_bytes * 8, "err": 1})


def bresp_layout(cfg):
    return data.StructLayout({"tag": tag_bits(cfg), "err": 1})


class DfiSignature(wiring.Signature):
    """Command/data interface of one pseudo-channel, as the controller drives it.

    Row bus: ``row_valid``, ``row_op`` (RowOp), ``row_bank``, ``row_addr``. Column bus:
    ``col_valid``, ``col_op`` (ColOp), ``col_bank``, ``col_addr``. Write data: ``wrdata`` (two
    DDR beats of codewords per cycle) with ``wrdata_valid``, CWL and CWL + 1 cycles after WR.
    Read data: ``rddata`` with ``rddata_valid`` from the device, CL and CL + 1 cycles after RD.
    """

    def __init__(self, cfg):
        super().__init__({
            "row_valid": Out(1),
            "row_op": Out(RowOp),
            "row_bank": Out(cfg.bank_bits),
            "row_addr": Out(cfg.row_bits),
            "col_valid": Out(1),
            "col_op": Out(ColOp),
            "col_bank": Out(cfg.bank_bits),
            "col_addr": Out(cfg.col_bits),
            "wrdata": Out(cfg.beat_bits),
            "wrdata_valid": Out(1),
            "rddata": In(cfg.beat_bits),
            "rddata_valid": In(1),
        })


def _first(m, name, bits):
    """Index of the lowest set bit of ``bits`` and whether there is one."""
    n = len(bits)
    idx = Signal(range(max(2, n)), name=f"{name}_idx")
    for i in reversed(range(n)):
        with m.If(bits[i]):
            m.d.comb += idx.eq(i)
    return idx, bits.any()


class PseudoChannel(wiring.Component):
    """Controller of one pseudo-channel.

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
        cfg = self._cfg
        t = cfg.timing
        Q, W, B = cfg.queue_depth, cfg.write_buffer, cfg.banks
        nbits = cfg.access_bytes * 8
        frfcfs = cfg.scheduler == "frfcfs"
        dfi = self.dfi

        # --- Timing counters: per bank, per bank group, per pseudo-channel -----------------
        bank_act = [Countdown({"act": t.rc, "pre": t.rp}) for _ in range(B)]
        bank_rd = [Countdown({"act": t.rcd_rd}) for _ in range(B)]
        bank_wr = [Countdown({"act": t.rcd_wr}) for _ in range(B)]
        bank_pre = [Countdown({"act": t.ras, "rd": t.rtp, "wr": t.wr_to_pre})
                    for _ in range(B)]
        bg_rrd = [Countdown({"act": t.rrd_l}) for _ in range(cfg.bank_groups)]
        bg_ccd = [Countdown({"col": t.ccd_l}) for _ in range(cfg.bank_groups)]
        bg_wtr = [Countdown({"wr": t.wr_to_rd_l}) for _ in range(cfg.bank_groups)]
        rrd = Countdown({"act": t.rrd_s})
        ccd = Countdown({"col": t.ccd_s})
        wtr = Countdown({"wr": t.wr_to_rd_s})
        rtw = Countdown({"rd": t.rd_to_wr})
        rfc = Countdown({"ref": t.rfc})
        faw = ActivateWindow(t.faw)
        for name, group in [("bank_act", bank_act), ("bank_rd", bank_rd),
                            ("bank_wr", bank_wr), ("bank_pre", bank_pre), ("bg_rrd", bg_rrd),
                            ("bg_ccd", bg_ccd), ("bg_wtr", bg_wtr)]:
            for i, c in enumerate(group):
                m.submodules[f"{name}{i}"] = c
        for name, c in [("rrd", rrd), ("ccd", ccd), ("wtr", wtr), ("rtw", rtw), ("rfc", rfc),
                        ("faw", faw)]:
            m.submodules[name] = c

        def ready_vec(group):
            return Array(c.ready for c in group)

        act_ok, rd_ok, wr_ok, pre_ok = (ready_vec(g) for g in (bank_act, bank_rd, bank_wr,
                                                               bank_pre))
        rrd_l_ok, ccd_l_ok, wtr_l_ok = (ready_vec(g) for g in (bg_rrd, bg_ccd, bg_wtr))

        # --- Bank machines: open row per bank ----------------------------------------------
        is_open = Signal(B)
        open_row = Array(Signal(cfg.row_bits, name=f"open_row{b}") for b in range(B))

        def bg_of(bank):
            return bank >> cfg.ba_bits if cfg.bg_bits else Const(0, 1)

        # --- Queue -------------------------------------------------------------------------
        wslot_bits = max(1, (W - 1).bit_length())
        wait_bits = cfg.starvation_cap.bit_length()
        entry_layout = data.StructLayout({
            "write": 1, "rmw": 1, "rmw_busy": 1, "cancel": 1, "posted": 1,
            "bank": cfg.bank_bits, "row": cfg.row_bits, "col": cfg.col_bits,
            "tag": tag_bits(cfg), "wslot": wslot_bits, "wait": wait_bits,
        })
        q = [Signal(entry_layout, name=f"q{i}") for i in range(Q)]
        count = Signal(range(Q + 1))
        valid = Cat(*[count > i for i in range(Q)])

        wmode = Signal()
        leaving = Signal()      # switching mode: row commands already serve the next one
        row_mode = Signal()
        m.d.comb += row_mode.eq(wmode ^ leaving)
        ref_active = Signal()

        # Per-entry views.
        hit = Signal(Q)
        same_addr = {}
        for i, e in enumerate(q):
            m.d.comb += hit[i].eq(valid[i] & is_open.bit_select(e.bank, 1)
                                  & (open_row[e.bank] == e.row))
        blocked = Signal(Q)
        for i, e in enumerate(q):
            conflicts = []
            for j in range(i):
                o = q[j]
                same_addr[i, j] = (o.bank == e.bank) & (o.row == e.row) & (o.col == e.col)
                conflicts.append(same_addr[i, j] & (o.write | e.write))
            m.d.comb += blocked[i].eq(Cat(*conflicts).any() if conflicts else 0)

        is_rd = Signal(Q)       # needs a RD: a read, or a partial write before its merge
        of_mode = Signal(Q)     # column commands: requests of the mode
        of_row = Signal(Q)      # row commands: of the mode, or of the next while leaving
        starving = Signal(Q)
        for i, e in enumerate(q):
            m.d.comb += [
                is_rd[i].eq(~e.write | e.rmw),
                of_mode[i].eq(valid[i] & (e.write == wmode)),
                of_row[i].eq(valid[i] & (e.write == row_mode)),
                starving[i].eq(e.wait == cfg.starvation_cap),
            ]
        if frfcfs:
            considered, row_considered = of_mode, of_row
        else:
            considered = Cat(valid[0], Const(0, Q - 1)) if Q > 1 else valid[:1]
            row_considered = considered
        urgent = Signal(Q)      # starving requests: served first
        row_urgent = Signal(Q)
        m.d.comb += [urgent.eq(considered & starving if frfcfs else 0),
                     row_urgent.eq(row_considered & starving if frfcfs else 0)]

        # Read/write mode: batches of writes between the watermarks; the mode of the oldest
        # starving request goes first. A switch first drains the open-row hits of the old mode
        # (their rows were opened for them) while the new mode's rows are opened, so the ACTs
        # of the new mode overlap the turnaround.
        writes = Cat(*[e.write for e in q])
        nwrites = Signal(range(Q + 1))
        m.d.comb += nwrites.eq(sum(valid[i] & q[i].write for i in range(Q)))
        rd_avail = (valid & ~writes & ~blocked).any()
        wr_avail = (valid & writes & ~blocked).any()
        rd_hazard = (valid & ~writes & blocked).any()
        starve_idx, starve_any = _first(m, "starve", valid & starving)
        starve_write = Array(q)[starve_idx].write
        go_write = wr_avail & ((nwrites >= cfg.write_high) | ~rd_avail | rd_hazard
                               | (starve_any & starve_write))
        go_read = rd_avail & ((nwrites <= cfg.write_low) | ~wr_avail
                              | (starve_any & ~starve_write))
        mode_hits = (of_mode & ((hit & ~blocked) | Cat(*[e.cancel for e in q]))).any()
        leave_for = Signal(range(LEAVE_LIMIT + 1))
        with m.If(~leaving):
            with m.If(Mux(wmode, go_read, go_write)):
                m.d.sync += [leaving.eq(1), leave_for.eq(0)]
        with m.Else():
            m.d.sync += leave_for.eq(leave_for + 1)
            with m.If(~mode_hits | (leave_for == LEAVE_LIMIT)):
                m.d.sync += [wmode.eq(~wmode), leaving.eq(0)]

        # --- Write buffer ------------------------------------------------------------------
        wbuf_data = Array(Signal(nbits, name=f"wbuf_data{i}") for i in range(W))
        wbuf_strb = Array(Signal(cfg.access_bytes, name=f"wbuf_strb{i}") for i in range(W))
        wfree = Signal(W, init=(1 << W) - 1)
        wfree_idx, wfree_any = _first(m, "wfree", wfree)

        # --- Response paths ----------------------------------------------------------------
        m.submodules.tags = tags = fifo.SyncFIFO(width=1 + max(tag_bits(cfg), wslot_bits),
                                                 depth=TAG_FIFO_DEPTH)
        m.submodules.rfifo = rfifo = fifo.SyncFIFO(width=rresp_layout(cfg).size,
                                                   depth=RRESP_DEPTH)
        m.submodules.bfifo = bfifo = fifo.SyncFIFO(width=bresp_layout(cfg).size,
                                                   depth=BRESP_DEPTH)
        inflight = Signal(range(RRESP_DEPTH + 1))     # reads issued whose data is not back
        rd_room = (inflight + rfifo.level < RRESP_DEPTH) & tags.w_rdy
        b_room = bfifo.w_rdy
        m.d.comb += [
            self.rresp.payload.eq(rfifo.r_data), self.rresp.valid.eq(rfifo.r_rdy),
            rfifo.r_en.eq(self.rresp.ready),
            self.bresp.payload.eq(bfifo.r_data), self.bresp.valid.eq(bfifo.r_rdy),
            bfifo.r_en.eq(self.bresp.ready),
        ]

        # Banks a starving request waits to open its row in: nobody else may use them.
        reserved = Signal(B)
        for b in range(B):
            m.d.comb += reserved[b].eq(Cat(*[row_urgent[i] & ~hit[i] & (q[i].bank == b)
                                             for i in range(Q)]).any())

        # --- Column command choice ---------------------------------------------------------
        # While a refresh waits for its PREA, column commands to open rows go on as long as they
        # do not delay it: some open bank must still wait at least as long for its PRE as the
        # command would make its own bank wait (tRTP after RD, CWL + 2 + tWR after WR).
        ref_rd_ok = Cat(*[is_open[b] & (bank_pre[b].left >= t.rtp) for b in range(B)]).any()
        ref_wr_ok = Cat(*[is_open[b] & (bank_pre[b].left >= t.wr_to_pre)
                          for b in range(B)]).any()
        col_ok = Signal(Q)
        for i, e in enumerate(q):
            bg = bg_of(e.bank)
            rd_timing = rd_ok[e.bank] & wtr.ready & wtr_l_ok[bg] & rd_room
            wr_timing = wr_ok[e.bank] & rtw.ready & (e.posted | b_room)
            timing_ok = ccd.ready & ccd_l_ok[bg] & Mux(is_rd[i], rd_timing, wr_timing)
            ref_ok = ~ref_active | Mux(is_rd[i], ref_rd_ok, ref_wr_ok)
            m.d.comb += col_ok[i].eq(
                considered[i] & ((e.cancel & b_room) | (hit[i] & timing_ok & ~e.rmw_busy
                                             & ~blocked[i] & ref_ok
                                             & (urgent[i] | ~reserved.bit_select(e.bank, 1)))))
        col_pick = Signal(Q)
        m.d.comb += col_pick.eq(Mux((col_ok & urgent).any(), col_ok & urgent, col_ok))
        col_idx, col_any = _first(m, "col", col_pick)
        col_e = Signal(entry_layout)
        m.d.comb += col_e.eq(Array(q)[col_idx])
        col_cancel = col_any & col_e.cancel
        col_issue = col_any & ~col_e.cancel
        col_is_rd = Signal()
        m.d.comb += col_is_rd.eq(~col_e.write | col_e.rmw)
        issue_rd = col_issue & col_is_rd
        issue_wr = col_issue & ~col_is_rd
        removes = col_cancel | issue_wr | (issue_rd & ~col_e.write)
        col_bresp = col_cancel | (issue_wr & ~col_e.posted)     # answers a partial write
        m.d.comb += [
            dfi.col_valid.eq(col_issue),
            dfi.col_op.eq(Mux(col_is_rd, ColOp.RD, ColOp.WR)),
            dfi.col_bank.eq(col_e.bank),
            dfi.col_addr.eq(col_e.col),
        ]

        # --- Row command choice ------------------------------------------------------------
        # Rows hit by a request of the mode stay open (FR-FCFS), while leaving a mode also
        # those of the old one; a starving request may close one, unless a starving request
        # hits it.
        hit_any = Signal(B)
        protected = Signal(B)
        urgent_hit = Signal(B)
        for b in range(B):
            in_b = Cat(*[hit[i] & (q[i].bank == b) for i in range(Q)])
            m.d.comb += [
                hit_any[b].eq(in_b.any()),
                protected[b].eq((in_b & Mux(leaving, valid, of_row)).any()),
                urgent_hit[b].eq((in_b & urgent).any()),
            ]
        act_ready = rrd.ready & faw.ready & rfc.ready & ~ref_active
        need_act = Signal(Q)
        need_pre = Signal(Q)
        for i, e in enumerate(q):
            bank_open = is_open.bit_select(e.bank, 1)
            pre_allowed = (~protected.bit_select(e.bank, 1)
                           | (row_urgent[i] & ~urgent_hit.bit_select(e.bank, 1)) | (not frfcfs))
            mine = row_urgent[i] | ~reserved.bit_select(e.bank, 1)
            m.d.comb += [
                need_act[i].eq(row_considered[i] & ~e.cancel & ~bank_open & act_ok[e.bank]
                               & act_ready & rrd_l_ok[bg_of(e.bank)] & mine),
                need_pre[i].eq(row_considered[i] & ~e.cancel & bank_open & ~hit[i]
                               & pre_ok[e.bank] & pre_allowed & ~ref_active & mine
                               & ~(col_issue & (col_e.bank == e.bank))),
            ]
        row_need = Signal(Q)
        m.d.comb += row_need.eq(need_act | need_pre)
        row_pick = Signal(Q)
        m.d.comb += row_pick.eq(Mux((row_need & row_urgent).any(), row_need & row_urgent,
                                    row_need))
        row_idx, row_any = _first(m, "row", row_pick)
        row_e = Signal(entry_layout)
        m.d.comb += row_e.eq(Array(q)[row_idx])
        row_is_act = ~is_open.bit_select(row_e.bank, 1)

        # Closed page: precharge rows nobody queued hits.
        idle_pre = Signal(B)
        if cfg.page_policy == "closed":
            for b in range(B):
                m.d.comb += idle_pre[b].eq(is_open[b] & ~hit_any[b] & pre_ok[b] & ~ref_active
                                           & ~(col_issue & (col_e.bank == b)))
        idle_pre_idx, idle_pre_any = _first(m, "idle_pre", idle_pre)

        # Refresh engine.
        refi = Signal(range(t.refi))
        owed = Signal(range(10))
        tick = Signal()
        ref_issue = Signal()
        prea_issue = Signal()
        forced = Signal()
        if cfg.refresh:
            m.d.comb += tick.eq(refi == t.refi - 1)
            m.d.sync += refi.eq(Mux(tick, 0, refi + 1))
            m.d.sync += owed.eq(owed + tick - ref_issue)
            # Early refresh only after the queue has been empty a while, so that a brief drain
            # under load does not start a refresh that then blocks the next tRFC of traffic.
            idle_for = Signal(range(IDLE_REFRESH + 1))
            empty = (count == 0) & ~self.req.valid
            m.d.sync += idle_for.eq(Mux(empty, Mux(idle_for == IDLE_REFRESH, idle_for,
                                                   idle_for + 1), 0))
            m.d.comb += forced.eq(~ref_active & (owed >= cfg.refresh_postpone))
            start = forced | (~ref_active & (owed != 0) & (idle_for == IDLE_REFRESH))
            with m.If(start):
                m.d.sync += ref_active.eq(1)
            with m.If(ref_issue):
                m.d.sync += ref_active.eq(0)
            open_ready = Cat(*[~is_open[b] | pre_ok[b] for b in range(B)]).all()
            all_closed_ready = (is_open == 0) & Cat(*[c.ready for c in bank_act]).all()
            m.d.comb += [
                prea_issue.eq(ref_active & (is_open != 0) & open_ready),
                ref_issue.eq(ref_active & all_closed_ready & rfc.ready),
            ]

        act_issue = Signal()
        pre_issue = Signal()
        pre_bank = Signal(cfg.bank_bits)
        # Without refresh the refresh branch is left out: its constant-false condition would
        # give Verilator overlapping case items.
        row_first = m.If
        if cfg.refresh:
            with m.If(ref_active):
                with m.If(prea_issue):
                    m.d.comb += [dfi.row_valid.eq(1), dfi.row_op.eq(RowOp.PREA)]
                with m.Elif(ref_issue):
                    m.d.comb += [dfi.row_valid.eq(1), dfi.row_op.eq(RowOp.REF)]
            row_first = m.Elif
        with row_first(row_any):
            m.d.comb += [dfi.row_valid.eq(1), dfi.row_bank.eq(row_e.bank),
                         dfi.row_addr.eq(row_e.row)]
            with m.If(row_is_act):
                m.d.comb += [dfi.row_op.eq(RowOp.ACT), act_issue.eq(1)]
            with m.Else():
                m.d.comb += [dfi.row_op.eq(RowOp.PRE), pre_issue.eq(1),
                             pre_bank.eq(row_e.bank)]
        with m.Elif(idle_pre_any):
            m.d.comb += [dfi.row_valid.eq(1), dfi.row_op.eq(RowOp.PRE),
                         dfi.row_bank.eq(idle_pre_idx), pre_issue.eq(1),
                         pre_bank.eq(idle_pre_idx)]

        # Bank state and timing loads.
        act_bank = row_e.bank
        for b in range(B):
            act_b = act_issue & (act_bank == b)
            pre_b = (pre_issue & (pre_bank == b)) | prea_issue
            m.d.comb += [
                bank_act[b].act.eq(act_b), bank_act[b].pre.eq(pre_b),
                bank_rd[b].act.eq(act_b), bank_wr[b].act.eq(act_b), bank_pre[b].act.eq(act_b),
                bank_pre[b].rd.eq(issue_rd & (col_e.bank == b)),
                bank_pre[b].wr.eq(issue_wr & (col_e.bank == b)),
            ]
            with m.If(act_b):
                m.d.sync += [is_open[b].eq(1), open_row[b].eq(row_e.row)]
            with m.If(pre_b):
                m.d.sync += is_open[b].eq(0)
        for g in range(cfg.bank_groups):
            m.d.comb += [
                bg_rrd[g].act.eq(act_issue & (bg_of(act_bank) == g)),
                bg_ccd[g].col.eq(col_issue & (bg_of(col_e.bank) == g)),
                bg_wtr[g].wr.eq(issue_wr & (bg_of(col_e.bank) == g)),
            ]
        m.d.comb += [
            rrd.act.eq(act_issue), faw.act.eq(act_issue), ccd.col.eq(col_issue),
            wtr.wr.eq(issue_wr), rtw.rd.eq(issue_rd), rfc.ref.eq(ref_issue),
        ]

        # --- Write data path: codewords CWL and CWL + 1 cycles after WR ---------------------
        pipe = [Signal(1 + wslot_bits, name=f"wpipe{i}") for i in range(t.cwl + 1)]
        m.d.sync += pipe[0].eq(Cat(issue_wr, col_e.wslot))
        for i in range(1, len(pipe)):
            m.d.sync += pipe[i].eq(pipe[i - 1])
        beat0, beat1 = pipe[t.cwl - 1], pipe[t.cwl]
        half = cfg.words // 2
        with m.If(beat0[0] | beat1[0]):
            first = beat0[0]
            slot = Mux(first, beat0[1:], beat1[1:])
            words = Signal(nbits)
            m.d.comb += words.eq(wbuf_data[slot])
            m.d.comb += dfi.wrdata_valid.eq(1)
            cws = []
            for k in range(half):
                lo = Mux(first, words.word_select(k, WORD_BITS),
                         words.word_select(half + k, WORD_BITS))
                cws.append(encode(lo))
            m.d.comb += dfi.wrdata.eq(Cat(*cws))
        freed = Signal(W)
        for s in range(W):
            m.d.comb += freed[s].eq(beat1[0] & (beat1[1:] == s))

        # --- Read data path: decode, then respond or merge ----------------------------------
        rd_second = Signal()
        first_half = Signal(nbits // 2)
        first_single = Signal(range(half + 1))
        first_double = Signal()
        dec = [decode(m, dfi.rddata.word_select(k, WORD_BITS + CHECK_BITS), f"dec{k}")
               for k in range(half)]
        beat_data = Cat(*[d for d, _, _ in dec])
        beat_single = sum(s for _, s, _ in dec)
        beat_double = Cat(*[d for _, _, d in dec]).any()
        ret_valid = Signal()
        ret_data = Signal(nbits)
        ret_double = Signal()
        ret_tag = Signal(tags.width)
        with m.If(dfi.rddata_valid):
            m.d.sync += rd_second.eq(~rd_second)
            with m.If(~rd_second):
                m.d.sync += [first_half.eq(beat_data), first_single.eq(beat_single),
                             first_double.eq(beat_double)]
        m.d.comb += tags.r_en.eq(dfi.rddata_valid & rd_second)
        m.d.sync += [
            ret_valid.eq(dfi.rddata_valid & rd_second),
            ret_data.eq(Cat(first_half, beat_data)),
            ret_double.eq(first_double | beat_double),
            ret_tag.eq(tags.r_data),
        ]
        sbe_add = Mux(dfi.rddata_valid, beat_single, 0)
        dbe_add = Mux(dfi.rddata_valid & rd_second, first_double | beat_double, 0)
        ret_rmw = ret_tag[0]
        ret_slot = ret_tag[1:1 + wslot_bits]
        merge = ret_valid & ret_rmw
        m.d.comb += [
            tags.w_en.eq(issue_rd),
            tags.w_data.eq(Mux(col_e.write, Cat(1, col_e.wslot), Cat(0, col_e.tag))),
            rfifo.w_en.eq(ret_valid & ~ret_rmw),
            rfifo.w_data.eq(Cat(ret_tag[1:1 + tag_bits(cfg)], ret_data, ret_double)),
        ]
        m.d.sync += inflight.eq(inflight + issue_rd - ret_valid)

        # --- Queue update: insert at the tail, remove the served entry, merge RMW data ------
        take = self.req.valid & self.req.ready
        new = Signal(entry_layout)
        r = self.req.payload
        post = r.write & r.strb.all()
        m.d.comb += [
            self.req.ready.eq((count < Q) & (~r.write | wfree_any)
                              & (~post | (b_room & ~col_bresp))),
            new.write.eq(r.write), new.rmw.eq(r.write & ~r.strb.all()), new.posted.eq(post),
            new.bank.eq(r.bank), new.row.eq(r.row), new.col.eq(r.col), new.tag.eq(r.tag),
            new.wslot.eq(wfree_idx),
        ]
        updated = []
        for i, e in enumerate(q):
            u = Signal(entry_layout, name=f"q{i}_next")
            mine = merge & e.write & e.rmw_busy & (e.wslot == ret_slot)
            m.d.comb += [
                u.eq(e),
                u.wait.eq(Mux(e.wait == cfg.starvation_cap, e.wait, e.wait + 1)),
            ]
            with m.If(issue_rd & (col_idx == i) & e.write):
                m.d.comb += u.rmw_busy.eq(1)
            with m.If(mine):
                m.d.comb += [u.rmw.eq(0), u.rmw_busy.eq(0), u.cancel.eq(ret_double)]
            updated.append(u)
        removed = Mux(removes, 1, 0)
        for i in range(Q):
            shift = removes & (col_idx <= i)
            src = Mux(shift, updated[i + 1], updated[i]) if i + 1 < Q else updated[i]
            with m.If(take & (count - removed == i)):
                m.d.sync += q[i].eq(new)
            with m.Else():
                m.d.sync += q[i].eq(src)
        m.d.sync += count.eq(count + take - removed)

        with m.If(take & r.write):
            m.d.sync += [wbuf_data[wfree_idx].eq(r.data), wbuf_strb[wfree_idx].eq(r.strb)]
        with m.If(merge):
            old = Signal(nbits)
            strb = Signal(cfg.access_bytes)
            m.d.comb += [old.eq(wbuf_data[ret_slot]), strb.eq(wbuf_strb[ret_slot])]
            merged = Cat(*[Mux(strb[k], old.word_select(k, 8), ret_data.word_select(k, 8))
                           for k in range(cfg.access_bytes)])
            m.d.sync += [wbuf_data[ret_slot].eq(merged), wbuf_strb[ret_slot].eq(-1)]
        alloc = Mux(take & r.write, 1 << wfree_idx, 0)
        cancel_free = Mux(col_cancel, 1 << col_e.wslot, 0)
        m.d.sync += wfree.eq((wfree | freed | cancel_free) & ~alloc)

        m.d.comb += [
            bfifo.w_en.eq(col_bresp | (take & post)),
            bfifo.w_data.eq(Mux(col_bresp, Cat(col_e.tag, col_cancel), Cat(r.tag, 0))),
        ]

        # --- Status and counters -----------------------------------------------------------
        m.d.comb += self.idle.eq((count == 0) & (inflight == 0) & ~rfifo.r_rdy & ~bfifo.r_rdy)
        events = {
            "data_busy": dfi.wrdata_valid | dfi.rddata_valid,
            "reads": issue_rd,
            "writes": issue_wr,
            "acts": act_issue,
            "pres": pre_issue | prea_issue,
            "refs": ref_issue,
            "refresh_busy": ref_active,
            "sbe": sbe_add,
            "dbe": dbe_add,
            "rmw": take & new.rmw,
            "queue_full": self.req.valid & ~self.req.ready,
            "forced_refs": forced,
        }
        for name, inc in events.items():
            counter = getattr(self, name)
            m.d.sync += counter.eq(counter + inc)
        return m
