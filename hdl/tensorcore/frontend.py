"""The sequencer's front end: fetches, executes the scalar instructions, and checks and
dispatches the queued ones to the DMA, MXU and VPU queues (docs/tensorcore.md).

One instruction per cycle: the instruction memory's read address is the next PC, computed in
the same cycle from the current instruction (a taken branch costs nothing). A queued
instruction is dispatched when its queue has room (else the front end waits, counted in
``stalled``); its register operands are read then, and its operands are checked then against
the front end's copy of the engine's shape state (``dma.shape``, ``mxu.shape``/``mxu.stride``,
``vpu.cfg``), so every instruction that reaches an engine is legal. The first fault stops
dispatch and is reported with its code and PC (``error``); ``halt`` stops fetching.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from spec import isa
from spec.isa import (
    FIELDS,
    ICI_OPS,
    IMM_FIELDS,
    OPERANDS,
    REGISTERS,
    SEM_NONE,
    SEM_NONE_OPS,
    SPECS,
    VOPS,
)
from spec.protocol import COLLECTIVE_SEM

from ..lib.codes import hw
from ..lib.sram import SRAM
from .dma import DIMS, dma_command_layout
from .ici_port import IciKind, ici_command_layout
from .matmul import matmul_command_layout
from .vmem_ports import VPUKind, vpu_command_layout

__all__ = ["FrontEnd", "EntryKind", "entry_layout"]

Collective = hw(isa.Collective)
DType = hw(isa.DType)
Error = hw(isa.Error)
IciFmt = hw(isa.IciFmt)
IciOp = hw(isa.IciOp)
IciSpace = hw(isa.IciSpace)
Op = hw(isa.Op)
Queue = hw(isa.Queue)
Src2 = hw(isa.Src2)


class EntryKind(enum.Enum, shape=2):
    """What a queue entry asks its engine queue to do."""

    CMD = 0
    WAIT = 1
    SIGNAL = 2


def entry_layout(cmd_layout):
    """A queue entry: a command for the engine, or a semaphore operation; its PC."""
    return data.StructLayout({"kind": EntryKind, "sem": 5, "pc": 16, "cmd": cmd_layout})


def _field(word, name):
    lo, width = FIELDS[name]
    return word[lo:lo + width]


def _imm(word, name):
    lo, width = IMM_FIELDS[name]
    return word[lo:lo + width]


def _used_mask(op):
    """The instruction bits ``op`` uses (opcode, its register fields, its immediate fields)."""
    spec = SPECS[op]
    mask = ((1 << FIELDS["opcode"][1]) - 1) << FIELDS["opcode"][0]
    for name in spec.operands:
        lo, width = FIELDS[name] if name in FIELDS else IMM_FIELDS[name]
        mask |= ((1 << width) - 1) << lo
    return mask


def _coded(word, name, *, ici):
    """Whether operand field ``name`` holds a value of its code (always, for a field that is
    not coded or whose every value is one; the ICI queue only with ``ici``)."""
    code = OPERANDS[name].code
    if code is None:
        return Const(1)
    values = [c.value for c in code if ici or c is not isa.Queue.ICI]
    if len(values) == 1 << code.width():
        return Const(1)
    return _imm(word, name) <= max(values)


def _vop_types(word):
    """Whether a VOP's element type is one its operation takes (``VOPS``)."""
    ok = Const(1)
    for vop in VOPS.values():
        if len(vop.dtypes) < len(isa.DType):
            ok = ok & ~((_imm(word, "vop") == vop.op.value)
                        & ~_imm(word, "dtype").matches(*[d.value for d in vop.dtypes]))
    return ok


