"""The scheduler of one HBM pseudo-channel: each cycle one column command and one row command
offered to the channel's command buses, chosen among the requests of the command queue
(``command_queue.py``), from the bank states and timing the bank machines (``bank.py``) report.

    entries, valid, blocked ─┬─► ModeControl ── mode (reads / writes, and leaving) ─┐
    bank status ─────────────┤                                                      │
                             ├─► ColumnChoice ◄─────────────────────────────────────┤─► RD(A), WR(A)
                             └─► RowChoice ◄── refresh commands ◄── Refresher ──────┘─► ACT, PRE

Policy (docs/hbm.md, "Scheduler policy"):
  * Column command: the oldest request of the mode whose row is open and whose every timing
    constraint is met (FR-FCFS: a row hit goes ahead of older misses); starving ones first.
    With the closed-page policy the last queued access to a row carries auto-precharge; an RDA
    waits until its bank's write recovery has at most tRTP left.
  * Read/write mode: batches of writes between the watermarks; the mode of the oldest starving
    request wins. A switch is made in two steps: first the row commands turn to the next mode
    while the old mode's requests whose rows are open still get their column commands (at most
    ``LEAVE_LIMIT`` cycles), then the column commands follow.
  * Row command: the refresher's command first; else ACT for the oldest request of the row
    commands' mode whose bank is closed; PRE for the oldest whose bank is open on another row,
    unless a request of that mode (while switching: of either) still hits the row; with the
    closed-page policy, PRE of any open row no queued request hits.
  * Starvation cap: a request that has waited ``starvation_cap`` cycles goes first in both
    choices, and nobody else may use its bank until its row is open.
  * FCFS (for comparison): only the oldest request is considered, reads and writes alike.

Commands are offers: the channel's arbiter grants each bus to one pseudo-channel per cycle, and
only a granted command takes effect (the queue, the bank machines and the data paths watch the
granted ones); an offer not granted is made afresh the next cycle.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..lib.bits import first_set
from .interface import (
    BankStatusSignature,
    RowOp,
    col_command_layout,
    entry_layout,
    refresh_command_layout,
    row_command_layout,
)

__all__ = ["Scheduler", "ModeControl", "ColumnChoice", "RowChoice", "LEAVE_LIMIT"]

LEAVE_LIMIT = 32        # cycles a mode switch waits for the old mode's row hits at most


def _group(cfg, bank):
    return bank >> cfg.ba_bits if cfg.bg_bits else Const(0, 1)


def _entries(cfg):
    return data.ArrayLayout(entry_layout(cfg), cfg.queue_depth)


class ModeControl(wiring.Component):
    """Read/write mode of the column commands, and the switch between modes.

    Read mode until ``write_high`` writes wait (or no read can go, or a read waits on an older
    write to its address); write mode until ``write_low`` remain and a read waits (or no write
    can go); the mode of the oldest starving request wins. A switch first raises ``leaving``
    (the row commands serve the next mode) and flips ``write_mode`` when the old mode has no
    open-row hit left (``mode_hits`` low) or after ``LEAVE_LIMIT`` cycles.

    Members
    -------
    valid, writes, blocked, starving : In(queue_depth)
        Per queue slot: holds a request; it is a write; it is blocked by a hazard; it starves.
    mode_hits : In(1)
        Some request of the current mode can still use an open row (or be dropped).
    write_mode : Out(1)
        Column commands serve writes (else reads); a register.
    leaving : Out(1)
        A switch is under way: row commands already serve the other mode; a register.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        Q = cfg.queue_depth
        super().__init__({"valid": In(Q), "writes": In(Q), "blocked": In(Q),
                          "starving": In(Q), "mode_hits": In(1),
                          "write_mode": Out(1), "leaving": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        valid, writes, blocked = self.valid, self.writes, self.blocked
        nwrites = Signal(range(cfg.queue_depth + 1))
        m.d.comb += nwrites.eq(sum(valid[i] & writes[i] for i in range(cfg.queue_depth)))
        rd_avail = (valid & ~writes & ~blocked).any()
        wr_avail = (valid & writes & ~blocked).any()
        rd_hazard = (valid & ~writes & blocked).any()
        starve_idx, starve_any = first_set(m, valid & self.starving, name="starve")
        starve_write = writes.bit_select(starve_idx, 1)
        go_write = wr_avail & ((nwrites >= cfg.write_high) | ~rd_avail | rd_hazard
                               | (starve_any & starve_write))
        go_read = rd_avail & ((nwrites <= cfg.write_low) | ~wr_avail
                              | (starve_any & ~starve_write))
        leave_for = Signal(range(LEAVE_LIMIT + 1))
        with m.If(~self.leaving):
            with m.If(Mux(self.write_mode, go_read, go_write)):
                m.d.sync += [self.leaving.eq(1), leave_for.eq(0)]
        with m.Else():
            m.d.sync += leave_for.eq(leave_for + 1)
            with m.If(~self.mode_hits | (leave_for == LEAVE_LIMIT)):
                m.d.sync += [self.write_mode.eq(~self.write_mode), self.leaving.eq(0)]
        return m


class ColumnChoice(wiring.Component):
    """Chooses the column command: the oldest ready row hit among the considered requests,
    starving ones first; or a dropped write (its merge read met an uncorrectable word), which
    leaves with an error response and no command.

    Combinational. A RD issues only when its data has room in the response path (``rd_room``),
    a WR of a partial write only when its completion has room (``b_room``). While an all-bank
    refresh waits for its PREA, a command goes only if it does not delay it: some open bank
    must still wait at least as long for its PRE as the command would make its own bank wait.
    With the closed-page policy, a command carries auto-precharge (RDA, WRA) when no other
    queued request hits its row and its request leaves the queue with it (not a partial
    write's merge read); such a read waits until its bank's last WR has at most tRTP of its
    write recovery left (``rda_ok``), so that its precharge does not cut it short (issue 34).

    Members
    -------
    entries, considered, hit, blocked, urgent, is_rd : In
        The queue's entries and per-slot views (see :class:`Scheduler`).
    reserved, block, row_shared : In(banks)
        Banks a starving request waits to open its row in (only it may use them); banks the
        refresher holds; banks whose open row more than one queued request hits.
    status : In(BankStatusSignature)
    rd_room, b_room, refresh_active : In(1)
    grant : In(1)
        The offered command has the column bus this cycle.
    col : Out(col_command_layout)
        The command offered (``valid`` low: none).
    index : Out(range(queue_depth)), entry : Out(entry_layout)
        The slot served and its entry.
    cancel, remove, complete : Out(1)
        The slot is a dropped write; it leaves the queue (a granted command, or a drop); a
        completion goes out (a partial write's granted WR, or a drop).
    """

    def __init__(self, cfg):
        self._cfg = cfg
        Q, B = cfg.queue_depth, cfg.banks
        super().__init__({
            "entries": In(_entries(cfg)), "considered": In(Q), "hit": In(Q),
            "blocked": In(Q), "urgent": In(Q), "is_rd": In(Q), "reserved": In(B),
            "block": In(B), "row_shared": In(B), "status": In(BankStatusSignature(cfg)),
            "rd_room": In(1), "b_room": In(1), "refresh_active": In(1), "grant": In(1),
            "col": Out(col_command_layout(cfg)),
            "index": Out(range(max(2, Q))), "entry": Out(entry_layout(cfg)),
            "cancel": Out(1), "remove": Out(1), "complete": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        ready = self._ready(m)
        pick = Signal(cfg.queue_depth)
        m.d.comb += pick.eq(Mux((ready & self.urgent).any(), ready & self.urgent, ready))
        index, served = first_set(m, pick, name="col")
        e = self.entry
        m.d.comb += [self.index.eq(index), e.eq(self.entries[index])]
        is_rd = Signal()
        m.d.comb += is_rd.eq(~e.write | e.rmw)
        leaves = ~is_rd | ~e.write          # a read's RD or a write's WR: the request is done
        granted = self.col.valid & self.grant
        auto = (Const(cfg.page_policy == "closed") & leaves
                & ~self.row_shared.bit_select(e.bank, 1))
        m.d.comb += [
            self.cancel.eq(served & e.cancel),
            self.remove.eq(self.cancel | (granted & leaves)),
            self.complete.eq(self.cancel | (granted & ~is_rd & ~e.posted)),
            self.col.valid.eq(served & ~e.cancel),
            self.col.op.eq(Cat(~is_rd, auto)),
            self.col.bank.eq(e.bank),
            self.col.col.eq(e.col),
        ]
        return m

    def _ready(self, m):
        """Per slot: its column command (or drop) may go this cycle."""
        cfg, st, t = self._cfg, self.status, self._cfg.timing
        banks = range(cfg.banks)
        ref_rd_ok = Cat(*[st.open[b] & (st.pre_left[b] >= t.rtp) for b in banks]).any()
        ref_wr_ok = Cat(*[st.open[b] & (st.pre_left[b] >= t.wr_to_pre) for b in banks]).any()
        closed_page = Const(cfg.page_policy == "closed")
        ready = Signal(cfg.queue_depth)
        for i in range(cfg.queue_depth):
            e, is_rd = self.entries[i], self.is_rd[i]
            bg = _group(cfg, e.bank)
            rda_held = (closed_page & ~e.write & ~self.row_shared.bit_select(e.bank, 1)
                        & ~st.rda_ok.bit_select(e.bank, 1))
            rd_timing = (st.rd_ok.bit_select(e.bank, 1) & st.wtr_s_ok
                         & st.wtr_l_ok.bit_select(bg, 1) & self.rd_room & ~rda_held)
            wr_timing = st.wr_ok.bit_select(e.bank, 1) & st.rtw_ok & (e.posted | self.b_room)
            timing_ok = (st.ccd_s_ok & st.ccd_l_ok.bit_select(bg, 1)
                         & Mux(is_rd, rd_timing, wr_timing))
            ref_ok = ~self.refresh_active | Mux(is_rd, ref_rd_ok, ref_wr_ok)
            mine = ((self.urgent[i] | ~self.reserved.bit_select(e.bank, 1))
                    & ~self.block.bit_select(e.bank, 1))
            m.d.comb += ready[i].eq(
                self.considered[i] & ((e.cancel & self.b_room)
                                      | (self.hit[i] & timing_ok & ~e.rmw_busy
                                         & ~self.blocked[i] & ref_ok & mine)))
        return ready


class RowChoice(wiring.Component):
    """Chooses the row command: the refresher's first, else an ACT or PRE for the oldest
    considered request that needs one (starving ones first), else, with the closed-page policy,
    a PRE of an open row no queued request hits.

    Combinational. An ACT needs tRP, tRC, tRRD_S/L, tFAW and tRFC met; a PRE needs tRAS, tRTP
    and WR to PRE met, no request of the mode (``protect``) still hitting the row unless a
    starving request needs the bank (and no starving request hits it), and no column command
    offered to the bank in the same cycle. Banks the refresher holds (``block``) get neither.

    Members
    -------
    entries, considered, hit, urgent, row_urgent : In
        The queue's entries and per-slot views (see :class:`Scheduler`).
    reserved, block, hit_any, protected, urgent_hit : In(banks)
        Banks a starving request waits to open its row in; banks the refresher holds; banks
        whose open row a queued request hits, a request of the mode (``protect``) hits, a
        starving request hits.
    status : In(BankStatusSignature)
    col : In(col_command_layout)
        This cycle's column command offer.
    refresh : In(refresh_command_layout)
        The refresher's command.
    row : Out(row_command_layout)
        The command offered.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        Q, B = cfg.queue_depth, cfg.banks
        super().__init__({
            "entries": In(_entries(cfg)), "considered": In(Q), "hit": In(Q), "urgent": In(Q),
            "row_urgent": In(Q), "reserved": In(B), "block": In(B), "hit_any": In(B),
            "protected": In(B), "urgent_hit": In(B),
            "status": In(BankStatusSignature(cfg)), "col": In(col_command_layout(cfg)),
            "refresh": In(refresh_command_layout(cfg)),
            "row": Out(row_command_layout(cfg)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, st, row = self._cfg, self.status, self.row
        need = self._need(m)
        pick = Signal(cfg.queue_depth)
        m.d.comb += pick.eq(Mux((need & self.row_urgent).any(), need & self.row_urgent, need))
        index, found = first_set(m, pick, name="row")
        e = Signal(entry_layout(cfg))
        m.d.comb += e.eq(self.entries[index])

        closed_page = cfg.page_policy == "closed"
        if closed_page:     # precharge rows nobody queued hits
            idle_pre = Signal(cfg.banks)
            m.d.comb += idle_pre.eq(st.open & ~self.hit_any & st.pre_ok & ~self.block
                                    & ~Mux(self.col.valid, 1 << self.col.bank, 0))
            idle_index, idle_found = first_set(m, idle_pre, name="idle_pre")

        with m.If(self.refresh.valid):
            m.d.comb += [row.valid.eq(1), row.op.eq(self.refresh.op),
                         row.bank.eq(self.refresh.bank)]
        with m.Elif(found):
            m.d.comb += [row.valid.eq(1), row.bank.eq(e.bank), row.row.eq(e.row),
                         row.op.eq(Mux(st.open.bit_select(e.bank, 1), RowOp.PRE, RowOp.ACT))]
        if closed_page:
            with m.Elif(idle_found):
                m.d.comb += [row.valid.eq(1), row.op.eq(RowOp.PRE), row.bank.eq(idle_index)]
        return m

    def _need(self, m):
        """Per slot: the request needs an ACT (its bank closed) or a PRE (open on another
        row) and the command may go this cycle."""
        cfg, st = self._cfg, self.status
        frfcfs = cfg.scheduler == "frfcfs"
        act_ready = st.rrd_s_ok & st.faw_ok & st.rfc_act_ok
        need = Signal(cfg.queue_depth)
        for i in range(cfg.queue_depth):
            e = self.entries[i]
            bank_open = st.open.bit_select(e.bank, 1)
            pre_allowed = (~self.protected.bit_select(e.bank, 1)
                           | (self.row_urgent[i] & ~self.urgent_hit.bit_select(e.bank, 1))
                           | (not frfcfs))
            mine = ((self.row_urgent[i] | ~self.reserved.bit_select(e.bank, 1))
                    & ~self.block.bit_select(e.bank, 1))
            act = (~bank_open & st.act_ok.bit_select(e.bank, 1) & act_ready
                   & st.rrd_l_ok.bit_select(_group(cfg, e.bank), 1))
            pre = (bank_open & ~self.hit[i] & st.pre_ok.bit_select(e.bank, 1) & pre_allowed
                   & ~(self.col.valid & (self.col.bank == e.bank)))
            m.d.comb += need[i].eq(self.considered[i] & ~e.cancel & mine & (act | pre))
        return need


class Scheduler(wiring.Component):
    """The pseudo-channel's scheduler: per-slot and per-bank views of the queue, and the mode,
    column and row choices built on them.

    Combinational from the queue, the bank status and the refresher, except for the mode
    (a register in :class:`ModeControl`): a command is chosen in the cycle its request is
    seen and offered in that cycle, one row and one column command per cycle.

    Per-slot views: ``hit`` (valid, bank open on the request's row), ``is_rd`` (needs a RD: a
    read, or a partial write before its merge), ``considered`` (column commands: the mode's
    requests, under FCFS only the oldest), ``row_considered`` (row commands: the row mode's
    requests), ``urgent`` / ``row_urgent`` (starving among them; none under FCFS). Per bank:
    ``hit_any`` (some request hits the open row), ``row_shared`` (more than one does),
    ``protected`` (a request whose hit keeps the row open does: the row mode's, all while
    leaving a mode), ``urgent_hit``, ``reserved`` (a starving request waits to open its row).

    Members
    -------
    entries, valid, blocked : In
        From the command queue.
    status : In(BankStatusSignature)
    refresh : In(refresh_command_layout), block : In(banks), refresh_active : In(1)
        From the refresher.
    rd_room, b_room : In(1)
        Room for a read's data, for a write completion.
    col_grant : In(1)
        The column command offer has the bus.
    row : Out(row_command_layout), col : Out(col_command_layout)
        This cycle's command offers.
    index, entry, cancel, remove, complete : Out
        The slot the column choice serves (see :class:`ColumnChoice`).
    """

    def __init__(self, cfg):
        self._cfg = cfg
        Q = cfg.queue_depth
        super().__init__({
            "entries": In(_entries(cfg)), "valid": In(Q), "blocked": In(Q),
            "status": In(BankStatusSignature(cfg)),
            "refresh": In(refresh_command_layout(cfg)), "block": In(cfg.banks),
            "refresh_active": In(1), "rd_room": In(1), "b_room": In(1), "col_grant": In(1),
            "row": Out(row_command_layout(cfg)), "col": Out(col_command_layout(cfg)),
            "index": Out(range(max(2, Q))), "entry": Out(entry_layout(cfg)),
            "cancel": Out(1), "remove": Out(1), "complete": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        m.submodules.mode = mode = ModeControl(cfg)
        m.submodules.col = col = ColumnChoice(cfg)
        m.submodules.row = row = RowChoice(cfg)
        v = self._views(m, mode)
        b = self._bank_views(m, v, mode)
        wiring.connect(m, wiring.flipped(self.status), col.status, row.status)
        m.d.comb += [
            mode.valid.eq(self.valid), mode.blocked.eq(self.blocked),
            mode.writes.eq(v["writes"]), mode.starving.eq(v["starving"]),
            mode.mode_hits.eq((v["of_mode"] & ((v["hit"] & ~self.blocked)
                                               | v["cancels"])).any()),
            col.entries.eq(self.entries), col.considered.eq(v["considered"]),
            col.hit.eq(v["hit"]), col.blocked.eq(self.blocked), col.urgent.eq(v["urgent"]),
            col.is_rd.eq(v["is_rd"]), col.reserved.eq(b["reserved"]), col.block.eq(self.block),
            col.row_shared.eq(b["row_shared"]), col.rd_room.eq(self.rd_room),
            col.b_room.eq(self.b_room), col.refresh_active.eq(self.refresh_active),
            col.grant.eq(self.col_grant),
            row.entries.eq(self.entries), row.considered.eq(v["row_considered"]),
            row.hit.eq(v["hit"]), row.urgent.eq(v["urgent"]),
            row.row_urgent.eq(v["row_urgent"]), row.reserved.eq(b["reserved"]),
            row.block.eq(self.block), row.hit_any.eq(b["hit_any"]),
            row.protected.eq(b["protected"]), row.urgent_hit.eq(b["urgent_hit"]),
            row.col.eq(col.col), row.refresh.eq(self.refresh),
            self.row.eq(row.row), self.col.eq(col.col), self.index.eq(col.index),
            self.entry.eq(col.entry), self.cancel.eq(col.cancel), self.remove.eq(col.remove),
            self.complete.eq(col.complete),
        ]
        return m

    def _views(self, m, mode):
        """The per-slot views (``hit``, ``is_rd``, ...) as named signals."""
        cfg, st = self._cfg, self.status
        Q, valid = cfg.queue_depth, self.valid
        frfcfs = cfg.scheduler == "frfcfs"
        v = {n: Signal(Q, name=n) for n in ("hit", "writes", "cancels", "is_rd", "of_mode",
                                            "of_row", "starving")}
        row_mode = mode.write_mode ^ mode.leaving
        for i in range(Q):
            e = self.entries[i]
            m.d.comb += [
                v["hit"][i].eq(valid[i] & st.open.bit_select(e.bank, 1)
                               & (st.open_row[e.bank] == e.row)),
                v["writes"][i].eq(e.write), v["cancels"][i].eq(e.cancel),
                v["is_rd"][i].eq(~e.write | e.rmw),
                v["of_mode"][i].eq(valid[i] & (e.write == mode.write_mode)),
                v["of_row"][i].eq(valid[i] & (e.write == row_mode)),
                v["starving"][i].eq(e.wait == cfg.starvation_cap),
            ]
        if frfcfs:
            v["considered"], v["row_considered"] = v["of_mode"], v["of_row"]
        else:
            v["considered"] = v["row_considered"] = (Cat(valid[0], Const(0, Q - 1)) if Q > 1
                                                     else valid[:1])
        v["urgent"], v["row_urgent"] = Signal(Q, name="urgent"), Signal(Q, name="row_urgent")
        m.d.comb += [v["urgent"].eq(v["considered"] & v["starving"] if frfcfs else 0),
                     v["row_urgent"].eq(v["row_considered"] & v["starving"] if frfcfs else 0)]
        return v

    def _bank_views(self, m, v, mode):
        """The per-bank views (``hit_any``, ``row_shared``, ...) as named signals."""
        cfg = self._cfg
        Q = cfg.queue_depth
        protect = Mux(mode.leaving, self.valid, v["of_row"])
        b = {n: Signal(cfg.banks, name=n) for n in ("hit_any", "row_shared", "protected",
                                                    "urgent_hit", "reserved")}
        for k in range(cfg.banks):
            at = Cat(*[self.entries[i].bank == k for i in range(Q)])
            hits = Signal(Q, name=f"hits_bank{k}")
            m.d.comb += [
                hits.eq(v["hit"] & at),
                b["hit_any"][k].eq(hits.any()),
                b["row_shared"][k].eq((hits & (hits - 1)) != 0),
                b["protected"][k].eq((hits & protect).any()),
                b["urgent_hit"][k].eq((hits & v["urgent"]).any()),
                b["reserved"][k].eq((v["row_urgent"] & ~v["hit"] & at).any()),
            ]
        return b
