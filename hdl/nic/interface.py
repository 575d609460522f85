"""The network interface's endpoint as every chip has it (docs/nic.md): the ICI endpoint, the
collective engine and the message unit on a router's three local ports, and how they and the
host reach the chip's memory.

    message ─► MessageUnit ─┐
    collective ─► engine[+] ┴─► MessageMux ─► Sender ─► inject[0] (requests)
                  engine[-] ──────────────► Sender ─► inject[2] (the - ring's requests)
                  ▲ arrived (its semaphore)
    eject[0] ─► Receiver ─► done ─┬─► done
    eject[2] ─► Receiver ─► done ─┤
    eject[1] ─► Receiver ─► done ─┘
    eject[0]'s Receiver ─► respond ─► Responder ─► inject[1] (responses)
    host_write, host_read ─► LocalMemory ◄─ every reader and writer above

Requests leave on local port 0 for port 0 of their destination, responses on port 1 for
port 1: each class has an ejection port and a Receiver of its own, so a response never
waits behind a request (docs/pod.md, "Traffic classes"). The collectives' - ring has port 2
at both ends, so a chip sends and takes a flit per cycle in each ring direction.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec import protocol
from spec.nic import READERS
from spec.protocol import COLLECTIVE_SEM, LOCAL_PORTS, MINUS_PORT, REQUEST_PORT, RESPONSE_PORT

from ..ici.packet import coord_layout, eject_layout
from ..lib.arbiter import RoundRobin
from ..lib.codes import hw
from ..lib.counter import COUNTER_WIDTH, count_events
from ..lib.tree import tree_sum
from .collective import CollectiveEngine, descriptor_layout
from .endpoint import (
    Receiver,
    Responder,
    Sender,
    command_layout,
    completion_layout,
    flit_reads,
    read_beat_layout,
    write_beat_layout,
)
from .hbm_port import HBM_DEPTH, HbmPort, SpaceSplit
from .memory import RESPONSE_DEPTH

__all__ = ["MessageUnit", "MessageMux", "ChipEndpoint", "endpoint_memory", "hbm_clients",
           "COMPLETION_DEPTH", "READ_GROUPS", "WRITE_GROUPS"]

PacketKind = hw(protocol.PacketKind)

COMPLETION_DEPTH = 16
"""Completions a chip holds for its host before its Receivers wait."""
READ_GROUPS = [[0, 1, 3], [2], [4, 6], [5]]
"""The local memory's read ports and the readers each serves (see ``elaborate``): the host,
the + ring's sends and the message unit; the - ring's sends; the + ring's adds and the
Responder; the - ring's adds."""
WRITE_GROUPS = [[0, 1, 3], [2]]
"""The local memory's write ports and the writers each serves: the host, the + ring's
arrivals and the responses; the - ring's arrivals."""


