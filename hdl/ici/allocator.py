"""The allocator of an ICI router: which input VC sends a flit to which output in a cycle,
and which packet holds which output VC.

Separable, input first, in one cycle. An input VC requests its output when its front flit
may go: a head whose output VC is free, or a body flit of the packet that holds it, with a
credit for that VC and the output ready. A round-robin arbiter per input port picks one of its
requesting VCs, then a round-robin arbiter per output port picks one of the inputs whose pick
targets it; each arbiter's priority moves past a grant only when the grant was used. The
winning head takes its output VC in the same cycle (the route fixes which VC, so VC allocation
needs no separate stage); the VC is held until its tail passes, so packets never interleave on
a VC, and may be taken by the next packet at once.
"""

from functools import reduce
from operator import or_

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..lib.arbiter import round_robin
from ..lib.bits import first_set
from .input import meta_layout

__all__ = ["Allocator", "transfer_layout"]


def transfer_layout(cfg):
    """What crosses an output in a cycle: whether a flit does (``sent``), from which input,
    its marks and its output VC."""
    return data.StructLayout({"sent": 1, "src": range(cfg.ports), "head": 1, "tail": 1,
                              "vc": range(cfg.total_vcs)})


class Allocator(wiring.Component):
    """Switch and VC allocation of a router with ``ports`` inputs and outputs (see the module
    docstring). Combinational from its inputs to its outputs; state: per input VC the output
    and output VC its packet holds, per output VC whether a packet holds it.

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
        P, V = cfg.ports, cfg.total_vcs
        # Packed vectors indexed with bit_select: one shift each in the Verilog (an Array
        # would be a case statement per access, and Verilator emits its code per instance).
        credit = self.credit.as_value()
        held = Signal(P * V)            # per output VC: a packet holds it
        picks = [self._input_stage(m, i, credit, held) for i in range(P)]
        out_grants = []
        for o in range(P):
            reqs = Cat(*[valid & (op == o) for _, valid, op, _, _ in picks])
            out_grants.append(round_robin(m, reqs, 1, name=f"oa{o}"))
        for i, (_, _, _, _, won) in enumerate(picks):
            m.d.comb += won.eq(reduce(or_, [g[i] for g in out_grants]))

        fronts = [front for front, _, _, _, _ in picks]
        ovcs = [ovc for _, _, _, ovc, _ in picks]
        for o, grant in enumerate(out_grants):
            t = self.transfer[o]
            src, sent = first_set(m, grant, name=f"xsel{o}")
            front = Signal(meta_layout(cfg), name=f"xfront{o}")
            m.d.comb += [front.eq(Array(fronts)[src]), t.sent.eq(sent), t.src.eq(src),
                         t.head.eq(front.head), t.tail.eq(front.tail),
                         t.vc.eq(Array(ovcs)[src])]
            for v in range(V):
                with m.If(sent & (t.vc == v)):
                    with m.If(front.tail):
                        m.d.sync += held[o * V + v].eq(0)
                    with m.Elif(front.head):
                        m.d.sync += held[o * V + v].eq(1)
        return m

    def _input_stage(self, m, i, credit, held):
        """Input ``i``'s arbiter over its VCs and the state of its packets; returns the
        picked VC's ``(front, valid, output, output VC, won)``, ``won`` to be driven."""
        cfg = self._cfg
        P, V = cfg.ports, cfg.total_vcs
        active = [Signal(name=f"act{i}_{v}") for v in range(V)]
        aop = [Signal(range(P), name=f"aop{i}_{v}") for v in range(V)]
        aovc = [Signal(range(V), name=f"aovc{i}_{v}") for v in range(V)]
        reqs, tops, tovcs = [], [], []
        for v in range(V):
            f = self.front[i][v]
            top = Signal(range(P), name=f"top{i}_{v}")
            tovc = Signal(range(V), name=f"tovc{i}_{v}")
            m.d.comb += [top.eq(Mux(active[v], aop[v], f.op)),
                         tovc.eq(Mux(active[v], aovc[v], f.ovc))]
            slot = Signal(range(P * V), name=f"slot{i}_{v}")
            m.d.comb += slot.eq(top * V + tovc)
            req = Signal(name=f"req{i}_{v}")
            m.d.comb += req.eq(self.nonempty[i][v] & self.out_ready.bit_select(top, 1)
                               & credit.bit_select(slot, 1)
                               & (active[v] | (f.head & ~held.bit_select(slot, 1))))
            reqs.append(req)
            tops.append(top)
            tovcs.append(tovc)
        won = Signal(name=f"won{i}")
        grant = round_robin(m, Cat(*reqs), won, name=f"ia{i}")
        vc, valid = first_set(m, grant, name=f"pick{i}")
        op = Signal(range(P), name=f"pickop{i}")
        ovc = Signal(range(V), name=f"pickovc{i}")
        front = Signal(meta_layout(cfg), name=f"pfront{i}")
        m.d.comb += [op.eq(Array(tops)[vc]), ovc.eq(Array(tovcs)[vc]),
                     front.eq(self.front[i].as_value().word_select(vc, meta_layout(cfg).size)),
                     self.pop[i].eq(won), self.pop_vc[i].eq(vc)]
        with m.If(won):
            with m.If(front.tail):
                m.d.sync += Array(active)[vc].eq(0)
            with m.Elif(front.head):
                m.d.sync += [Array(active)[vc].eq(1), Array(aop)[vc].eq(op),
                             Array(aovc)[vc].eq(ovc)]
        return front, valid, op, ovc, won
