"""The refresher of one HBM pseudo-channel: decides when an all-bank refresh happens and asks
the row command bus for its PREA and REF.

It sits beside the scheduler in a :class:`~hdl.hbm.channel.PseudoChannel` (LiteDRAM's
``Refresher``). One refresh falls due every tREFI. Owed refreshes are done when the command
queue has been empty for ``IDLE_REFRESH`` cycles (a short drain under load does not count), or
forced once ``refresh_postpone`` are owed (JEDEC allows 8 postponed). While a refresh is under
way (``active``) the scheduler issues no ACT and no PRE of its own; column commands to open rows
go on while they do not delay the PREA (the scheduler's column choice checks that).
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .interface import BankStatusSignature

__all__ = ["Refresher", "IDLE_REFRESH"]

IDLE_REFRESH = 16       # empty-queue cycles before an owed refresh is done early


class Refresher(wiring.Component):
    """Refresh timer, owed count and the PREA / REF requests.

    Latency: ``active`` rises the cycle after a refresh is started (forced, or early after the
    queue was idle); PREA is asked for as soon as every open bank allows its PRE, REF once every
    bank is closed with tRP and tRFC met; ``active`` falls the cycle after the REF.

    Members
    -------
    idle : In(1)
        No request queued or offered this cycle.
    status : In(BankStatusSignature)
    active : Out(1)
        A refresh is under way (a register).
    prea, ref : Out(1)
        The refresher wants a PREA / REF on the row bus now; the row choice gives it
        priority, so it issues in this cycle (a REF pays one owed refresh).
    forced : Out(1)
        A refresh is forced this cycle (``refresh_postpone`` owed): one cycle per refresh.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "idle": In(1), "status": In(BankStatusSignature(cfg)),
            "active": Out(1), "prea": Out(1), "ref": Out(1), "forced": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, t, st = self._cfg, self._cfg.timing, self.status
        refi = Signal(range(t.refi))
        owed = Signal(range(10))
        tick = Signal()
        m.d.comb += tick.eq(refi == t.refi - 1)
        m.d.sync += [refi.eq(Mux(tick, 0, refi + 1)), owed.eq(owed + tick - self.ref)]
        idle_for = Signal(range(IDLE_REFRESH + 1))
        m.d.sync += idle_for.eq(Mux(self.idle, Mux(idle_for == IDLE_REFRESH, idle_for,
                                                   idle_for + 1), 0))
        m.d.comb += self.forced.eq(~self.active & (owed >= cfg.refresh_postpone))
        with m.If(self.forced | (~self.active & (owed != 0) & (idle_for == IDLE_REFRESH))):
            m.d.sync += self.active.eq(1)
        with m.If(self.ref):
            m.d.sync += self.active.eq(0)
        open_ready = Cat(*[~st.open[b] | st.pre_ok[b] for b in range(cfg.banks)]).all()
        m.d.comb += [
            self.prea.eq(self.active & (st.open != 0) & open_ready),
            self.ref.eq(self.active & (st.open == 0) & st.act_ok.all() & st.rfc_ok),
        ]
        return m
