"""The chip's ICI endpoint (docs/pod.md, "ICI endpoint"): messages, runs of bytes for a remote
chip's memory or requests for one, leave as ICI packets from a :class:`Sender`; the
destination's :class:`Receiver` writes (or adds) them to memory packet by packet, in order,
reports each message complete when its last byte is written, and hands the work it owes the
requester (the data of a ``READ``, the ``ACK`` of an acknowledged ``WRITE``) to its
:class:`Responder`, which sends it back as response packets.

    cmd, data ─► Sender ──────► class 0 ··· ─► Receiver ─► write, read (memory)
                                                   │    └─► done (completion)
                                                   ▼ respond
    read (memory) ◄─ Responder ─► class 1 ··· ─► Receiver (requester)

A packet is a head flit (the ICI header in its low bits, the endpoint header above it) and
its payload in whole flits after it; the payload never shares the head flit, so no byte is
shifted across a flit boundary. Requests (``WRITE``, ``READ``) travel in ICI class 0,
responses (``READ_DATA``, ``ACK``) in class 1.
"""

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from spec import protocol
from spec.protocol import ADDR_BITS, NO_SEM, REQUEST_CLASS, RESPONSE_CLASS, SEM_BITS, TAG_BITS

from ..ici.packet import coord_layout, eject_layout, endpoint_number, header_layout
from ..lib.codes import hw
from ..lib.counter import COUNTER_WIDTH, count_events
from ..lib.fp import add_fp32, fp32_to_bf16

__all__ = ["endpoint_header_layout", "command_layout", "read_request_layout",
           "write_beat_layout", "read_beat_layout", "completion_layout", "Sender", "Receiver",
           "Responder", "ADD_AHEAD", "flit_reads", "bf16_add", "staging_address"]

PacketKind, IciOp = hw(protocol.PacketKind), hw(protocol.IciOp)
IciFmt, IciSpace = hw(protocol.IciFmt), hw(protocol.IciSpace)

ADD_AHEAD = 3
"""Flits a Receiver reads ahead of its writes in an add (what keeps it at a flit per cycle
through the memory's latency)."""


def endpoint_header_layout(cfg):
    """The endpoint header, above the ICI header in a head flit (docs/pod.md, "Packets")."""
    return data.StructLayout({
        "kind": PacketKind, "space": IciSpace, "op": IciOp, "fmt": IciFmt, "last": 1, "ack": 1,
        "tag": TAG_BITS, "sem": SEM_BITS, "bytes": range(cfg.packet_bytes + 1),
        "address": ADDR_BITS,
    })


def command_layout(cfg):
    """A message to send to the endpoint ``dst``, port ``dst_port``.

    ``WRITE`` / ``READ_DATA``: ``bytes`` bytes (0 allowed: one packet that only completes)
    from the sender's ``data`` to ``address`` of ``space`` at the destination, which
    increments ``sem`` when they have landed; a ``WRITE`` does ``op`` in ``fmt`` there and
    asks for an ``ACK`` (carrying ``tag``) if ``ack`` is set. ``READ``: ``bytes`` bytes at
    ``address`` of ``space`` at the destination, to land at ``reply_address`` of
    ``reply_space`` here, completing on ``sem`` here with ``tag``. ``ACK``: ``tag``, no
    bytes."""
    return data.StructLayout({
        "kind": PacketKind, "dst": coord_layout(cfg.ici), "dst_port": cfg.ici.port_bits,
        "space": IciSpace, "address": ADDR_BITS, "bytes": range(cfg.max_message + 1),
        "op": IciOp, "fmt": IciFmt, "ack": 1, "tag": TAG_BITS, "sem": SEM_BITS,
        "reply_space": IciSpace, "reply_address": ADDR_BITS,
    })


def read_request_layout(cfg):
    """The payload flit of a ``READ``: where the data lands at the requester, and how much."""
    return data.StructLayout({"space": IciSpace, "address": ADDR_BITS,
                              "bytes": range(cfg.max_message + 1)})