class FrontEnd(wiring.Component):
    """Fetch, scalar execution, checks and dispatch (see the module docstring).

    Members
    -------
    start : In(1)
        Begin at ``start_pc`` with registers and shape state cleared.
    start_pc : In(16)
    stop : In(1)
        Stop dispatching (an error elsewhere, or the host's abort).
    imem_we, imem_addr, imem_data, imem_strb : In
        The host writes the instruction memory (only while not running).
    dma, mxu, vpu : Out(stream of entry_layout)
        The three engine queues.
    ici : Out(stream of entry_layout)
        With ``ici``: the ICI queue.
    running : Out(1)
        Fetching: started, not halted, not stopped, no fault.
    error : Out(1), error_code : Out(Error), error_pc : Out(16)
        A fault this cycle (one cycle) and its code and PC.
    pc : Out(16), regs : Out(32).array(16)
    executed : Out(1)
        An instruction completed this cycle (scalar executed or dispatched).
    stalled : Out(1)
        The front end waited for a full queue this cycle.
    """

    def __init__(self, cfg, *, imem_name):
        self._cfg = cfg
        self._imem = SRAM(imem_name, width=64, depth=cfg.imem_depth, byte_enable=True)
        pc_bits = (cfg.imem_depth - 1).bit_length()
        super().__init__({
            "start": In(1), "start_pc": In(16), "stop": In(1),
            "imem_we": In(1), "imem_addr": In(pc_bits), "imem_data": In(64),
            "imem_strb": In(8),
            "dma": Out(stream.Signature(entry_layout(dma_command_layout(cfg)))),
            "mxu": Out(stream.Signature(entry_layout(matmul_command_layout(cfg)))),
            "vpu": Out(stream.Signature(entry_layout(vpu_command_layout(cfg)))),
            **({"ici": Out(stream.Signature(entry_layout(ici_command_layout(cfg))))}
               if cfg.ici else {}),
            "running": Out(1), "error": Out(1), "error_code": Out(Error), "error_pc": Out(16),
            "pc": Out(16), "regs": Out(32).array(REGISTERS),
            "executed": Out(1), "stalled": Out(1),
        })

    @property
    def submodules(self):
        return [self._imem]

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        depth = cfg.imem_depth
        pc = Signal(range(depth))
        pc_next = Signal(range(depth))
        word = Signal(64)
        self._imem.instance(m, "imem", we=self.imem_we, waddr=self.imem_addr,
                            wdata=self.imem_data, wstrb=self.imem_strb, raddr=[pc_next],
                            rdata=[word])
        regs = Array(self.regs)
        op = _field(word, "opcode")
        rb, rc, rd = (regs[_field(word, f)] for f in ("b", "c", "d"))
        fault = Signal(Error)            # a fault of this instruction (NONE: none)
        check = Signal(Error)            # what the operand checks of a queued one found
        pc_fault = Signal()              # a branch or the next PC past the memory
        advance = Signal()               # the instruction completes this cycle
        m.d.comb += [self.pc.eq(pc), pc_next.eq(pc)]
        with m.If(self.start):
            m.d.sync += [self.running.eq(1), pc.eq(self.start_pc),
                         *[r.eq(0) for r in self.regs]]
            m.d.comb += pc_next.eq(self.start_pc)
        with m.Elif(self.running & (self.stop | (fault != Error.NONE))):
            m.d.sync += self.running.eq(0)
        with m.Elif(advance):
            m.d.sync += pc.eq(pc_next)

        legal = self._legal(m, word, op)
        go = Signal()
        m.d.comb += go.eq(self.running & ~self.stop & legal & (check == Error.NONE))
        self._execute(m, word, op, go, pc_next, pc_fault, advance, rb, rc)
        with m.If(self.running & ~self.stop):
            with m.If(~legal):
                m.d.comb += fault.eq(Error.ILLEGAL_INSTRUCTION)
            with m.Elif(check != Error.NONE):
                m.d.comb += fault.eq(check)
            with m.Elif(pc_fault):
                m.d.comb += fault.eq(Error.PC_RANGE)
        m.d.comb += [self.error.eq(fault != Error.NONE), self.error_code.eq(fault),
                     self.error_pc.eq(pc), self.executed.eq(advance)]
        self._dispatch(m, word, op, go, pc, rb, rc, rd, check, advance)
        return m

    def _legal(self, m, word, op):
        """The opcode exists (the ICI's only with ``ici``), no unused bit is set, every coded
        field has a value (spec/isa.py, ``OPERANDS``) and the semaphore exists."""
        cfg = self._cfg
        legal = Signal()
        with m.Switch(op):
            for spec in SPECS.values():
                if spec.op in ICI_OPS and not cfg.ici:
                    continue
                if spec.op == isa.Op.VTRANS and not cfg.vtrans:
                    continue
                with m.Case(spec.op.value):
                    ok = (word & ~Const(_used_mask(spec.op), 64)) == 0
                    for name in spec.operands:
                        ok = ok & _coded(word, name, ici=cfg.ici)
                    if spec.op == isa.Op.VOP:
                        ok = ok & _vop_types(word)
                    if spec.op == isa.Op.ICI_SEND:
                        # A send's adds are int32 or fp32 (bfloat16 adds are the
                        # collectives'); its semaphore is the destination's, not the engine's.
                        ok = ok & ~((_imm(word, "iop") != IciOp.STORE.value)
                                    & (_imm(word, "ifmt") == IciFmt.BF16.value))
                        ok = ok & (_imm(word, "sem") != COLLECTIVE_SEM)
                    elif "sem" in spec.operands:
                        sem = _imm(word, "sem")
                        in_range = sem < cfg.semaphores
                        if spec.op in SEM_NONE_OPS:
                            in_range = in_range | (sem == SEM_NONE)
                        ok = ok & in_range
                    m.d.comb += legal.eq(ok)
        return legal

    def _execute(self, m, word, op, go, pc_next, pc_fault, advance, rb, rc):
        """Scalar instructions, and the next PC of every instruction (``go``: legal, checked
        and running)."""
        depth = self._cfg.imem_depth
        regs = Array(self.regs)
        dest = _field(word, "a")
        imm32 = _imm(word, "imm32")
        target = _imm(word, "target")
        value = Signal(32)
        write = Signal()
        taken = Signal()
        with m.Switch(op):
            with m.Case(Op.LI):
                m.d.comb += [value.eq(imm32), write.eq(1)]
            with m.Case(Op.ADDI):
                m.d.comb += [value.eq(rb + imm32), write.eq(1)]
            with m.Case(Op.ADD):
                m.d.comb += [value.eq(rb + rc), write.eq(1)]
            with m.Case(Op.SUB):
                m.d.comb += [value.eq(rb - rc), write.eq(1)]
            with m.Case(Op.MUL):
                m.d.comb += [value.eq(rb * rc), write.eq(1)]
            with m.Case(Op.SLLI):
                m.d.comb += [value.eq(rb << _imm(word, "shamt")), write.eq(1)]
            with m.Case(Op.SRLI):
                m.d.comb += [value.eq(rb >> _imm(word, "shamt")), write.eq(1)]
            with m.Case(Op.BEQ):
                m.d.comb += taken.eq(rb == rc)
            with m.Case(Op.BNE):
                m.d.comb += taken.eq(rb != rc)
            with m.Case(Op.BLT):
                m.d.comb += taken.eq(rb.as_signed() < rc.as_signed())
            with m.Case(Op.JMP):
                m.d.comb += taken.eq(1)
        full = ~self._queue_ready(word, op)
        halt = op == Op.HALT.value
        seq = Signal(range(depth + 1))
        m.d.comb += [seq.eq(self.pc + 1), self.stalled.eq(go & full)]
        with m.If(go & ~full):
            with m.If(halt):
                m.d.sync += self.running.eq(0)
                m.d.comb += advance.eq(1)
            with m.Elif(taken):
                with m.If(target >= depth):
                    m.d.comb += pc_fault.eq(1)
                with m.Else():
                    m.d.comb += [pc_next.eq(target), advance.eq(1)]
            with m.Elif(seq == depth):
                m.d.comb += pc_fault.eq(1)
            with m.Else():
                m.d.comb += [pc_next.eq(seq), advance.eq(1)]
        with m.If(advance & write & (dest != 0)):
            m.d.sync += regs[dest].eq(value)

    def _queue_ready(self, word, op):
        """The instruction needs no queue entry, or its queue has room. The shape
        instructions (``dma.shape``, ``mxu.shape``, ``mxu.stride``, ``vpu.cfg``) change the
        front end's copy of the shape state only: the commands after them carry it."""
        q = _imm(word, "queue")
        ici = self.ici.ready if self._cfg.ici else 0
        ready = {Op.WAIT: Array([self.dma.ready, self.mxu.ready, self.vpu.ready, ici])[q],
                 Op.DMA_LOAD: self.dma.ready, Op.DMA_STORE: self.dma.ready,
                 Op.MATMUL: self.mxu.ready, Op.VOP: self.vpu.ready, Op.VCAST: self.vpu.ready,
                 Op.VRED: self.vpu.ready, Op.VTRANS: self.vpu.ready}
        if self._cfg.ici:
            ready.update({o: ici for o in ICI_OPS})
        ready[Op.SIGNAL] = ready[Op.WAIT]
        result = Const(1)
        for o, r in ready.items():
            result = Mux(op == o.value, r, result)
        return result

    def _dispatch(self, m, word, op, go, pc, rb, rc, rd, check, advance):
        """Shape state, operand checks (``check``) and the entries of the engine queues
        (``go``: the instruction is legal, checked and the front end running)."""
        queue = _imm(word, "queue")
        sync_kind = Mux(op == Op.WAIT.value, EntryKind.WAIT, EntryKind.SIGNAL)
        is_sync = (op == Op.WAIT.value) | (op == Op.SIGNAL.value)
        queues = [(self.dma, Op.DMA_LOAD, Op.DMA_STORE, Queue.DMA),
                  (self.mxu, Op.MATMUL, Op.MATMUL, Queue.MXU),
                  (self.vpu, Op.VOP, Op.VTRANS, Queue.VPU)]
        if self._cfg.ici:
            queues.append((self.ici, Op.ICI_SEND, Op.ICI_COLL, Queue.ICI))
        for port, first, last, q in queues:
            mine = (op >= first.value) & (op <= last.value)
            m.d.comb += [
                port.valid.eq(go & (mine | (is_sync & (queue == q.value)))),
                port.payload.kind.eq(Mux(is_sync, sync_kind, EntryKind.CMD)),
                port.payload.sem.eq(_imm(word, "sem")), port.payload.pc.eq(pc),
            ]
        m.d.comb += check.eq(Error.NONE)
        with m.If(self.running):
            self._dma_checks(m, word, op, rb, rc, rd, check, advance)
            self._mxu_checks(m, word, op, rb, rc, rd, check, advance)
            self._vpu_checks(m, word, op, rb, rc, rd, check, advance)
            if self._cfg.ici:
                self._ici_checks(m, word, op, rb, rc, rd, check)

    def _shadow(self, m, name, init=0, width=32):
        """A register of the front end's copy of an engine's shape state: ``init`` at start."""
        reg = Signal(width, name=name, init=init)
        with m.If(self.start):
            m.d.sync += reg.eq(init)
        return reg

    def _dma_checks(self, m, word, op, rb, rc, rd, check, advance):
        cfg = self._cfg
        run = self._shadow(m, "dma_run")
        count = [self._shadow(m, f"dma_count{d}", 1) for d in range(DIMS)]
        hs = [self._shadow(m, f"dma_hstride{d}") for d in range(DIMS)]
        vs = [self._shadow(m, f"dma_vstride{d}") for d in range(DIMS)]
        ext = [self._shadow(m, f"dma_extent{d}", width=64) for d in range(DIMS)]
        dim = _imm(word, "dim")
        with m.If(advance & (op == Op.DMA_SHAPE.value)):
            with m.If(dim == 0):
                m.d.sync += run.eq(rb)
            for d in range(DIMS):
                with m.If(dim == d + 1):
                    m.d.sync += [count[d].eq(rb), hs[d].eq(rc), vs[d].eq(rd),
                                 ext[d].eq((rb - 1)[:32] * rd)]
        mask = cfg.beat_bytes - 1
        misaligned = Cat(run == 0, (run & mask) != 0, (rb & mask) != 0, (rc & mask) != 0,
                         *[(x & mask) != 0 for x in hs + vs],
                         *[(c == 0) | (c > 0xFFFF) for c in count]).any()
        past = rc + ext[0] + ext[1] + ext[2] + run > cfg.vmem_bytes
        transfer = (op == Op.DMA_LOAD.value) | (op == Op.DMA_STORE.value)
        with m.If(transfer):
            with m.If(misaligned):
                m.d.comb += check.eq(Error.DMA_ALIGN)
            with m.Elif(past):
                m.d.comb += check.eq(Error.VMEM_RANGE)
        c = self.dma.payload.cmd
        m.d.comb += [c.store.eq(op == Op.DMA_STORE.value), c.hbm.eq(rb), c.vmem.eq(rc),
                     c.run.eq(run), c.signal.eq(_imm(word, "sem") != SEM_NONE),
                     c.sem.eq(_imm(word, "sem")), c.pc.eq(self.pc)]
        for d in range(DIMS):
            m.d.comb += [c.count[d].eq(count[d]), c.hstride[d].eq(hs[d]),
                         c.vstride[d].eq(vs[d])]

    def _mxu_checks(self, m, word, op, rb, rc, rd, check, advance):
        cfg = self._cfg
        R, C = cfg.mxu.rows, cfg.mxu.cols
        mm, kk, nn = (self._shadow(m, f"mxu_{x}") for x in "mkn")
        sa, sb, sc = (self._shadow(m, f"mxu_{x}_stride") for x in "abc")
        with m.If(advance & (op == Op.MXU_SHAPE.value)):
            m.d.sync += [mm.eq(rb), kk.eq(rc), nn.eq(rd)]
        with m.If(advance & (op == Op.MXU_STRIDE.value)):
            m.d.sync += [sa.eq(rb), sb.eq(rc), sc.eq(rd)]
        emit = _imm(word, "emit")
        acc = _imm(word, "acc_addr")
        tiles_n = (nn[:16] + (C - 1)) >> (C - 1).bit_length()
        tiles_k = (kk[:16] + (R - 1)) >> (R - 1).bit_length()
        av, bv, cv = R * cfg.esize, C * cfg.esize, C * cfg.osize
        vmem = cfg.vmem_bytes
        bad = Cat(
            *[(x == 0) | (x > 0xFFFF) for x in (mm, kk, nn)],
            acc + tiles_n * mm[:16] > cfg.mxu.acc_depth,
            (rb % av) != 0, (sa % av) != 0, (rc % bv) != 0, (sb % bv) != 0,
            rb + (mm[:16] - 1) * sa + tiles_k * av > vmem,
            rc + (kk[:16] - 1) * sb + tiles_n * bv > vmem,
            emit & (((rd % cv) != 0) | ((sc % cv) != 0)
                    | (rd + (mm[:16] - 1) * sc + nn[:16] * cfg.osize > vmem)),
        ).any()
        with m.If((op == Op.MATMUL.value) & bad):
            m.d.comb += check.eq(Error.VMEM_RANGE)
        c = self.mxu.payload.cmd
        m.d.comb += [c.m.eq(mm), c.k.eq(kk), c.n.eq(nn), c.acc_addr.eq(acc),
                     c.accumulate.eq(_imm(word, "accumulate")), c.emit.eq(emit),
                     c.a.eq(rb), c.b.eq(rc), c.c.eq(rd),
                     c.a_stride.eq(sa), c.b_stride.eq(sb), c.c_stride.eq(sc)]

    def _vpu_checks(self, m, word, op, rb, rc, rd, check, advance):
        cfg = self._cfg
        count, scalar, shift = (self._shadow(m, f"vpu_{x}") for x in ("count", "scalar",
                                                                     "shift"))
        with m.If(advance & (op == Op.VPU_CFG.value)):
            m.d.sync += [count.eq(rb), scalar.eq(rc), shift.eq(rd)]
        row_shift = (cfg.row_bytes - 1).bit_length()

        def outside(base, rows):
            return ((base & (cfg.row_bytes - 1)) != 0) | (
                base + (rows << row_shift) > cfg.vmem_bytes)

        mode = _imm(word, "src2")
        unary = _imm(word, "vop").matches(*[v.op.value for v in VOPS.values() if v.unary])
        # vred: count reductions of span = rD rows; vop src2=stat: count groups of span =
        # scalar rows, each with its statistic row
        stat = (op == Op.VOP.value) & ~unary & (mode == Src2.STAT.value)
        span = Mux(stat, scalar, rd)
        too_many = count > cfg.vmem_rows
        bad_span = (span == 0) | (span > cfg.vmem_rows)
        spanned = Signal(range(cfg.vmem_rows ** 2 + 1))     # count x span, once both are checked
        m.d.comb += spanned.eq(count[:22] * span[:22])
        with m.Switch(op):
            with m.Case(Op.VOP):
                rows = Mux(stat, spanned, count)
                src2 = Mux(mode == Src2.ROWS.value, outside(rd, count),
                           Mux(mode == Src2.BROADCAST.value, outside(rd, 1),
                               Mux(stat, bad_span | outside(rd, count), 0)))
                bad = too_many | outside(rb, rows) | outside(rc, rows) | (~unary & src2)
                with m.If(bad):
                    m.d.comb += check.eq(Error.VMEM_RANGE)
            with m.Case(Op.VCAST):
                with m.If(too_many | outside(rb, count) | outside(rc, count)):
                    m.d.comb += check.eq(Error.VMEM_RANGE)
            with m.Case(Op.VRED):
                with m.If(too_many | bad_span | outside(rb, count) | outside(rc, spanned)):
                    m.d.comb += check.eq(Error.VMEM_RANGE)
            with m.Case(Op.VTRANS):     # count tiles of n rows, n a row's elements
                tile = (cfg.lanes - 1).bit_length() + (
                    _imm(word, "dtype") == DType.BF16.value)
                tiles = count[:22] << tile
                with m.If(too_many | outside(rb, tiles) | outside(rc, tiles)):
                    m.d.comb += check.eq(Error.VMEM_RANGE)
        c = self.vpu.payload.cmd
        kind = VPUKind.VRED
        for o, k in ((Op.VTRANS, VPUKind.VTRANS), (Op.VCAST, VPUKind.VCAST),
                     (Op.VOP, VPUKind.VOP)):
            kind = Mux(op == o.value, k, kind)
        m.d.comb += [
            c.kind.eq(kind),
            c.vop.eq(_imm(word, "vop")), c.dtype.eq(_imm(word, "dtype")), c.src2_mode.eq(mode),
            c.relu.eq(_imm(word, "relu")), c.cast.eq(_imm(word, "cast")),
            c.rop.eq(_imm(word, "rop")), c.count.eq(Mux(stat, spanned, count)), c.span.eq(span),
            c.dst.eq(rb >> row_shift), c.src1.eq(rc >> row_shift), c.src2.eq(rd >> row_shift),
            c.scalar.eq(scalar), c.shift.eq(Mux(shift > 62, 62, shift)),
        ]

    def _ici_checks(self, m, word, op, rb, rc, rd, check):
        """The local operands of the ICI instructions: addresses on VMEM rows (a row is a
        flit of the pod's endpoint), the bytes or elements inside VMEM when they are in VMEM
        (HBM answers for its own addresses); a send's adds in whole 32-bit elements
        (docs/pod.md). The destination, the sizes and the collective are the pod's to check
        (``Error.ICI``)."""
        cfg = self._cfg
        mask = cfg.row_bytes - 1
        misaligned = ((rb & mask) != 0) | ((rc & mask) != 0)
        coll = _imm(word, "coll")
        fmt = _imm(word, "cfmt")
        esize = Mux(fmt == IciFmt.BF16.value, 2, 4)
        # An all-to-all's table holds an entry per chip, a row each.
        extent = Mux(coll == Collective.ALL_TO_ALL.value, rc[:24] * cfg.row_bytes, rc[:24] * esize)
        with m.Switch(op):
            with m.Case(Op.ICI_SEND, Op.ICI_READ):
                in_vmem = _imm(word, "lspace") == IciSpace.VMEM.value
                with m.If(misaligned | (in_vmem & (rb + rd > cfg.vmem_bytes))):
                    m.d.comb += check.eq(Error.VMEM_RANGE)
                with m.Elif((op == Op.ICI_SEND.value)
                            & (_imm(word, "iop") != IciOp.STORE.value) & (rd[:2] != 0)):
                    m.d.comb += check.eq(Error.ICI)
            with m.Case(Op.ICI_COLL):
                in_vmem = _imm(word, "cspace") == IciSpace.VMEM.value
                with m.If(((rb & mask) != 0) | (in_vmem & (rb + extent > cfg.vmem_bytes))
                          | (rc >= 1 << 24)):
                    m.d.comb += check.eq(Error.VMEM_RANGE)
        c = self.ici.payload.cmd
        m.d.comb += [
            c.kind.eq(Mux(op == Op.ICI_SEND.value, IciKind.SEND,
                          Mux(op == Op.ICI_READ.value, IciKind.READ, IciKind.COLL))),
            c.local.eq(rb), c.remote.eq(rc), c.bytes.eq(Mux(op == Op.ICI_COLL.value, rc, rd)),
            c.chip.eq(_imm(word, "chip")), c.op.eq(_imm(word, "iop")),
            c.fmt.eq(Mux(op == Op.ICI_COLL.value, fmt, _imm(word, "ifmt"))),
            c.sem.eq(_imm(word, "sem")), c.coll.eq(coll), c.dim.eq(_imm(word, "cdim")),
            c.lspace.eq(Mux(op == Op.ICI_COLL.value, _imm(word, "cspace"),
                            _imm(word, "lspace"))),
            c.rspace.eq(_imm(word, "rspace")),
            c.pc.eq(self.pc),
        ]
