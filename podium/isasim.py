"""The golden ISA simulator of the TensorCore, in numpy, written from docs/tensorcore.md (not
from the RTL): the chip's reference for final registers, semaphores, VMEM, HBM, the
timing-independent counters and errors.

The machine is modelled at instruction granularity. The front end executes scalar
instructions and dispatches queued ones, reading their registers and checking every operand
at dispatch against its own copy of the engines' shape state; each engine (DMA, MXU, VPU)
executes the instruction at the front of its queue in one atomic action (a DMA transfer, a
whole ``matmul`` through verification/models/mxu.py, a VPU instruction through
verification/models/vpu.py). Each queue holds ``queue_depth`` instructions that their engine
has not finished, a blocked ``wait`` included; the front end stalls on a full queue.

Scheduling: every step one component (front end or engine) that can progress takes one
action. Without a seed the components take turns in a fixed order (front end, DMA, MXU, VPU),
which makes runs reproducible; with ``seed`` each component gets a random speed for the run
and each step picks one that can progress with probability proportional to its speed, which
explores other fair interleavings (an engine far behind the others, or far ahead): a program
without data races gives the same result under all of them. When none can progress before
the program is done, the run stops with DEADLOCK (the hardware detects the same state after
``deadlock_cycles`` cycles).

On a pod chip (a TensorCore built with ``ici``) a fourth engine, the ICI, executes
``ici.send``, ``ici.read`` and ``ici.coll`` through the :class:`~podium.podsim.PodSim` the
chip belongs to, which runs every chip's components under one schedule.

Errors follow the doc: the first one stops dispatching, the instructions already dispatched
keep running while they can (a ``wait`` that nothing will satisfy ends them), and the result
carries the error code and ERROR_PC. A DMA transfer refused by HBM (an address at or past
``hbm_capacity``: DECERR) copies nothing and signals nothing.
"""

from dataclasses import dataclass, field

import numpy as np

from spec.isa import (
    SEM_NONE,
    SPECS,
    VOPS,
    Collective,
    Error,
    IciFmt,
    IciOp,
    IciSpace,
    Op,
    Queue,
    Src2,
    VOp,
    decode,
    illegal,
)
from verification.models.mxu import Gemm, MXUModel
from verification.models.vpu import tile_rows, vcast_rows, vop_rows, vred_rows, vtrans_rows

__all__ = ["HBM", "Result", "TensorCoreSim", "schedule", "SEM_MAX", "DMA_COUNT_MAX",
           "LENGTH_MAX"]

SEM_MAX = 255
DMA_COUNT_MAX = 65535
_MASK = 0xFFFFFFFF
_ENGINES = (Queue.DMA, Queue.MXU, Queue.VPU)
LENGTH_MAX = (1 << 24) - 1
"""Longest collective, in elements."""


class HBM:
    """HBM as the DMA sees it: ``capacity`` bytes from address 0, zero at start; an access at
    or past the capacity is answered with DECERR."""

    def __init__(self, capacity):
        if not isinstance(capacity, int) or not 0 < capacity <= 1 << 32:
            raise ValueError(f"hbm_capacity must be an integer in 1..2**32, got {capacity!r}")
        self.capacity = capacity
        self.data = np.zeros(capacity, dtype=np.uint8)

    def write(self, address, data):
        """Store bytes (``bytes`` or a uint8 array) at ``address`` (host backdoor)."""
        data = np.frombuffer(bytes(data), dtype=np.uint8)
        if not 0 <= address <= self.capacity - len(data):
            raise ValueError(f"HBM write of {len(data)} bytes at {address:#x} is past the "
                             f"capacity {self.capacity:#x}")
        self.data[address:address + len(data)] = data

    def read(self, address, length):
        if not 0 <= address <= self.capacity - length:
            raise ValueError(f"HBM read of {length} bytes at {address:#x} is past the "
                             f"capacity {self.capacity:#x}")
        return self.data[address:address + length].tobytes()