def write_beat_layout(cfg):
    """A flit of data for memory: its byte address, data and byte strobe."""
    return data.StructLayout({"space": IciSpace, "address": ADDR_BITS,
                              "data": cfg.ici.flit_bits, "strobe": cfg.flit_bytes})


def read_beat_layout(cfg):
    """The address of a flit to read from memory."""
    return data.StructLayout({"space": IciSpace, "address": ADDR_BITS})


def completion_layout(cfg):
    """A message that has completed here: a ``WRITE`` or ``READ_DATA`` message that has
    landed (its semaphore ``sem``), or an ``ACK``; ``src`` the endpoint that sent it, ``tag``
    the requester's slot it carried."""
    return data.StructLayout({"kind": PacketKind, "src": range(cfg.ici.endpoints), "sem": SEM_BITS,
                              "tag": TAG_BITS})


def bf16_add(ep):
    """Whether a header or command is a ``WRITE`` that adds ``bfloat16`` elements."""
    return (ep.kind == PacketKind.WRITE) & (ep.op != IciOp.STORE) & (ep.fmt == IciFmt.BF16)


def flit_reads(m, cfg, read, *, name="remaining", wrap=None):
    """The flit reads of one message on ``read``: returns the count of flits still to read;
    while it is not zero ``read`` offers the next flit's address, a flit further per read
    taken. A user starts a message by loading the count and ``read.payload``'s address.
    While ``wrap`` (a signal) is set the address wraps round within its staging slot."""
    shift = (cfg.flit_bytes - 1).bit_length()
    remaining = Signal(range((cfg.max_message >> shift) + 2), name=name)
    m.d.comb += read.valid.eq(remaining != 0)
    address = read.payload.address
    following = address + cfg.flit_bytes
    if wrap is not None:
        mask = cfg.staging_slot - 1
        following = Mux(wrap, (address & ~mask) | (following & mask), following)
    with m.If(read.valid & read.ready):
        m.d.sync += [remaining.eq(remaining - 1), address.eq(following)]
    return remaining


def staging_address(cfg, base, tag, address):
    """Where the fp32 partial of the bfloat16 element at ``address`` stands in staging slot
    ``tag mod 4`` of the staging area at ``base`` (docs/pod.md, "bfloat16"): at twice the
    element's address, modulo the slot."""
    return base + (tag[:2] * cfg.staging_slot) + ((address << 1) & (cfg.staging_slot - 1))


