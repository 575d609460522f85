"""The read return path of one HBM pseudo-channel: read data from the device, ECC-decoded, to
the read response queue, or to the write buffer as a partial write's merge data.

It sits at the device end of a :class:`~hdl.hbm.channel.PseudoChannel`. The device returns an
access in two cycles (CL and CL + 1 after its RD) and cannot be held up, so a RD issues only
when its response has a place (``rd_room``): every read in flight has a slot reserved in the
response queue, and the tag of each RD waits in a small queue of its own until its data comes.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec.hbm import CHECK_BITS, WORD_BITS

from ..lib.queue import Queue
from .ecc import decode
from .interface import rresp_layout, tag_bits, wslot_bits

__all__ = ["ReadReturn", "TAG_FIFO_DEPTH", "RRESP_DEPTH"]

TAG_FIFO_DEPTH = 16
RRESP_DEPTH = 16


class ReadReturn(wiring.Component):
    """Tags of the reads in flight, the ECC decoder and the read response queue.

    Latency: an access whose second beat arrives in cycle ``t`` is decoded and registered in
    ``t + 1``: then it enters the response queue (offered on ``rresp`` from ``t + 2``) or is
    offered as ``merge`` for one cycle. Throughput: one access per two cycles, the device's
    rate. Backpressure: ``rresp`` may stall freely; ``rd_room`` then falls once
    ``RRESP_DEPTH`` reads are queued or in flight, and the scheduler stops issuing RDs.

    Members
    -------
    issue : In(1)
        A RD issues this cycle; ``rmw``: it is a partial write's merge read (then ``wslot``
        names the write buffer slot), else a read with ``tag``.
    rd_room : Out(1)
        A RD may issue this cycle.
    rddata, rddata_valid : In
        The device's read data beats.
    rresp : Out(stream of rresp_layout)
        Read responses (``err``: an uncorrectable word).
    merge : Out(1), merge_slot : Out(wslot_bits), merge_data : Out(access bits),
    merge_double : Out(1)
        A merge read's corrected data for write buffer slot ``merge_slot`` (one cycle);
        ``merge_double``: some word was uncorrectable.
    sbe, dbe : Out
        Words corrected / found uncorrectable this cycle (counter increments).
    busy : Out(1)
        A read is in flight or a response waits.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        nbits, half = cfg.access_bytes * 8, cfg.words // 2
        super().__init__({
            "issue": In(1), "rmw": In(1), "tag": In(tag_bits(cfg)),
            "wslot": In(wslot_bits(cfg)), "rd_room": Out(1),
            "rddata": In(cfg.beat_bits), "rddata_valid": In(1),
            "rresp": Out(stream.Signature(rresp_layout(cfg))),
            "merge": Out(1), "merge_slot": Out(wslot_bits(cfg)), "merge_data": Out(nbits),
            "merge_double": Out(1),
            "sbe": Out(range(half + 1)), "dbe": Out(1), "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        tb, sb = tag_bits(cfg), wslot_bits(cfg)
        m.submodules.tags = tags = Queue(1 + max(tb, sb), TAG_FIFO_DEPTH)
        m.submodules.responses = responses = Queue(rresp_layout(cfg), RRESP_DEPTH)
        wiring.connect(m, responses.o, wiring.flipped(self.rresp))
        inflight = Signal(range(RRESP_DEPTH + 1))     # reads issued whose data is not back
        m.d.comb += [
            self.rd_room.eq((inflight + responses.level < RRESP_DEPTH) & tags.i.ready),
            tags.i.valid.eq(self.issue),
            tags.i.payload.eq(Mux(self.rmw, Cat(1, self.wslot), Cat(0, self.tag))),
        ]

        second, data, double = self._decode(m)
        ret_valid = Signal()
        ret_tag = Signal(len(tags.o.payload))
        m.d.comb += tags.o.ready.eq(self.rddata_valid & second)
        m.d.sync += [ret_valid.eq(self.rddata_valid & second), self.merge_data.eq(data),
                     self.merge_double.eq(double), ret_tag.eq(tags.o.payload)]
        rmw = ret_tag[0]
        m.d.comb += [
            self.merge.eq(ret_valid & rmw), self.merge_slot.eq(ret_tag[1:1 + sb]),
            responses.i.valid.eq(ret_valid & ~rmw),
            responses.i.payload.tag.eq(ret_tag[1:1 + tb]),
            responses.i.payload.data.eq(self.merge_data),
            responses.i.payload.err.eq(self.merge_double),
            self.busy.eq((inflight != 0) | responses.o.valid),
        ]
        m.d.sync += inflight.eq(inflight + self.issue - ret_valid)
        return m

    def _decode(self, m):
        """Decode each beat; returns (second beat now, the access's data, a double error in
        it), data and error valid with the second beat. Drives ``sbe`` and ``dbe``."""
        cfg = self._cfg
        half = cfg.words // 2
        second = Signal()
        first_half = Signal(cfg.access_bytes * 4)
        first_double = Signal()
        dec = [decode(m, self.rddata.word_select(k, WORD_BITS + CHECK_BITS), f"dec{k}")
               for k in range(half)]
        beat_data = Cat(*[d for d, _, _ in dec])
        beat_single = sum(s for _, s, _ in dec)
        beat_double = Cat(*[d for _, _, d in dec]).any()
        with m.If(self.rddata_valid):
            m.d.sync += second.eq(~second)
            with m.If(~second):
                m.d.sync += [first_half.eq(beat_data), first_double.eq(beat_double)]
        m.d.comb += [
            self.sbe.eq(Mux(self.rddata_valid, beat_single, 0)),
            self.dbe.eq(Mux(self.rddata_valid & second, first_double | beat_double, 0)),
        ]
        return second, Cat(first_half, beat_data), first_double | beat_double
