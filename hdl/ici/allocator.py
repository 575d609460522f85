"""The allocator of an ICI router: which input VC sends a flit to which output in a cycle,
and which packet holds which output VC.

Separable, input first, in one cycle. An input VC requests its output when its front flit
may go: a head whose output VC is free, or a body flit (whose packet holds its output VC),
with a credit for that VC and the output ready. A round-robin arbiter per input port picks one
of its requesting VCs, then a round-robin arbiter per output port picks one of the inputs
whose pick targets it; each arbiter's priority moves past a grant only when the grant was
used. The winning head takes its output VC in the same cycle; the VC is held until its tail
passes, so packets never interleave on a VC, and may be taken by the next packet at once.

On a network output the route fixes the VC (so VC allocation needs no separate stage). An
ejection port has ``total_vcs`` VCs of its own (reassembly queues, :class:`~.router.Ejection`):
a head takes the first that is free and has room, and the packet's body follows it there, so
packets whose flits arrive interleaved eject side by side instead of one after the other.
"""

from functools import reduce
from operator import or_

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..lib.arbiter import round_robin
from ..lib.bits import first_set, one_hot_select
from .input import meta_layout

__all__ = ["Allocator", "transfer_layout"]


def transfer_layout(cfg):
    """What crosses an output in a cycle: whether a flit does (``sent``), from which input
    (one-hot ``grant``), its marks and its output VC."""
    return data.StructLayout({"sent": 1, "grant": cfg.ports, "head": 1, "tail": 1,
                              "vc": range(cfg.total_vcs)})


class Allocator(wiring.Component):
    """Switch and VC allocation of a router with ``ports`` inputs and outputs (see the module
    docstring). Combinational from its inputs to its outputs; state: per output VC whether a
    packet holds it, and the arbiters' priorities.

    Parameters
    ----------
    cfg : ICIConfig

    Members
    -------
    nonempty : In(ArrayLayout(total_vcs, ports))
        Per input, per VC: a flit is buffered.
    front : In(ArrayLayout(ArrayLayout(meta_layout, total_vcs), ports))
        Per input, per VC: the front flit's marks and route.
    out_ready : In(ports)
        Per output: it can take a flit this cycle.
    credit : In(ArrayLayout(total_vcs, ports))
        Per output, per output VC: a buffer slot is free downstream.
    pop : Out(ports), pop_vc : Out(ArrayLayout(range(total_vcs), ports))
        Per input: its front flit of ``pop_vc`` leaves this cycle.
    transfer : Out(ArrayLayout(transfer_layout, ports))
        Per output: the flit that crosses it.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        P, V = cfg.ports, cfg.total_vcs
        super().__init__({
            "nonempty": In(data.ArrayLayout(V, P)),
            "front": In(data.ArrayLayout(data.ArrayLayout(meta_layout(cfg), V), P)),
            "out_ready": In(P),
            "credit": In(data.ArrayLayout(V, P)),
            "pop": Out(P),
            "pop_vc": Out(data.ArrayLayout(range(V), P)),
            "transfer": Out(data.ArrayLayout(transfer_layout(cfg), P)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        P, NP, V = cfg.ports, cfg.net_ports, cfg.total_vcs
        # Per output VC: a packet holds it (packed, read with bit_select: one shift each).
        held = [Signal(V, name=f"held{o}") for o in range(P)]
        # Per ejection port, the VC a head would take now: the first free one with room.
        free = [first_set(m, ~held[o] & self.credit[o], name=f"eject_vc{o}")
                for o in range(NP, P)]
        picks = [self._input_stage(m, i, Cat(*held), free) for i in range(P)]
        grants = [round_robin(m, Cat(*[valid & (front.op == o) for front, valid, _ in picks]),
                              1, name=f"oa{o}")
                  for o in range(P)]
        for i, (_, _, won) in enumerate(picks):
            m.d.comb += won.eq(reduce(or_, [g[i] for g in grants]))
        fronts = [front.as_value() for front, _, _ in picks]
        for o, grant in enumerate(grants):
            t = self.transfer[o]
            front = data.View(meta_layout(cfg), one_hot_select(grant, fronts))
            m.d.comb += [t.sent.eq(grant.any()), t.grant.eq(grant), t.head.eq(front.head),
                         t.tail.eq(front.tail), t.vc.eq(front.ovc)]
            # The VC is taken by a head and given back by a tail (a one-flit packet: neither).
            vc = Signal(V, name=f"held_vc{o}")
            m.d.comb += vc.eq(Const(1, V) << front.ovc)
            take = Mux(t.sent & front.head & ~front.tail, vc, 0)
            give = Mux(t.sent & front.tail, vc, 0)
            m.d.sync += held[o].eq((held[o] & ~give) | take)
        return m

    def _input_stage(self, m, i, held, free):
        """Input ``i``'s arbiter over its VCs; returns the picked VC's ``(front, valid,
        won)``, its front with the output VC it goes to, ``won`` (its output granted it) to be
        driven."""
        cfg = self._cfg
        NP, V = cfg.net_ports, cfg.total_vcs
        credit = self.credit.as_value()
        # Per VC: the ejection VC its packet holds (set as its head wins).
        ejecting = [Signal(range(V), name=f"evc{i}_{v}") for v in range(V)]
        reqs, fronts = [], []
        for v in range(V):
            f = self.front[i][v]
            front = Signal(meta_layout(cfg), name=f"front{i}_{v}")
            m.d.comb += front.eq(f)
            if cfg.local_ports:
                local = Array(vc for vc, _ in free)[f.op - NP]
                with m.If(f.op >= NP):
                    m.d.comb += front.ovc.eq(Mux(f.head, local, ejecting[v]))
            slot = Signal(range(cfg.ports * V), name=f"slot{i}_{v}")
            m.d.comb += slot.eq(f.op * V + front.ovc)
            req = Signal(name=f"req{i}_{v}")
            m.d.comb += req.eq(self.nonempty[i][v] & self.out_ready.bit_select(f.op, 1)
                               & credit.bit_select(slot, 1)
                               & ~(f.head & held.bit_select(slot, 1)))
            reqs.append(req)
            fronts.append(front.as_value())
        won = Signal(name=f"won{i}")
        grant = round_robin(m, Cat(*reqs), won, name=f"ia{i}")
        vc, valid = first_set(m, grant, name=f"pick{i}")
        front = Signal(meta_layout(cfg), name=f"pfront{i}")
        m.d.comb += [front.eq(one_hot_select(grant, fronts)),
                     self.pop[i].eq(won), self.pop_vc[i].eq(vc)]
        with m.If(won & front.head & (front.op >= NP)):
            m.d.sync += Array(ejecting)[vc].eq(front.ovc)
        return front, valid, won
