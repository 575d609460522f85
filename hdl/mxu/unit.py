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
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.mxu import GEMM_DIM_BITS

from ..lib.counter import COUNTER_WIDTH, count_events
from ..lib.sram import SRAM
from ..top import Top
from .accumulator import Accumulator, acc_addr_bits, output_layout
from .array import SystolicArray
from .formats import arithmetic

__all__ = ["MXU", "command_layout", "output_layout", "COUNTERS"]

RING_DEPTH = 4
COUNTERS = ("busy", "mac", "weight_load", "stall", "weight_wait", "cmd_errors")


def command_layout(config):
    return data.StructLayout({
        "m": GEMM_DIM_BITS,
        "k": GEMM_DIM_BITS,
        "n": GEMM_DIM_BITS,
        "acc_addr": acc_addr_bits(config),
        "accumulate": 1,
        "emit": 1,
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
        fmt = arithmetic(config.format)
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
        R, C = cfg.rows, cfg.cols
        m.submodules.array = arr = self._array
        m.submodules.accumulator = acc = Accumulator(cfg, self._acc)

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

        self._feed_weights(m, wk, arr)
        self._feed_activations(m, ak, arr)
        self._place_results(m, rk, arr, acc)
        wiring.connect(m, acc.c, wiring.flipped(self.c))

        m.d.comb += self.idle.eq((wr_ptr == rk.ptr) & ~acc.busy)
        count_events(m, self, {
            "busy": ~self.idle,
            "mac": arr.a_take,
            "weight_load": arr.w_take,
            "stall": ~arr.advance,
            "weight_wait": arr.weight_wait,
            "cmd_errors": self.cmd.valid & self.cmd.ready & ~cmd_ok,
        })
        return m

    def _feed_weights(self, m, wk, arr):
        """Weight walker: real tile rows come from ``w``, missing ones are padding rows."""
        R, C, fmt = self._config.rows, self._config.cols, arithmetic(self._config.format)
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

    def _feed_activations(self, m, ak, arr):
        """Activation walker: ``m`` vectors per fold, lanes past k zeroed, ``last`` on the
        final one."""
        R = self._config.rows
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

    def _place_results(self, m, rk, arr, acc):
        """Result walker: the accumulator row of each result row of the array (row ``r`` of
        column tile ``j`` at ``acc_addr + j*m + r``), whether it accumulates and whether it is
        sent; a refused command's error beat, in command order."""
        cfg = self._config
        C = cfg.cols
        r_row = Signal(GEMM_DIM_BITS)
        r_base = Signal(acc_addr_bits(cfg) + 1)    # j * m: the column tile's first row
        r_fold_end = r_row == rk.entry.cmd.m - 1
        row = acc.i.payload
        m.d.comb += [
            acc.i.valid.eq((rk.ok & arr.o.valid) | rk.skip),
            arr.o.ready.eq(rk.ok & acc.i.ready),
            row.data.eq(arr.o.payload.data),
            row.addr.eq(rk.entry.cmd.acc_addr + r_base + r_row),
            row.write.eq(~rk.skip),
            row.overwrite.eq((rk.koff == 0) & ~rk.entry.cmd.accumulate),
            row.send.eq(rk.skip | (rk.last_k & rk.entry.cmd.emit)),
            row.error.eq(rk.skip),
            row.last.eq(rk.skip | (r_fold_end & rk.last_k & rk.last_n)),
            row.lanes.eq(Mux(rk.n_left > C, C, rk.n_left)),
        ]
        r_take = arr.o.valid & arr.o.ready
        with m.If(rk.skip & acc.i.ready):
            m.d.sync += rk.ptr.eq(rk.ptr + 1)
        with m.If(r_take):
            m.d.sync += r_row.eq(Mux(r_fold_end, 0, r_row + 1))
            with m.If(r_fold_end):
                with m.If(rk.last_k):
                    m.d.sync += r_base.eq(Mux(rk.last_n, 0, r_base + rk.entry.cmd.m))
                rk.next_tile(m)
