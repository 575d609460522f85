"""The systolic array: rows x cols PEs, input skew, output de-skew, double-buffered weights.

Dataflow (weight stationary): activation vectors enter from the left, row ``k`` delayed ``k``
cycles, and move one column per cycle; partial sums move down one row per cycle and leave the
bottom of column ``c`` ``rows + c`` cycles after their vector entered; the de-skew delays column
``c`` by ``cols - 1 - c`` more cycles so a whole result row leaves together.

Weights enter at the bottom of each column and shift up the ``chain`` registers, column ``c``
delayed ``c`` cycles, so after ``rows`` shifts tile row ``k`` sits in PE row ``k``. A commit
token, launched at column 0 and delayed ``c`` cycles to column ``c``, copies the chain into one
of the two weight banks. Fold ``f`` (the ``f``-th weight tile and the ``f``-th packet of
activation vectors, ended by ``last``) uses bank ``f % 2``.

Rules that make the double buffer safe, in cycles of ``advance``:
  * a vector of fold ``f`` enters only after tile ``f`` has committed (one cycle later at least);
  * tile ``f`` commits only when fold ``f - 2`` has fully entered and its last vector entered at
    least ``rows`` cycles ago, so that vector has left every PE row of every column.
Hence consecutive folds stream without a bubble whenever each has at least ``rows`` vectors and
the weight stream keeps up.

Backpressure: the whole array advances only while its output FIFO has room (a registered
condition, so no combinational path runs from ``o.ready`` to the inputs); a stall freezes every
register, so nothing is lost or duplicated.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.delay import delay_taps, skew
from ..lib.hier import Submodule
from ..lib.queue import Queue
from .pe import ProcessingElement

__all__ = ["SystolicArray", "SystolicRow", "activation_layout", "result_layout"]


def activation_layout(fmt, rows):
    return data.StructLayout({"data": data.ArrayLayout(fmt.in_shape, rows), "last": 1})


def result_layout(fmt, cols):
    return data.StructLayout({"data": data.ArrayLayout(fmt.acc_shape, cols), "last": 1})


class SystolicRow(wiring.Component):
    """One row of ``cols`` PEs, instantiated from the PE module; the unit of array hierarchy."""

    def __init__(self, fmt, cols, pe):
        self._cols = cols
        self._pe = pe
        super().__init__({
            "advance": In(1),
            "a_in": In(fmt.in_shape),
            "bank_in": In(1),
            "psum_in": In(data.ArrayLayout(fmt.acc_shape, cols)),
            "chain_in": In(data.ArrayLayout(fmt.in_shape, cols)),
            "shift": In(cols),
            "commit": In(cols),
            "commit_bank": In(cols),
            "psum_out": Out(data.ArrayLayout(fmt.acc_shape, cols)),
            "chain_out": Out(data.ArrayLayout(fmt.in_shape, cols)),
        })

    def elaborate(self, platform):
        m = Module()
        a, bank = self.a_in, self.bank_in
        for c in range(self._cols):
            pe = self._pe.instance(m, f"pe{c}")
            m.d.comb += [
                pe.advance.eq(self.advance),
                pe.a_in.eq(a),
                pe.bank_in.eq(bank),
                pe.psum_in.eq(self.psum_in[c]),
                pe.chain_in.eq(self.chain_in[c]),
                pe.shift.eq(self.shift[c]),
                pe.commit.eq(self.commit[c]),
                pe.commit_bank.eq(self.commit_bank[c]),
                self.psum_out[c].eq(pe.psum_out),
                self.chain_out[c].eq(pe.chain_out),
            ]
            a, bank = pe.a_out, pe.bank_out
        return m


class SystolicArray(wiring.Component):
    """A ``rows`` x ``cols`` weight-stationary systolic array with double-buffered weights.

    Parameters
    ----------
    fmt : Format
    rows, cols : int
    prefix : str
        Prefix of the Verilog module names of the PE and row modules.

    Members
    -------
    w : In(stream of ``cols`` weights)
        One tile row per beat, ``rows`` beats per tile, tile row 0 first.
    a : In(stream of {data: ``rows`` activations, last})
        Activation vectors; ``last`` ends the fold that uses the next weight tile.
    o : Out(stream of {data: ``cols`` results, last})
        ``o[m][c] = sum_k a[m][k] * w[k][c]``, in order, ``last`` copied from the input vector.
    advance : Out(1)
        The array moved this cycle (low: frozen by a full result path).
    a_take, w_take : Out(1)
        An activation vector / a weight row entered this cycle.
    weight_wait : Out(1)
        An activation vector was offered but its weight tile had not committed.

    Latency: a vector accepted in cycle ``s`` is in the output FIFO after ``rows + cols``
    advancing cycles and on ``o`` one cycle later.
    """

    def __init__(self, fmt, rows, cols, *, prefix):
        self._fmt, self._rows, self._cols = fmt, rows, cols
        pe = Submodule(f"{prefix}_pe", ProcessingElement(fmt))
        self._row = Submodule(f"{prefix}_row", SystolicRow(fmt, cols, pe), children=[pe])
        super().__init__({
            "w": In(stream.Signature(data.ArrayLayout(fmt.in_shape, cols))),
            "a": In(stream.Signature(activation_layout(fmt, rows))),
            "o": Out(stream.Signature(result_layout(fmt, cols))),
            "advance": Out(1),
            "a_take": Out(1),
            "w_take": Out(1),
            "weight_wait": Out(1),
        })

    @property
    def submodules(self):
        return [self._row]

    def elaborate(self, platform):
        m = Module()
        R, C, fmt = self._rows, self._cols, self._fmt

        out_layout = result_layout(fmt, C)
        m.submodules.out_queue = out_queue = Queue(out_layout, 2)
        advance = out_queue.i.ready

        # Fold bookkeeping at the array's left edge.
        fill = Signal(range(R + 1))         # rows shifted into the column-0 chain since commit
        commit_bank = Signal()              # bank the next tile commits to
        act_bank = Signal()                 # bank of the fold now entering
        pending = Signal(range(3))          # committed tiles whose fold has not fully entered
        drain = [Signal(range(max(R, 2)), name=f"drain{b}") for b in range(2)]

        bank_drained = Mux(commit_bank, drain[1] == 0, drain[0] == 0)
        commit_ok = (fill == R) & (pending != 2) & bank_drained
        commit_now = Signal()
        m.d.comb += [
            commit_now.eq(advance & commit_ok),
            self.w.ready.eq(advance & ((fill != R) | commit_ok)),
            self.a.ready.eq(advance & (pending != 0)),
            self.w_take.eq(self.w.valid & self.w.ready),
            self.a_take.eq(self.a.valid & self.a.ready),
            self.advance.eq(advance),
            self.weight_wait.eq(advance & self.a.valid & (pending == 0)),
        ]
        fold_end = self.a_take & self.a.payload.last

        with m.If(advance):
            with m.If(commit_now):
                m.d.sync += [fill.eq(self.w_take), commit_bank.eq(~commit_bank)]
            with m.Elif(self.w_take):
                m.d.sync += fill.eq(fill + 1)
            m.d.sync += pending.eq(pending + commit_now - fold_end)
            with m.If(fold_end):
                m.d.sync += act_bank.eq(~act_bank)
            for b, cnt in enumerate(drain):
                with m.If(self.a_take & (act_bank == b)):
                    m.d.sync += cnt.eq(R - 1)
                with m.Elif(cnt != 0):
                    m.d.sync += cnt.eq(cnt - 1)

        # Weight skew: column c sees the tile rows, their shift strobes and the commit token
        # c cycles after column 0.
        w_valid = delay_taps(m, self.w_take, C - 1, enable=advance, name="w_valid",
                             reset_less=False)
        commit = delay_taps(m, commit_now, C - 1, enable=advance, name="commit",
                            reset_less=False)
        cbank = delay_taps(m, commit_bank, C - 1, enable=advance, name="cbank")
        w_skewed = skew(m, [self.w.payload[c] for c in range(C)], enable=advance, name="w")

        # Activation skew: row k sees its element and the fold's bank k cycles after row 0.
        a_bank = delay_taps(m, act_bank, R - 1, enable=advance, name="a_bank")
        a_skewed = skew(m, [self.a.payload.data[k] for k in range(R)], enable=advance, name="a")

        rows = [self._row.instance(m, f"row{r}") for r in range(R)]
        for r, row in enumerate(rows):
            m.d.comb += [
                row.advance.eq(advance),
                row.a_in.eq(a_skewed[r]),
                row.bank_in.eq(a_bank[r]),
                row.psum_in.eq(rows[r - 1].psum_out if r else
                               Cat(*[Const(fmt.psum_init, 32) for _ in range(C)])),
                row.chain_in.eq(rows[r + 1].chain_out if r + 1 < R else Cat(*w_skewed)),
                row.shift.eq(Cat(*w_valid)),
                row.commit.eq(Cat(*commit)),
                row.commit_bank.eq(Cat(*cbank)),
            ]

        # De-skew: column c waits cols - 1 - c cycles more; valid and last ride a line of the
        # whole latency.
        bottom = rows[-1].psum_out
        result = skew(m, [bottom[c] for c in range(C)], enable=advance, name="o", reverse=True)
        o_valid = delay_taps(m, self.a_take, R + C - 1, enable=advance, name="o_valid",
                             reset_less=False)[-1]
        o_last = delay_taps(m, self.a.payload.last, R + C - 1, enable=advance, name="o_last")[-1]

        out = Signal(out_layout)
        m.d.comb += [
            out.data.eq(Cat(*result)),
            out.last.eq(o_last),
            out_queue.i.payload.eq(out),
            out_queue.i.valid.eq(advance & o_valid),
        ]
        wiring.connect(m, out_queue.o, wiring.flipped(self.o))
        return m