class Sender(wiring.Component):
    """Cuts messages into ICI packets of one traffic class.

    A command is taken in the cycle it is offered when the sender is idle. A ``WRITE`` or
    ``READ_DATA`` then goes out as packets back to back: a head flit, then up to
    ``max_packet - 1`` data flits taken from ``data`` (``ceil(bytes / flit_bytes)`` beats per
    message, the last one's unused bytes ignored), one flit per cycle while ``o`` and ``data``
    allow. Every packet but the last carries ``packet_bytes``; the last the rest (``last``
    set), at the message's address plus the bytes before it (half of them for a ``bfloat16``
add, whose address is of the bfloat16 elements its fp32 partials add to). A ``READ`` is one
packet of two flits, the head (``bytes`` 0) and a
    ``read_request_layout`` flit; an ``ACK`` is a head alone (``bytes`` must be 0); neither
    takes ``data``. The head's ``seq`` counts the packets sent to each destination endpoint
    modulo 256, so one sender serves one class: the requests of an endpoint (class 0), or,
    with ``responses``, its :class:`Responder`'s responses (class 1). One cycle is lost
    between messages.

    Members
    -------
    cmd : In(stream of command_layout)
    data : In(stream of flit_bits)
    o : Out(stream of flit_bits)
        To a router's ``inject`` port.
    packets : Out(32)
        Packets sent.
    """

    def __init__(self, cfg, *, responses=False):
        self._cfg = cfg
        self._tclass = RESPONSE_CLASS if responses else REQUEST_CLASS
        super().__init__({
            "cmd": In(stream.Signature(command_layout(cfg))),
            "data": In(stream.Signature(cfg.ici.flit_bits)),
            "o": Out(stream.Signature(cfg.ici.flit_bits)),
            "packets": Out(COUNTER_WIDTH),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, ici = self._cfg, self._cfg.ici
        shift = (cfg.flit_bytes - 1).bit_length()
        msg = Signal(command_layout(cfg))
        is_read = msg.kind == PacketKind.READ
        beats = Signal(range(ici.max_packet))
        seq = Array(Signal(8, name=f"seq{e}") for e in range(ici.endpoints))
        dst = endpoint_number(cfg.ici, [msg.dst[f"c{d}"] for d in range(ici.ndims)], msg.dst_port)
        size = Signal(range(cfg.packet_bytes + 1))
        m.d.comb += size.eq(Mux(is_read, 0, Mux(msg.bytes > cfg.packet_bytes,
                                                cfg.packet_bytes, msg.bytes)))

        head = Signal(header_layout(ici))
        ep = Signal(endpoint_header_layout(cfg))
        request = Signal(read_request_layout(cfg))
        for d in range(ici.ndims):
            m.d.comb += head[f"dst{d}"].eq(msg.dst[f"c{d}"])
        m.d.comb += [
            head.dst_port.eq(msg.dst_port), head.tclass.eq(self._tclass),
            head.length.eq(Mux(is_read, 2, 1 + ((size + cfg.flit_bytes - 1) >> shift))),
            head.seq.eq(seq[dst]),
            ep.kind.eq(msg.kind), ep.space.eq(msg.space), ep.op.eq(msg.op), ep.fmt.eq(msg.fmt),
            ep.ack.eq(msg.ack), ep.tag.eq(msg.tag), ep.sem.eq(msg.sem), ep.bytes.eq(size),
            ep.last.eq(is_read | (msg.bytes <= cfg.packet_bytes)), ep.address.eq(msg.address),
            request.space.eq(msg.reply_space), request.address.eq(msg.reply_address),
            request.bytes.eq(msg.bytes),
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
                                 msg.address.eq(msg.address + Mux(bf16_add(msg), size >> 1,
                                                                  size)),
                                 beats.eq(head.length - 1)]
                    m.next = "BODY"
                    with m.If(is_read):
                        m.next = "REQUEST"
                    with m.Elif(size == 0):
                        m.next = "IDLE"
            with m.State("REQUEST"):
                m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(request)]
                with m.If(self.o.ready):
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
    """Executes arriving packets: writes and adds to memory, completions, work for the
    :class:`Responder`.

    A head is taken in the cycle it arrives. Then, by kind:

    - ``WRITE`` ``STORE`` and ``READ_DATA``: the data flits go to ``write`` one per cycle as
      ``write`` allows, at the packet's address and the addresses after it, with a byte strobe
      covering the packet's ``bytes``.
    - ``WRITE`` ``ADD`` / ``ADD_FINAL`` in ``int32`` or ``fp32``: the packet's flits are read
      at their addresses (``read``, answered in order on ``read_data``), up to
      ``ADD_AHEAD`` ahead of the writes, and each arriving flit is written back as
      ``arriving + present`` element by element (32-bit lanes; int32 wraps, fp32 is IEEE
      round to nearest even with NaN canonical, so the format's result of ``ADD_FINAL`` is the
      sum itself): one flit per cycle when the memory answers in time. A packet's flits are
      distinct addresses, and the next packet's reads start after this one's last write is
      taken, so two adds to one address in a row see each other (the memory must make a taken
      write visible to a later read).
    - ``WRITE`` ``ADD`` / ``ADD_FINAL`` in ``bfloat16``: the data are fp32 partials of the
      bfloat16 elements at the packet's address, a flit of partials per half flit of
      elements. Each arriving flit is added to its elements widened (exactly) to fp32, read
      from the flit that holds them; ``ADD`` writes the fp32 sums to staging slot ``tag mod 4``
      (``staging_address``), ``ADD_FINAL`` rounds them to bfloat16 (nearest even, NaN
      canonical) and writes them over the elements (a half-flit strobe).
    - ``READ``: the request flit is taken and the read is offered on ``respond`` (a
      ``READ_DATA`` command for the requester); the next head waits until it is taken.
    - ``ACK``: completes at once.

    After the last flit of a ``WRITE`` or ``READ_DATA`` message, or an ``ACK``, ``done``
    offers the completion; after a ``WRITE`` message that asked for one, ``respond`` offers
    its ``ACK``; the next head waits until they are taken.

    Each source endpoint's ``seq`` is checked per class against the count of its packets
    received: a mismatch is counted in ``seq_errors`` (and the count resynchronises). A bad
    packet is consumed with its body and counted in ``dropped``, without touching memory or
    completing anything: a kind in the wrong class, a ``WRITE`` or ``READ_DATA`` whose
    ``length`` is not ``1 + ceil(bytes / flit_bytes)``, a ``READ`` that is not two flits, an
    ``ACK`` with a body, an ``op`` of 3, or an add in format 3.

    Members
    -------
    i : In(stream of eject_layout)
        From a router's ``eject`` port.
    write : Out(stream of write_beat_layout)
    read : Out(stream of read_beat_layout)
    read_data : In(stream of flit_bits)
    done : Out(stream of completion_layout)
    respond : Out(stream of command_layout)
        To the :class:`Responder`.
    pending : In(1)
        The memory has writes it has taken but not yet made visible (an AXI4 port waiting for
        its responses): a completion, and an add packet's first read, wait until it falls.
    packets, seq_errors, dropped : Out(32)

    ``staging_base`` is the byte address of the staging area of ``bfloat16`` adds
    (``NICConfig.staging_bytes`` long, a multiple of ``staging_slot``).
    """

    def __init__(self, cfg, *, staging_base=0):
        self._cfg = cfg
        self._staging_base = staging_base
        super().__init__({
            "i": In(stream.Signature(eject_layout(cfg.ici))),
            "write": Out(stream.Signature(write_beat_layout(cfg))),
            "read": Out(stream.Signature(read_beat_layout(cfg))),
            "read_data": In(stream.Signature(cfg.ici.flit_bits)),
            "done": Out(stream.Signature(completion_layout(cfg))),
            "respond": Out(stream.Signature(command_layout(cfg))),
            "pending": In(1),
            "packets": Out(COUNTER_WIDTH),
            "seq_errors": Out(COUNTER_WIDTH),
            "dropped": Out(COUNTER_WIDTH),
        })

    def _bad(self, head, ep):
        """Whether a head starts a packet this receiver refuses (see the class docstring)."""
        cfg = self._cfg
        shift = (cfg.flit_bytes - 1).bit_length()
        data_kind = (ep.kind == PacketKind.WRITE) | (ep.kind == PacketKind.READ_DATA)
        request = (ep.kind == PacketKind.WRITE) | (ep.kind == PacketKind.READ)
        adds = (ep.op == IciOp.ADD) | (ep.op == IciOp.ADD_FINAL)
        return (
            (head.tclass != Mux(request, REQUEST_CLASS, RESPONSE_CLASS))
            | (data_kind & (head.length != 1 + ((ep.bytes + cfg.flit_bytes - 1) >> shift)))
            | ((ep.kind == PacketKind.READ) & (head.length != 2))
            | ((ep.kind == PacketKind.ACK) & (head.length != 1))
            | ((ep.kind == PacketKind.WRITE) & (ep.op.as_value() == 3))
            | ((ep.kind == PacketKind.WRITE) & adds & (ep.fmt.as_value() == 3)))

    def _outputs(self, m, pkt, origin, sender, request):
        """The payloads of ``write``, ``read``, ``done`` and ``respond`` from the packet being
        served (``pkt``, its head ``origin``, its source endpoint ``sender``) and, for a
        ``READ``, its ``request`` flit; ``write.data`` and the kind-specific fields of
        ``respond`` are the states' own."""
        cfg = self._cfg
        fb = cfg.flit_bytes
        strobe = Signal(fb)
        m.d.comb += strobe.eq(Mux(pkt.bytes >= fb, (1 << fb) - 1,
                                  (Const(1, fb + 1) << pkt.bytes) - 1))
        m.d.comb += [self.done.payload.kind.eq(pkt.kind), self.done.payload.src.eq(sender),
                     self.done.payload.sem.eq(pkt.sem), self.done.payload.tag.eq(pkt.tag)]
        # A bfloat16 add's partials go to staging, its results to half of the elements' flit.
        final = bf16_add(pkt) & (pkt.op == IciOp.ADD_FINAL)
        half = pkt.address[(fb - 1).bit_length() - 1]
        elements = Mux(pkt.bytes >= fb, fb, pkt.bytes) >> 1
        halved = Signal(fb)
        m.d.comb += halved.eq(((Const(1, fb + 1) << elements) - 1) << Mux(half, fb // 2, 0))
        address = Mux(final, pkt.address & ~(fb - 1),
                      Mux(bf16_add(pkt),
                          staging_address(cfg, self._staging_base, pkt.tag, pkt.address),
                          pkt.address))
        m.d.comb += [self.write.payload.space.eq(pkt.space),
                     self.write.payload.address.eq(address),
                     self.write.payload.strobe.eq(Mux(final, halved, strobe)),
                     self.read.payload.space.eq(pkt.space)]
        reply = self.respond.payload
        for d in range(cfg.ici.ndims):
            m.d.comb += reply.dst[f"c{d}"].eq(origin[f"src{d}"])
        m.d.comb += [reply.dst_port.eq(origin.src_port), reply.tag.eq(pkt.tag),
                     reply.space.eq(pkt.space), reply.address.eq(pkt.address),
                     reply.reply_space.eq(request.space),
                     reply.reply_address.eq(request.address)]

    def _sum(self, m, pkt, arriving, present):
        """The flit an add writes: ``arriving + present`` in 32-bit lanes, int32 (wrapping)
        or fp32; in bfloat16 the fp32 partials plus the elements of the present flit's half
        they belong to (widened), rounded to bfloat16 in both halves for ``ADD_FINAL``."""
        lanes = self._cfg.ici.flit_bits // 32
        bf16 = pkt.fmt == IciFmt.BF16
        half = pkt.address[(self._cfg.flit_bytes - 1).bit_length() - 1]
        sums, narrow = [], []
        for k in range(lanes):
            a = arriving[32 * k:32 * k + 32]
            b = Mux(bf16, Cat(Const(0, 16), Mux(half, present[16 * (k + lanes):][:16],
                                                present[16 * k:][:16])),
                    present[32 * k:32 * k + 32])
            total = Signal(32, name=f"sum{k}")
            m.d.comb += total.eq(Mux(pkt.fmt == IciFmt.INT32, (a + b)[:32],
                                     add_fp32(m, a, b, name=f"add{k}")))
            sums.append(total)
            narrow.append(fp32_to_bf16(total))
        return Mux(bf16 & (pkt.op == IciOp.ADD_FINAL), Cat(*narrow, *narrow), Cat(*sums))

    def elaborate(self, platform):
        m = Module()
        head, ep, src, expected = self._decode(m)
        r = self._packet(m)
        reply = self.respond.payload
        with m.FSM():
            with m.State("HEAD"):
                self._head(m, r, head, ep, src, expected)
            with m.State("BODY"):
                self._write_body(m, r)
            with m.State("ADD"):
                self._add_body(m, r)
            with m.State("REQUEST"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid):
                    m.d.sync += r.request.eq(self.i.payload.data[:len(r.request.as_value())])
                    m.next = "READ"
            with m.State("READ"):
                m.d.comb += [self.respond.valid.eq(1), reply.kind.eq(PacketKind.READ_DATA),
                             reply.bytes.eq(r.request.bytes), reply.sem.eq(r.pkt.sem)]
                with m.If(self.respond.ready):
                    m.next = "HEAD"
            with m.State("DONE"):
                self._complete(m, r)
            with m.State("ACK"):
                m.d.comb += [self.respond.valid.eq(1), reply.kind.eq(PacketKind.ACK),
                             reply.bytes.eq(0), reply.sem.eq(NO_SEM)]
                with m.If(self.respond.ready):
                    m.next = "HEAD"
            with m.State("DROP"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid & self.i.payload.last):
                    m.next = "HEAD"
        count_events(m, self, r.events)
        return m

    def _decode(self, m):
        """The arriving head decoded: returns its ICI header, its endpoint header, its source
        endpoint and the ``seq`` expected next of each source endpoint and class."""
        cfg, ici = self._cfg, self._cfg.ici
        hb = ici.header_bits
        head = data.View(header_layout(ici), self.i.payload.data[:hb])
        epl = endpoint_header_layout(cfg)
        ep = data.View(epl, self.i.payload.data[hb:hb + epl.size])
        src = Signal(range(ici.endpoints))
        m.d.comb += src.eq(endpoint_number(cfg.ici, [head[f"src{d}"] for d in range(ici.ndims)],
                                           head.src_port))
        expected = Array(Signal(8, name=f"expected{e}_{c}")
                         for e in range(ici.endpoints) for c in range(ici.classes))
        return head, ep, src, expected

    def _packet(self, m):
        """The registers of the packet being served, an add's read address and the outputs'
        payloads from them; returns them (and the event strobes) for the states."""
        cfg, ici = self._cfg, self._cfg.ici
        epl = endpoint_header_layout(cfg)
        pkt = Signal(epl)
        origin = Signal(header_layout(ici))     # the packet's head: its source, for responses
        sender = Signal(range(ici.endpoints))
        request = Signal(read_request_layout(cfg))
        events = {"packets": Signal(), "seq_errors": Signal(), "dropped": Signal()}
        to_read = Signal(ici.length_bits)           # an add's flits not yet read
        read_address = Signal(ADDR_BITS)
        ahead = Signal(range(ADD_AHEAD + 1))        # flits read and not yet written back
        started = Signal()                          # an add packet's first read is issued
        step = Mux(bf16_add(pkt), cfg.flit_bytes // 2, cfg.flit_bytes)   # address per flit
        m.d.comb += self.read.payload.address.eq(
            Mux(bf16_add(pkt), read_address & ~(cfg.flit_bytes - 1), read_address))
        self._outputs(m, pkt, origin, sender, request)
        advance = [pkt.address.eq(pkt.address + step),
                   pkt.bytes.eq(Mux(pkt.bytes > cfg.flit_bytes, pkt.bytes - cfg.flit_bytes, 0))]
        return SimpleNamespace(pkt=pkt, origin=origin, sender=sender, request=request,
                               events=events, to_read=to_read, read_address=read_address,
                               ahead=ahead, started=started, step=step, advance=advance)

    def _head(self, m, r, head, ep, src, expected):
        """The HEAD state: a head taken, its ``seq`` checked, the packet registered and the
        state its kind goes to (a bad packet's DROP)."""
        ici = self._cfg.ici
        events = r.events
        m.d.comb += self.i.ready.eq(1)
        m.d.sync += r.started.eq(0)
        with m.If(self.i.valid):
            bad = self._bad(head, ep)
            index = src * ici.classes + head.tclass
            m.d.comb += [events["packets"].eq(1),
                         events["seq_errors"].eq(head.seq != expected[index]),
                         events["dropped"].eq(bad)]
            m.d.sync += [expected[index].eq(head.seq + 1), r.pkt.eq(ep), r.origin.eq(head),
                         r.sender.eq(src)]
            with m.If(bad):
                with m.If(~self.i.payload.last):
                    m.next = "DROP"
            with m.Elif(ep.kind == PacketKind.READ):
                m.next = "REQUEST"
            with m.Elif(ep.kind == PacketKind.ACK):
                m.next = "DONE"
            with m.Elif(~self.i.payload.last):
                m.next = "BODY"
                with m.If((ep.kind == PacketKind.WRITE) & (ep.op != IciOp.STORE)):
                    m.next = "ADD"
                    m.d.sync += [r.to_read.eq(head.length - 1),
                                 r.read_address.eq(ep.address)]
            with m.Elif(ep.last):
                m.next = "DONE"

    def _write_body(self, m, r):
        """The BODY state (the write path): each data flit to ``write``."""
        m.d.comb += [self.write.valid.eq(self.i.valid), self.i.ready.eq(self.write.ready),
                     self.write.payload.data.eq(self.i.payload.data)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += r.advance
            with m.If(self.i.payload.last):
                m.next = "HEAD"
                with m.If(r.pkt.last):
                    m.next = "DONE"

    def _add_body(self, m, r):
        """The ADD state (the add path): the packet's flits read ahead of its data, and each
        data flit written back added to the flit read for it."""
        both = self.i.valid & self.read_data.valid
        wrote = both & self.write.ready
        m.d.comb += [
            self.read.valid.eq((r.to_read != 0) & (r.ahead < ADD_AHEAD)
                               & (r.started | ~self.pending)),
            self.write.valid.eq(both),
            self.write.payload.data.eq(self._sum(m, r.pkt, self.i.payload.data,
                                                 self.read_data.payload)),
            self.i.ready.eq(self.write.ready & self.read_data.valid),
            self.read_data.ready.eq(self.write.ready & self.i.valid),
        ]
        issued = self.read.valid & self.read.ready
        with m.If(issued):
            m.d.sync += [r.to_read.eq(r.to_read - 1), r.read_address.eq(r.read_address + r.step),
                         r.started.eq(1)]
        m.d.sync += r.ahead.eq(r.ahead + issued - wrote)
        with m.If(wrote):
            m.d.sync += r.advance
            with m.If(self.i.payload.last):
                m.next = "HEAD"
                with m.If(r.pkt.last):
                    m.next = "DONE"

    def _complete(self, m, r):
        """The DONE state (completions): the completion offered on ``done`` once no write is
        pending, then the ``ACK`` a ``WRITE`` asked for."""
        m.d.comb += self.done.valid.eq(~self.pending)
        with m.If(self.done.valid & self.done.ready):
            m.next = "HEAD"
            with m.If((r.pkt.kind == PacketKind.WRITE) & r.pkt.ack):
                m.next = "ACK"


class Responder(wiring.Component):
    """Sends what a :class:`Receiver` owes its requesters, as response packets (class 1).

    A ``READ_DATA`` job (a ``READ`` turned round: ``space`` / ``address`` what to read here,
    ``reply_space`` / ``reply_address`` where it lands at ``dst``) is taken when the inner
    :class:`Sender` is idle and the reads of the previous job have all been issued; its
    ``ceil(bytes / flit_bytes)`` flit reads then go to ``read`` one per cycle as ``read``
    allows, and the data answered in order on ``read_data`` goes out as the job's packets. An
    ``ACK`` job is one head-only packet.

    Members
    -------
    job : In(stream of command_layout)
        From the :class:`Receiver`'s ``respond``.
    read : Out(stream of read_beat_layout)
    read_data : In(stream of flit_bits)
    o : Out(stream of flit_bits)
        To a router's ``inject`` port.
    packets : Out(32)
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "job": In(stream.Signature(command_layout(cfg))),
            "read": Out(stream.Signature(read_beat_layout(cfg))),
            "read_data": In(stream.Signature(cfg.ici.flit_bits)),
            "o": Out(stream.Signature(cfg.ici.flit_bits)),
            "packets": Out(COUNTER_WIDTH),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        shift = (cfg.flit_bytes - 1).bit_length()
        m.submodules.sender = sender = Sender(cfg, responses=True)
        job = self.job.payload
        remaining = flit_reads(m, cfg, self.read)
        m.d.comb += [
            sender.cmd.payload.eq(job),
            sender.cmd.payload.space.eq(job.reply_space),
            sender.cmd.payload.address.eq(job.reply_address),
            sender.cmd.valid.eq(self.job.valid & (remaining == 0)),
            self.job.ready.eq(sender.cmd.ready & (remaining == 0)),
            self.packets.eq(sender.packets),
        ]
        with m.If(self.job.valid & self.job.ready):
            m.d.sync += [
                remaining.eq(Mux(job.kind == PacketKind.READ_DATA,
                                 (job.bytes + cfg.flit_bytes - 1) >> shift, 0)),
                self.read.payload.space.eq(job.space),
                self.read.payload.address.eq(job.address),
            ]
        wiring.connect(m, wiring.flipped(self.read_data), sender.data)
        wiring.connect(m, sender.o, wiring.flipped(self.o))
        return m
