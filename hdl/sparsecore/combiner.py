"""The combiner: rows in (in token order), one combined fp32 row per bag out as AXI writes.

For each token that is not skipped it takes the row's beats from the row buffer and adds each
element times the token's weight into the accumulator (``lanes`` fp32 lanes, one
``acc = fp32(acc + fp32(w * x))`` per lane per cycle, the first row of a bag added to +0), so a
bag's sum is formed in CSR order as the golden model defines it. A bfloat16 beat holds two
groups of ``lanes`` elements and takes two cycles. At the bag's last token it writes the row:
one AW (``out``, then ``out + out_pitch`` for the next bag, ...) and ``out_beats`` W beats of
``fp32(acc * scale)`` (+0 in every element when nothing was added). ``scale`` is sampled when
the bag's output starts (1.0 for the sum combiner).

A scatter's update token (after the gradient rows of its id, which the accumulator has summed
into ``G``) takes the table row it read and writes it back to the same address as
``fp32(row - fp32(lr * G))``, a beat per cycle (bfloat16: widened, then rounded to nearest
even, two groups per beat).
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.fp import add_fp32, fp32_to_bf16, mul_fp32
from ..lib.queue import Queue
from .gather import pending_layout

__all__ = ["Combiner"]


class Combiner(wiring.Component):
    """See the module docstring.

    Members
    -------
    start : In(1), out : In(addr_width), out_pitch : In(32), bf16 : In(1)
    ubf16 : In(1)
        The table an update writes is bfloat16 (its rows are half as many beats).
    row_beats, out_beats : In(range(max_row_beats + 1))
        Beats of a table row and of an output row.
    pending : In(stream of pending_layout)
    lr : In(32)
        The learning rate of a scatter's update (fp32).
    rows : In(stream of axi_data_width)
    freed : Out(1)
        A row beat was taken (the gather's credit).
    scale : In(32), bag_end : Out(1)
        ``bag_end``: the last token of a bag was taken (the scale unit's cue).
    took : Out(1), weight : Out(32)
        A row was added, with this weight (the scale unit's denominator).
    scale_valid : In(1)
        The scale of the bag being written is ready.
    aw : Out(stream of addr_width), w : Out(stream of axi_data_width + 1 (last on top))
    busy : Out(1)
    """

    def __init__(self, cfg):
        self._cfg = cfg
        beats = range(cfg.max_row_beats + 1)
        super().__init__({
            "start": In(1), "out": In(cfg.axi_addr_width), "out_pitch": In(32), "bf16": In(1),
            "ubf16": In(1),
            "row_beats": In(beats), "out_beats": In(beats),
            "pending": In(stream.Signature(pending_layout(cfg))), "lr": In(32),
            "rows": In(stream.Signature(cfg.axi_data_width)),
            "freed": Out(1), "scale": In(32), "scale_valid": In(1), "bag_end": Out(1),
            "took": Out(1), "weight": Out(32),
            "aw": Out(stream.Signature(cfg.axi_addr_width)),
            "w": Out(stream.Signature(cfg.axi_data_width + 1)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        lanes, width = cfg.lanes, cfg.axi_data_width
        acc = Array(Signal(width, name=f"acc{g}") for g in range(cfg.max_row_beats))
        g = Signal(range(cfg.max_row_beats + 1))   # output group being added / written
        first = Signal(init=1)                     # nothing added to this bag yet
        addr = Signal(cfg.axi_addr_width)
        m.submodules.wq = wq = Queue(width + 1, 2)
        m.submodules.awq = awq = Queue(cfg.axi_addr_width, 2)
        wiring.connect(m, wq.o, wiring.flipped(self.w))
        wiring.connect(m, awq.o, wiring.flipped(self.aw))
        with m.If(self.start):
            m.d.sync += [addr.eq(self.out), first.eq(1), g.eq(0)]

        t = self.pending.payload.token
        beat = self.rows.payload
        half = g[0]
        xs = []
        for k in range(lanes):
            bf = Mux(half, beat.word_select(lanes + k, 16), beat.word_select(k, 16))
            xs.append(Mux(self.bf16, Cat(Const(0, 16), bf), beat.word_select(k, 32)))
        cur = acc[g]
        total = Cat(*[add_fp32(m, Mux(first, 0, cur.word_select(k, 32)),
                               mul_fp32(m, t.weight, xs[k], name=f"wx{k}"), name=f"acc{k}")
                      for k in range(lanes)])
        scaled = Cat(*[mul_fp32(m, cur.word_select(k, 32), self.scale, name=f"sc{k}")
                       for k in range(lanes)])
        last_group = g == self.out_beats - 1
        old = [Mux(self.ubf16, Cat(Const(0, 16), Mux(half, beat.word_select(lanes + k, 16),
                                                      beat.word_select(k, 16))),
                   beat.word_select(k, 32)) for k in range(lanes)]
        new = [add_fp32(m, old[k], mul_fp32(m, self.lr, cur.word_select(k, 32), name=f"lr{k}")
                        ^ (1 << 31), name=f"upd{k}")
               for k in range(lanes)]
        updated = Cat(*[Mux(first, old[k], new[k]) for k in range(lanes)])
        narrow = Cat(*[fp32_to_bf16(Mux(first, old[k], new[k])) for k in range(lanes)])
        low = Signal(width // 2)        # a bfloat16 update's first half beat

        with m.FSM() as fsm:
            with m.State("TAKE"):
                with m.If(self.pending.valid & t.update):
                    m.d.comb += [awq.i.valid.eq(1), awq.i.payload.eq(self.pending.payload.addr)]
                    with m.If(awq.i.ready):
                        m.next = "UPDATE"
                with m.Elif(self.pending.valid & t.skip):
                    m.d.comb += self.pending.ready.eq(1)
                    with m.If(t.last):
                        m.d.comb += self.bag_end.eq(1)
                        m.next = "AW"
                with m.Elif(self.pending.valid & self.rows.valid):
                    m.d.comb += self.rows.ready.eq(~self.bf16 | half | last_group)
                    m.d.sync += [acc[g].eq(total), g.eq(g + 1)]
                    with m.If(last_group):
                        m.d.comb += [self.pending.ready.eq(1), self.took.eq(1)]
                        m.d.sync += [g.eq(0), first.eq(0)]
                        with m.If(t.last):
                            m.d.comb += self.bag_end.eq(1)
                            m.next = "AW"
            with m.State("UPDATE"):
                # bfloat16: an even group is rounded and kept, an odd one completes the beat.
                hold = self.ubf16 & ~half
                with m.If(hold & self.rows.valid):
                    m.d.sync += [low.eq(narrow), g.eq(g + 1)]
                m.d.comb += [wq.i.valid.eq(self.rows.valid & ~hold),
                             wq.i.payload.eq(Cat(Mux(self.ubf16, Cat(low, narrow), updated),
                                                 last_group))]
                with m.If(wq.i.valid & wq.i.ready):
                    m.d.comb += self.rows.ready.eq(1)
                    m.d.sync += g.eq(g + 1)
                    with m.If(last_group):
                        m.d.comb += self.pending.ready.eq(1)
                        m.d.sync += [g.eq(0), first.eq(1)]
                        m.next = "TAKE"
            with m.State("AW"):
                m.d.comb += [awq.i.valid.eq(self.scale_valid), awq.i.payload.eq(addr)]
                with m.If(awq.i.valid & awq.i.ready):
                    m.d.sync += addr.eq(addr + self.out_pitch)
                    m.next = "W"
            with m.State("W"):
                m.d.comb += [wq.i.valid.eq(1),
                             wq.i.payload.eq(Cat(Mux(first, 0, scaled), last_group))]
                with m.If(wq.i.ready):
                    m.d.sync += g.eq(g + 1)
                    with m.If(last_group):
                        m.d.sync += [g.eq(0), first.eq(1)]
                        m.next = "TAKE"
        m.d.comb += self.freed.eq(self.rows.valid & self.rows.ready)
        m.d.comb += [self.busy.eq(~fsm.ongoing("TAKE") | (g != 0) | wq.o.valid | awq.o.valid),
                     self.weight.eq(t.weight)]
        return m
