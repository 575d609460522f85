"""Event counters: what every block exposes for benchmarks and status registers (busy cycles,
stalls, bytes, flits, errors)."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from spec.config import check_int

__all__ = ["EventCounter", "count_events", "COUNTER_WIDTH"]

COUNTER_WIDTH = 32
"""Width of every block's counters: they wrap modulo 2**32."""


class EventCounter(wiring.Component):
    """Adds ``event`` (a bit, or a small count) to ``count`` every cycle, from reset; wraps.

    Members
    -------
    event : In(increment_width)
    count : Out(width)
    """

    def __init__(self, *, width=COUNTER_WIDTH, increment_width=1):
        check_int("width", width, 1, 64)
        check_int("increment_width", increment_width, 1, width)
        super().__init__({"event": In(increment_width), "count": Out(width)})

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.count.eq(self.count + self.event)
        return m


def count_events(m, owner, events):
    """Count each event of ``events`` (name -> value) into the ``owner`` member of that name,
    one :class:`EventCounter` each (submodule ``count_<name>``)."""
    for name, event in events.items():
        out = getattr(owner, name)
        counter = EventCounter(width=len(out), increment_width=max(1, len(event)))
        m.submodules[f"count_{name}"] = counter
        m.d.comb += [counter.event.eq(event), out.eq(counter.count)]
