"""The chip's ICI endpoint, write path (docs/pod.md, "ICI endpoint"): a message, a run of
bytes for a remote chip's memory, leaves as ICI packets from the :class:`Sender` and is
written, packet by packet and in order, by the destination's :class:`Receiver`, which reports
the message complete when its last byte is written.

    cmd, data ─► Sender ─► inject (router) ··· eject (router) ─► Receiver ─► write (memory)
                                                                         └─► done (semaphore)

A packet is a head flit (the ICI header in its low bits, the endpoint header above it) and the
message's data in whole flits after it; the payload never shares the head flit, so no byte is
shifted across a flit boundary. Messages are requests: ICI class 0.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ..ici.packet import coord_layout, eject_layout, header_layout
from ..lib.counter import COUNTER_WIDTH, count_events
from .config import ADDR_BITS, SEM_BITS, TAG_BITS

__all__ = ["Kind", "Op", "Space", "REQUEST_CLASS", "RESPONSE_CLASS", "endpoint_header_layout",
           "write_command_layout", "write_beat_layout", "completion_layout", "Sender",
           "Receiver"]

REQUEST_CLASS = 0
RESPONSE_CLASS = 1


class Kind(enum.Enum, shape=2):
    """What a packet is."""
    WRITE = 0
    READ = 1
    READ_DATA = 2
    ACK = 3


class Op(enum.Enum, shape=2):
    """What a ``WRITE`` does with the destination's elements."""
    STORE = 0
    ADD = 1
    ADD_FINAL = 2


class Space(enum.Enum, shape=1):
    """The destination memory."""
    HBM = 0
    VMEM = 1


def endpoint_header_layout(cfg):
    """The endpoint header, above the ICI header in a head flit (docs/pod.md, "Packets")."""
    return data.StructLayout({
        "kind": Kind, "space": Space, "op": Op, "fmt": 2, "last": 1, "ack": 1,
        "tag": TAG_BITS, "sem": SEM_BITS, "bytes": range(cfg.packet_bytes + 1),
        "address": ADDR_BITS,
    })


def write_command_layout(cfg):
    """A message to send: ``bytes`` bytes (0 allowed: one packet that only completes) to
    ``address`` of ``space`` at the destination's port ``dst_port``; ``sem`` is incremented
    there when it has landed."""
    return data.StructLayout({
        "dst": coord_layout(cfg.ici), "dst_port": cfg.ici.port_bits, "space": Space,
        "address": ADDR_BITS, "bytes": range(cfg.max_message + 1), "sem": SEM_BITS,
    })


def write_beat_layout(cfg):
    """A flit of data for memory: its byte address, data and byte strobe."""
    return data.StructLayout({"space": Space, "address": ADDR_BITS,
                              "data": cfg.ici.flit_bits, "strobe": cfg.flit_bytes})


def completion_layout(cfg):
    """A message that has landed: its source endpoint and semaphore."""
    return data.StructLayout({"src": range(cfg.ici.endpoints), "sem": SEM_BITS})


def _endpoint_index(cfg, coords, port):
    """``node * local_ports + port`` of a node's coordinates (node numbering of the ICI)."""
    ici = cfg.ici
    node, stride = Const(0), 1
    for d, k in enumerate(ici.dims):
        node = node + coords[d] * stride
        stride *= k
    return node * ici.local_ports + port


