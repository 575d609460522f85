"""The ICI link layer: CRC on every flit and go-back-N retransmission, inside each router.

Sender (:class:`LinkTx`, one per output port): every flit taken from the switch is written
into a retry buffer of ``retry_depth`` entries and sent with the next sequence number; it stays
there until the receiver acknowledges it. The receiver (:class:`LinkRx`, one per input port)
accepts a flit only if its CRC is good and its sequence number is the one expected; anything
else is dropped, and the first drop raises ``nak`` until the expected flit arrives. The sender
rewinds to the acknowledged number (go-back-N) once per ``nak`` episode, and also when nothing
has been acknowledged for ``REPLAY_TIMEOUT`` cycles while flits are outstanding, which recovers
from a lost retransmission or a lost ``nak``. While it replays it takes no new flit.

The reverse channel carries, every cycle, the receiver's expected sequence number (a
cumulative acknowledgement), ``nak`` and, per virtual channel, the cumulative count of buffer
slots freed (modulo ``2**credit_bits``), all under a CRC. A corrupted message is ignored, and
because every count is cumulative the next good one restores whatever it carried: no credit and
no acknowledgement is ever lost.
"""

from amaranth.hdl import Cat, Mux, Signal
from amaranth.lib import data, memory

from .packet import reverse_crc, reverse_layout, wire_crc, wire_layout

__all__ = ["LinkTx", "LinkRx", "REPLAY_TIMEOUT"]

REPLAY_TIMEOUT = 32
"""Cycles without acknowledgement progress, with flits outstanding, before a replay."""


class LinkTx:
    """Sending half of a link, built into module ``m``.

    Inputs (drive them): ``take`` (the switch sends a flit this cycle; only when ``ready``),
    ``data``, ``head``, ``tail``, ``vc``; ``rev`` (the reverse message from the receiver).
    Outputs: ``wire`` (registered flit and its CRC), ``ready``, ``credit_delta[vc]`` (credits
    returned this cycle), ``retry`` and ``rev_error`` (events).
    """

    def __init__(self, m, cfg, name, rev):
        S, R = cfg.seq_bits, cfg.retry_depth
        V = cfg.total_vcs
        wl = wire_layout(cfg)
        self.take = Signal(name=f"{name}_take")
        self.data = Signal(cfg.flit_bits, name=f"{name}_data")
        self.head = Signal(name=f"{name}_head")
        self.tail = Signal(name=f"{name}_tail")
        self.vc = Signal(wl["vc"].shape, name=f"{name}_vc")
        self.ready = Signal(name=f"{name}_ready")
        self.retry = Signal(name=f"{name}_retry")
        self.rev_error = Signal(name=f"{name}_rev_error")
        self.credit_delta = [Signal(cfg.credit_bits, name=f"{name}_cdelta{v}") for v in range(V)]
        self.wire = Signal(wl, name=f"{name}_wire")

        entry = data.StructLayout({"data": cfg.flit_bits, "head": 1, "tail": 1,
                                   "vc": wl["vc"].shape})
        m.submodules[f"{name}_retry_buf"] = buf = memory.Memory(shape=entry, depth=R, init=[])
        wp = buf.write_port()
        rp = buf.read_port(domain="comb")

        ack = Signal(S, name=f"{name}_ack")      # oldest unacknowledged
        send = Signal(S, name=f"{name}_send")    # next to put on the wire
        wr = Signal(S, name=f"{name}_wr")        # next new sequence number
        nak_seen = Signal(name=f"{name}_nak_seen")
        timer = Signal(range(REPLAY_TIMEOUT + 1), name=f"{name}_timer")
        out = Signal(wl, name=f"{name}_out")     # the register that drives the wire

        outstanding = Signal(S, name=f"{name}_outstanding")
        m.d.comb += [
            outstanding.eq(wr - ack),
            self.ready.eq((send == wr) & (outstanding < R)),
            wp.addr.eq(wr[: (R - 1).bit_length()]),
            wp.data.eq(Cat(self.data, self.head, self.tail, self.vc)),
            wp.en.eq(self.take),
            rp.addr.eq(send[: (R - 1).bit_length()]),
        ]
        with m.If(self.take):
            m.d.sync += [
                out.valid.eq(1), out.data.eq(self.data), out.head.eq(self.head),
                out.tail.eq(self.tail), out.vc.eq(self.vc), out.seq.eq(wr),
                wr.eq(wr + 1), send.eq(send + 1),
            ]
        with m.Elif(send != wr):
            m.d.sync += [
                out.valid.eq(1), out.data.eq(rp.data.data), out.head.eq(rp.data.head),
                out.tail.eq(rp.data.tail), out.vc.eq(rp.data.vc), out.seq.eq(send),
                send.eq(send + 1),
            ]
        with m.Else():
            m.d.sync += out.valid.eq(0)
        m.d.comb += [self.wire.eq(out), self.wire.crc.eq(wire_crc(out))]

        # Reverse channel: acknowledgements, nak and credits, only from messages with good CRC.
        rev_ok = Signal(name=f"{name}_rev_ok")
        m.d.comb += [rev_ok.eq(reverse_crc(rev) == rev.crc), self.rev_error.eq(~rev_ok)]
        ack_valid = Signal(name=f"{name}_ack_valid")
        m.d.comb += ack_valid.eq(rev_ok & ((rev.ack - ack)[:S] <= outstanding))
        progress = ack_valid & (rev.ack != ack)
        with m.If(ack_valid):
            m.d.sync += ack.eq(rev.ack)
        with m.If(rev_ok):
            m.d.sync += nak_seen.eq(rev.nak)
        seen = [Signal(cfg.credit_bits, name=f"{name}_cseen{v}") for v in range(V)]
        for v in range(V):
            m.d.comb += self.credit_delta[v].eq(Mux(rev_ok, rev.credits[v] - seen[v], 0))
            with m.If(rev_ok):
                m.d.sync += seen[v].eq(rev.credits[v])

        rewind_nak = ack_valid & rev.nak & ~nak_seen
        with m.If(progress | (ack == wr)):
            m.d.sync += timer.eq(0)
        with m.Elif(timer == REPLAY_TIMEOUT):
            m.d.sync += timer.eq(0)
        with m.Else():
            m.d.sync += timer.eq(timer + 1)
        rewind_timeout = ~progress & (ack != wr) & (timer == REPLAY_TIMEOUT)
        with m.If(rewind_nak):
            m.d.sync += send.eq(rev.ack)
        with m.Elif(rewind_timeout):
            m.d.sync += send.eq(ack)
        m.d.comb += self.retry.eq(rewind_nak | rewind_timeout)


