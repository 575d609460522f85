"""The VPU's issue stage: turns each command into passes through the lanes (micro-operations)
and the row reads they need, in program order (docs/tensorcore.md, "VPU").

One pass is one cycle of the lanes: a row of ``vop`` int32 / fp32 or ``vcast``; each half of a
bfloat16 row (low halves of every lane, then high halves); a row step of a reduction (the
first row copied into the accumulator, later rows combined with it); a level of a reduction's
tree; a step of a ``vtrans`` tile buffer: a source row in and (but for the first tile's
``n``) a transposed row out, then ``n`` passes that only write the last tile's rows. A ``vop``
with a broadcast row starts with a pass that loads that row.

Reads that a command needs wait, before its first pass, for the writes of earlier commands
that are still in the pipeline when the rows overlap (read after write through VMEM): the
stage keeps the span of destination rows with writes outstanding and compares the command's
source rows with it.
"""

from types import SimpleNamespace

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from spec import isa, vmath
from spec.isa import VOPS

from ..lib.codes import hw
from .vmem_ports import VPUKind, row_bits, vpu_command_layout
from .vpu_lane import AluOp

__all__ = ["Operands", "Pack", "uop_layout", "VPUIssue", "WRITES_ROW"]

Cast, DType, ROp = hw(isa.Cast), hw(isa.DType), hw(isa.ROp)
Src2, VOp = hw(isa.Src2), hw(isa.VOp)


class Operands(enum.Enum, shape=4):
    """Where the lanes' operands of a pass come from (lane ``k``)."""

    ROWS = 0        # x: the src1 row, y: the src2 row
    BCAST = 1       # x: the src1 row, y: the broadcast row
    SCALAR = 2      # x: the src1 row, y: the scalar (or unused: unary ops, casts)
    ACC = 3         # x: the src1 row, y: accumulator element; the result replaces it
    TREE = 4        # x, y: accumulator elements 2k, 2k+1; the result replaces element k
    LOAD = 5        # no lane result: the src2 row becomes the broadcast row
    STAT = 6        # x: the src1 row, y: word 0 of the src2 row (a group's statistic)
    TLOAD = 7       # the src1 row enters the transpose tile buffer (``tdir``); with a pack,
                    # the buffer's next transposed row leaves it as the result row
    TEMIT = 8       # no operands: the buffer's next transposed row is the result row


class Pack(enum.Enum, shape=4):
    """What the writeback stage makes of a pass's lane results."""

    NONE = 0        # nothing (a load, a reduction step)
    WORDS = 1       # int32 / fp32 lanes, ReLU if asked
    LOW = 2         # a bfloat16 row's low halves, rounded (ReLU if asked) and held
    BF16 = 3        # its high halves, rounded and written with the held low halves
    F32_BF16 = 4    # every lane rounded to bfloat16, packed into the first half
    BF16_F32 = 5    # the bfloat16 elements of the first half, widened
    I8 = 6          # requantized lanes packed into the first quarter
    I8_I32 = 7      # the int8 elements of the first quarter, sign-extended
    FIRST = 8       # lane 0 (a reduction's result), the rest zero


WRITES_ROW = (Pack.WORDS, Pack.BF16, Pack.F32_BF16, Pack.BF16_F32, Pack.I8, Pack.I8_I32,
              Pack.FIRST)
"""Packs that write a destination row."""

_CAST_PACK = {Cast.F32_BF16: Pack.F32_BF16, Cast.BF16_F32: Pack.BF16_F32, Cast.I32_I8: Pack.I8,
              Cast.I8_I32: Pack.I8_I32}


