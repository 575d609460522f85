"""The ICI link layer: CRC on every flit and go-back-N retransmission, at both ends of every
link between two routers.

Sender (:class:`LinkTx`, one per output port): every flit taken from the switch is written
into a retry buffer of ``retry_depth`` entries and sent with the next sequence number; it stays
there until the receiver acknowledges it. The receiver (:class:`LinkRx`, one per input port)
accepts a flit only if its CRC is good and its sequence number is the one expected; anything
else is dropped, and the first drop raises ``nak`` until the expected flit arrives. The sender
rewinds to the acknowledged number (go-back-N) once per ``nak`` episode, and also when nothing
has been acknowledged for ``replay_timeout`` cycles (``ICIConfig.replay_timeout``, longer than
the acknowledgement round trip) while flits are outstanding, which recovers from a lost
retransmission or a lost ``nak``. While it replays it still takes new flits into the retry
buffer (they go on the wire after the replayed ones).

Both ends drive their wire from registers, CRC included: the sender computes a flit's CRC as
it loads its output register and drives all zeros (CRC 0) while idle; the receiver computes
its reverse message's CRC as the message changes. Between the two ends the network may put a
delay line (``link_latency``).

The reverse channel carries, every cycle, the receiver's expected sequence number (a
cumulative acknowledgement), ``nak`` and, per virtual channel, the cumulative count of buffer
slots freed (modulo ``2**credit_bits``), all under a CRC. A corrupted message is ignored, and
because every count is cumulative the next good one restores whatever it carried: no credit and
no acknowledgement is ever lost.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .packet import flit_layout, link_signature, reverse_crc, reverse_layout, wire_crc, wire_layout

__all__ = ["LinkTx", "LinkRx"]


class LinkTx(wiring.Component):
    """Sending half of a link.

    A flit taken on ``i`` is on the wire (a register) in the next cycle, or after the flits of
    a replay in progress, and again after every rewind until the receiver acknowledges it.
    ``i.ready`` depends only on registers: it is low while ``retry_depth`` flits are
    unacknowledged, so at one flit per cycle the link streams as long as acknowledgements
    return within ``retry_depth`` cycles.

    Parameters
    ----------
    cfg : ICIConfig

    Members
    -------
    i : In(stream of flit_layout)
        Flits from the switch.
    link : Out(link_signature)
        The wire to the receiver and its reverse channel.
    credits : Out(ArrayLayout(credit_bits, total_vcs))
        Per VC, the buffer slots the receiver freed that this cycle's reverse message reports
        (zero when the message is corrupted).
    room : Out(range(retry_depth + 1))
        Flits the retry buffer can still take.
    retry, rev_error : Out(1)
        Events: a rewind starts; the reverse message has a bad CRC.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "i": In(stream.Signature(flit_layout(cfg))),
            "link": Out(link_signature(cfg)),
            "credits": Out(data.ArrayLayout(cfg.credit_bits, cfg.total_vcs)),
            "room": Out(range(cfg.retry_depth + 1)),
            "retry": Out(1),
            "rev_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        S, R = cfg.seq_bits, cfg.retry_depth
        m.submodules.retry_buf = buf = memory.Memory(shape=flit_layout(cfg), depth=R, init=[])
        wp = buf.write_port()
        rp = buf.read_port(domain="comb")

        ack = Signal(S)                 # oldest unacknowledged
        send = Signal(S)                # next to put on the wire
        wr = Signal(S)                  # next new sequence number
        out = Signal(wire_layout(cfg))  # the register that drives the wire
        outstanding = Signal(S)
        take = self.i.valid & self.i.ready
        m.d.comb += [
            outstanding.eq(wr - ack),
            self.room.eq(R - outstanding),
            self.i.ready.eq(outstanding < R),
            wp.addr.eq(wr[: (R - 1).bit_length()]),
            wp.data.eq(self.i.payload),
            wp.en.eq(take),
            rp.addr.eq(send[: (R - 1).bit_length()]),
        ]
        # Straight onto the wire when nothing waits before it, else from the retry buffer.
        replaying = send != wr
        flit = Signal(flit_layout(cfg))
        frame = Signal(wire_layout(cfg))
        m.d.comb += [flit.eq(Mux(replaying, rp.data, self.i.payload)),
                     frame.valid.eq(1), frame.data.eq(flit.data), frame.head.eq(flit.head),
                     frame.tail.eq(flit.tail), frame.vc.eq(flit.vc), frame.seq.eq(send)]
        crc = wire_crc(m, frame, name="crc")
        with m.If(take | replaying):
            m.d.sync += [out.eq(frame), out.crc.eq(crc), send.eq(send + 1)]
        with m.Else():
            m.d.sync += out.eq(0)
        with m.If(take):
            m.d.sync += wr.eq(wr + 1)
        m.d.comb += self.link.flit.eq(out)
        self._reverse(m, ack, send, wr, outstanding)
        return m

    def _reverse(self, m, ack, send, wr, outstanding):
        """Acknowledgements, ``nak`` and credits from reverse messages with a good CRC, and
        the rewinds (on a new ``nak``, or on the replay timeout)."""
        cfg = self._cfg
        rev = self.link.rev
        rev_ok = Signal()
        m.d.comb += [rev_ok.eq(reverse_crc(m, rev, name="rev_crc") == rev.crc),
                     self.rev_error.eq(~rev_ok)]
        ack_valid = Signal()
        m.d.comb += ack_valid.eq(rev_ok & ((rev.ack - ack)[: cfg.seq_bits] <= outstanding))
        progress = ack_valid & (rev.ack != ack)
        nak_seen = Signal()
        with m.If(ack_valid):
            m.d.sync += ack.eq(rev.ack)
        with m.If(rev_ok):
            m.d.sync += nak_seen.eq(rev.nak)
        for v in range(cfg.total_vcs):
            seen = Signal(cfg.credit_bits, name=f"credits_seen{v}")
            m.d.comb += self.credits[v].eq(Mux(rev_ok, rev.credits[v] - seen, 0))
            with m.If(rev_ok):
                m.d.sync += seen.eq(rev.credits[v])

        timeout = cfg.replay_timeout
        timer = Signal(range(timeout + 1))
        rewind_nak = ack_valid & rev.nak & ~nak_seen
        with m.If(progress | (ack == wr)):
            m.d.sync += timer.eq(0)
        with m.Elif(timer == timeout):
            m.d.sync += timer.eq(0)
        with m.Else():
            m.d.sync += timer.eq(timer + 1)
        rewind_timeout = ~progress & (ack != wr) & (timer == timeout)
        with m.If(rewind_nak):
            m.d.sync += send.eq(rev.ack)
        with m.Elif(rewind_timeout):
            m.d.sync += send.eq(ack)
        m.d.comb += self.retry.eq(rewind_nak | rewind_timeout)


