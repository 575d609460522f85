"""A pod's simulation chip (docs/pod.md, "Pod top"): the ICI endpoint, the collective engine
and a message unit around a local memory, on a router's two local ports.

    message ─► MessageUnit ─┐                      ┌─► inject[0] (requests)
    collective ─► engine ───┴─► Sender ────────────┘
                  ▲ arrived (its semaphore)
    eject[0] ─► Receiver ─► done ─┬─► completion queue ─► done
                  └─► respond ─► Responder ─► inject[1] (responses)
    eject[1] ─► Receiver ─► done ─┘
    host_write, host_read ─► LocalMemory ◄─ every reader and writer above

Requests leave on local port 0 for port 0 of their destination, responses on port 1 for
port 1: each class has an ejection port and a Receiver of its own, so a response never
waits behind a request (docs/pod.md, "Traffic classes").
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..ici.packet import coord_layout, eject_layout
from ..lib.arbiter import RoundRobin
from ..lib.counter import COUNTER_WIDTH, count_events
from ..lib.queue import Queue
from ..lib.tree import tree_sum
from .collective import CollectiveEngine, descriptor_layout
from .config import COLLECTIVE_SEM, REQUEST_PORT, RESPONSE_PORT
from .endpoint import (
    Kind,
    Receiver,
    Responder,
    Sender,
    command_layout,
    completion_layout,
    read_beat_layout,
    write_beat_layout,
)
from .memory import LocalMemory

__all__ = ["MessageUnit", "PodNode", "COMPLETION_DEPTH", "READ_GROUPS"]

COMPLETION_DEPTH = 16
"""Completions a chip holds for its host before its Receivers wait."""
READ_GROUPS = [[0, 1, 2], [3, 4]]
"""The local memory's two read ports and the readers each serves (see ``elaborate``)."""