def uop_layout(config):
    """One pass, as the issue stage hands it to the lanes."""
    return data.StructLayout({
        "alu": AluOp, "fp": 1,
        "bf16": 1,          # row operands hold bfloat16 pairs: widen the ``half`` of each lane
        "half": 1,
        "operands": Operands,
        "pop1": 1,          # the src1 row is used for the last time
        "pop2": 1,          # the src2 row is used for the last time
        "pack": Pack, "relu": 1,
        "addr": row_bits(config),
        "scalar": 32, "shift": range(63),
        "vmath": 1,         # through the transcendental unit (function ``fop``), not the ALU
        "fop": range(len(vmath.OPS)),
        "tdir": 1,          # vtrans: rows enter the buffer at the bottom (0) or the right (1)
    })


class _Phase(enum.Enum, shape=2):
    LOAD = 0        # a broadcast row's load pass
    STEPS = 1       # rows (vop, vcast), a reduction's row steps or a tile's loads (vtrans)
    TREE = 2        # a reduction's tree levels
    EMIT = 3        # the last tile's transposed rows (vtrans)


class VPUIssue(wiring.Component):
    """Issue stage (see the module docstring).

    Parameters
    ----------
    config : TensorCoreConfig
    max_outstanding : int
        Most row writes that can be between this stage and the write port (queues and
        registers downstream); sizes the counter of outstanding writes.

    Members
    -------
    cmd : In(stream of vpu_command_layout)
    uop : Out(stream of uop_layout)
    read1, read2 : Out(stream of row index)
        Rows to read on src1 / src2, in the order the passes use them.
    written : In(1)
        A destination row was written (the write port's handshake).
    idle : Out(1)
        No command in hand and no write outstanding.
    hazard : Out(1)
        A command waits for earlier writes to land.

    Throughput: one pass per cycle while ``uop`` and the read streams take them; a command
    taken on ``cmd`` issues its first pass in the next cycle, and the next command is taken in
    the cycle of the last pass. A command with ``count = 0`` is taken and dropped in one
    cycle.
    """

    def __init__(self, config, *, max_outstanding):
        self._config = config
        self._max_outstanding = max_outstanding
        rows = row_bits(config)
        super().__init__({
            "cmd": In(stream.Signature(vpu_command_layout(config))),
            "uop": Out(stream.Signature(uop_layout(config))),
            "read1": Out(stream.Signature(rows)),
            "read2": Out(stream.Signature(rows)),
            "written": In(1),
            "idle": Out(1),
            "hazard": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        cmd = Signal(vpu_command_layout(cfg))
        busy = Signal()
        fresh = Signal()            # no pass of the command issued yet
        st = _State(cfg)

        bf16 = (cmd.kind != VPUKind.VCAST) & (cmd.dtype == DType.BF16)
        ctl = SimpleNamespace(        # facts about the command that several decisions share
            binary=_binary(cmd.vop),
            bf16=bf16,
            last_half=~bf16 | st.half,
            last_row=st.row == cmd.count - 1,
            last_step=st.step == cmd.span - 1,
            levels=(cfg.lanes.bit_length() - 1) + bf16,     # log2 of a row's elements
        )
        ctl.last_level = st.level == ctl.levels - 1
        tile_log = cfg.lanes.bit_length() - 1 + (cmd.dtype == DType.BF16)
        ctl.tile_rows = Signal(range(2 * cfg.lanes + 1))   # vtrans: rows (elements) of a tile
        m.d.comb += ctl.tile_rows.eq(Mux(cmd.dtype == DType.BF16, 2 * cfg.lanes, cfg.lanes))
        ctl.last_tile_row = st.step == ctl.tile_rows - 1
        ctl.trans_rows = cmd.count << tile_log                # vtrans: rows of the command

        u = Signal(uop_layout(cfg))
        read1, read2, last = Signal(), Signal(), Signal()
        self._describe_pass(m, cmd, st, ctl, u, read1, read2, last)
        m.d.comb += [self.uop.payload.eq(u), self.read1.payload.eq(st.rd1),
                     self.read2.payload.eq(st.rd2)]

        fire = Signal()
        writes = u.pack.as_value().matches(*WRITES_ROW)
        go, quiet = self._hazard_check(m, cmd, busy & fresh, ctl, fire & writes)
        m.d.comb += [
            fire.eq(busy & go & self.uop.ready & (~read1 | self.read1.ready)
                    & (~read2 | self.read2.ready)),
            self.uop.valid.eq(fire),
            self.read1.valid.eq(fire & read1),
            self.read2.valid.eq(fire & read2),
        ]
        with m.If(fire):
            m.d.sync += fresh.eq(0)
            with m.If(read1):
                m.d.sync += st.rd1.eq(st.rd1 + 1)
            with m.If(read2):
                m.d.sync += st.rd2.eq(st.rd2 + 1)
            self._advance(m, cmd, st, ctl)

        done = fire & last
        with m.If(done):
            m.d.sync += busy.eq(0)
        m.d.comb += self.cmd.ready.eq(~busy | done)
        with m.If(self.cmd.valid & self.cmd.ready):
            p = self.cmd.payload
            load = (p.kind == VPUKind.VOP) & (p.src2_mode == Src2.BROADCAST) & _binary(p.vop)
            m.d.sync += [cmd.eq(p), busy.eq(p.count != 0), fresh.eq(1), st.row.eq(0), st.step.eq(0),
                         st.half.eq(0), st.level.eq(0), st.rd1.eq(p.src1), st.rd2.eq(p.src2),
                         st.wr.eq(p.dst), st.phase.eq(Mux(load, _Phase.LOAD, _Phase.STEPS))]
        m.d.comb += self.idle.eq(~busy & quiet)
        return m

    @staticmethod
    def _describe_pass(m, cmd, st, ctl, u, read1, read2, last):
        """The pass the command is at: its micro-operation, the reads it starts and whether it
        is the command's last pass."""
        is_float = cmd.dtype != DType.INT32
        rop = Mux(cmd.rop == ROp.SUM, AluOp.ADD, AluOp.MAX)
        m.d.comb += [u.addr.eq(st.wr), u.scalar.eq(cmd.scalar), u.shift.eq(cmd.shift),
                     u.half.eq(st.half), u.fp.eq(is_float)]
        with m.Switch(st.phase):
            with m.Case(_Phase.LOAD):
                m.d.comb += [u.operands.eq(Operands.LOAD), u.pop2.eq(1), read2.eq(1)]
            with m.Case(_Phase.TREE):
                m.d.comb += [u.operands.eq(Operands.TREE), u.alu.eq(rop),
                             u.pack.eq(Mux(ctl.last_level, Pack.FIRST, Pack.NONE)),
                             last.eq(ctl.last_level & ctl.last_row)]
            with m.Case(_Phase.EMIT):       # vtrans: row `step` of the last tile
                m.d.comb += [u.operands.eq(Operands.TEMIT), u.bf16.eq(ctl.bf16),
                             u.tdir.eq(st.row[0]), u.pack.eq(Pack.WORDS),
                             last.eq(ctl.last_tile_row)]
            with m.Case(_Phase.STEPS):
                with m.Switch(cmd.kind):
                    with m.Case(VPUKind.VOP):
                        _vop_pass(m, cmd, st, ctl, u, read1, read2, last)
                    with m.Case(VPUKind.VCAST):
                        pack = Pack.I8_I32
                        for cast in (Cast.I32_I8, Cast.BF16_F32, Cast.F32_BF16):
                            pack = Mux(cmd.cast == cast, _CAST_PACK[cast], pack)
                        m.d.comb += [
                            u.operands.eq(Operands.SCALAR), u.fp.eq(0),
                            u.alu.eq(Mux(cmd.cast == Cast.I32_I8, AluOp.REQUANT, AluOp.COPY)),
                            u.pack.eq(pack), u.pop1.eq(1), read1.eq(1), last.eq(ctl.last_row),
                        ]
                    with m.Case(VPUKind.VTRANS):    # row `step` of tile `row` in, of the
                        m.d.comb += [                   # tile before out
                            u.operands.eq(Operands.TLOAD), u.bf16.eq(ctl.bf16),
                            u.tdir.eq(st.row[0]),
                            u.pack.eq(Mux(st.row != 0, Pack.WORDS, Pack.NONE)),
                            u.pop1.eq(1), read1.eq(1)]
                    with m.Case(VPUKind.VRED):
                        m.d.comb += [
                            u.operands.eq(Operands.ACC), u.bf16.eq(ctl.bf16),
                            u.alu.eq(Mux(st.step == 0, AluOp.COPY, rop)),
                            u.pop1.eq(ctl.last_half), read1.eq(~st.half),
                        ]

    @staticmethod
    def _advance(m, cmd, st, ctl):
        """Counters after a pass: half, row step, tree level, row; the next phase."""
        next_row = [st.row.eq(st.row + 1), st.wr.eq(st.wr + 1)]
        with m.Switch(st.phase):
            with m.Case(_Phase.LOAD):
                m.d.sync += st.phase.eq(_Phase.STEPS)
            with m.Case(_Phase.STEPS):
                with m.If(cmd.kind == VPUKind.VTRANS):
                    m.d.sync += st.step.eq(Mux(ctl.last_tile_row, 0, st.step + 1))
                    with m.If(st.row != 0):
                        m.d.sync += st.wr.eq(st.wr + 1)
                    with m.If(ctl.last_tile_row):
                        m.d.sync += st.row.eq(st.row + 1)
                        with m.If(ctl.last_row):
                            m.d.sync += st.phase.eq(_Phase.EMIT)
                with m.Elif(~ctl.last_half):
                    m.d.sync += st.half.eq(1)
                with m.Elif(cmd.kind == VPUKind.VRED):
                    m.d.sync += [st.half.eq(0), st.step.eq(Mux(ctl.last_step, 0, st.step + 1))]
                    with m.If(ctl.last_step):
                        m.d.sync += st.phase.eq(_Phase.TREE)
                with m.Else():      # a row; step counts the rows of a src2=stat group
                    m.d.sync += [st.half.eq(0), *next_row,
                                 st.step.eq(Mux(ctl.last_step, 0, st.step + 1))]
            with m.Case(_Phase.TREE):
                with m.If(ctl.last_level):
                    m.d.sync += [st.level.eq(0), st.phase.eq(_Phase.STEPS), *next_row]
                with m.Else():
                    m.d.sync += st.level.eq(st.level + 1)
            with m.Case(_Phase.EMIT):
                m.d.sync += [st.wr.eq(st.wr + 1), st.step.eq(st.step + 1)]

    def _hazard_check(self, m, cmd, starting, ctl, issue_write):
        """Whether the command may issue: before its first pass (``starting``), none of its
        source rows may lie in the span of destination rows whose writes are outstanding.
        Keeps that span and the count of outstanding writes; returns ``(go, quiet)``, quiet
        when no write is outstanding."""
        cfg = self._config
        outstanding = Signal(range(self._max_outstanding + 1))
        m.d.sync += outstanding.eq(outstanding + issue_write - self.written)
        quiet = outstanding == 0
        win_lo = Signal(range(cfg.vmem_rows + 1))
        win_hi = Signal(range(cfg.vmem_rows + 1))

        def overlaps(lo, n):
            return (n != 0) & (lo < win_hi) & (win_lo < lo + n)

        vop2 = (cmd.kind == VPUKind.VOP) & ctl.binary
        trans = cmd.kind == VPUKind.VTRANS
        n1 = Mux(cmd.kind == VPUKind.VRED, cmd.count * cmd.span,
                 Mux(trans, ctl.trans_rows, cmd.count))
        # src2=stat reads count / span rows: count is a bound that needs no divider
        n2 = Mux(vop2 & cmd.src2_mode.as_value().matches(Src2.ROWS, Src2.STAT), cmd.count,
                 Mux(vop2 & (cmd.src2_mode == Src2.BROADCAST), 1, 0))
        m.d.comb += self.hazard.eq(starting & ~quiet & (overlaps(cmd.src1, n1)
                                                              | overlaps(cmd.src2, n2)))
        with m.If(self.uop.valid & starting):
            end = cmd.dst + Mux(trans, ctl.trans_rows, cmd.count)
            m.d.sync += [
                win_lo.eq(Mux(quiet | (cmd.dst < win_lo), cmd.dst, win_lo)),
                win_hi.eq(Mux(quiet | (end > win_hi), end, win_hi)),
            ]
        return ~self.hazard, quiet


class _State:
    """The issue stage's position in its command."""

    def __init__(self, cfg):
        self.phase = Signal(_Phase)
        self.row = Signal(range(cfg.vmem_rows + 1))
        self.step = Signal(range(max(cfg.vmem_rows, 2 * cfg.lanes) + 1))
        self.half = Signal()
        self.level = Signal(range(cfg.lanes.bit_length() + 1))
        self.rd1 = Signal(row_bits(cfg))
        self.rd2 = Signal(row_bits(cfg))
        self.wr = Signal(row_bits(cfg))


def _binary(vop):
    """Whether a VOP operation takes a second operand (``VOPS``)."""
    return vop.as_value().matches(*[v.op.value for v in VOPS.values() if not v.unary])


def _alu_op(m, vop):
    """The lane operation of a VOP operation: the one of the same name (``VOPS``)."""
    alu = Signal(AluOp, name="vop_alu")
    with m.Switch(vop):
        for v in VOPS:
            with m.Case(VOp[v.name]):
                m.d.comb += alu.eq(AluOp[v.name] if v.name in AluOp.__members__
                                   else AluOp.COPY)     # a function: the ALU idles
    return alu


def _function(m, vop):
    """Whether a VOP operation runs through the transcendental unit, and its function there
    (spec/vmath.py ``OPS``, by name)."""
    fop = Signal(range(len(vmath.OPS)), name="vop_fop")
    functions = [v.op for v in VOPS.values() if v.latency == "vmath"]
    with m.Switch(vop):
        for v in functions:
            with m.Case(VOp[v.name]):
                m.d.comb += fop.eq(vmath.OP_CODES[v.name.lower()])
    return vop.as_value().matches(*[VOp[v.name] for v in functions]), fop


def _vop_pass(m, cmd, st, ctl, u, read1, read2, last):
    """A pass of a ``vop`` row: one for int32 / fp32, two for bfloat16 (low, high halves)."""
    mode = cmd.src2_mode
    operands = Mux(~ctl.binary, Operands.SCALAR,
                   Mux(mode == Src2.ROWS, Operands.ROWS,
                       Mux(mode == Src2.BROADCAST, Operands.BCAST,
                           Mux(mode == Src2.STAT, Operands.STAT, Operands.SCALAR))))
    rows2 = ctl.binary & (mode == Src2.ROWS)
    stat = ctl.binary & (mode == Src2.STAT)     # a group's row read at its first row
    is_function, fop = _function(m, cmd.vop)
    m.d.comb += [
        u.vmath.eq(is_function), u.fop.eq(fop),
        u.operands.eq(operands), u.alu.eq(_alu_op(m, cmd.vop)), u.bf16.eq(ctl.bf16),
        u.pop1.eq(ctl.last_half),
        u.pop2.eq((rows2 | (stat & ctl.last_step)) & ctl.last_half),
        u.pack.eq(Mux(ctl.bf16, Mux(st.half, Pack.BF16, Pack.LOW), Pack.WORDS)),
        u.relu.eq(cmd.relu), read1.eq(~st.half),
        read2.eq((rows2 | (stat & (st.step == 0))) & ~st.half),
        last.eq(ctl.last_half & ctl.last_row),
    ]
