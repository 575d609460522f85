"""Round-robin arbitration, shared by every block that merges several requesters onto one
resource (the HBM crossbar and response paths, router output ports)."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["RoundRobin"]


class RoundRobin(wiring.Component):
    """Grants one of ``count`` requesters per cycle, starting the search after the last winner.

    Members
    -------
    requests : In(count)
        One bit per requester.
    grant : Out(range(count))
        Index of the winner (meaningful when ``valid``); combinational from ``requests``.
    valid : Out(1)
        Some requester is asking.
    advance : In(1)
        The grant was used this cycle: the winner becomes the lowest priority next cycle.
    """

    def __init__(self, count):
        self._count = count
        super().__init__({
            "requests": In(count),
            "grant": Out(range(max(2, count))),
            "valid": Out(1),
            "advance": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = self._count
        last = Signal(range(max(2, n)), init=n - 1)
        m.d.comb += self.valid.eq(self.requests.any())
        # Requesters after `last` first (ascending), then the rest: the first hit wins, so
        # assign in reverse priority order and let later assignments override.
        order = []
        for start in range(n):
            after = [(start + 1 + k) % n for k in range(n)]
            order.append(after)
        with m.Switch(last):
            for start in range(n):
                with m.Case(start):
                    for idx in reversed(order[start]):
                        with m.If(self.requests[idx]):
                            m.d.comb += self.grant.eq(idx)
        with m.If(self.advance & self.valid):
            m.d.sync += last.eq(self.grant)
        if n == 1:
            m.d.comb += self.grant.eq(0)
        return m