class MessageUnit(wiring.Component):
    """Sends the host's messages: a ``WRITE`` of local memory to a remote chip, or a ``READ``
    of a remote chip's memory into local memory.

    A message is a ``command_layout`` whose ``reply_space`` / ``reply_address`` name its
    local side: where a ``WRITE``'s bytes are read here, where a ``READ``'s land here. It is
    taken when the previous one's reads are all issued, and offered on ``cmd``; once taken
    there, a ``WRITE``'s ``ceil(bytes / flit_bytes)`` flits are read (``read``, in order on
    ``read_data``) and passed on to ``data``. Any other kind is consumed and counted in
    ``errors``.

    Members
    -------
    message : In(stream of command_layout)
    cmd : Out(stream of command_layout)
    data : Out(stream of flit_bits)
    read : Out(stream of read_beat_layout)
    read_data : In(stream of flit_bits)
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
            "errors": Out(COUNTER_WIDTH),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        shift = (cfg.flit_bytes - 1).bit_length()
        msg = self.message.payload
        remaining = Signal(range((cfg.max_message >> shift) + 2))
        held = Signal()
        bad = (msg.kind != Kind.WRITE) & (msg.kind != Kind.READ)
        m.d.comb += [self.message.ready.eq(~held & (remaining == 0)),
                     self.cmd.valid.eq(held), self.read.valid.eq(~held & (remaining != 0))]
        with m.If(self.message.valid & self.message.ready & ~bad):
            m.d.sync += [self.cmd.payload.eq(msg), held.eq(1)]
        with m.If(self.cmd.valid & self.cmd.ready):
            cmd = self.cmd.payload
            m.d.sync += [
                held.eq(0),
                remaining.eq(((cmd.bytes + cfg.flit_bytes - 1) >> shift)
                             * (cmd.kind == Kind.WRITE)),
                self.read.payload.space.eq(cmd.reply_space),
                self.read.payload.address.eq(cmd.reply_address),
            ]
        with m.If(self.read.valid & self.read.ready):
            m.d.sync += [remaining.eq(remaining - 1),
                         self.read.payload.address.eq(self.read.payload.address
                                                      + cfg.flit_bytes)]
        wiring.connect(m, wiring.flipped(self.read_data), wiring.flipped(self.data))
        count_events(m, self, {"errors": self.message.valid & self.message.ready & bad})
        return m


class PodNode(wiring.Component):
    """One chip of a pod: see the module docstring.

    Members
    -------
    coords : In(coord_layout)
    inject : Out(stream of flit_bits).array(2)
        To the router's local ports (0 requests, 1 responses).
    eject : In(stream of eject_layout).array(2)
    host_write : In(stream of write_beat_layout)
    host_read : In(stream of read_beat_layout)
    host_read_data : Out(stream of flit_bits)
        The host's port on the local memory (load inputs, read results).
    message : In(stream of command_layout)
        A message for the :class:`MessageUnit`.
    collective : In(stream of descriptor_layout)
        A collective for the :class:`~.collective.CollectiveEngine`.
    busy : Out(1)
        The engine is running a collective.
    done : Out(stream of completion_layout)
        Every completion here but the engine's: messages landed here (``WRITE``,
        ``READ_DATA``), and ``ACK`` s of this chip's writes.
    dropped, seq_errors, errors : Out(32)
        Bad packets dropped and sequence mismatches (both Receivers); bad descriptors,
        messages and memory accesses.
    """

    def __init__(self, cfg, sram):
        self._cfg, self._sram = cfg, sram
        ep, ici = cfg.endpoint, cfg.ici
        super().__init__({
            "coords": In(coord_layout(ici)),
            "inject": Out(stream.Signature(ici.flit_bits)).array(2),
            "eject": In(stream.Signature(eject_layout(ici))).array(2),
            "host_write": In(stream.Signature(write_beat_layout(ep))),
            "host_read": In(stream.Signature(read_beat_layout(ep))),
            "host_read_data": Out(stream.Signature(ici.flit_bits)),
            "message": In(stream.Signature(command_layout(ep))),
            "collective": In(stream.Signature(descriptor_layout(ep))),
            "busy": Out(1),
            "done": Out(stream.Signature(completion_layout(ep))),
            "dropped": Out(COUNTER_WIDTH),
            "seq_errors": Out(COUNTER_WIDTH),
            "errors": Out(COUNTER_WIDTH),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg.endpoint
        m.submodules.sender = sender = Sender(cfg)
        m.submodules.requests = requests = Receiver(cfg)
        m.submodules.responses = responses = Receiver(cfg)
        m.submodules.responder = responder = Responder(cfg)
        m.submodules.engine = engine = CollectiveEngine(cfg)
        m.submodules.messages = messages = MessageUnit(cfg)
        m.submodules.memory = memory = LocalMemory(
            cfg, self._sram, words=self._cfg.memory_words, writers=3, readers=5,
            read_groups=READ_GROUPS)

        # Memory clients: writers host, requests, responses; readers host, engine, message
        # unit (port 0: what the Sender sends, and the host), requests (adds) and responder
        # (port 1: what arrives), so a reduce-scatter's sends and adds each read a flit per
        # cycle.
        for i, w in enumerate([wiring.flipped(self.host_write), requests.write,
                               responses.write]):
            wiring.connect(m, w, memory.write[i])
        readers = [(wiring.flipped(self.host_read), wiring.flipped(self.host_read_data)),
                   (engine.read, engine.read_data), (messages.read, messages.read_data),
                   (requests.read, requests.read_data), (responder.read, responder.read_data)]
        for i, (read, data) in enumerate(readers):
            wiring.connect(m, read, memory.read[i])
            wiring.connect(m, memory.read_data[i], data)
        m.d.comb += [responses.read.ready.eq(0), responses.read_data.valid.eq(0)]

        # Requests: the engine and the message unit share the Sender a message at a time.
        m.d.comb += engine.coords.eq(self.coords)
        wiring.connect(m, wiring.flipped(self.collective), engine.start)
        wiring.connect(m, wiring.flipped(self.message), messages.message)
        m.submodules.cmd_arb = arb = RoundRobin(2)
        owner = Signal()
        sources = [(engine.cmd, engine.data), (messages.cmd, messages.data)]
        m.d.comb += [arb.requests.eq(Cat(engine.cmd.valid, messages.cmd.valid)),
                     arb.advance.eq(sender.cmd.ready), sender.cmd.valid.eq(arb.valid)]
        for i, (cmd, data) in enumerate(sources):
            with m.If(arb.grant == i):
                m.d.comb += [sender.cmd.payload.eq(cmd.payload), cmd.ready.eq(sender.cmd.ready)]
            with m.If(owner == i):
                m.d.comb += [sender.data.valid.eq(data.valid),
                             sender.data.payload.eq(data.payload),
                             data.ready.eq(sender.data.ready)]
        m.d.comb += sender.cmd.payload.dst_port.eq(REQUEST_PORT)
        with m.If(sender.cmd.valid & sender.cmd.ready):
            m.d.sync += owner.eq(arb.grant)
        wiring.connect(m, sender.o, wiring.flipped(self.inject[REQUEST_PORT]))

        # Arrivals: requests and responses each on their own port and Receiver.
        wiring.connect(m, wiring.flipped(self.eject[REQUEST_PORT]), requests.i)
        wiring.connect(m, wiring.flipped(self.eject[RESPONSE_PORT]), responses.i)
        m.d.comb += [responder.job.payload.eq(requests.respond.payload),
                     responder.job.payload.dst_port.eq(RESPONSE_PORT),
                     responder.job.valid.eq(requests.respond.valid),
                     requests.respond.ready.eq(responder.job.ready),
                     responses.respond.ready.eq(1)]   # a response asks for nothing
        wiring.connect(m, responder.o, wiring.flipped(self.inject[RESPONSE_PORT]))

        # Completions: the engine's to the engine, the rest queued for the host.
        mine = requests.done.payload.sem == COLLECTIVE_SEM
        m.d.comb += [engine.arrived.payload.eq(requests.done.payload),
                     engine.arrived.valid.eq(requests.done.valid & mine)]
        m.submodules.done_queue = queue = Queue(completion_layout(cfg), COMPLETION_DEPTH)
        m.submodules.done_arb = darb = RoundRobin(2)
        m.d.comb += [darb.requests.eq(Cat(requests.done.valid & ~mine, responses.done.valid)),
                     darb.advance.eq(queue.i.ready), queue.i.valid.eq(darb.valid)]
        with m.If(darb.grant == 0):
            m.d.comb += [queue.i.payload.eq(requests.done.payload),
                         requests.done.ready.eq(queue.i.ready)]
        with m.Else():
            m.d.comb += [queue.i.payload.eq(responses.done.payload),
                         responses.done.ready.eq(queue.i.ready)]
        with m.If(mine):
            m.d.comb += requests.done.ready.eq(engine.arrived.ready)
        wiring.connect(m, queue.o, wiring.flipped(self.done))

        m.d.comb += [
            self.busy.eq(engine.busy),
            self.dropped.eq(requests.dropped + responses.dropped),
            self.seq_errors.eq(requests.seq_errors + responses.seq_errors),
            self.errors.eq(tree_sum([engine.errors, messages.errors, memory.errors])),
        ]
        return m
