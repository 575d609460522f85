"""One ICI router: an input-queued virtual-channel router with wormhole switching, credit-based
flow control, dimension-order routing with datelines, and the link layer on every port.

Ports: ``2 * ndims`` network ports, (d, +) numbered ``2d`` and (d, -) numbered ``2d + 1``,
then ``local_ports`` injection/ejection pairs. Input port (d, +) receives the flits that travel
in the + direction of dimension d (from the neighbour at coordinate - 1), so a flit that goes
straight on leaves through the output port of the same number.

Composition (each a component of its own)::

    link_in[p] -> LinkRx --------> InputUnit[p] --+                +-> OutputPort[p] -> link_out[p]
    inject[l]  -> InjectionPort -> InputUnit[NP+l] +-> Switch ------+-> Ejection[l] -> eject[l]
                                                   Allocator

Pipeline, two cycles per hop at zero load (plus ``link_latency - 1`` on a longer link):

1. a flit arrives on a link (CRC and sequence checked by :class:`~.link.LinkRx`), or on an
   injection port, has its route computed if it is a head (:mod:`.input`), and is written into
   the buffer of its virtual channel;
2. from the front of that buffer it is allocated (VC and switch in one cycle,
   :class:`~.allocator.Allocator`), crosses the switch and is registered on the output link
   (:class:`OutputPort`, :class:`~.link.LinkTx`) or written into an ejection queue
   (:class:`Ejection`).

With ``switch_stage`` the allocation is registered and the flit is read and crosses the switch
in a third cycle, which cuts the longest combinational path (allocation, buffer read, switch,
CRC) about in half.
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.bits import one_hot_select
from ..lib.counter import count_events
from ..lib.queue import Queue
from ..lib.tree import tree_sum
from ..top import Top
from .allocator import Allocator, transfer_layout
from .input import InjectionPort, InputUnit
from .link import LinkRx, LinkTx
from .packet import coord_layout, eject_layout, flit_layout, header_layout, link_signature

__all__ = ["Router", "Switch", "OutputPort", "Ejection", "COUNTERS", "COUNTER_WIDTH",
           "EJECT_DEPTH"]

COUNTERS = ("crc_errors", "retries", "dropped")
COUNTER_WIDTH = 32
EJECT_DEPTH = 4


class Switch(wiring.Component):
    """The crossbar: per output, the flit of the input the allocator chose (combinational).

    Parameters
    ----------
    cfg : ICIConfig

    Members
    -------
    data : In(ArrayLayout(flit_bits, ports))
        Per input, the flit at the front of the VC it pops.
    transfer : In(ArrayLayout(transfer_layout, ports))
        Per output, the allocator's choice.
    o : Out(stream of flit_layout).array(ports)
        Per output, the flit; ``valid`` when one crosses. The allocator only sends to an
        output that is ready, so ``ready`` is not looked at.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "data": In(data.ArrayLayout(cfg.flit_bits, cfg.ports)),
            "transfer": In(data.ArrayLayout(transfer_layout(cfg), cfg.ports)),
            "o": Out(stream.Signature(flit_layout(cfg))).array(cfg.ports),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        inputs = [self.data[i] for i in range(cfg.ports)]
        for o, out in enumerate(self.o):
            t = self.transfer[o]
            m.d.comb += [out.valid.eq(t.sent), out.payload.head.eq(t.head),
                         out.payload.tail.eq(t.tail), out.payload.vc.eq(t.vc),
                         out.payload.data.eq(one_hot_select(t.grant, inputs))]
        return m