class MessageUnit(wiring.Component):
    """Sends the host's messages: a ``WRITE`` of local memory to a remote chip, or a ``READ``
    of a remote chip's memory into local memory.

    A message is a ``command_layout`` whose ``reply_space`` / ``reply_address`` name its
    local side: where a ``WRITE``'s bytes are read here, where a ``READ``'s land here. It is
    taken when the previous one's reads are all issued, and offered on ``cmd``; once taken
    there, a ``WRITE``'s ``ceil(bytes / flit_bytes)`` flits are read (``read``, in order on
    ``read_data``) and passed on to ``data``. Any other kind, or a message carrying the
    collective engine's semaphore ``COLLECTIVE_SEM``, is consumed and counted in ``errors``.

    Members
    -------
    message : In(stream of command_layout)
    cmd : Out(stream of command_layout)
    data : Out(stream of flit_bits)
    read : Out(stream of read_beat_layout)
    read_data : In(stream of flit_bits)
    idle : Out(1)
        No message held, every flit of the last one read (its local bytes may change).
    errors : Out(32)
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "message": In(stream.Signature(command_layout(cfg))),
            "cmd": Out(stream.Signature(command_layout(cfg))),
            "data": Out(stream.Signature(cfg.ici.flit_bits)),
            "read": Out(stream.Signature(read_beat_layout(cfg))),
            "read_data": In(stream.Signature(cfg.ici.flit_bits)),
            "idle": Out(1),
            "errors": Out(COUNTER_WIDTH),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        shift = (cfg.flit_bytes - 1).bit_length()
        msg = self.message.payload
        remaining = flit_reads(m, cfg, self.read)
        held = Signal()
        bad = (((msg.kind != PacketKind.WRITE) & (msg.kind != PacketKind.READ))
               | (msg.sem == COLLECTIVE_SEM))
        m.d.comb += [self.message.ready.eq(~held & (remaining == 0)),
                     self.cmd.valid.eq(held), self.idle.eq(~held & (remaining == 0))]
        with m.If(self.message.valid & self.message.ready & ~bad):
            m.d.sync += [self.cmd.payload.eq(msg), held.eq(1)]
        with m.If(self.cmd.valid & self.cmd.ready):
            cmd = self.cmd.payload
            m.d.sync += [
                held.eq(0),
                remaining.eq(((cmd.bytes + cfg.flit_bytes - 1) >> shift)
                             * (cmd.kind == PacketKind.WRITE)),
                self.read.payload.space.eq(cmd.reply_space),
                self.read.payload.address.eq(cmd.reply_address),
            ]
        wiring.connect(m, wiring.flipped(self.read_data), wiring.flipped(self.data))
        count_events(m, self, {"errors": self.message.valid & self.message.ready & bad})
        return m


class MessageMux(wiring.Component):
    """Shares one :class:`~.endpoint.Sender` between ``count`` message sources, a message at a
    time: a command is chosen round robin among the valid ones when the Sender takes one, and
    the Sender's data then comes from its source until the next command.

    Members
    -------
    cmd : In(stream of command_layout).array(count)
    data : In(stream of flit_bits).array(count)
    o_cmd : Out(stream of command_layout)
    o_data : Out(stream of flit_bits)
    """

    def __init__(self, cfg, count):
        self._count = count
        super().__init__({
            "cmd": In(stream.Signature(command_layout(cfg))).array(count),
            "data": In(stream.Signature(cfg.ici.flit_bits)).array(count),
            "o_cmd": Out(stream.Signature(command_layout(cfg))),
            "o_data": Out(stream.Signature(cfg.ici.flit_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.arb = arb = RoundRobin(self._count)
        owner = Signal(range(max(2, self._count)))
        m.d.comb += [arb.requests.eq(Cat(*(c.valid for c in self.cmd))),
                     arb.advance.eq(self.o_cmd.ready), self.o_cmd.valid.eq(arb.valid)]
        for i, (cmd, data) in enumerate(zip(self.cmd, self.data, strict=True)):
            with m.If(arb.grant == i):
                m.d.comb += [self.o_cmd.payload.eq(cmd.payload), cmd.ready.eq(self.o_cmd.ready)]
            with m.If(owner == i):
                m.d.comb += [self.o_data.valid.eq(data.valid),
                             self.o_data.payload.eq(data.payload),
                             data.ready.eq(self.o_data.ready)]
        with m.If(self.o_cmd.valid & self.o_cmd.ready):
            m.d.sync += owner.eq(arb.grant)
        return m


def _merge(m, name, sources, sink):
    """Beats of the streams ``sources`` onto ``sink``, one per cycle, round robin."""
    m.submodules[name] = arb = RoundRobin(len(sources))
    m.d.comb += [arb.requests.eq(Cat(*(s.valid for s in sources))), arb.advance.eq(sink.ready),
                 sink.valid.eq(arb.valid)]
    for i, src in enumerate(sources):
        with m.If(arb.grant == i):
            m.d.comb += [sink.payload.eq(src.payload), src.ready.eq(sink.ready)]


class ChipEndpoint(wiring.Component):
    """A chip's ICI endpoint on its router's three local ports, as every pod chip has it:
    the Senders, Receivers and Responder, the collective engine and the message unit (see the
    module docstring); memory is the chip's (its clients' ports here).

    Members
    -------
    coords : In(coord_layout)
    inject : Out(stream of flit_bits).array(3)
        To the router's local ports (0 requests, 1 responses, 2 the - ring's requests).
    eject : In(stream of eject_layout).array(3)
    message : In(stream of command_layout)
        A message for the :class:`MessageUnit`.
    collective : In(stream of descriptor_layout)
        A collective for the :class:`~.collective.CollectiveEngine`.
    busy : Out(1)
        The engine is running a collective.
    messages_idle : Out(1)
        The :class:`MessageUnit`'s ``idle``.
    write : Out(stream of write_beat_layout).array(3)
        The Receivers' writes: requests (port 0), the - ring's requests (port 2), responses.
    read : Out(stream of read_beat_layout).array(6), read_data : In(...).array(6)
        The memory's readers: the engine's two directions, the message unit, the two request
        Receivers' adds, the Responder.
    done : Out(stream of completion_layout)
        Every completion here but the engine's: messages landed here (``WRITE``,
        ``READ_DATA``), and ``ACK`` s of this chip's writes.
    pending : In(1)
        The memory's writes are not all visible yet (the Receivers' ``pending``).
    dropped, seq_errors : Out(32)
        Bad packets dropped and sequence mismatches (the Receivers').
    engine_errors, message_errors : Out(32)
        Descriptors and messages refused.
    """

    def __init__(self, cfg, *, staging_base):
        self._cfg, self._staging = cfg, staging_base
        ici = cfg.ici
        super().__init__({
            "coords": In(coord_layout(ici)),
            "inject": Out(stream.Signature(ici.flit_bits)).array(LOCAL_PORTS),
            "eject": In(stream.Signature(eject_layout(ici))).array(LOCAL_PORTS),
            "message": In(stream.Signature(command_layout(cfg))),
            "collective": In(stream.Signature(descriptor_layout(cfg))),
            "busy": Out(1), "messages_idle": Out(1),
            "write": Out(stream.Signature(write_beat_layout(cfg))).array(3),
            "read": Out(stream.Signature(read_beat_layout(cfg))).array(6),
            "read_data": In(stream.Signature(ici.flit_bits)).array(6),
            "done": Out(stream.Signature(completion_layout(cfg))),
            "pending": In(1),
            "dropped": Out(COUNTER_WIDTH), "seq_errors": Out(COUNTER_WIDTH),
            "engine_errors": Out(COUNTER_WIDTH), "message_errors": Out(COUNTER_WIDTH),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, staging = self._cfg, self._staging
        m.submodules.sender = sender = Sender(cfg)
        m.submodules.minus_sender = minus_sender = Sender(cfg)
        m.submodules.requests = requests = Receiver(cfg, staging_base=staging)
        m.submodules.minus_requests = minus_requests = Receiver(cfg, staging_base=staging)
        m.submodules.responses = responses = Receiver(cfg)
        m.submodules.responder = responder = Responder(cfg)
        m.submodules.engine = engine = CollectiveEngine(cfg, staging_base=staging)
        m.submodules.messages = messages = MessageUnit(cfg)

        # Memory clients: each ring direction's sends and arrivals have ports of their own in
        # the chip's grouping (READ_GROUPS, WRITE_GROUPS), so a collective moves a flit per
        # cycle each way.
        for w, rx in zip(self.write, (requests, minus_requests, responses), strict=True):
            wiring.connect(m, rx.write, wiring.flipped(w))
        readers = [(engine.read[0], engine.read_data[0]), (engine.read[1], engine.read_data[1]),
                   (messages.read, messages.read_data), (requests.read, requests.read_data),
                   (minus_requests.read, minus_requests.read_data),
                   (responder.read, responder.read_data)]
        for i, (read, data) in enumerate(readers):
            wiring.connect(m, read, wiring.flipped(self.read[i]))
            wiring.connect(m, wiring.flipped(self.read_data[i]), data)
        m.d.comb += [responses.read.ready.eq(0), responses.read_data.valid.eq(0)]

        # Requests: the + ring and the message unit share a Sender a message at a time; the
        # - ring has its own.
        m.d.comb += engine.coords.eq(self.coords)
        wiring.connect(m, wiring.flipped(self.collective), engine.start)
        wiring.connect(m, wiring.flipped(self.message), messages.message)
        m.submodules.mux = mux = MessageMux(cfg, 2)
        wiring.connect(m, engine.cmd[0], mux.cmd[0])
        wiring.connect(m, engine.data[0], mux.data[0])
        wiring.connect(m, messages.cmd, mux.cmd[1])
        wiring.connect(m, messages.data, mux.data[1])
        for s, cmd, data, port in ((sender, mux.o_cmd, mux.o_data, REQUEST_PORT),
                                   (minus_sender, engine.cmd[1], engine.data[1], MINUS_PORT)):
            m.d.comb += [s.cmd.valid.eq(cmd.valid), cmd.ready.eq(s.cmd.ready),
                         s.cmd.payload.eq(cmd.payload), s.cmd.payload.dst_port.eq(port)]
            wiring.connect(m, data, s.data)
            wiring.connect(m, s.o, wiring.flipped(self.inject[port]))

        # Arrivals: each on its port's Receiver.
        for rx, port in ((requests, REQUEST_PORT), (minus_requests, MINUS_PORT),
                         (responses, RESPONSE_PORT)):
            wiring.connect(m, wiring.flipped(self.eject[port]), rx.i)
            m.d.comb += rx.pending.eq(self.pending)
        m.d.comb += [responder.job.payload.eq(requests.respond.payload),
                     responder.job.payload.dst_port.eq(RESPONSE_PORT),
                     responder.job.valid.eq(requests.respond.valid),
                     requests.respond.ready.eq(responder.job.ready),
                     # Only the engine's stores and adds arrive on port 2, and a response asks
                     # for nothing.
                     minus_requests.respond.ready.eq(1), responses.respond.ready.eq(1)]
        wiring.connect(m, responder.o, wiring.flipped(self.inject[RESPONSE_PORT]))

        # Completions: the engine's to the engine, the rest out on ``done``.
        to_engine, others = [], []
        for i, rx in enumerate((requests, minus_requests, responses)):
            sig = stream.Signature(completion_layout(cfg))
            mine, other = sig.create(path=(f"engine{i}",)), sig.create(path=(f"host{i}",))
            is_mine = rx.done.payload.sem == COLLECTIVE_SEM
            m.d.comb += [mine.payload.eq(rx.done.payload), other.payload.eq(rx.done.payload),
                         mine.valid.eq(rx.done.valid & is_mine),
                         other.valid.eq(rx.done.valid & ~is_mine),
                         rx.done.ready.eq(Mux(is_mine, mine.ready, other.ready))]
            to_engine.append(mine)
            others.append(other)
        _merge(m, "arrived_arb", to_engine[:2], engine.arrived)
        m.d.comb += to_engine[2].ready.eq(1)
        _merge(m, "done_arb", others, wiring.flipped(self.done))

        rxs = (requests, minus_requests, responses)
        m.d.comb += [
            self.busy.eq(engine.busy), self.messages_idle.eq(messages.idle),
            self.dropped.eq(tree_sum([rx.dropped for rx in rxs])),
            self.seq_errors.eq(tree_sum([rx.seq_errors for rx in rxs])),
            self.engine_errors.eq(engine.errors), self.message_errors.eq(messages.errors),
        ]
        return m


def endpoint_memory(m, endpoint, memory, host_write, host_read, host_read_data):
    """Join a chip's ``endpoint`` and its host port to the memory clients of ``memory`` (a
    :class:`~.memory.LocalMemory` of ``READ_GROUPS`` / ``WRITE_GROUPS``, or a
    :class:`~.hbm_port.SpaceSplit` in front of one): the host is the first writer and
    reader, the endpoint's follow."""
    wiring.connect(m, host_write, memory.write[0])
    for i, w in enumerate(endpoint.write):
        wiring.connect(m, w, memory.write[1 + i])
    wiring.connect(m, host_read, memory.read[0])
    wiring.connect(m, memory.read_data[0], host_read_data)
    for i, (read, data) in enumerate(zip(endpoint.read, endpoint.read_data, strict=True)):
        wiring.connect(m, read, memory.read[1 + i])
        wiring.connect(m, memory.read_data[1 + i], data)


def hbm_clients(m, cfg, endpoint, memory, axi, bus):
    """Put a :class:`~.hbm_port.SpaceSplit` in front of ``memory`` and an
    :class:`~.hbm_port.HbmPort` on ``axi`` (the chip's HBM port, of signature ``bus``) beside
    it, for the memory clients of ``endpoint`` and the host; returns the split (their
    clients) and the HBM port's error counter."""
    m.submodules.split = clients = SpaceSplit(cfg, writers=4, readers=READERS,
                                              depth=RESPONSE_DEPTH + HBM_DEPTH)
    m.submodules.hbm = hbm = HbmPort(cfg, writers=4, readers=READERS, bus=bus)
    clients.join(m, "vmem", memory)
    clients.join(m, "hbm", hbm)
    wiring.connect(m, hbm.axi, axi)
    m.d.comb += endpoint.pending.eq(hbm.pending)
    return clients, hbm.errors
