"""Tiny timing counters of the HBM controller: one per DRAM constraint (as LiteDRAM's
``tXXDController`` and ``tFAWController``), instantiated per bank, per bank group or per
pseudo-channel by the scheduler in ``channel.py``.

A :class:`Countdown` is loaded by any of its named triggers with that trigger's delay ``d``
when a command issues in cycle ``t``; its ``ready`` output is high again from cycle ``t + d``
on, so a command gated by ``ready`` keeps the constraint exactly, with no slack. Several
triggers in one cycle, or a trigger while counting, keep the longest remaining wait.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Countdown", "ActivateWindow"]


class Countdown(wiring.Component):
    """A down-counter gating one kind of command.

    Parameters
    ----------
    delays : dict of str to int
        Trigger name to delay in cycles (>= 1). Each name becomes a 1-bit input.

    Members
    -------
    ready : Out(1)
        The constraint is met this cycle (combinational from the count register).
    left : Out(range(max delay))
        Cycles until ``ready`` (0 when ready).
    """

    def __init__(self, delays):
        for name, d in delays.items():
            if d < 1:
                raise ValueError(f"delay of {name} must be at least 1 cycle, got {d}")
        self._delays = dict(delays)
        top = max(self._delays.values())
        super().__init__({**{name: In(1) for name in delays}, "ready": Out(1),
                          "left": Out(range(top + 1))})

    def elaborate(self, platform):
        m = Module()
        count = self.left
        m.d.comb += self.ready.eq(count == 0)
        nxt = Mux(count == 0, 0, count - 1)
        for name, d in self._delays.items():
            if d > 1:
                nxt = Mux(getattr(self, name) & (nxt < d - 1), d - 1, nxt)
        m.d.sync += count.eq(nxt)
        return m


class ActivateWindow(wiring.Component):
    """tFAW: at most four ACTs in any window of ``faw`` cycles.

    Four countdowns, one per recent ACT, used round robin: the next ACT may issue when the
    countdown of the fourth ACT back (the one it would reuse) has expired.
    """

    act: In(1)
    ready: Out(1)

    def __init__(self, faw):
        self._faw = faw
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        slots = [Countdown({"act": self._faw}) for _ in range(4)]
        ptr = Signal(2)
        for i, slot in enumerate(slots):
            m.submodules[f"slot{i}"] = slot
            m.d.comb += slot.act.eq(self.act & (ptr == i))
        m.d.comb += self.ready.eq(Mux(ptr[1], Mux(ptr[0], slots[3].ready, slots[2].ready),
                                      Mux(ptr[0], slots[1].ready, slots[0].ready)))
        with m.If(self.act):
            m.d.sync += ptr.eq(ptr + 1)
        return m