class OutputPort(wiring.Component):
    """A network output: the credit count of every VC downstream, the hop count of every head
    incremented, and the link sender.

    A credit is spent as the allocator sends a flit to this output and returned when the
    receiver's reverse message reports the slot freed. With one-cycle links a credit is usable
    again 4 cycles after the flit that spent it left the downstream buffer
    (``credit_round_trip``).

    Parameters
    ----------
    cfg : ICIConfig

    Members
    -------
    i : In(stream of flit_layout)
        From the switch; only flits the allocator sent here (``ready`` was high), so ``i``
        always finds room.
    spend : In(1), spend_vc : In(range(total_vcs))
        The allocator sends a flit of ``spend_vc`` here this cycle (it reaches ``i`` in the same
        cycle, or in the next with ``switch_stage``).
    pending : In(1)
        With ``switch_stage``: a flit sent here in the last cycle reaches ``i`` now.
    ready : Out(1)
        The link sender has room for a flit sent here now.
    link : Out(link_signature)
    credit : Out(total_vcs)
        Per VC: at least one buffer slot is free downstream.
    retry, rev_error : Out(1)
        The link sender's events.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "i": In(stream.Signature(flit_layout(cfg))),
            "spend": In(1),
            "spend_vc": In(range(cfg.total_vcs)),
            "pending": In(1),
            "ready": Out(1),
            "link": Out(link_signature(cfg)),
            "credit": Out(cfg.total_vcs),
            "retry": Out(1),
            "rev_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        B = cfg.buffer_depth
        m.submodules.tx = tx = LinkTx(cfg)
        wiring.connect(m, tx.link, wiring.flipped(self.link))
        hl = header_layout(cfg)
        raw = self.i.payload.data
        hdr = data.View(hl, raw[: cfg.header_bits])
        bumped = Signal(hl)
        m.d.comb += [bumped.eq(hdr), bumped.hops.eq(hdr.hops + 1)]
        m.d.comb += [
            tx.i.valid.eq(self.i.valid), self.i.ready.eq(tx.i.ready),
            tx.i.payload.eq(self.i.payload),
            tx.i.payload.data.eq(Mux(self.i.payload.head,
                                     Cat(bumped, raw[cfg.header_bits:]), raw)),
            self.ready.eq(tx.room > self.pending),
            self.retry.eq(tx.retry), self.rev_error.eq(tx.rev_error),
        ]
        for v in range(cfg.total_vcs):
            credits = Signal(range(B + 1), init=B, name=f"credits{v}")
            spend = self.spend & (self.spend_vc == v)
            m.d.sync += credits.eq(credits + tx.credits[v] - spend)
            m.d.comb += self.credit[v].eq(credits != 0)
        return m


class Ejection(wiring.Component):
    """A local port's ejection side: ``total_vcs`` reassembly queues of ``EJECT_DEPTH`` flits,
    one per ejection VC, and the stream to the endpoint, which delivers whole packets in the
    order their heads arrived.

    The allocator gives each packet a free ejection VC, so flits of packets that arrive
    interleaved (on different links, or on different VCs of one) are taken side by side; only
    the stream serializes them. A packet is delivered as soon as its head is the oldest waiting
    (cut-through: its body follows as it arrives), so zero-load latency is unchanged; packets
    of one flow arrive in order and so leave in order.

    Parameters
    ----------
    cfg : ICIConfig

    Members
    -------
    i : In(stream of flit_layout)
        From the switch, into the queue of VC ``vc``; only flits the allocator sent here (the
        queue had room).
    pending : In(total_vcs)
        With ``switch_stage``: a flit sent here in the last cycle reaches ``i`` now, for VC v.
    room : Out(total_vcs)
        Per VC: the queue has room for a flit sent now.
    o : Out(stream of {data, last})
        To the endpoint.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        V = cfg.total_vcs
        super().__init__({
            "i": In(stream.Signature(flit_layout(cfg))),
            "pending": In(V),
            "room": Out(V),
            "o": Out(stream.Signature(eject_layout(cfg))),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        V = cfg.total_vcs
        # Packets waiting: each but the one being delivered has its head in a queue.
        m.submodules.order = order = Queue(range(max(2, V)), V * EJECT_DEPTH + 2)
        m.d.comb += [order.i.valid.eq(self.i.valid & self.i.payload.head),
                     order.i.payload.eq(self.i.payload.vc), self.i.ready.eq(1)]
        queues = []
        for v in range(V):
            m.submodules[f"vc{v}"] = q = Queue(eject_layout(cfg), EJECT_DEPTH)
            m.d.comb += [q.i.valid.eq(self.i.valid & (self.i.payload.vc == v)),
                         q.i.payload.data.eq(self.i.payload.data),
                         q.i.payload.last.eq(self.i.payload.tail),
                         self.room[v].eq(q.level + self.pending[v] < EJECT_DEPTH)]
            queues.append(q)
        current = order.o.payload
        m.d.comb += [self.o.valid.eq(order.o.valid & Array(q.o.valid for q in queues)[current]),
                     self.o.payload.eq(Array(q.o.payload for q in queues)[current])]
        for v, q in enumerate(queues):
            m.d.comb += q.o.ready.eq(self.o.ready & order.o.valid & (current == v))
        m.d.comb += order.o.ready.eq(self.o.valid & self.o.ready & self.o.payload.last)
        return m


class Router(Top):
    """One ICI router (see the module docstring for its parts and timing).

    Parameters
    ----------
    config : ICIConfig

    Members
    -------
    coord : In(coord_layout)
        This router's coordinates (tied to constants in a network).
    link_out : Out(link_signature).array(net_ports)
        Per network port: the flit wire to the neighbour and its reverse channel.
    link_in : In(link_signature).array(net_ports)
        Per network port: the flit wire from the neighbour and the reverse channel back.
    inject : In(stream of flit_bits).array(local_ports)
        Flits of packets to send; the head's ``length`` delimits each packet. A head with a
        destination outside the pod, a class past ``classes`` or a length outside
        1..max_packet is dropped with its packet (only the head when the length is bad) and
        counted in ``dropped``. The router stamps the head's source and zeroes its hop count.
    eject : Out(stream of {data, last}).array(local_ports)
        Delivered flits, packet by packet (never interleaved), ``last`` on each tail.
    crc_errors, retries, dropped : Out(32)
        Counters: flits and reverse messages received with a bad CRC; go-back-N rewinds of the
        output links; packets dropped at injection.
    """

    def __init__(self, config):
        cfg = config
        super().__init__(config, {
            "coord": In(coord_layout(cfg)),
            "link_out": Out(link_signature(cfg)).array(cfg.net_ports),
            "link_in": In(link_signature(cfg)).array(cfg.net_ports),
            "inject": In(stream.Signature(cfg.flit_bits)).array(cfg.local_ports),
            "eject": Out(stream.Signature(eject_layout(cfg))).array(cfg.local_ports),
            **{name: Out(COUNTER_WIDTH) for name in COUNTERS},
        })

    @property
    def name(self):
        return self.config.router_name

    @property
    def extras(self):
        cfg = self.config
        return {"constants": {"replay_timeout": cfg.replay_timeout,
                              "credit_round_trip": cfg.credit_round_trip},
                "warnings": cfg.warnings}

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        P, NP = cfg.ports, cfg.net_ports
        m.submodules.alloc = alloc = Allocator(cfg)
        m.submodules.switch = switch = Switch(cfg)
        # With switch_stage the allocator's decisions are registered: the flits are read and
        # cross the switch in the next cycle.
        transfer = Signal.like(alloc.transfer) if cfg.switch_stage else alloc.transfer
        if cfg.switch_stage:
            m.d.sync += transfer.eq(alloc.transfer)
        m.d.comb += switch.transfer.eq(transfer)
        inputs = []
        for i in range(P):
            m.submodules[f"in{i}"] = unit = InputUnit(cfg, i)
            m.d.comb += [unit.coord.eq(self.coord), alloc.nonempty[i].eq(unit.nonempty),
                         alloc.front[i].eq(unit.front), unit.pop.eq(alloc.pop[i]),
                         unit.pop_vc.eq(alloc.pop_vc[i]), switch.data[i].eq(unit.data)]
            inputs.append(unit)
        pending = [transfer[o].sent if cfg.switch_stage else 0 for o in range(P)]

        events = {"crc_errors": [], "retries": [], "dropped": []}
        for p in range(NP):
            m.submodules[f"rx{p}"] = rx = LinkRx(cfg)
            m.submodules[f"out{p}"] = out = OutputPort(cfg)
            wiring.connect(m, wiring.flipped(self.link_in[p]), rx.link)
            wiring.connect(m, rx.o, inputs[p].w)
            wiring.connect(m, out.link, wiring.flipped(self.link_out[p]))
            wiring.connect(m, switch.o[p], out.i)
            m.d.comb += [rx.freed.eq(Mux(alloc.pop[p], 1 << alloc.pop_vc[p], 0)),
                         out.spend.eq(alloc.transfer[p].sent),
                         out.spend_vc.eq(alloc.transfer[p].vc), out.pending.eq(pending[p]),
                         alloc.out_ready[p].eq(out.ready), alloc.credit[p].eq(out.credit)]
            events["crc_errors"] += [rx.crc_error, out.rev_error]
            events["retries"].append(out.retry)
        for lp in range(cfg.local_ports):
            m.submodules[f"inj{lp}"] = inj = InjectionPort(cfg, lp)
            m.d.comb += [inj.coord.eq(self.coord), inj.full.eq(inputs[NP + lp].full)]
            wiring.connect(m, wiring.flipped(self.inject[lp]), inj.i)
            wiring.connect(m, inj.o, inputs[NP + lp].w)
            events["dropped"].append(inj.drop)
            m.submodules[f"eject{lp}"] = ejection = Ejection(cfg)
            o = NP + lp
            wiring.connect(m, switch.o[o], ejection.i)
            m.d.comb += [alloc.out_ready[o].eq(1), alloc.credit[o].eq(ejection.room)]
            if cfg.switch_stage:
                m.d.comb += ejection.pending.eq(Mux(pending[o], 1 << transfer[o].vc, 0))
            wiring.connect(m, ejection.o, wiring.flipped(self.eject[lp]))
        count_events(m, self, {name: tree_sum(bits) for name, bits in events.items()})
        return m