@dataclass
class Result:
    """The state after a run. ``status`` is ``done`` (halted and drained), ``error`` (see
    ``error`` and ``error_pc``) or ``timeout`` (``max_steps`` reached first). ``undefined``
    / ``hbm_undefined``: the ``(start, end)`` VMEM / HBM byte ranges whose contents the run
    left undefined (a pod chip's: what a collective leaves, docs/pod.md)."""

    status: str
    error: Error
    error_pc: int
    pc: int
    registers: list
    semaphores: list
    vmem: np.ndarray
    hbm: HBM
    counters: dict = field(default_factory=dict)
    steps: int = 0
    undefined: list = field(default_factory=list)
    hbm_undefined: list = field(default_factory=list)


@dataclass
class _Entry:
    """A dispatched instruction: its PC, opcode and operands resolved at dispatch."""

    pc: int
    op: Op
    args: dict


class _Fault(Exception):
    def __init__(self, error, message):
        self.error = error
        super().__init__(message)


def _ceil(a, b):
    return -(-a // b)


def schedule(sims, rng, max_steps):
    """Run the components of ``sims`` (started TensorCoreSims) until none can progress or
    ``max_steps`` actions have been taken; returns the steps taken. Without ``rng`` the
    components take turns in a fixed order; with it each has a random speed for the run (see
    the module docstring)."""
    actors, ready = [], []
    for sim in sims:
        actors += [sim._front_end_step] + [lambda q=q, s=sim: s._engine_step(q)
                                           for q in sim.engines]
        ready += [sim._front_end_ready] + [lambda q=q, s=sim: s._engine_ready(q)
                                           for q in sim.engines]
    count = len(actors)
    steps, turn = 0, 0
    speed = None if rng is None else rng.exponential(size=count) ** 3
    while steps < max_steps:
        able = [i for i in range(count) if ready[i]()]
        if not able:
            break
        if rng is None:
            while turn not in able:
                turn = (turn + 1) % count
            choice, turn = turn, (turn + 1) % count
        else:
            weights = speed[able]
            choice = able[int(np.searchsorted(np.cumsum(weights),
                                              rng.random() * weights.sum()))]
        actors[choice]()
        steps += 1
    return steps


class TensorCoreSim:
    """The TensorCore of ``config`` (a TensorCoreConfig) with an HBM of ``hbm_capacity`` bytes.

    ``load(words)`` puts a program into the instruction memory (the rest of it holds zeros,
    ``nop``); ``hbm.write`` fills HBM; ``run(max_steps)`` starts at instruction 0 and returns a
    :class:`Result`. A pod chip's (``config.ici``) runs in its :class:`~podium.podsim.PodSim`
    (``pod``, its node number ``index``).
    """

    def __init__(self, config, hbm_capacity=1 << 24, seed=None):
        self.config = config
        self.hbm = HBM(hbm_capacity)
        self.vmem = np.zeros(config.vmem_bytes, dtype=np.uint8)
        mxu = config.mxu
        self.mxu = MXUModel(mxu.rows, mxu.cols, mxu.acc_depth, mxu.fmt, mxu.output)
        self.rng = None if seed is None else np.random.default_rng(seed)
        self.engines = _ENGINES + ((Queue.ICI,) if config.ici else ())
        self.pod, self.index = None, 0
        self.imem = [None] * config.imem_depth
        self.load([])

    # Program and state ------------------------------------------------------------------

    def load(self, program):
        """Load instruction words (a list, or a Program's ``words``); the rest of the
        instruction memory holds ``nop``."""
        words = [int(w) for w in getattr(program, "words", program)]
        if len(words) > self.config.imem_depth:
            raise ValueError(f"program of {len(words)} instructions does not fit imem_depth "
                             f"{self.config.imem_depth}")
        if any(not 0 <= w < 1 << 64 for w in words):
            raise ValueError("instruction words must be in 0..2**64-1")
        self.imem = [self._decode(w) for w in words]
        self.imem += [self._decode(0)] * (self.config.imem_depth - len(words))

    def _decode(self, word):
        try:
            op, fields = decode(word)
        except ValueError as e:
            return None, str(e)
        cfg = self.config
        reason = illegal(op, fields, semaphores=cfg.semaphores, ici=cfg.ici, vmath=cfg.vmath,
                         vtrans=cfg.vtrans)
        return (None, reason) if reason else (op, fields)

    def _reset(self):
        cfg = self.config
        self.regs = [0] * 16
        self.sems = [0] * cfg.semaphores
        self.pc = 0
        self.halted = False
        self.error, self.error_pc, self.error_message = Error.NONE, 0, ""
        self.queues = {q: [] for q in self.engines}
        self.counters = {"retired": 0, "bytes_read": 0, "bytes_written": 0}
        self.dma_shape = {"run": 0, "count": [1, 1, 1], "hbm": [0, 0, 0], "vmem": [0, 0, 0]}
        self.mxu_shape = (0, 0, 0)
        self.mxu_stride = (0, 0, 0)
        self.vpu_cfg = (0, 0, 0)

    def _fail(self, error, pc, message):
        if self.error == Error.NONE:
            self.error, self.error_pc, self.error_message = error, pc, message

    # Running ----------------------------------------------------------------------------

    def run(self, max_steps=10_000_000, start_pc=0):
        """Run from instruction ``start_pc`` until done, an error or ``max_steps`` actions."""
        if self.config.ici:
            raise ValueError("a pod chip's TensorCore runs in its PodSim")
        self.begin(start_pc)
        steps = schedule([self], self.rng, max_steps)
        return self.result(steps, timed_out=steps >= max_steps)

    def begin(self, start_pc=0):
        """Reset the machine state (not memory) and set the PC: the host's ``clear`` and ``start``
        (semaphores zero, as after ``clear``; on a pod every chip is cleared before any starts)."""
        self._reset()
        self.pc = start_pc
        self.undefined, self.hbm_undefined = [], []

    def result(self, steps, *, timed_out):
        """The :class:`Result` once the schedule has stopped after ``steps`` actions: done,
        an error, a timeout, or (nothing could progress) DEADLOCK."""
        if self.error != Error.NONE:
            status = "error"
        elif self.halted and not any(self.queues.values()):
            status = "done"
        elif timed_out:
            status = "timeout"
        else:
            self._fail(Error.DEADLOCK, self.pc, "nothing can progress")
            status = "error"
        return Result(status=status, error=self.error, error_pc=self.error_pc, pc=self.pc,
                      registers=list(self.regs), semaphores=list(self.sems),
                      vmem=self.vmem.copy(), hbm=self.hbm, counters=dict(self.counters),
                      steps=steps, undefined=list(self.undefined),
                      hbm_undefined=list(self.hbm_undefined))

    # Front end --------------------------------------------------------------------------

    def _front_end_ready(self):
        if self.halted or self.error != Error.NONE:
            return False
        op, fields = self.imem[self.pc]
        if op is None or SPECS[op].queue is None and op not in (Op.WAIT, Op.SIGNAL):
            return True
        return len(self.queues[self._queue_of(op, fields)]) < self.config.queue_depth

    @staticmethod
    def _queue_of(op, fields):
        return Queue(fields["queue"]) if op in (Op.WAIT, Op.SIGNAL) else SPECS[op].queue

    def _set(self, n, value):
        if n:
            self.regs[n] = value & _MASK

    def _front_end_step(self):
        pc = self.pc
        op, fields = self.imem[pc]
        if op is None:
            self._fail(Error.ILLEGAL_INSTRUCTION, pc, fields)
            return
        nxt = pc + 1
        if op in (Op.WAIT, Op.SIGNAL) or SPECS[op].queue is not None:
            try:
                args = self._dispatch_args(op, fields)
            except _Fault as fault:
                self._fail(fault.error, pc, str(fault))
                return
            self.queues[self._queue_of(op, fields)].append(_Entry(pc, op, args))
        elif op == Op.HALT:
            self.halted = True
            self.counters["retired"] += 1
            return
        else:
            nxt = self._scalar(op, fields, nxt)
            self.counters["retired"] += 1
        if nxt >= self.config.imem_depth:
            self._fail(Error.PC_RANGE, pc, f"next PC {nxt} is past the instruction memory")
            return
        self.pc = nxt

    def _scalar(self, op, f, nxt):
        r = self.regs.__getitem__
        if op == Op.LI:
            self._set(f["a"], f["imm32"])
        elif op == Op.ADDI:
            self._set(f["a"], r(f["b"]) + f["imm32"])
        elif op == Op.ADD:
            self._set(f["a"], r(f["b"]) + r(f["c"]))
        elif op == Op.SUB:
            self._set(f["a"], r(f["b"]) - r(f["c"]))
        elif op == Op.MUL:
            self._set(f["a"], r(f["b"]) * r(f["c"]))
        elif op == Op.SLLI:
            self._set(f["a"], r(f["b"]) << f["shamt"])
        elif op == Op.SRLI:
            self._set(f["a"], r(f["b"]) >> f["shamt"])
        elif op == Op.JMP:
            return f["target"]
        elif op in (Op.BEQ, Op.BNE, Op.BLT):
            x, y = r(f["b"]), r(f["c"])
            if op == Op.BLT:
                x, y = x - ((x >> 31) << 32), y - ((y >> 31) << 32)
            taken = {Op.BEQ: x == y, Op.BNE: x != y, Op.BLT: x < y}[op]
            return f["target"] if taken else nxt
        return nxt

    # Dispatch-time checks ---------------------------------------------------------------

    def _dispatch_args(self, op, f):
        """The operands of a queued instruction, checked; updates the front end's copy of
        the engines' shape state. Raises _Fault for an operand that would fault."""
        r = self.regs.__getitem__
        if op in (Op.WAIT, Op.SIGNAL):
            return {"sem": f["sem"]}
        if op == Op.DMA_SHAPE:
            s = self.dma_shape
            if f["dim"] == 0:
                s["run"] = r(f["b"])
            else:
                d = f["dim"] - 1
                s["count"][d], s["hbm"][d], s["vmem"][d] = r(f["b"]), r(f["c"]), r(f["d"])
            return {}
        if op in (Op.DMA_LOAD, Op.DMA_STORE):
            return self._check_dma(r(f["b"]), r(f["c"]), f["sem"])
        if op == Op.MXU_SHAPE:
            self.mxu_shape = (r(f["b"]), r(f["c"]), r(f["d"]))
            return {}
        if op == Op.MXU_STRIDE:
            self.mxu_stride = (r(f["b"]), r(f["c"]), r(f["d"]))
            return {}
        if op == Op.MATMUL:
            return self._check_matmul(r(f["b"]), r(f["c"]), r(f["d"]), f)
        if op == Op.VPU_CFG:
            self.vpu_cfg = (r(f["b"]), r(f["c"]), min(r(f["d"]), 62))
            return {}
        if op in (Op.ICI_SEND, Op.ICI_READ, Op.ICI_COLL):
            return self._check_ici(op, r(f["b"]), r(f["c"]), r(f.get("d", 0)), f)
        return self._check_vpu(op, f)

    def _check_ici(self, op, local, remote, size, f):
        """An ICI instruction's local operands (docs/pod.md, "Programs on the pod"): row
        aligned, and inside VMEM when they are in VMEM."""
        rb = self.config.row_bytes
        if op == Op.ICI_COLL:
            length = remote
            coll = Collective(f["coll"])
            esize = 2 if f["cfmt"] == IciFmt.BF16.value else 4
            extent = length * (rb if coll == Collective.ALL_TO_ALL else esize)
            space = IciSpace(f["cspace"])
            if local % rb or length > LENGTH_MAX or self._outside(space, local, extent):
                raise _Fault(Error.VMEM_RANGE, f"ici.coll buffer at {local:#x} of {length} "
                                               f"elements is outside VMEM or not row aligned")
            return {"coll": coll, "dim": f["cdim"], "fmt": IciFmt(f["cfmt"]),
                    "address": local, "length": length, "space": space}
        space = IciSpace(f["lspace"])
        if local % rb or remote % rb or self._outside(space, local, size):
            raise _Fault(Error.VMEM_RANGE, f"{SPECS[op].mnemonic} of {size} bytes at "
                                           f"{local:#x} (remote {remote:#x}) is outside VMEM "
                                           f"or not row aligned")
        iop = IciOp(f.get("iop", 0))
        if iop != IciOp.STORE and size % 4:
            raise _Fault(Error.ICI, f"ici.send adds whole 32-bit elements, got {size} bytes")
        return {"local": local, "remote": remote, "bytes": size, "chip": f["chip"],
                "op": iop, "fmt": IciFmt(f.get("ifmt", 0)), "sem": f["sem"],
                "lspace": space, "rspace": IciSpace(f["rspace"])}

    def _outside(self, space, address, size):
        """``size`` bytes at ``address`` of ``space`` are past VMEM (HBM answers for its own
        addresses)."""
        return space == IciSpace.VMEM and address + size > self.config.vmem_bytes

    def _check_dma(self, hbm_base, vmem_base, sem):
        s, beat = self.dma_shape, self.config.beat_bytes
        run, counts = s["run"], s["count"]
        values = [run, hbm_base, vmem_base, *s["hbm"], *s["vmem"]]
        if run == 0 or any(v % beat for v in values):
            raise _Fault(Error.DMA_ALIGN, f"DMA run, bases and strides must be non-zero "
                                          f"multiples of the {beat}-byte beat")
        if any(not 1 <= c <= DMA_COUNT_MAX for c in counts):
            raise _Fault(Error.DMA_ALIGN, f"DMA counts must be in 1..{DMA_COUNT_MAX}, "
                                          f"got {counts}")
        end = vmem_base + run + sum((c - 1) * v for c, v in zip(counts, s["vmem"],
                                                                  strict=True))
        if end > self.config.vmem_bytes:
            raise _Fault(Error.VMEM_RANGE, f"DMA VMEM footprint ends at {end:#x}")
        return {"hbm": hbm_base, "vmem": vmem_base, "sem": sem, "run": run,
                "count": list(counts), "hbm_stride": list(s["hbm"]),
                "vmem_stride": list(s["vmem"])}

    def _check_matmul(self, a, b, c, f):
        cfg = self.config
        rows, cols = cfg.mxu.rows, cfg.mxu.cols
        esize, osize, vmem = cfg.esize, cfg.osize, cfg.vmem_bytes
        (m, k, n), (sa, sb, sc) = self.mxu_shape, self.mxu_stride
        cmd = Gemm(m, k, n, f["acc_addr"], bool(f["accumulate"]), bool(f["emit"]))
        if not self.mxu.accepts(cmd):
            raise _Fault(Error.VMEM_RANGE, f"the MXU refuses {cmd}")
        checks = [(a, sa, rows * esize, (m - 1) * sa + _ceil(k, rows) * rows * esize, "A"),
                  (b, sb, cols * esize, (k - 1) * sb + _ceil(n, cols) * cols * esize, "B")]
        if cmd.emit:
            checks.append((c, sc, cols * osize, (m - 1) * sc + n * osize, "C"))
        for base, stride, vector, extent, name in checks:
            if base % vector or stride % vector:
                raise _Fault(Error.VMEM_RANGE, f"matmul {name} base {base:#x} or stride "
                                               f"{stride} not a multiple of {vector}")
            if base + extent > vmem:
                raise _Fault(Error.VMEM_RANGE, f"matmul {name} footprint ends at "
                                               f"{base + extent:#x}")
        return {"cmd": cmd, "a": a, "b": b, "c": c, "strides": (sa, sb, sc)}

    def _rows(self, base, count, name):
        rb = self.config.row_bytes
        if base % rb or base + count * rb > self.config.vmem_bytes:
            raise _Fault(Error.VMEM_RANGE, f"{name} rows at {base:#x} x {count} are outside "
                                           f"VMEM or not row aligned")
        return base // rb

    def _check_vpu(self, op, f):
        count, scalar, shift = self.vpu_cfg
        r = self.regs.__getitem__
        args = {"count": count, "scalar": scalar, "shift": shift, "f": f,
                "dst": self._rows(r(f["b"]), count, "dst")}
        if op == Op.VOP:
            unary = VOPS[VOp(f["vop"])].unary
            if not unary and f["src2"] == Src2.STAT.value:
                # count groups of `scalar` rows, each with its statistic row
                if not 1 <= scalar <= self.config.vmem_rows:
                    raise _Fault(Error.VMEM_RANGE, f"vop src2=stat: scalar (rows per group) "
                                                   f"must be 1..{self.config.vmem_rows}, got "
                                                   f"{scalar}")
                args["src2"] = self._rows(r(f["d"]), count, "src2")
                args["group"] = scalar
                args["dst"] = self._rows(r(f["b"]), count * scalar, "dst")
                args["count"] = count * scalar
            args["src1"] = self._rows(r(f["c"]), args["count"], "src1")
            if not unary and f["src2"] == Src2.ROWS.value:
                args["src2"] = self._rows(r(f["d"]), count, "src2")
            elif not unary and f["src2"] == Src2.BROADCAST.value:
                args["src2"] = self._rows(r(f["d"]), 1, "src2")
        elif op == Op.VCAST:
            args["src1"] = self._rows(r(f["c"]), count, "src")
        elif op == Op.VTRANS:
            # count tiles of n rows, n the elements of a row
            n = tile_rows(f["dtype"], self.config.row_bytes)
            args["dst"] = self._rows(r(f["b"]), count * n, "dst")
            args["span"] = n
            args["src1"] = self._rows(r(f["c"]), count * n, "src")
        else:
            span = r(f["d"])
            if not 1 <= span <= self.config.vmem_rows:
                raise _Fault(Error.VMEM_RANGE, f"vred span must be 1..{self.config.vmem_rows}"
                                               f", got {span}")
            args["span"] = span
            args["src1"] = self._rows(r(f["c"]), count * span, "src")
        return args

    # Engines ----------------------------------------------------------------------------

    def _engine_ready(self, q):
        queue = self.queues[q]
        if not queue:
            return False
        head = queue[0]
        if head.op == Op.ICI_COLL:
            return self.pod.collective_ready()
        return head.op != Op.WAIT or self.sems[head.args["sem"]] > 0

    def _signal(self, sem, pc):
        """Increment ``sem``; False (and SEM_OVERFLOW) if it is at its maximum."""
        if self.sems[sem] == SEM_MAX:
            self._fail(Error.SEM_OVERFLOW, pc, f"semaphore {sem} is at {SEM_MAX}")
            return False
        self.sems[sem] += 1
        return True

    def _engine_step(self, q):
        entry = self.queues[q].pop(0)
        op, args = entry.op, entry.args
        if op == Op.WAIT:
            self.sems[args["sem"]] -= 1
        elif op == Op.SIGNAL:
            if not self._signal(args["sem"], entry.pc):
                return
        elif op in (Op.DMA_LOAD, Op.DMA_STORE):
            if not self._transfer(op == Op.DMA_LOAD, args):
                self._fail(Error.DMA_RESPONSE, entry.pc, "HBM answered DECERR")
                return
            if args["sem"] != SEM_NONE and not self._signal(args["sem"], entry.pc):
                return
        elif op == Op.MATMUL:
            self._matmul(args)
        elif op in (Op.VOP, Op.VCAST, Op.VRED, Op.VTRANS):
            self._vpu(op, args)
        elif op == Op.ICI_COLL:
            self.queues[q].insert(0, entry)
            self.pod.collective()
            return
        elif op in (Op.ICI_SEND, Op.ICI_READ):
            if not self.pod.message(self, op, entry.pc, args):
                return
        self.counters["retired"] += 1

    def _transfer(self, load, a):
        """One DMA transfer; False (and nothing copied) if HBM refuses any of its bytes."""
        idx = np.indices(a["count"][::-1]).reshape(3, -1)[::-1].astype(np.int64)
        h_start = (a["hbm"] + np.dot(a["hbm_stride"], idx)) & _MASK
        v_start = a["vmem"] + np.dot(a["vmem_stride"], idx)
        offsets = np.arange(a["run"], dtype=np.int64)
        h = ((h_start[:, None] + offsets) & _MASK).ravel()
        v = (v_start[:, None] + offsets).ravel()
        if h.max() >= self.hbm.capacity:
            return False
        if load:
            self.vmem[v] = self.hbm.data[h]
            self.counters["bytes_read"] += len(h)
        else:
            self.hbm.data[h] = self.vmem[v]
            self.counters["bytes_written"] += len(h)
        return True

    def _operand(self, base, stride, rows, cols, esize):
        """Elements of a row-strided matrix in VMEM: int8 values, or raw float bit patterns
        (uint8 / uint16) for the float formats."""
        idx = (base + np.arange(rows)[:, None] * stride + np.arange(cols)[None, :] * esize)
        raw = self.vmem[idx[..., None] + np.arange(esize)]
        if esize == 2:
            return raw[..., 0].astype(np.uint16) | raw[..., 1].astype(np.uint16) << 8
        return raw[..., 0].view(np.int8) if self.config.mxu.fmt == "int8" else raw[..., 0]

    def _matmul(self, args):
        cmd, cfg = args["cmd"], self.config
        sa, sb, sc = args["strides"]
        a = self._operand(args["a"], sa, cmd.m, cmd.k, cfg.esize)
        b = self._operand(args["b"], sb, cmd.k, cmd.n, cfg.esize)
        beats = self.mxu.execute(cmd, a, b)
        if not cmd.emit:
            return
        cols, tiles = cfg.mxu.cols, _ceil(cmd.n, cfg.mxu.cols)
        out = np.zeros((cmd.m, tiles * cols), dtype=np.int64)
        for i, beat in enumerate(beats):
            j, r = divmod(i, cmd.m)
            out[r, j * cols:(j + 1) * cols] = beat.data
        out = out[:, :cmd.n]
        if cfg.osize == 2:
            data = out.astype(np.uint16)
        elif cfg.mxu.fmt == "int8":
            data = out.astype(np.int32)
        else:
            data = out.astype(np.uint32)
        data = data.view(np.uint8).reshape(cmd.m, cmd.n * cfg.osize)
        for r in range(cmd.m):
            base = args["c"] + r * sc
            self.vmem[base:base + data.shape[1]] = data[r]

    def _vpu(self, op, a):
        rows = self.vmem.reshape(-1, self.config.row_bytes)
        f, count = a["f"], a["count"]
        if count == 0:
            return
        src = rows[a["src1"]:a["src1"] + count * a.get("span", 1)].copy()
        if op == Op.VOP:
            src2 = None
            if "src2" in a:
                span = {Src2.BROADCAST.value: 1,
                        Src2.STAT.value: count // a.get("group", 1)}.get(f["src2"], count)
                src2 = rows[a["src2"]:a["src2"] + span].copy()
            scalar = a["scalar"] if f["src2"] == Src2.SCALAR.value else None
            out = vop_rows(f["vop"], f["dtype"], src, src2,
                           broadcast=f["src2"] == Src2.BROADCAST.value, scalar=scalar,
                           group=a.get("group"), relu=bool(f["relu"]))
        elif op == Op.VCAST:
            out = vcast_rows(f["cast"], src, scalar=a["scalar"], shift=a["shift"])
        elif op == Op.VTRANS:
            out = vtrans_rows(f["dtype"], src)
        else:
            out = vred_rows(f["rop"], f["dtype"], src, a["span"])
        rows[a["dst"]:a["dst"] + len(out)] = out
