"""The command queue of one HBM pseudo-channel: a collapsing queue of requests in age order,
and the same-address hazards between them.

It sits at the entrance of a :class:`~hdl.hbm.channel.PseudoChannel`: requests from the
crossbar enter at the tail; the scheduler (``scheduler.py``) looks at every entry at once and
serves any of them; the served entry leaves and the younger ones move down one slot, so slot 0
is always the oldest and age order is slot order. A write's data waits in the write buffer
(``write_path.py``); its entry holds the buffer slot.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .interface import entry_layout, request_layout, wslot_bits

__all__ = ["CommandQueue"]


class CommandQueue(wiring.Component):
    """A collapsing queue of ``queue_depth`` requests.

    Latency and throughput: a request taken on ``req`` is an entry from the next cycle; one
    request in and one entry out per cycle, also when full (an entry leaving frees its slot
    only in the next cycle). Backpressure: ``req.ready`` is high while a slot is free and
    ``admit`` is high (the parent's conditions on the request: a write buffer slot for a
    write, room for a posted write's response).

    Members
    -------
    req : In(stream of request_layout)
        Requests in.
    admit : In(1)
        The request offered on ``req`` may be taken if a slot is free (combinational).
    wslot : In(wslot_bits)
        The write buffer slot a write taken this cycle gets.
    served_index : In(range(queue_depth))
        The entry the scheduler serves with this cycle's column command.
    served_read : In(1)
        A RD issued (granted) for ``served_index``: a partial write's merge read is then in
        flight.
    served_remove : In(1)
        ``served_index`` leaves the queue (a read's RD, a write's WR, a dropped write).
    merge, merge_slot, merge_double : In(1), In(wslot_bits), In(1)
        The merge read of the partial write holding ``merge_slot`` has returned; with
        ``merge_double`` it met an uncorrectable word and the write is to be dropped.
    entries : Out(array of entry_layout)
        Every slot, oldest first (only the first ``level`` are valid).
    valid : Out(queue_depth)
        Slot ``i`` holds a request.
    blocked : Out(queue_depth)
        Slot ``i`` may not be served: an older queued request is to the same access and one of
        the two is a write (so reads never see stale data and writes land in order).
    level : Out(range(queue_depth + 1))
        Requests queued.
    wanted : Out(banks)
        Banks some queued request is for.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        Q = cfg.queue_depth
        super().__init__({
            "req": In(stream.Signature(request_layout(cfg))),
            "admit": In(1),
            "wslot": In(wslot_bits(cfg)),
            "served_index": In(range(max(2, Q))),
            "served_read": In(1),
            "served_remove": In(1),
            "merge": In(1), "merge_slot": In(wslot_bits(cfg)), "merge_double": In(1),
            "entries": Out(data.ArrayLayout(entry_layout(cfg), Q)),
            "valid": Out(Q),
            "blocked": Out(Q),
            "level": Out(range(Q + 1)),
            "wanted": Out(cfg.banks),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        Q = cfg.queue_depth
        q = [Signal(entry_layout(cfg), name=f"q{i}") for i in range(Q)]
        count = Signal(range(Q + 1))
        m.d.comb += [self.entries[i].eq(e) for i, e in enumerate(q)]
        m.d.comb += [self.level.eq(count), self.valid.eq(Cat(*[count > i for i in range(Q)]))]
        self._hazards(m, q)
        for b in range(cfg.banks):
            m.d.comb += self.wanted[b].eq(Cat(*[(count > i) & (e.bank == b)
                                               for i, e in enumerate(q)]).any())

        take = self.req.valid & self.req.ready
        r = self.req.payload
        m.d.comb += self.req.ready.eq((count < Q) & self.admit)
        new = Signal(entry_layout(cfg))
        m.d.comb += [
            new.write.eq(r.write), new.rmw.eq(r.write & ~r.strb.all()),
            new.posted.eq(r.write & r.strb.all()),
            new.bank.eq(r.bank), new.row.eq(r.row), new.col.eq(r.col), new.tag.eq(r.tag),
            new.wslot.eq(self.wslot),
        ]
        updated = [self._aged(m, i, e) for i, e in enumerate(q)]
        removed = Mux(self.served_remove, 1, 0)
        for i in range(Q):
            shift = self.served_remove & (self.served_index <= i)
            src = Mux(shift, updated[i + 1], updated[i]) if i + 1 < Q else updated[i]
            with m.If(take & (count - removed == i)):
                m.d.sync += q[i].eq(new)
            with m.Else():
                m.d.sync += q[i].eq(src)
        m.d.sync += count.eq(count + take - removed)
        return m

    def _hazards(self, m, q):
        for i, e in enumerate(q):
            conflicts = [(o.bank == e.bank) & (o.row == e.row) & (o.col == e.col)
                         & (o.write | e.write) for o in q[:i]]
            m.d.comb += self.blocked[i].eq(Cat(*conflicts).any() if conflicts else 0)

    def _aged(self, m, i, e):
        """Entry ``e`` (slot ``i``) as it stays next cycle: one cycle older, its merge read
        marked in flight or done."""
        cap = self._cfg.starvation_cap
        u = Signal(entry_layout(self._cfg), name=f"q{i}_next")
        m.d.comb += [u.eq(e), u.wait.eq(Mux(e.wait == cap, e.wait, e.wait + 1))]
        with m.If(self.served_read & (self.served_index == i) & e.write):
            m.d.comb += u.rmw_busy.eq(1)
        with m.If(self.merge & e.write & e.rmw_busy & (e.wslot == self.merge_slot)):
            m.d.comb += [u.rmw.eq(0), u.rmw_busy.eq(0), u.cancel.eq(self.merge_double)]
        return u
