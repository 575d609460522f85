"""The MXU's accumulator: the memory behind the array, its read-modify-write pipeline and the
result queue.

Each beat that enters is one result row of the array (or the error answer of a refused
command): stage 0 reads the accumulator row at ``addr`` (an SRAM macro, hdl/lib/sram.py, with
a transparent read port, so a row written and read in the same cycle reads the new sum);
stage 1 adds the array's row to it (or overwrites it), writes it back and, for a row that is
final and to be sent, puts it on ``c`` in the configured output format, lanes past ``lanes``
reading zero. A beat that sends is taken only when the result queue is sure to have room
(counting the beat stage 1 may hold), so backpressure on ``c`` reaches the array only when the
queue is full.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.queue import Queue
from .formats import arithmetic

__all__ = ["Accumulator", "row_layout", "output_layout", "acc_addr_bits", "OUT_DEPTH"]

OUT_DEPTH = 4


def acc_addr_bits(config):
    return max(1, (config.acc_depth - 1).bit_length())


def row_layout(config):
    """One beat into the accumulator."""
    fmt = arithmetic(config.format)
    return data.StructLayout({
        "data": data.ArrayLayout(fmt.acc_shape, config.cols),
        "addr": acc_addr_bits(config),
        "write": 1,         # an array row: accumulate (or overwrite) and write back
        "overwrite": 1,     # the first k-tile of a command that does not accumulate
        "send": 1,          # the row (or the error) goes out on c
        "error": 1,         # a refused command's answer: no data
        "last": 1,
        "lanes": range(config.cols + 1),
    })


def output_layout(config):
    return data.StructLayout({
        "data": data.ArrayLayout(arithmetic(config.format).out_shape(config.output), config.cols),
        "last": 1,
        "error": 1,
    })


class Accumulator(wiring.Component):
    """Accumulator memory, read-modify-write and result queue (see the module docstring).

    Parameters
    ----------
    config : MXUConfig
    sram : hdl.lib.sram.SRAM
        The accumulator macro (``cols`` x 32 bits wide, ``acc_depth`` deep).

    Members
    -------
    i : In(stream of row_layout)
    c : Out(stream of output_layout)
    busy : Out(1)
        A beat in stage 1 or in the result queue.
    """

    def __init__(self, config, sram):
        self._config = config
        self._sram = sram
        super().__init__({
            "i": In(stream.Signature(row_layout(config))),
            "c": Out(stream.Signature(output_layout(config))),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        fmt, C = arithmetic(cfg.format), cfg.cols
        acc_row = data.ArrayLayout(fmt.acc_shape, C)
        rd_data = Signal(acc_row)
        wr_en, wr_addr, wr_data = Signal(), Signal(acc_addr_bits(cfg)), Signal(acc_row)
        self._sram.instance(m, "acc", we=wr_en, waddr=wr_addr, wdata=wr_data,
                            raddr=[self.i.payload.addr], rdata=[rd_data])
        m.submodules.out_queue = out_queue = Queue(output_layout(cfg), OUT_DEPTH)

        s1 = Signal(row_layout(cfg))
        s1_out = Signal()
        room = out_queue.level + s1_out < OUT_DEPTH
        m.d.comb += self.i.ready.eq(~self.i.payload.send | room)
        take = self.i.valid & self.i.ready
        m.d.sync += [s1.eq(self.i.payload), s1.write.eq(take & self.i.payload.write),
                     s1_out.eq(take & self.i.payload.send)]

        total = Signal(acc_row)
        out = Signal(output_layout(cfg))
        for c in range(C):
            m.d.comb += [
                total[c].eq(Mux(s1.overwrite, s1.data[c],
                                fmt.add(m, rd_data[c], s1.data[c], name=f"acc{c}"))),
                out.data[c].eq(Mux(~s1.error & (c < s1.lanes), fmt.cast(cfg.output, total[c]),
                                   0)),
            ]
        m.d.comb += [
            wr_addr.eq(s1.addr), wr_data.eq(total), wr_en.eq(s1.write),
            out.last.eq(s1.last), out.error.eq(s1.error),
            out_queue.i.payload.eq(out), out_queue.i.valid.eq(s1_out),
            self.busy.eq(s1.write | s1_out | (out_queue.level != 0)),
        ]
        wiring.connect(m, out_queue.o, wiring.flipped(self.c))
        return m
