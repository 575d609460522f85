"""The write data path of one HBM pseudo-channel: the write buffer that holds every queued
write's data and strobes, the merge of a partial write with the data its merge read returned,
and the ECC encoder that sends codewords to the device CWL cycles after each WR.

It sits beside the command queue in a :class:`~hdl.hbm.channel.PseudoChannel`: a write takes a
free slot as it enters the queue (its entry holds the slot number) and frees it when its data
has gone to the device, or when it is dropped.
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from spec.hbm import WORD_BITS

from ..lib.bits import first_set
from ..lib.delay import delay_taps
from .ecc import encode
from .interface import wslot_bits

__all__ = ["WriteBuffer"]


class WriteBuffer(wiring.Component):
    """``write_buffer`` slots of one access of data and strobes, and the write data pipeline.

    Latency: the codewords of a WR issued in cycle ``t`` are on ``wrdata`` in cycles ``t + CWL``
    (first half of the access's words) and ``t + CWL + 1`` (second half), with ``wrdata_valid``;
    ``wrdata`` is zero in other cycles. A slot is free again the cycle after its last beat.
    Throughput: one write taken, one WR and one merge per cycle.

    Members
    -------
    free_slot : Out(wslot_bits), free_any : Out(1)
        The lowest free slot, and whether there is one.
    alloc : In(1), alloc_data : In(access bits), alloc_strb : In(access bytes)
        A write takes ``free_slot`` this cycle with this data and these strobes.
    issue : In(1), issue_slot : In(wslot_bits)
        A WR issues this cycle for the write in ``issue_slot``.
    merge : In(1), merge_slot : In(wslot_bits), merge_data : In(access bits)
        The merge read of ``merge_slot`` returned ``merge_data``: bytes whose strobe is clear
        take it, and the slot becomes a full write.
    cancel : In(1), cancel_slot : In(wslot_bits)
        The write in ``cancel_slot`` is dropped; its slot is freed.
    wrdata : Out(beat bits), wrdata_valid : Out(1)
        Codewords to the device.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        nbits, slot = cfg.access_bytes * 8, wslot_bits(cfg)
        super().__init__({
            "free_slot": Out(slot), "free_any": Out(1),
            "alloc": In(1), "alloc_data": In(nbits), "alloc_strb": In(cfg.access_bytes),
            "issue": In(1), "issue_slot": In(slot),
            "merge": In(1), "merge_slot": In(slot), "merge_data": In(nbits),
            "cancel": In(1), "cancel_slot": In(slot),
            "wrdata": Out(cfg.beat_bits), "wrdata_valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        W, nbits = cfg.write_buffer, cfg.access_bytes * 8
        data = Array(Signal(nbits, name=f"wbuf_data{i}") for i in range(W))
        strb = Array(Signal(cfg.access_bytes, name=f"wbuf_strb{i}") for i in range(W))
        free = Signal(W, init=(1 << W) - 1)
        free_slot, free_any = first_set(m, free, name="wfree")
        m.d.comb += [self.free_slot.eq(free_slot), self.free_any.eq(free_any)]

        with m.If(self.alloc):
            m.d.sync += [data[free_slot].eq(self.alloc_data), strb[free_slot].eq(self.alloc_strb)]
        with m.If(self.merge):
            old = Signal(nbits)
            mask = Signal(cfg.access_bytes)
            m.d.comb += [old.eq(data[self.merge_slot]), mask.eq(strb[self.merge_slot])]
            merged = Cat(*[Mux(mask[k], old.word_select(k, 8), self.merge_data.word_select(k, 8))
                           for k in range(cfg.access_bytes)])
            m.d.sync += [data[self.merge_slot].eq(merged), strb[self.merge_slot].eq(-1)]

        freed = self._send(m, data)
        alloc = Mux(self.alloc, 1 << free_slot, 0)
        cancel = Mux(self.cancel, 1 << self.cancel_slot, 0)
        m.d.sync += free.eq((free | freed | cancel) & ~alloc)
        return m

    def _send(self, m, data):
        """Codewords out CWL and CWL + 1 cycles after each WR; returns the slots freed."""
        cfg, t = self._cfg, self._cfg.timing
        taps = delay_taps(m, Cat(self.issue, self.issue_slot), t.cwl + 1, enable=1,
                          name="wpipe", reset_less=False)
        beat0, beat1 = taps[t.cwl], taps[t.cwl + 1]
        half = cfg.words // 2
        with m.If(beat0[0] | beat1[0]):
            first = beat0[0]
            words = Signal(cfg.access_bytes * 8)
            m.d.comb += [words.eq(data[Mux(first, beat0[1:], beat1[1:])]),
                         self.wrdata_valid.eq(1)]
            m.d.comb += self.wrdata.eq(Cat(*[
                encode(Mux(first, words.word_select(k, WORD_BITS),
                           words.word_select(half + k, WORD_BITS))) for k in range(half)]))
        freed = Signal(cfg.write_buffer)
        for s in range(cfg.write_buffer):
            m.d.comb += freed[s].eq(beat1[0] & (beat1[1:] == s))
        return freed
