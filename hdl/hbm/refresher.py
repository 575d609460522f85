"""The refresher of one HBM pseudo-channel: decides when refresh happens and asks the row
command bus for it, all-bank (PREA, REF) or per bank (PRE, REFSB).

It sits beside the scheduler in a :class:`~hdl.hbm.channel.PseudoChannel` (LiteDRAM's
``Refresher``).

All-bank refresh: one REF falls due every tREFI. Owed refreshes are done when the command
queue has been empty for ``IDLE_REFRESH`` cycles (a short drain under load does not count), or
forced once ``refresh_postpone`` are owed (JEDEC allows 8 postponed). While a refresh is under
way (``active``) the scheduler issues no ACT and no PRE of its own; column commands to open rows
go on while they do not delay the PREA (the scheduler's column choice checks that).

Per-bank refresh (``per_bank_refresh``): one REFSB falls due every tREFI / banks, and every
bank is refreshed once per round (a round: each bank once). An owed REFSB goes to a bank of the
round that no queued request wants, as soon as its timing allows (a closed bank; an open one is
precharged first), so refresh hides behind traffic to the other banks. Once
``refresh_postpone`` are owed, the round's first remaining bank is forced: no queued request may
use it until it is precharged and refreshed.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..lib.bits import first_set
from .interface import BankStatusSignature, RowOp, refresh_command_layout, row_command_layout

__all__ = ["Refresher", "IDLE_REFRESH"]

IDLE_REFRESH = 16       # empty-queue cycles before an owed all-bank refresh is done early


class Refresher(wiring.Component):
    """Refresh timer, owed count and the refresh commands.

    Latency: all-bank: ``active`` rises the cycle after a refresh is started (forced, or early
    after the queue was idle); PREA is asked for as soon as every open bank allows its PRE, REF
    once every bank is closed with tRP and tRFC met; ``active`` falls the cycle after the REF
    issues. Per bank: a REFSB (or the PRE before it) is asked for in the cycle its bank and
    timing allow it. Throughput: a refresh command per cycle at most. Backpressure: a command
    asked for and not issued (the row bus went to the other pseudo-channel) is asked for again.

    Members
    -------
    idle : In(1)
        No request queued or offered this cycle (all-bank early refresh).
    wanted : In(banks)
        Banks some queued request is for (per-bank refresh avoids them).
    status : In(BankStatusSignature)
    row : In(row_command_layout)
        The row command issued this cycle (a REF or REFSB pays an owed refresh).
    cmd : Out(refresh_command_layout)
        The refresh command wanted now (PREA, REF, PRE or REFSB); the row choice gives it
        priority.
    active : Out(1)
        An all-bank refresh is under way (a register).
    block : Out(banks)
        Banks the queue's requests may not use now (every bank while an all-bank refresh is
        under way; the forced bank of a per-bank refresh).
    forced : Out(1)
        All-bank: a refresh is forced this cycle (one cycle per refresh); per bank: a forced
        REFSB issues.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        B = cfg.banks
        super().__init__({
            "idle": In(1), "wanted": In(B), "status": In(BankStatusSignature(cfg)),
            "row": In(row_command_layout(cfg)),
            "cmd": Out(refresh_command_layout(cfg)), "active": Out(1), "block": Out(B),
            "forced": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        if self._cfg.per_bank_refresh:
            self._per_bank(m)
        else:
            self._all_bank(m)
        return m

    def _owed(self, m, interval, paid):
        """Refreshes owed: one more every ``interval`` cycles, one less per ``paid``."""
        timer = Signal(range(interval))
        owed = Signal(range(16))
        tick = Signal()
        m.d.comb += tick.eq(timer == interval - 1)
        m.d.sync += [timer.eq(Mux(tick, 0, timer + 1)), owed.eq(owed + tick - paid)]
        return owed

    def _all_bank(self, m):
        cfg, st, cmd = self._cfg, self.status, self.cmd
        issued = self.row.valid & (self.row.op == RowOp.REF)
        owed = self._owed(m, cfg.timing.refi, issued)
        idle_for = Signal(range(IDLE_REFRESH + 1))
        m.d.sync += idle_for.eq(Mux(self.idle, Mux(idle_for == IDLE_REFRESH, idle_for,
                                                   idle_for + 1), 0))
        m.d.comb += self.forced.eq(~self.active & (owed >= cfg.refresh_postpone))
        with m.If(self.forced | (~self.active & (owed != 0) & (idle_for == IDLE_REFRESH))):
            m.d.sync += self.active.eq(1)
        with m.If(issued):
            m.d.sync += self.active.eq(0)
        open_ready = Cat(*[~st.open[b] | st.pre_ok[b] for b in range(cfg.banks)]).all()
        prea = self.active & (st.open != 0) & open_ready
        ref = self.active & (st.open == 0) & st.ref_ok.all() & st.rfc_ok
        m.d.comb += [
            cmd.valid.eq(prea | ref), cmd.op.eq(Mux(prea, RowOp.PREA, RowOp.REF)),
            self.block.eq(Mux(self.active, (1 << cfg.banks) - 1, 0)),
        ]

    def _per_bank(self, m):
        cfg, st, cmd = self._cfg, self.status, self.cmd
        B = cfg.banks
        issued = self.row.valid & (self.row.op == RowOp.REFSB)
        owed = self._owed(m, cfg.refi_sb, issued)
        done = Signal(B)                # banks refreshed in this round
        now_done = done | Mux(issued, 1 << self.row.bank, 0)
        m.d.sync += done.eq(Mux(now_done == (1 << B) - 1, 0, now_done))

        def group(b):
            return b >> cfg.ba_bits if cfg.bg_bits else 0

        ready = Signal(B)               # a REFSB to the bank may issue now
        for b in range(B):
            m.d.comb += ready[b].eq(~st.open[b] & st.ref_ok[b] & st.refsb_ok & st.rfc_ok
                                    & st.refsb_l_ok.bit_select(group(b), 1))
        forcing = owed >= cfg.refresh_postpone
        target, _ = first_set(m, ~done, name="refsb_target")
        free = ~done & ~self.wanted
        ref_idx, ref_any = first_set(m, free & ready, name="refsb_free")
        pre_idx, pre_any = first_set(m, free & st.open & st.pre_ok, name="refsb_pre")
        with m.If(forcing):
            m.d.comb += [cmd.bank.eq(target), self.block.eq(1 << target)]
            with m.If(st.open.bit_select(target, 1)):
                m.d.comb += [cmd.valid.eq(st.pre_ok.bit_select(target, 1)), cmd.op.eq(RowOp.PRE)]
            with m.Else():
                m.d.comb += [cmd.valid.eq(ready.bit_select(target, 1)), cmd.op.eq(RowOp.REFSB)]
        with m.Elif((owed != 0) & ref_any):
            m.d.comb += [cmd.valid.eq(1), cmd.op.eq(RowOp.REFSB), cmd.bank.eq(ref_idx)]
        with m.Elif((owed != 0) & pre_any):
            m.d.comb += [cmd.valid.eq(1), cmd.op.eq(RowOp.PRE), cmd.bank.eq(pre_idx)]
        m.d.comb += self.forced.eq(forcing & issued)