class Sender(wiring.Component):
    """Cuts messages into ICI write packets.

    A command is taken in the cycle it is offered when the sender is idle; then its packets go
    out back to back: a head flit, then up to ``max_packet - 1`` data flits taken from
    ``data`` (``ceil(bytes / flit_bytes)`` beats per message, the last one's unused bytes
    ignored), one flit per cycle while ``o`` and ``data`` allow. Every packet but the last
    carries ``packet_bytes``; the last the rest (``last`` set). The head's ``seq`` counts the
    packets sent to each destination endpoint modulo 256. One cycle is lost between messages.

    Members
    -------
    cmd : In(stream of write_command_layout)
    data : In(stream of flit_bits)
    o : Out(stream of flit_bits)
        To a router's ``inject`` port.
    packets : Out(32)
        Packets sent.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "cmd": In(stream.Signature(write_command_layout(cfg))),
            "data": In(stream.Signature(cfg.ici.flit_bits)),
            "o": Out(stream.Signature(cfg.ici.flit_bits)),
            "packets": Out(COUNTER_WIDTH),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, ici = self._cfg, self._cfg.ici
        shift = (cfg.flit_bytes - 1).bit_length()
        msg = Signal(write_command_layout(cfg))
        beats = Signal(range(ici.max_packet))
        seq = Array(Signal(8, name=f"seq{e}") for e in range(ici.endpoints))
        dst = _endpoint_index(cfg, [msg.dst[f"c{d}"] for d in range(ici.ndims)], msg.dst_port)
        size = Signal(range(cfg.packet_bytes + 1))
        m.d.comb += size.eq(Mux(msg.bytes > cfg.packet_bytes, cfg.packet_bytes, msg.bytes))

        head = Signal(header_layout(ici))
        ep = Signal(endpoint_header_layout(cfg))
        for d in range(ici.ndims):
            m.d.comb += head[f"dst{d}"].eq(msg.dst[f"c{d}"])
        m.d.comb += [
            head.dst_port.eq(msg.dst_port), head.tclass.eq(REQUEST_CLASS),
            head.length.eq(1 + ((size + cfg.flit_bytes - 1) >> shift)), head.seq.eq(seq[dst]),
            ep.kind.eq(Kind.WRITE), ep.space.eq(msg.space), ep.op.eq(Op.STORE),
            ep.last.eq(msg.bytes <= cfg.packet_bytes), ep.sem.eq(msg.sem), ep.bytes.eq(size),
            ep.address.eq(msg.address),
        ]
        head_taken = Signal()
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += msg.eq(self.cmd.payload)
                    m.next = "HEAD"
            with m.State("HEAD"):
                m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(Cat(head, ep)),
                             head_taken.eq(self.o.ready)]
                with m.If(self.o.ready):
                    m.d.sync += [seq[dst].eq(seq[dst] + 1), msg.bytes.eq(msg.bytes - size),
                                 msg.address.eq(msg.address + size),
                                 beats.eq(head.length - 1)]
                    m.next = "BODY"
                    with m.If(size == 0):
                        m.next = "IDLE"
            with m.State("BODY"):
                m.d.comb += [self.o.valid.eq(self.data.valid),
                             self.o.payload.eq(self.data.payload),
                             self.data.ready.eq(self.o.ready)]
                with m.If(self.o.valid & self.o.ready):
                    m.d.sync += beats.eq(beats - 1)
                    with m.If(beats == 1):
                        m.next = "HEAD"
                        with m.If(msg.bytes == 0):
                            m.next = "IDLE"
        count_events(m, self, {"packets": head_taken})
        return m


class Receiver(wiring.Component):
    """Writes arriving write packets to memory and reports each message complete.

    A head is taken in the cycle it arrives; its data flits then go to ``write`` one per cycle
    as ``write`` allows (``i.ready`` follows ``write.ready``), at the packet's address and the
    addresses after it, with a byte strobe covering the packet's ``bytes``. After the last flit
    of a message's last packet has been taken by ``write``, ``done`` offers its source and
    semaphore, and the next head waits until ``done`` is taken. Each source endpoint's ``seq``
    is checked against the count of its packets received: a mismatch is counted in
    ``seq_errors`` (and the count resynchronises to the packet). A packet of a kind this path
    does not serve (anything but ``WRITE``) is consumed and counted in ``dropped``.

    Members
    -------
    i : In(stream of eject_layout)
        From a router's ``eject`` port.
    write : Out(stream of write_beat_layout)
    done : Out(stream of completion_layout)
    packets, seq_errors, dropped : Out(32)
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "i": In(stream.Signature(eject_layout(cfg.ici))),
            "write": Out(stream.Signature(write_beat_layout(cfg))),
            "done": Out(stream.Signature(completion_layout(cfg))),
            "packets": Out(COUNTER_WIDTH),
            "seq_errors": Out(COUNTER_WIDTH),
            "dropped": Out(COUNTER_WIDTH),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, ici = self._cfg, self._cfg.ici
        hb = ici.header_bits
        head = data.View(header_layout(ici), self.i.payload.data[:hb])
        epl = endpoint_header_layout(cfg)
        ep = data.View(epl, self.i.payload.data[hb:hb + epl.size])
        src = Signal(range(ici.endpoints))
        m.d.comb += src.eq(_endpoint_index(cfg, [head[f"src{d}"] for d in range(ici.ndims)],
                                           head.src_port))
        expected = Array(Signal(8, name=f"expected{e}") for e in range(ici.endpoints))
        pkt = Signal(epl)
        sender = Signal(range(ici.endpoints))
        events = {"packets": Signal(), "seq_errors": Signal(), "dropped": Signal()}
        strobe = Signal(cfg.flit_bytes)
        m.d.comb += strobe.eq(Mux(pkt.bytes >= cfg.flit_bytes, (1 << cfg.flit_bytes) - 1,
                                  (Const(1, cfg.flit_bytes + 1) << pkt.bytes) - 1))
        m.d.comb += [self.done.payload.src.eq(sender), self.done.payload.sem.eq(pkt.sem)]
        with m.FSM():
            with m.State("HEAD"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid):
                    m.d.comb += [events["packets"].eq(1),
                                 events["seq_errors"].eq(head.seq != expected[src]),
                                 events["dropped"].eq(ep.kind != Kind.WRITE)]
                    m.d.sync += [expected[src].eq(head.seq + 1), pkt.eq(ep), sender.eq(src)]
                    with m.If(ep.kind != Kind.WRITE):
                        with m.If(~self.i.payload.last):
                            m.next = "DROP"
                    with m.Elif(~self.i.payload.last):
                        m.next = "BODY"
                    with m.Elif(ep.last):
                        m.next = "DONE"
            with m.State("BODY"):
                m.d.comb += [
                    self.write.valid.eq(self.i.valid), self.i.ready.eq(self.write.ready),
                    self.write.payload.space.eq(pkt.space),
                    self.write.payload.address.eq(pkt.address),
                    self.write.payload.data.eq(self.i.payload.data),
                    self.write.payload.strobe.eq(strobe),
                ]
                with m.If(self.i.valid & self.i.ready):
                    m.d.sync += [pkt.address.eq(pkt.address + cfg.flit_bytes),
                                 pkt.bytes.eq(Mux(pkt.bytes > cfg.flit_bytes,
                                                  pkt.bytes - cfg.flit_bytes, 0))]
                    with m.If(self.i.payload.last):
                        m.next = "HEAD"
                        with m.If(pkt.last):
                            m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += self.done.valid.eq(1)
                with m.If(self.done.ready):
                    m.next = "HEAD"
            with m.State("DROP"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid & self.i.payload.last):
                    m.next = "HEAD"
        count_events(m, self, events)
        return m
