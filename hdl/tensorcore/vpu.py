"""The TensorCore's vector unit (VPU): elementwise operations, casts and row reductions on VMEM
rows, ``lanes = row_bytes / 4`` 32-bit lanes wide (docs/tensorcore.md, "VPU").

    cmd ─► VPUIssue ──passes──► Queue ─────────────► VPUDatapath ─► output queue ─► dst
              │ read1 ─► RowReader ◄─► src1 ──rows1──►  │  lanes (LaneALU x lanes),
              └ read2 ─► RowReader ◄─► src2 ──rows2──►  │  accumulator, writeback
              ◄──────────────── written (dst handshake) ─────────────────────────┘

The issue stage (hdl/tensorcore/vpu_issue.py) turns a command into passes through the lanes
and the row reads they need; each read port has a reader (hdl/tensorcore/row_reader.py) that
issues reads only when its row queue has room for the answers, so the ports' ``ready`` can
drop in any cycle without losing a row; the datapath (hdl/tensorcore/vpu_datapath.py) executes
a pass when its rows are there and the output queue has room, and the output queue drives the
write port. Everything stays in order, so a program's VPU instructions take effect in order;
an instruction whose source rows overlap destination rows of earlier instructions still in the
pipeline waits for those writes (read after write through VMEM).
"""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec import vmath

from ..lib.hier import Submodule
from ..lib.queue import Queue
from .row_reader import RowReader
from .vmem_ports import vmem_read_signature, vmem_write_signature, vpu_command_layout
from .vpu_datapath import VPUDatapath
from .vpu_func import VPUFunc
from .vpu_issue import VPUIssue, uop_layout
from .vpu_lane import LaneALU

__all__ = ["VPU", "EVENTS", "UOP_DEPTH", "OUT_DEPTH", "READ_DEPTH"]

UOP_DEPTH = 4
OUT_DEPTH = 3
READ_DEPTH = 3
EVENTS = ("busy", "alu_pass", "read_wait", "write_wait", "hazard_wait")


class VPU(wiring.Component):
    """Vector unit of one TensorCore.

    Parameters
    ----------
    config : TensorCoreConfig
    prefix : str or None
        Start of the Verilog module name of the lane, which is emitted once
        (``<prefix>_vpu_lane``; default: the configuration's name); list :attr:`submodules`
        in the top's.

    Members
    -------
    cmd : In(stream of vpu_command_layout)
        VPU instructions from the sequencer, operands already checked.
    src1, src2 : Out(vmem_read_signature)
        Source rows (``src2``: a ``vop``'s second operand rows or its broadcast row).
    dst : Out(vmem_write_signature)
        Destination rows, whole rows (``strb`` all ones).
    idle : Out(1)
        No command in hand, nothing in the pipeline, no write outstanding. A command
        offered on ``cmd`` while idle is taken in that cycle.
    busy, alu_pass, read_wait, write_wait, hazard_wait : Out(1)
        Events for the sequencer's counters: not idle; the lanes execute a pass; a pass
        waits for its source rows; a destination row waits for ``dst.ready``; a command waits
        for earlier writes to its source rows.

    Latency: with every port ready, the first destination row of a command is written 6
    cycles after the command is taken (issue, read, row in the queue, execute, writeback,
    write). Throughput (passes, one per cycle): int32 / fp32 ``vop`` and every ``vcast``:
    one row per cycle; bfloat16 ``vop``: two cycles per row (low and high halves of the
    lanes), plus one cycle per command for a broadcast row; ``vred``: per result
    ``span`` cycles (``2 * span`` for bfloat16) plus ``log2`` of a row's elements for the tree;
    ``vtrans`` (with ``config.vtrans``): ``n * (count + 1)`` cycles for ``count`` tiles of
    ``n`` rows (a tile comes in while the one before leaves). A ``vop`` row whose two
    source rows are in one VMEM bank (``x * x``) waits for the bank's read port: fp32 two
    cycles, bfloat16 two and a half (``UOP_DEPTH`` passes ahead are two rows; docs/
    tensorcore.md, "Two sources in one bank").
    Consecutive commands follow without a gap unless one reads what an earlier one writes.
    Backpressure: a port's ``ready`` low stalls only what depends on it; queues between the
    stages absorb the rest.
    """

    def __init__(self, config, *, prefix=None):
        self._config = config
        self._lane = Submodule(f"{prefix or config.name}_vpu_lane", LaneALU())
        self._func = (Submodule(f"{prefix or config.name}_vpu_func", VPUFunc(), no_inline=True)
                      if config.vmath else None)
        super().__init__({
            "cmd": In(stream.Signature(vpu_command_layout(config))),
            "src1": Out(vmem_read_signature(config)),
            "src2": Out(vmem_read_signature(config)),
            "dst": Out(vmem_write_signature(config)),
            "idle": Out(1),
            **{name: Out(1) for name in EVENTS},
        })

    @property
    def submodules(self):
        """Modules emitted once: the lane ALU (and the transcendental unit)."""
        return [self._lane] + ([self._func] if self._func else [])

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        # with the transcendental unit, its pipeline holds rows too, and the output queue
        # grows by as many so that a function's rows keep one per cycle
        extra = vmath.LATENCY if cfg.vmath else 0
        out_depth = OUT_DEPTH + extra
        m.submodules.issue = issue = VPUIssue(cfg,
                                              max_outstanding=UOP_DEPTH + 1 + out_depth + extra)
        m.submodules.uops = uops = Queue(uop_layout(cfg), UOP_DEPTH)
        m.submodules.reader1 = reader1 = RowReader(cfg, depth=READ_DEPTH)
        m.submodules.reader2 = reader2 = RowReader(cfg, depth=READ_DEPTH)
        m.submodules.datapath = dp = VPUDatapath(cfg, self._lane, self._func,
                                                 out_depth=out_depth)

        wiring.connect(m, wiring.flipped(self.cmd), issue.cmd)
        wiring.connect(m, issue.uop, uops.i)
        wiring.connect(m, uops.o, dp.uop)
        for reader, read, port, rows in ((reader1, issue.read1, self.src1, dp.rows1),
                                         (reader2, issue.read2, self.src2, dp.rows2)):
            wiring.connect(m, read, reader.addr)
            wiring.connect(m, reader.port, wiring.flipped(port))
            wiring.connect(m, reader.rows, rows)

        dst, out = self.dst, dp.out
        written = dst.valid & dst.ready
        m.d.comb += [
            dst.valid.eq(out.valid), dst.addr.eq(out.payload.addr),
            dst.data.eq(out.payload.data), dst.strb.eq(-1), out.ready.eq(dst.ready),
            issue.written.eq(written),
            self.idle.eq(issue.idle & ~uops.o.valid & reader1.idle & reader2.idle & dp.idle),
            self.busy.eq(~self.idle),
            self.alu_pass.eq(dp.alu_pass),
            self.read_wait.eq(dp.read_wait),
            self.write_wait.eq(dst.valid & ~dst.ready),
            self.hazard_wait.eq(issue.hazard),
        ]
        return m