class LinkRx:
    """Receiving half of a link, built into module ``m``.

    Input: ``wire`` (the flit as it arrives). Drive ``freed[vc]`` high in cycles where a flit
    of that VC leaves the input buffer. Outputs: ``accept`` (a new, intact flit: write it to
    the buffer), ``rev`` (the reverse message), ``crc_error`` (event).
    """

    def __init__(self, m, cfg, name, wire):
        S, V = cfg.seq_bits, cfg.total_vcs
        self.accept = Signal(name=f"{name}_accept")
        self.crc_error = Signal(name=f"{name}_crc_error")
        self.freed = [Signal(name=f"{name}_freed{v}") for v in range(V)]
        self.rev = Signal(reverse_layout(cfg), name=f"{name}_rev")
        expected = Signal(S, name=f"{name}_expected")
        nak = Signal(name=f"{name}_nak")
        freed_count = [Signal(cfg.credit_bits, name=f"{name}_fcount{v}") for v in range(V)]

        crc_ok = Signal(name=f"{name}_crc_ok")
        m.d.comb += [
            crc_ok.eq(wire_crc(wire) == wire.crc),
            self.crc_error.eq(wire.valid & ~crc_ok),
            self.accept.eq(wire.valid & crc_ok & (wire.seq == expected)),
        ]
        with m.If(self.accept):
            m.d.sync += [expected.eq(expected + 1), nak.eq(0)]
        with m.Elif(wire.valid):
            m.d.sync += nak.eq(1)
        for v in range(V):
            with m.If(self.freed[v]):
                m.d.sync += freed_count[v].eq(freed_count[v] + 1)
        m.d.comb += [self.rev.ack.eq(expected), self.rev.nak.eq(nak)]
        for v in range(V):
            m.d.comb += self.rev.credits[v].eq(freed_count[v])
        m.d.comb += self.rev.crc.eq(reverse_crc(self.rev))
