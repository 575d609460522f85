"""Round-robin arbitration, shared by every block that merges several requesters onto one
resource (the HBM crossbar and response paths, the ICI router's allocators).

A grant goes to the first requester after the one granted last, wrapping around, so under
persistent requests every requester is served once in every ``n`` grants. ``RoundRobin`` is a
component with an index grant; ``round_robin`` builds the same arbiter inline with a one-hot
grant (what the router's crossbar selects want, without an instance per arbiter).
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["RoundRobin", "round_robin"]


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


def round_robin(m, requests, advance, *, name):
    """Grant one of ``requests`` (an ``n``-bit value); return the ``n``-bit one-hot grant.

    The priority moves past the granted requester in cycles where ``advance`` is high (the
    grant was used); otherwise it stays, so a grant that was not used is offered again. The
    grant is combinational from ``requests``.
    """
    n = len(requests)
    req = Signal(n, name=f"{name}_req")
    above = Signal(n, name=f"{name}_above")   # requesters after the last one granted
    grant = Signal(n, name=f"{name}_grant")
    m.d.comb += req.eq(requests)
    high = Signal(n, name=f"{name}_high")
    m.d.comb += high.eq(req & above)
    # x & -x isolates the lowest set bit.
    m.d.comb += grant.eq((high & (~high + 1)) | ((req & (~req + 1)) & -(high == 0)))
    with m.If(advance & (grant != 0)):
        m.d.sync += above.eq(~(grant | (grant - 1)))
    return grant
