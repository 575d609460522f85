"""The MXU: a systolic array, an accumulator memory and the sequencing of whole GEMMs.

A command asks for ``C = A x B`` with ``A`` of ``m x k`` and ``B`` of ``k x n``. The unit walks the
tiles in a fixed order, for each column tile ``j`` (``cols`` wide) and each k-tile ``i`` (``rows``
deep): it takes the weight tile ``B[iR:(i+1)R, jC:(j+1)C]`` from ``w`` (only its real rows;
missing rows and lanes are filled with the format's padding weight, 0 or -0) and ``m``
activation vectors ``A[:, iR:(i+1)R]`` from ``a`` (lanes past ``k`` are zeroed). Row ``r`` of
column tile ``j`` accumulates at accumulator row ``acc_addr + j*m + r``: the first k-tile
overwrites it unless ``accumulate`` is set, later k-tiles add to it. When a column tile's last
k-tile is done and ``emit`` is set, its rows stream out on ``c`` (lanes past ``n`` read as
zero), ``last`` on the final row of the GEMM, in the configured output format.

Weights, activations and results are independent streams: the weight walker runs up to two
tiles ahead of the activations (one in the chain, one committed), and the result walker follows
the array's output through a two-stage read-modify-write of the accumulator. A row of a column
tile's last k-tile is final when it is written, so an emitting command sends it on ``c`` in that
same cycle: results stream out while the array computes, and backpressure on ``c`` reaches the
array (which freezes) only when the small output FIFO is full.

A command that is malformed (``m``, ``k`` or ``n`` zero) or does not fit the accumulator
(``acc_addr + ceil(n/cols) * m > acc_depth``) is refused: it consumes no data, it answers with
one beat on ``c`` with ``error`` and ``last`` set, in command order, and ``cmd_errors`` counts it.
"""

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import data, fifo, stream
from amaranth.lib.wiring import In, Out

from ..lib.sram import SRAM
from ..top import Top
from .array import SystolicArray
from .config import GEMM_DIM_BITS

__all__ = ["MXU", "command_layout", "output_layout", "COUNTERS"]

RING_DEPTH = 4
OUT_DEPTH = 4
COUNTER_WIDTH = 32
COUNTERS = ("busy", "mac", "weight_load", "stall", "weight_wait", "cmd_errors")


def _addr_bits(config):
    return max(1, (config.acc_depth - 1).bit_length())


def command_layout(config):
    return data.StructLayout({
        "m": GEMM_DIM_BITS,
        "k": GEMM_DIM_BITS,
        "n": GEMM_DIM_BITS,
        "acc_addr": _addr_bits(config),
        "accumulate": 1,
        "emit": 1,
    })


def output_layout(config):
    return data.StructLayout({
        "data": data.ArrayLayout(config.format.out_shape(config.output), config.cols),
        "last": 1,
        "error": 1,
    })


class _TileWalker:
    """Position in the tile order of the command at ``ptr``: k and n offsets of the tile."""

    def __init__(self, m, name, ring, wr_ptr, rows, cols):
        self.ptr = Signal(range(2 * RING_DEPTH), name=f"{name}_ptr")
        self.koff = Signal(GEMM_DIM_BITS + 1, name=f"{name}_koff")
        self.noff = Signal(GEMM_DIM_BITS + 1, name=f"{name}_noff")
        self.entry = ring[self.ptr[: (RING_DEPTH - 1).bit_length()]]
        self.have = Signal(name=f"{name}_have")
        m.d.comb += self.have.eq(self.ptr != wr_ptr)
        self.ok = self.have & self.entry.ok
        self.skip = self.have & ~self.entry.ok
        self.k_left = self.entry.cmd.k - self.koff
        self.n_left = self.entry.cmd.n - self.noff
        self.last_k = self.koff + rows >= self.entry.cmd.k
        self.last_n = self.noff + cols >= self.entry.cmd.n
        self._rows, self._cols = rows, cols

    def next_tile(self, m):
        """Statements moving to the next tile, and to the next command after the last one."""
        with m.If(self.last_k):
            m.d.sync += self.koff.eq(0)
            with m.If(self.last_n):
                m.d.sync += [self.noff.eq(0), self.ptr.eq(self.ptr + 1)]
            with m.Else():
                m.d.sync += self.noff.eq(self.noff + self._cols)
        with m.Else():
            m.d.sync += self.koff.eq(self.koff + self._rows)


