"""The list reader: a contiguous list of 32-bit words in HBM (CSR offsets, ids, weights) read
over AXI4 as a stream of words.

``start`` with ``base`` (4-byte aligned) and ``count`` words: the reader issues INCR bursts of
at most ``max_burst`` beats, never across a 4 KiB boundary, on its own AXI ID, while its beat
buffer has room for every beat in flight (so its read data is always accepted and never holds
up the shared R channel), and offers the words in order on ``o``, dropping the words of the
first and last beats outside the list. ``busy`` until every word of the list has left on
``o`` (``count = 0``: nothing is read). A non-OKAY response sets ``error`` for the rest of the
list (the words are still delivered).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.queue import Queue

__all__ = ["ListReader", "ar_layout"]


def ar_layout(cfg):
    """A read request: address and length (beats - 1)."""
    return data.StructLayout({"addr": cfg.axi_addr_width, "len": 8})


class ListReader(wiring.Component):
    """See the module docstring.

    Members
    -------
    start : In(1), base : In(addr_width), count : In(32)
    busy : Out(1)
    ar : Out(stream of ar_layout)
        Read requests (the owner adds the ID).
    r_data : In(axi_data_width), r_valid : In(1), r_ok : In(1)
        This reader's read beats (always accepted).
    o : Out(stream of 32 bits)
    error : Out(1)
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "start": In(1), "base": In(cfg.axi_addr_width), "count": In(32), "busy": Out(1),
            "ar": Out(stream.Signature(ar_layout(cfg))),
            "r_data": In(cfg.axi_data_width), "r_valid": In(1), "r_ok": In(1),
            "o": Out(stream.Signature(32)), "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        bb, words = cfg.beat_bytes, cfg.lanes
        shift = (bb - 1).bit_length()
        m.submodules.beats = beats = Queue(cfg.axi_data_width, cfg.list_beats)

        addr = Signal(cfg.axi_addr_width)       # next beat to request
        left = Signal(32)                       # beats still to request
        owed = Signal(range(cfg.list_beats + 1))  # beats requested, not yet arrived
        words_left = Signal(33)                 # words still to deliver
        index = Signal(range(words))            # word of the head beat to deliver next

        with m.If(self.start):
            first_word = (self.base >> 2) & (words - 1)
            total = first_word + self.count
            m.d.sync += [addr.eq((self.base >> shift) << shift),
                         left.eq(Mux(self.count == 0, 0, (total + words - 1) >> (shift - 2))),
                         words_left.eq(self.count), index.eq(first_word),
                         self.error.eq(0)]

        # Requests: while the buffer holds every beat requested and the next burst.
        to_4k = (4096 - addr[:12]) >> shift
        n = Signal(range(cfg.max_burst + 1))
        capped = Mux(left < cfg.max_burst, left, cfg.max_burst)
        m.d.comb += n.eq(Mux(to_4k < capped, to_4k, capped))
        room = cfg.list_beats - beats.level - owed
        m.d.comb += [self.ar.valid.eq((left != 0) & (room >= n)),
                     self.ar.payload.addr.eq(addr), self.ar.payload.len.eq(n - 1)]
        issued = self.ar.valid & self.ar.ready
        with m.If(issued):
            m.d.sync += [addr.eq(addr + (n << shift)), left.eq(left - n)]
        arrived = self.r_valid
        m.d.sync += owed.eq(owed + Mux(issued, n, 0) - arrived)
        m.d.comb += [beats.i.valid.eq(self.r_valid), beats.i.payload.eq(self.r_data)]
        with m.If(self.r_valid & ~self.r_ok):
            m.d.sync += self.error.eq(1)

        # Words out of the head beat.
        word = beats.o.payload.word_select(index, 32)
        m.d.comb += [self.o.valid.eq(beats.o.valid & (words_left != 0)),
                     self.o.payload.eq(word)]
        last_of_list = words_left == 1
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += [words_left.eq(words_left - 1), index.eq(index + 1)]
            m.d.comb += beats.o.ready.eq((index == words - 1) | last_of_list)
            with m.If(last_of_list):
                m.d.sync += index.eq(0)
        m.d.comb += self.busy.eq((words_left != 0) | (left != 0) | (owed != 0)
                                 | beats.o.valid)
        return m