class LinkRx(wiring.Component):
    """Receiving half of a link.

    A flit on the wire is offered on ``o`` in the same cycle if it is intact and the next in
    sequence; ``o`` has no ``ready``, since the sender spends a credit for every flit and so
    the buffer behind always has room. The reverse message is combinational from registers.

    Parameters
    ----------
    cfg : ICIConfig

    Members
    -------
    link : In(link_signature)
        The wire from the sender and the reverse channel back to it.
    o : Out(stream of flit_layout, always ready)
        Accepted flits.
    freed : In(total_vcs)
        Bit ``v`` high in a cycle where a flit of VC ``v`` leaves the buffer behind: a credit
        to return.
    crc_error : Out(1)
        Event: a flit arrived with a bad CRC.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "link": In(link_signature(cfg)),
            "o": Out(stream.Signature(flit_layout(cfg), always_ready=True)),
            "freed": In(cfg.total_vcs),
            "crc_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        wire, rev = self.link.flit, self.link.rev
        expected = Signal(cfg.seq_bits)
        nak = Signal()
        crc_ok = Signal()
        accept = Signal()
        crc = wire_crc(m, wire, name="crc")
        with m.If(wire.valid):      # an idle wire needs no check (nor its simulation)
            m.d.comb += crc_ok.eq(crc == wire.crc)
        m.d.comb += [
            self.crc_error.eq(wire.valid & ~crc_ok),
            accept.eq(wire.valid & crc_ok & (wire.seq == expected)),
            self.o.valid.eq(accept),
            self.o.payload.data.eq(wire.data), self.o.payload.head.eq(wire.head),
            self.o.payload.tail.eq(wire.tail), self.o.payload.vc.eq(wire.vc),
        ]
        with m.If(accept):
            m.d.sync += [expected.eq(expected + 1), nak.eq(0)]
        with m.Elif(wire.valid):
            m.d.sync += nak.eq(1)
        # The reverse message, a register: the next values of expected, nak and the freed
        # counts, and their CRC, loaded in cycles where one of them changes.
        message = Signal(reverse_layout(cfg))
        m.d.comb += [message.ack.eq(Mux(accept, expected + 1, expected)),
                     message.nak.eq(Mux(accept, 0, Mux(wire.valid, 1, nak)))]
        for v in range(cfg.total_vcs):
            freed = Signal(cfg.credit_bits, name=f"freed{v}")
            m.d.comb += message.credits[v].eq(freed + self.freed[v])
            m.d.sync += freed.eq(message.credits[v])
        crc = reverse_crc(m, message, name="rev_crc")
        with m.If(wire.valid | self.freed.any()):
            m.d.sync += [rev.eq(message), rev.crc.eq(crc)]
        return m
