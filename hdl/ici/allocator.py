"""The allocator of an ICI router: which input VC sends a flit to which output in a cycle,
and which packet holds which output VC.

Separable, input first, in one cycle. An input VC requests its output when its front flit
may go: a head whose output VC is free, or a body flit (whose packet holds its output VC),
with a credit for that VC and the output ready. A round-robin arbiter per input port picks one
of its requesting VCs, then a round-robin arbiter per output port picks one of the inputs
whose pick targets it; each arbiter's priority moves past a grant only when the grant was
used. The winning head takes its output VC in the same cycle; the VC is held until its tail
passes, so packets never interleave on a VC, and may be taken by the next packet at once.

With ``alloc_iters`` > 1 the separable match is repeated in the same cycle (as iSLIP
iterates): inputs and outputs left unmatched by the earlier iterations arbitrate again among
the requests between them, each iteration with arbiters of its own. Every arbiter then serves
flits that continue a packet (body flits) before heads: a packet in flight holds its output
VC, and finishing it frees the VC soonest. One iteration is the separable input-first
allocator of BookSim's default router; three bring the 8x8 torus with 4-flit packets from
0.52 to 0.58 flits/node/cycle at stable saturation, at 2.9 times the logic depth (the
iterations run in sequence; docs/results/ici.md).

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
    """Switch and VC allocation of a router with ``ports`` inputs and outputs, in
    ``alloc_iters`` iterations (see the module docstring). Combinational from its inputs to
    its outputs; state: per output VC whether a packet holds it, and the arbiters'
    priorities.

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
        inputs = [self._requests(m, i, Cat(*held), free) for i in range(P)]
        # Per input: the flit that goes (its VC and front): the first iteration's pick unless a
        # later iteration's won, so with one iteration nothing waits for the output arbiters.
        sent = [Signal(meta_layout(cfg), name=f"sent{i}") for i in range(P)]
        sent_vc = [Signal(range(V), name=f"sent_vc{i}") for i in range(P)]
        matched = Const(0, P)       # inputs granted in an earlier iteration
        taken = Const(0, P)         # outputs granted in an earlier iteration
        grants = [Const(0, P)] * P
        # Per output, what crosses it: each iteration's grant selects among its own picks.
        crossing = [Const(0, len(sent[0].as_value()))] * P

        def arbitrate(req, heads, name, advance):
            # With more than one iteration, flits that continue a packet go before heads.
            if cfg.alloc_iters > 1:
                body = req & ~heads
                req = Mux(body.any(), body, req)
            return round_robin(m, req, advance, name=name)

        for it in range(cfg.alloc_iters):
            picks = []
            for i, (reqs, fronts, _) in enumerate(inputs):
                req = Cat(*[r & ~taken.bit_select(f.op, 1)
                            for r, f in zip(reqs, fronts, strict=True)])
                won = Signal(name=f"won{it}_{i}")
                grant = arbitrate(Mux(matched[i], 0, req), Cat(*[f.head for f in fronts]),
                                  f"ia{it}_{i}", won)
                vc, valid = first_set(m, grant, name=f"pick{it}_{i}")
                front = Signal(meta_layout(cfg), name=f"pfront{it}_{i}")
                m.d.comb += front.eq(one_hot_select(grant, [f.as_value() for f in fronts]))
                picks.append((front, valid, vc, won))
            out = []
            for o in range(P):
                req = Cat(*[valid & (front.op == o) for front, valid, _, _ in picks])
                heads = Cat(*[front.head for front, _, _, _ in picks])
                out.append(arbitrate(Mux(taken[o], 0, req), heads, f"oa{it}_{o}", 1))
            for i, (front, _, vc, won) in enumerate(picks):
                m.d.comb += won.eq(reduce(or_, [g[i] for g in out]))
                if it == 0:
                    m.d.comb += [sent[i].eq(front), sent_vc[i].eq(vc)]
                else:
                    with m.If(won):
                        m.d.comb += [sent[i].eq(front), sent_vc[i].eq(vc)]
            fronts = [front.as_value() for front, _, _, _ in picks]
            crossing = [c | one_hot_select(g, fronts) for c, g in zip(crossing, out, strict=True)]
            matched = matched | Cat(*[won for _, _, _, won in picks])
            taken = taken | Cat(*[g.any() for g in out])
            grants = [g | h for g, h in zip(grants, out, strict=True)]
        for i in range(P):
            m.d.comb += [self.pop[i].eq(matched[i]), self.pop_vc[i].eq(sent_vc[i])]
            with m.If(matched[i] & sent[i].head & (sent[i].op >= NP)):
                m.d.sync += Array(inputs[i][2])[sent_vc[i]].eq(sent[i].ovc)
        for o, grant in enumerate(grants):
            t = self.transfer[o]
            front = data.View(meta_layout(cfg), crossing[o])
            m.d.comb += [t.sent.eq(grant.any()), t.grant.eq(grant), t.head.eq(front.head),
                         t.tail.eq(front.tail), t.vc.eq(front.ovc)]
            # The VC is taken by a head and given back by a tail (a one-flit packet: neither).
            vc = Signal(V, name=f"held_vc{o}")
            m.d.comb += vc.eq(Const(1, V) << front.ovc)
            take = Mux(t.sent & front.head & ~front.tail, vc, 0)
            give = Mux(t.sent & front.tail, vc, 0)
            m.d.sync += held[o].eq((held[o] & ~give) | take)
        return m

    def _requests(self, m, i, held, free):
        """Input ``i``'s requests: per VC, whether its front flit may go now, and its front
        (a ``meta_layout`` signal) with the output VC it goes to; and the per-VC ejection VC
        registers."""
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
            fronts.append(front)
        return reqs, fronts, ejecting
