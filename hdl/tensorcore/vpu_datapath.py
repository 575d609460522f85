"""The VPU's datapath: operand selection, the lanes, the reduction accumulator, the transpose
tile buffer (``vtrans``), writeback and the queue of rows waiting for the VMEM write port
(docs/tensorcore.md, "VPU").

A pass (hdl/tensorcore/vpu_issue.py) executes when its rows have arrived and, if it makes a
row, when the output queue is sure to have room for it (counting the row in writeback): in
that cycle every lane computes (execute stage) and the results are registered, together with
the accumulator, broadcast row and tile buffer updates (a ``vtrans`` pass registers the
buffer's next transposed row in the place of the lanes' results). In the next cycle (writeback) the
results are packed into the destination row (ReLU, rounding to bfloat16, casts) and queued.
Execute and writeback never stall, so the only buffers that wait are the row queues of the
readers, the queue of passes and the output queue.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from spec import vmath
from spec.formats import FP32_NAN

from ..lib.fp import fp32_is_nan, fp32_to_bf16
from ..lib.queue import Queue
from .vmem_ports import row_bits
from .vpu_issue import WRITES_ROW, Operands, Pack, uop_layout

__all__ = ["VPUDatapath", "out_row_layout"]


def out_row_layout(config):
    """A destination row and where it goes."""
    return data.StructLayout({"addr": row_bits(config), "data": 8 * config.row_bytes})


def _words(value, count, width=32):
    return [value[i * width:(i + 1) * width] for i in range(count)]


class VPUDatapath(wiring.Component):
    """Execute and writeback stages (see the module docstring).

    Parameters
    ----------
    config : TensorCoreConfig
    lane : hdl.lib.hier.Submodule
        The lane ALU (hdl/tensorcore/vpu_lane.py), instantiated ``lanes`` times.
    out_depth : int
        Rows the output queue holds; three keep a row per cycle going.

    Members
    -------
    uop : In(stream of uop_layout)
    rows1, rows2 : In(stream of a row)
        The src1 / src2 rows, in the order the passes use them.
    out : Out(stream of out_row_layout)
    idle : Out(1)
        Nothing in writeback or in the output queue.
    alu_pass : Out(1)
        A pass executes.
    read_wait : Out(1)
        A pass waits for its rows.

    Latency: a pass executes in the cycle its rows are at the heads of ``rows1`` / ``rows2``;
    its row is on ``out`` two cycles later. Throughput: one pass per cycle.
    """

    def __init__(self, config, lane, func=None, *, out_depth=3):
        self._config = config
        self._lane = lane
        self._func = func
        self._out_depth = out_depth
        row = 8 * config.row_bytes
        super().__init__({
            "uop": In(stream.Signature(uop_layout(config))),
            "rows1": In(stream.Signature(row)),
            "rows2": In(stream.Signature(row)),
            "out": Out(stream.Signature(out_row_layout(config))),
            "idle": Out(1),
            "alu_pass": Out(1),
            "read_wait": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        L = cfg.lanes
        u = self.uop.payload
        m.submodules.out_queue = out_q = Queue(out_row_layout(cfg), self._out_depth)

        wb_pack = Signal(Pack)
        operands = u.operands.as_value()
        need1 = operands.matches(Operands.ROWS, Operands.BCAST, Operands.SCALAR, Operands.ACC,
                                 Operands.STAT, Operands.TLOAD)
        need2 = operands.matches(Operands.ROWS, Operands.LOAD, Operands.STAT)
        have = (~need1 | self.rows1.valid) & (~need2 | self.rows2.valid)
        # Passes through the transcendental unit (``vmath``) reach writeback LATENCY cycles
        # after they execute, the others one cycle after: ``inflight`` bit i is a function
        # pass that executed i + 1 cycles ago; a pass that packs a row (or a half) waits
        # until every function pass before it is within a cycle of writeback, so rows stay
        # in order and never meet in writeback.
        latency = vmath.LATENCY if self._func else 1
        inflight = Signal(latency, name="func_inflight")
        functions = Signal(range(latency + 1), name="func_count")
        room = out_q.level + (wb_pack != Pack.NONE) + functions < self._out_depth
        in_order = u.vmath | (u.pack == Pack.NONE) | (inflight[:latency - 1] == 0)
        fire = Signal()
        m.d.comb += [
            fire.eq(self.uop.valid & have & ((u.pack == Pack.NONE) | room) & in_order),
            self.uop.ready.eq(fire),
            self.rows1.ready.eq(fire & u.pop1),
            self.rows2.ready.eq(fire & u.pop2),
            self.alu_pass.eq(fire),
            self.read_wait.eq(self.uop.valid & ~have),
        ]

        func_fire = fire & u.vmath
        results, func_results = self._execute(m, fire, func_fire)
        wb_res = [Signal(32, name=f"wb_res{k}", reset_less=True) for k in range(L)]
        wb_relu = Signal(reset_less=True)
        wb_addr = Signal(row_bits(cfg), reset_less=True)
        m.d.sync += wb_pack.eq(Mux(fire & ~u.vmath, u.pack, Pack.NONE))
        with m.If(fire):
            m.d.sync += [wb_relu.eq(u.relu), wb_addr.eq(u.addr),
                         *(r.eq(v) for r, v in zip(wb_res, results, strict=True))]
        pack, relu, addr, res = wb_pack, wb_relu, wb_addr, wb_res
        if self._func:
            landing = inflight[latency - 1]
            m.d.sync += [inflight.eq(Cat(func_fire, inflight[:latency - 1])),
                         functions.eq(functions + func_fire - landing)]
            carried = {"pack": (Pack, u.pack), "relu": (1, u.relu),     # along the unit
                       "addr": (row_bits(cfg), u.addr)}
            for i in range(latency):
                carried = {name: (shape, self._delay(m, f"func_{name}{i}", shape, v))
                           for name, (shape, v) in carried.items()}
            pack = Signal(Pack, name="wb_sel_pack")
            relu, addr = Signal(name="wb_sel_relu"), Signal(row_bits(cfg), name="wb_sel_addr")
            m.d.comb += [pack.eq(Mux(landing, carried["pack"][1], wb_pack)),
                         relu.eq(Mux(landing, carried["relu"][1], wb_relu)),
                         addr.eq(Mux(landing, carried["addr"][1], wb_addr))]
            res = [Mux(landing, f, w) for f, w in zip(func_results, wb_res, strict=True)]

        m.d.comb += [
            out_q.i.valid.eq(pack.as_value().matches(*WRITES_ROW)),
            out_q.i.payload.addr.eq(addr),
            out_q.i.payload.data.eq(self._writeback(m, pack, relu, res)),
            self.idle.eq((wb_pack == Pack.NONE) & (out_q.level == 0) & (functions == 0)),
        ]
        wiring.connect(m, out_q.o, wiring.flipped(self.out))
        return m

    @staticmethod
    def _delay(m, name, shape, value):
        """``value`` one cycle later."""
        reg = Signal(shape, name=name, reset_less=True)
        m.d.sync += reg.eq(value)
        return reg

    def _execute(self, m, fire, func_fire):
        """The lanes, their operands, and the accumulator and broadcast row they update;
        returns the lanes' results and the transcendental units' (None without them)."""
        L = self._config.lanes
        u = self.uop.payload
        acc = [Signal(32, name=f"acc{j}", reset_less=True) for j in range(2 * L)]
        bcast = Signal(8 * self._config.row_bytes, reset_less=True)
        row1 = _words(self.rows1.payload, L)
        row2 = _words(self.rows2.payload, L)
        row_b = _words(bcast, L)

        def element(word, half):
            """An operand word, or the bfloat16 half of it widened to fp32."""
            return Mux(u.bf16, Cat(Const(0, 16), Mux(half, word[16:], word[:16])), word)

        tree = u.operands == Operands.TREE
        results, func_results = [], []
        for k in range(L):
            lane = self._lane.instance(m, f"lane{k}")
            y = Signal(32, name=f"y{k}")
            with m.Switch(u.operands):
                with m.Case(Operands.ROWS):
                    m.d.comb += y.eq(element(row2[k], u.half))
                with m.Case(Operands.BCAST):
                    m.d.comb += y.eq(element(row_b[k], u.half))
                with m.Case(Operands.SCALAR):
                    m.d.comb += y.eq(element(u.scalar, 0))
                with m.Case(Operands.STAT):     # int32 or fp32, bfloat16 rows too: no widening
                    m.d.comb += y.eq(row2[0])
                with m.Case(Operands.ACC):
                    m.d.comb += y.eq(Mux(u.bf16, Mux(u.half, acc[2 * k + 1], acc[2 * k]),
                                         acc[k]))
                with m.Case(Operands.TREE):
                    m.d.comb += y.eq(acc[2 * k + 1])
            m.d.comb += [lane.op.eq(u.alu), lane.fp.eq(u.fp), lane.shift.eq(u.shift),
                         lane.x.eq(Mux(tree, acc[2 * k], element(row1[k], u.half))),
                         lane.y.eq(y)]
            results.append(lane.result)
            if self._func:
                func = self._func.instance(m, f"func{k}")
                m.d.comb += [func.valid.eq(func_fire), func.op.eq(u.fop),
                             func.x.eq(element(row1[k], u.half))]
                func_results.append(func.result)

        with m.If(fire):
            with m.Switch(u.operands):
                with m.Case(Operands.LOAD):
                    m.d.sync += bcast.eq(self.rows2.payload)
                with m.Case(Operands.ACC):
                    for j in range(2 * L):
                        with m.If(u.bf16 & (u.half == j % 2)):
                            m.d.sync += acc[j].eq(results[j // 2])
                        if j < L:
                            with m.If(~u.bf16):
                                m.d.sync += acc[j].eq(results[j])
                with m.Case(Operands.TREE):
                    m.d.sync += [acc[j].eq(results[j]) for j in range(L)]
        if self._config.vtrans:
            emit = self._transpose(m, fire)
            trans = u.operands.as_value().matches(Operands.TLOAD, Operands.TEMIT)
            results = [Mux(trans, e, r) for e, r in zip(emit, results, strict=True)]
        return results, func_results

    def _transpose(self, m, fire):
        """The transpose unit's tile buffer (``vtrans``): ``N = 2 * lanes`` rows of ``N``
        16-bit cells, each row one register (cell ``c`` at bits ``16c``); a bfloat16 tile
        fills all ``N`` rows, a 32-bit one the last ``lanes`` (an element two cells). A step
        moves every row one way and puts the incoming src1 row in the space it frees:

        - up (``tdir`` 0): the rows move up, the incoming row becomes the last; the first
          row of the tile leaves as the result;
        - left (``tdir`` 1): every row moves down by one element, element ``i`` of the
          incoming row becomes the last element of the tile's row ``i``; the first column
          of the tile leaves as the result.

        A tile that came in with one direction leaves, transposed, with the other while the
        next tile comes in: ``n`` steps a tile. Each buffer row is written whole (a short
        expression a row: logic cell by cell made the 64-byte VPU's Verilog 2.7 times as
        long). Returns the result row's words."""
        L = self._config.lanes
        N = 2 * L
        u = self.uop.payload
        width = 8 * self._config.row_bytes
        rows = [Signal(width, name=f"tile{r}", reset_less=True) for r in range(N)]
        halves = _words(self.rows1.payload, N, 16)
        words = _words(self.rows1.payload, L)
        with m.If(fire & u.operands.as_value().matches(Operands.TLOAD, Operands.TEMIT)):
            with m.If(~u.tdir):
                m.d.sync += [rows[r].eq(rows[r + 1]) for r in range(N - 1)]
                m.d.sync += rows[N - 1].eq(self.rows1.payload)
            with m.Else():
                m.d.sync += [row.eq(Mux(u.bf16, Cat(row[16:], halves[r]),
                                        Cat(row[32:], words[r - L] if r >= L else Const(0, 32))))
                             for r, row in enumerate(rows)]
        top = [Mux(u.bf16, rows[0][32 * i:32 * i + 32], rows[L][32 * i:32 * i + 32])
               for i in range(L)]
        left = [Mux(u.bf16, Cat(rows[2 * i][:16], rows[2 * i + 1][:16]), rows[L + i][:32])
                for i in range(L)]
        return [Mux(u.tdir, lc, tr) for lc, tr in zip(left, top, strict=True)]

    def _writeback(self, m, pack, relu, res):
        """The destination row of the results ``res`` registered by the execute stage, built
        word by word (one small multiplexer per 32-bit word of the row: a row-wide one
        becomes a single line of Verilog too long for Verilator on wide rows)."""
        L = self._config.lanes
        relu_res = [Mux(relu & r[31], 0, r) for r in res]    # NaN results are canonical: > 0
        rounded = [fp32_to_bf16(r) for r in relu_res]
        held = [Signal(16, name=f"held{k}", reset_less=True) for k in range(L)]
        with m.If(pack == Pack.LOW):
            m.d.sync += [h.eq(r) for h, r in zip(held, rounded, strict=True)]
        raw = Cat(*res)
        halves = _words(raw, L, 16)
        quarters = _words(raw, L, 8)

        words = []
        for k in range(L):
            word = Signal(32, name=f"out{k}")
            bf16 = Cat(Const(0, 16), halves[k])
            candidates = {
                Pack.WORDS: relu_res[k],
                Pack.BF16: Cat(held[k], rounded[k]),
                Pack.BF16_F32: Mux(fp32_is_nan(bf16), FP32_NAN, bf16),
                Pack.I8_I32: quarters[k].as_signed(),
            }
            if 2 * k < L:       # packed results fill the first half / quarter of the row
                candidates[Pack.F32_BF16] = Cat(*rounded[2 * k:2 * k + 2])
            if 4 * k < L:
                candidates[Pack.I8] = Cat(*(r[:8] for r in res[4 * k:4 * k + 4]))
            if k == 0:
                candidates[Pack.FIRST] = res[0]
            with m.Switch(pack):
                for case, value in candidates.items():
                    with m.Case(case):
                        m.d.comb += word.eq(value)
            words.append(word)
        return Cat(*words)