class MXU(Top):
    """Matrix multiply unit: GEMM commands in, result rows out.

    Parameters
    ----------
    config : MXUConfig

    Members
    -------
    cmd : In(stream of command_layout)
        GEMM commands {m, k, n, acc_addr, accumulate, emit}; up to four are queued.
    w : In(stream of ``cols`` weights)
        Weight tile rows in tile order (see the module docstring).
    a : In(stream of ``rows`` activations)
        Activation vectors in tile order.
    c : Out(stream of output_layout)
        Result rows {data: ``cols`` accumulators, last, error}.
    idle : Out(1)
        No command queued or in flight and nothing left to send.
    busy, mac, weight_load, stall, weight_wait, cmd_errors : Out(32)
        Counters since reset: cycles not idle; cycles an activation vector entered the array;
        cycles a weight row entered; cycles the array was frozen by a full result path; cycles an
        activation vector waited for its weight tile; refused commands.

    Throughput: one activation vector per cycle; at least ``rows`` vectors per fold (``m >= rows``)
    hide every weight load. Latency from an activation vector of a last k-tile to its result row
    on ``c``: ``rows + cols + 2`` cycles.
    """

    def __init__(self, config):
        fmt = config.format
        self._array = SystolicArray(fmt, config.rows, config.cols, prefix=config.name)
        self._acc = SRAM(f"{config.name}_acc", width=32 * config.cols,
                         depth=max(2, config.acc_depth))
        super().__init__(config, {
            "cmd": In(stream.Signature(command_layout(config))),
            "w": In(stream.Signature(data.ArrayLayout(fmt.in_shape, config.cols))),
            "a": In(stream.Signature(data.ArrayLayout(fmt.in_shape, config.rows))),
            "c": Out(stream.Signature(output_layout(config))),
            "idle": Out(1),
            **{name: Out(COUNTER_WIDTH) for name in COUNTERS},
        })

    @property
    def submodules(self):
        """Modules emitted once and instantiated by name: the array's, the accumulator SRAM."""
        return [*self._array.submodules, self._acc]

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        R, C, fmt = cfg.rows, cfg.cols, cfg.format
        m.submodules.array = arr = self._array

        # Command ring: written in order, read by three walkers, freed by the result walker.
        entry_layout = data.StructLayout({"cmd": command_layout(cfg), "ok": 1})
        ring = Array(Signal(entry_layout, name=f"ring{i}") for i in range(RING_DEPTH))
        wr_ptr = Signal(range(2 * RING_DEPTH))
        wk = _TileWalker(m, "wt", ring, wr_ptr, R, C)
        ak = _TileWalker(m, "act", ring, wr_ptr, R, C)
        rk = _TileWalker(m, "res", ring, wr_ptr, R, C)

        cmd = self.cmd.payload
        n_tiles = (cmd.n + (C - 1)) // C
        cmd_ok = ((cmd.m != 0) & (cmd.k != 0) & (cmd.n != 0)
                  & (cmd.acc_addr + n_tiles * cmd.m <= cfg.acc_depth))
        m.d.comb += self.cmd.ready.eq((wr_ptr - rk.ptr)[: (2 * RING_DEPTH - 1).bit_length()]
                                      != RING_DEPTH)
        with m.If(self.cmd.valid & self.cmd.ready):
            slot = ring[wr_ptr[: (RING_DEPTH - 1).bit_length()]]
            m.d.sync += [slot.cmd.eq(cmd), slot.ok.eq(cmd_ok), wr_ptr.eq(wr_ptr + 1)]

        # Weight walker: real tile rows come from `w`, missing ones are padding rows.
        w_row = Signal(range(max(R, 2)))
        real_row = w_row < wk.k_left
        m.d.comb += [
            arr.w.valid.eq(wk.ok & (~real_row | self.w.valid)),
            self.w.ready.eq(wk.ok & real_row & arr.w.ready),
        ]
        for c in range(C):
            m.d.comb += arr.w.payload[c].eq(
                Mux(real_row & (c < wk.n_left), self.w.payload[c], fmt.pad_weight))
        with m.If(wk.skip):
            m.d.sync += wk.ptr.eq(wk.ptr + 1)
        with m.If(arr.w.valid & arr.w.ready):
            m.d.sync += w_row.eq(Mux(w_row == R - 1, 0, w_row + 1))
            with m.If(w_row == R - 1):
                wk.next_tile(m)

        # Activation walker: `m` vectors per fold, lanes past k zeroed, `last` on the final one.
        a_row = Signal(GEMM_DIM_BITS)
        a_last = a_row == ak.entry.cmd.m - 1
        m.d.comb += [
            arr.a.valid.eq(ak.ok & self.a.valid),
            self.a.ready.eq(ak.ok & arr.a.ready),
            arr.a.payload.last.eq(a_last),
        ]
        for k in range(R):
            m.d.comb += arr.a.payload.data[k].eq(Mux(k < ak.k_left, self.a.payload[k], 0))
        with m.If(ak.skip):
            m.d.sync += ak.ptr.eq(ak.ptr + 1)
        with m.If(arr.a.valid & arr.a.ready):
            m.d.sync += a_row.eq(Mux(a_last, 0, a_row + 1))
            with m.If(a_last):
                ak.next_tile(m)

        # Accumulator memory (an SRAM macro, hdl/lib/sram.py): a read-modify-write pipeline of
        # two stages; its read port is transparent, so a row written and read in the same cycle
        # (m = 1 folds on a one-row array) reads the new sum.
        acc_row = data.ArrayLayout(fmt.acc_shape, C)
        rd_addr, rd_data = Signal(_addr_bits(cfg)), Signal(acc_row)
        wr_en, wr_addr, wr_data = Signal(), Signal(_addr_bits(cfg)), Signal(acc_row)
        self._acc.instance(m, "acc", we=wr_en, waddr=wr_addr, wdata=wr_data, raddr=[rd_addr],
                           rdata=[rd_data])
        m.submodules.out_fifo = out_fifo = fifo.SyncFIFO(
            width=output_layout(cfg).size, depth=OUT_DEPTH)

        # Stage 0: place each result row of the array, read its accumulator row. A row of a
        # column tile's last k-tile is final once written: if the command emits, it also goes
        # out, so stage 0 takes it only when the output FIFO is sure to have room (counting
        # the beat stage 1 may hold). A refused command sends its error beat the same way.
        r_row = Signal(GEMM_DIM_BITS)
        r_base = Signal(_addr_bits(cfg) + 1)    # j * m: the column tile's first row
        r_addr = rk.entry.cmd.acc_addr + r_base + r_row
        r_fold_end = r_row == rk.entry.cmd.m - 1
        r_emits = rk.last_k & rk.entry.cmd.emit

        s1_write = Signal()
        s1_out = Signal()
        s1_error = Signal()
        s1_last = Signal()
        s1_lanes = Signal(range(C + 1))
        s1_overwrite = Signal()
        s1_addr = Signal.like(r_addr)
        s1_data = Signal(data.ArrayLayout(fmt.acc_shape, C))

        room = out_fifo.level + s1_out < OUT_DEPTH
        m.d.comb += [
            arr.o.ready.eq(rk.ok & (~r_emits | room)),
            rd_addr.eq(r_addr),
        ]
        r_take = arr.o.valid & arr.o.ready
        r_refuse = rk.skip & room
        m.d.sync += [
            s1_write.eq(r_take),
            s1_out.eq((r_take & r_emits) | r_refuse),
            s1_error.eq(r_refuse),
            s1_last.eq(r_refuse | (r_fold_end & rk.last_k & rk.last_n)),
            s1_lanes.eq(Mux(rk.n_left > C, C, rk.n_left)),
            s1_overwrite.eq((rk.koff == 0) & ~rk.entry.cmd.accumulate),
            s1_addr.eq(r_addr),
            s1_data.eq(arr.o.payload.data),
        ]
        with m.If(r_refuse):
            m.d.sync += rk.ptr.eq(rk.ptr + 1)
        with m.If(r_take):
            m.d.sync += r_row.eq(Mux(r_fold_end, 0, r_row + 1))
            with m.If(r_fold_end):
                with m.If(rk.last_k):
                    m.d.sync += r_base.eq(Mux(rk.last_n, 0, r_base + rk.entry.cmd.m))
                rk.next_tile(m)

        # Stage 1: add (or overwrite), write back, and send the row if it is final.
        total = Signal(data.ArrayLayout(fmt.acc_shape, C))
        out = Signal(output_layout(cfg))
        for c in range(C):
            m.d.comb += [
                total[c].eq(Mux(s1_overwrite, s1_data[c],
                                fmt.add(m, rd_data[c], s1_data[c], name=f"acc{c}"))),
                out.data[c].eq(Mux(~s1_error & (c < s1_lanes), fmt.cast(cfg.output, total[c]),
                                   0)),
            ]
        m.d.comb += [
            wr_addr.eq(s1_addr),
            wr_data.eq(total),
            wr_en.eq(s1_write),
            out.last.eq(s1_last),
            out.error.eq(s1_error),
            out_fifo.w_data.eq(out),
            out_fifo.w_en.eq(s1_out),
            self.c.payload.eq(out_fifo.r_data),
            self.c.valid.eq(out_fifo.r_rdy),
            out_fifo.r_en.eq(self.c.ready),
        ]

        # Status and counters.
        m.d.comb += self.idle.eq((wr_ptr == rk.ptr) & ~s1_write & ~s1_out
                                 & (out_fifo.level == 0))
        events = {
            "busy": ~self.idle,
            "mac": arr.a_take,
            "weight_load": arr.w_take,
            "stall": ~arr.advance,
            "weight_wait": arr.weight_wait,
            "cmd_errors": self.cmd.valid & self.cmd.ready & ~cmd_ok,
        }
        for name, event in events.items():
            counter = getattr(self, name)
            with m.If(event):
                m.d.sync += counter.eq(counter + 1)
        return m

