"""Round-robin arbitration: the fairness primitive of the ICI router's allocators.

A grant goes to the first requester after the one granted last, wrapping around, so under
persistent requests every requester is served once in every ``n`` grants.
"""

from amaranth.hdl import Signal

__all__ = ["round_robin"]


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
