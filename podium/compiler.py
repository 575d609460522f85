"""The TensorCore compiler: GEMMs and MLPs to programs (podium/program.py) for one
TensorCoreConfig, written as assembly (podium/asm.py) and assembled.

``gemm(config, M, K, N)`` follows the JAX Pallas model: a grid of steps ``(i, j, kc)`` over
tiles ``tm x tk`` of A, ``tk x tn`` of B and ``tm x tn`` of C (``kc`` fastest), each operand a
block whose index depends on some of the grid indices; a block is fetched only when its
index changes, into one of two VMEM buffers, so the DMA fetches step ``t+1`` while the MXU
computes step ``t``. The program is a loop over the steps in scalar registers, its length
independent of M, K and N: each iteration dispatches the DMA loads of the next step, the
MXU work of this one and, when a C tile is complete, its store. Engines synchronize
through semaphore pairs per operand (``full`` from producer to consumer, ``empty`` back,
two credits for two buffers), and every ``wait`` is dispatched after the ``signal`` it
needs, so no queue depth can deadlock the front end. K larger than one tile accumulates in
the MXU accumulator across steps (``accumulate``, ``emit`` on the last).

``mlp(config, layers, batch, ...)`` fuses a whole MLP: weights and biases stay in VMEM, the
batch streams through in row tiles (double-buffered); the epilogue runs on the VPU: bias add
(``vop add ... src2=broadcast`` with fused ``relu``) in place, then int8 requantization
(``vcast i32_i8``) or bfloat16 rounding (``vcast f32_bf16``) of hidden activations into a
separate buffer, the next layer's operand. The VPU overlaps the MXU: a hidden layer goes to
it in groups of output chunks (``h_full`` / ``h_ready`` once a group), the epilogue of
group ``g`` dispatched after the matmuls of group ``g + 1``, and the next layer waits for
each group only as it reaches it; a tile's output epilogue and store are dispatched behind
the next tile's first matmuls (docs/tensorcore.md, "Compiler: MLP").

Layouts. HBM rows are padded to the AXI beat. In VMEM a result tile is stored in *chunks*:
chunk ``s`` holds columns ``s*L .. s*L+L-1`` (``L = row_bytes / 4`` lanes) of every row, one
VMEM row per matrix row, so a bias row broadcasts over a chunk and a cast's packed output is
the next layer's operand (``k = L`` per ``matmul``, accumulated over chunks). N is padded to
whole chunks: the padding columns of C compute ``A x 0``. A GEMM's A, B and C buffers (and
their double buffers) are placed in distinct VMEM banks when the banks allow; an MLP's so
that no two buffers read at the same time share a bank's read port, when the banks allow.
"""

import itertools
import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from spec.tensorcore import TensorCoreConfig
from verification.models import fp
from verification.models.mxu import Gemm, MXUModel

from .asm import assemble
from .program import Program, Tensor

__all__ = ["gemm", "mlp", "gemm_reference", "result_bits", "GemmTiling", "MLP_ACTIVATIONS",
           "CompileError"]

MLP_ACTIVATIONS = ("relu", "none")
_TEMPS = ("r12", "r13", "r14", "r15")
_UNROLL = 4
"""Chunk matmuls per GEMM step, unrolled (each has its own ``acc_addr``): at most
``_UNROLL`` chunks per N tile, so the program's length does not depend on the tiling."""
_HBM_ALIGN = 4096


class CompileError(ValueError):
    """A request the compiler cannot compile, naming the parameter and what is allowed."""


def _roundup(x, m):
    return -(-x // m) * m


def _check_dim(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise CompileError(f"{name} must be an integer in 1..65535, got {value!r}")


class _Asm:
    """Assembly text under construction, with fresh labels and small idioms."""

    def __init__(self):
        self.lines = []
        self.count = 0

    def __call__(self, line):
        self.lines.append(f"        {line}")

    def label(self, hint):
        self.count += 1
        return f"{hint}{self.count}"

    def place(self, label):
        self.lines.append(f"{label}:")

    def comment(self, text):
        self.lines.append(f"# {text}")

    def li(self, reg, value):
        self(f"li {reg}, {value}")

    def affine(self, dst, base, terms, tmp):
        """``dst = base + sum(reg * coef)``."""
        self.li(dst, base)
        for reg, coef in terms:
            self.li(tmp, coef)
            self(f"mul {tmp}, {reg}, {tmp}")
            self(f"add {dst}, {dst}, {tmp}")

    def tile_size(self, dst, index, tile, total, tmp):
        """``dst = min(tile, total - index * tile)``: the size of tile ``index``."""
        self.li(tmp, tile)
        self(f"mul {dst}, {index}, {tmp}")
        self.li(tmp, total)
        self(f"sub {dst}, {tmp}, {dst}")
        self.li(tmp, tile)
        done = self.label("min")
        self(f"blt {dst}, {tmp}, {done}")
        self(f"addi {dst}, {tmp}, 0")
        self.place(done)

    def toggle(self, reg, first, second, tmp):
        """``reg`` from one of two buffer addresses to the other."""
        self.li(tmp, first + second)
        self(f"sub {reg}, {tmp}, {reg}")

    def unless_zero(self, regs, label):
        """Branch to ``label`` unless every register of ``regs`` is zero."""
        for reg in regs:
            self(f"bne {reg}, r0, {label}")

    def dma_shape(self, run, dims, t):
        """Set the DMA shape: run bytes and up to three (count, hbm stride, vmem stride);
        the dimensions not given have one iteration."""
        self.li(t[0], run)
        self(f"dma.shape 0, {t[0]}, r0, r0")
        for d, (count, hstride, vstride) in enumerate(dims, 1):
            regs = []
            for k, value in enumerate((count, hstride, vstride)):
                if isinstance(value, str):
                    regs.append(value)
                elif value == 0:
                    regs.append("r0")
                else:
                    self.li(t[k], value)
                    regs.append(t[k])
            self(f"dma.shape {d}, {', '.join(regs)}")
        if len(dims) < 3:
            self.li(t[0], 1)
        for d in range(len(dims) + 1, 4):
            self(f"dma.shape {d}, {t[0]}, r0, r0")

    def text(self):
        return "\n".join(self.lines) + "\n"


# ---------------------------------------------------------------------------------------
# Formats and VMEM placement


def _formats(config):
    """(operand dtype, result dtype) names of the configuration's MXU."""
    fmt = config.mxu.fmt
    return fmt, {"int32": "int32", "float32": "float32",
                 "bfloat16": "bfloat16"}[config.mxu.output]


def _layout(config, sizes, fresh):
    """VMEM address of each buffer (name -> bytes, in order), packed one after another on
    row boundaries except that those named in ``fresh`` start on a bank boundary; None when
    they do not fit."""
    row, bank = config.row_bytes, config.vmem_bytes // config.vmem_banks
    addresses, at = {}, 0
    for name, size in sizes.items():
        if name in fresh:
            at = _roundup(at, bank)
        addresses[name] = at
        at += _roundup(max(size, 1), row)
    return addresses if at <= config.vmem_bytes else None


def _place(config, sizes):
    """Each buffer in banks of its own when the banks allow, else packed; None when they do
    not fit."""
    return _layout(config, sizes, sizes) or _layout(config, sizes, ())


def _banks(config, address, size):
    bank = config.vmem_bytes // config.vmem_banks
    return set(range(address // bank, (address + max(size, 1) - 1) // bank + 1))


def _distinct_banks(config, sizes):
    bank = config.vmem_bytes // config.vmem_banks
    return sum(max(1, -(-s // bank)) for s in sizes.values()) <= config.vmem_banks


def _semaphores(config, names):
    if config.semaphores < len(names):
        raise CompileError(f"config.semaphores must be at least {len(names)} for this "
                           f"program, got {config.semaphores}")
    return {n: f"s{i}" for i, n in enumerate(names)}


# ---------------------------------------------------------------------------------------
# GEMM


@dataclass(frozen=True)
class GemmTiling:
    """Block sizes of a GEMM: ``tm`` rows of A and C, ``tk`` of the reduction, ``tn`` columns
    of B and C (a multiple of the chunk width)."""

    tm: int
    tk: int
    tn: int


class _GemmPlan:
    """Every constant of one GEMM's program: layouts, tiles, buffers."""

    def __init__(self, config, M, K, N, tiling):
        cfg = self.config = config
        self.M, self.K, self.N = M, K, N
        self.esize, self.osize = cfg.esize, cfg.osize
        self.rb, beat = cfg.row_bytes, cfg.beat_bytes
        self.chunk = self.rb // self.osize
        self.tk_unit = math.lcm(cfg.mxu.rows, beat // self.esize)
        self.tn_unit = math.lcm(self.chunk, beat // self.esize)
        self.Ncc = _roundup(N, self.chunk)
        self.Nch = self.Ncc // self.chunk
        self.lda = _roundup(K * self.esize, beat)
        self.ldb = _roundup(self.Ncc * self.esize, beat)
        self.ldc = self.Ncc * self.osize
        self.tiling = tiling
        tm, tk, tn = tiling.tm, tiling.tk, tiling.tn
        self.r = tn // self.chunk
        self.Mt, self.Kt, self.Nt = -(-M // tm), -(-K // tk), -(-self.Ncc // tn)
        self.a_stride, self.b_stride = tk * self.esize, tn * self.esize
        self.acc_per_chunk = tm * -(-self.chunk // cfg.mxu.cols)
        self.sizes = {"A0": tm * self.a_stride, "A1": tm * self.a_stride,
                      "B0": tk * self.b_stride, "B1": tk * self.b_stride,
                      "C0": self.r * tm * self.rb, "C1": self.r * tm * self.rb}

    def fits(self):
        return (self.r * self.acc_per_chunk <= self.config.mxu.acc_depth
                and _place(self.config, self.sizes) is not None)

    def cost(self):
        """Estimated cycles: the larger of DMA and MXU time, plus the front end's work per
        step (about 100 cycles) and a bank-sharing penalty."""
        rows, tile = self.config.mxu.rows, self.tiling
        steps = self.Mt * self.Nt * self.Kt
        a_loads = self.Mt * (1 if self.Kt == 1 else self.Nt * self.Kt)
        b_loads = 1 if self.Kt == self.Nt == 1 else steps
        dma = (a_loads * tile.tm * self.a_stride + b_loads * tile.tk * self.b_stride
               + self.M * self.ldc) / self.config.beat_bytes
        mxu = steps * self.r * -(-tile.tk // rows) * max(tile.tm, rows)
        shared = 1 if _distinct_banks(self.config, self.sizes) else 1.5
        return max(dma, mxu) * shared + 100 * steps


def _candidates(limit, unit, first):
    """Multiples of ``unit`` up to ``limit`` by powers of two, and ``first`` if in range."""
    values = {first} if first <= limit else set()
    v = unit
    while v <= limit:
        values.add(v)
        v *= 2
    return sorted(values)


def _choose_tiling(config, M, K, N):
    best = None
    probe = _GemmPlan(config, M, K, N, GemmTiling(1, 1, 1))
    tms = _candidates(M, 1, M)
    tks = _candidates(_roundup(K, probe.tk_unit), probe.tk_unit, _roundup(K, probe.tk_unit))
    tns = _candidates(min(_roundup(probe.Ncc, probe.tn_unit), _UNROLL * probe.chunk),
                      probe.tn_unit, _roundup(probe.Ncc, probe.tn_unit))
    for tm in tms:
        for tk in tks:
            for tn in tns:
                plan = _GemmPlan(config, M, K, N, GemmTiling(tm, tk, tn))
                if plan.fits():
                    key = (plan.cost(), -tm * tk * tn)
                    if best is None or key < best[0]:
                        best = (key, plan.tiling)
    if best is None:
        raise CompileError(f"no tiling of a {M}x{K}x{N} GEMM fits vmem_bytes "
                           f"{config.vmem_bytes} and acc_depth {config.mxu.acc_depth}")
    return best[1]


_GEMM_SEMS = ("a_full", "a_empty", "b_full", "b_empty", "c_full", "c_empty")


class _GemmCode:
    """The assembly of one GEMM's loop (see the module docstring), by phase: the DMA loads of
    the blocks that change at a step, the step's matmuls, the store of a finished C tile, and
    the loop over the grid that runs them a step apart."""

    load, comp = ("r1", "r2", "r3"), ("r4", "r5", "r6")      # (i, j, kc) of two steps
    al, au, bl, bu, cb = "r7", "r8", "r9", "r10", "r11"      # buffer addresses

    def __init__(self, p, base, vmem, sem):
        self.p, self.base, self.vmem, self.sem = p, base, vmem, sem
        self.e = _Asm()
        self.ext = (p.Mt, p.Nt, p.Kt)
        self.za, self.zb, self.zc = (self._zero_set(deps) for deps in ({0, 2}, {1, 2}, {0, 1}))

    def _zero_set(self, deps):
        """Indices that must be zero at a step for a block depending on ``deps`` (a set of
        0=i, 1=j, 2=kc) to change there: those faster than its fastest varying index."""
        varying = [x for x in deps if self.ext[x] > 1]
        fastest = max(varying) if varying else -1
        return [x for x in range(3) if self.ext[x] > 1 and (x > fastest or not varying)]

    @staticmethod
    def _regs(cursor, zs):
        """The registers of ``cursor`` (a step's (i, j, kc)) at the grid indices ``zs``."""
        return [cursor[x] for x in zs]

    def program(self):
        """The whole program: buffer registers and credits, the first step's loads, then the
        loop, each pass the next step's loads, this step's matmuls and store."""
        e, p, t, load = self.e, self.p, _TEMPS, self.load
        til = p.tiling
        e.comment(f"GEMM {p.M}x{p.K}x{p.N}: tiles {til.tm}x{til.tk}x{til.tn}, grid "
                  f"{p.Mt}x{p.Nt}x{p.Kt}")
        for reg, buf in ((self.al, "A0"), (self.au, "A0"), (self.bl, "B0"), (self.bu, "B0"),
                         (self.cb, "C0")):
            e.li(reg, self.vmem[buf])
        for queue, name in (("dma", "a_empty"), ("dma", "b_empty"), ("mxu", "c_empty")):
            e(f"signal {queue}, {self.sem[name]}")
            e(f"signal {queue}, {self.sem[name]}")
        self._fetch(load)
        e.place("step")
        self._advance()
        self._compute()
        self._store()
        self._sum_load()
        e(f"bne {t[0]}, r0, step")
        e("halt")
        return e.text()

    def _sum_load(self):
        """``t[0] = i + j + kc`` of the load cursor: zero once it has wrapped past the last
        step."""
        e, t, load = self.e, _TEMPS, self.load
        e(f"add {t[0]}, {load[0]}, {load[1]}")
        e(f"add {t[0]}, {t[0]}, {load[2]}")

    def _advance(self):
        """The step to compute is the one loaded; the load cursor moves to the next step
        (``kc`` fastest) and, unless it wrapped to the start, its blocks are fetched."""
        e, t, load = self.e, _TEMPS, self.load
        for now, nxt in zip(self.comp, load, strict=True):
            e(f"addi {now}, {nxt}, 0")
        carry = e.label("advanced")
        for x in (2, 1, 0):
            e(f"addi {load[x]}, {load[x]}, 1")
            e.li(t[0], self.ext[x])
            e(f"bne {load[x]}, {t[0]}, {carry}")
            e(f"addi {load[x]}, r0, 0")
        e.place(carry)
        last = e.label("last")
        self._sum_load()
        e(f"beq {t[0]}, r0, {last}")
        self._fetch(load)
        e.place(last)

    def _fetch(self, cursor):
        """DMA loads of the blocks that change at step ``cursor``."""
        e, p, t, sem = self.e, self.p, _TEMPS, self.sem
        til = p.tiling
        i, j, kc = cursor
        blocks = (("a", self.za, self.al, (i, til.tm, p.M), (kc, til.tk * p.esize, p.lda),
                   p.a_stride),
                  ("b", self.zb, self.bl, (kc, til.tk, p.K), (j, til.tn * p.esize, p.ldb),
                   p.b_stride))
        for name, zs, reg, (row, rows, total), (col, run, ld), vstride in blocks:
            skip = e.label(f"no_{name}")
            e.unless_zero(self._regs(cursor, zs), skip)
            e(f"wait dma, {sem[name + '_empty']}")
            e.tile_size(t[1], row, rows, total, t[3])
            e.tile_size(t[2], col, run, ld, t[3])
            e(f"dma.shape 0, {t[2]}, r0, r0")
            e.li(t[2], ld)
            e.li(t[3], vstride)
            e(f"dma.shape 1, {t[1]}, {t[2]}, {t[3]}")
            e.li(t[1], 1)
            e(f"dma.shape 2, {t[1]}, r0, r0")
            e.affine(t[0], self.base[name.upper()], [(row, rows * ld), (col, run)], t[3])
            e(f"dma.load {t[0]}, {reg}, {sem[name + '_full']}")
            bufs = name.upper() + "0", name.upper() + "1"
            e.toggle(reg, self.vmem[bufs[0]], self.vmem[bufs[1]], t[3])
            e.place(skip)

    def _compute(self):
        """The MXU's part of the step: wait for its new blocks and for a free C buffer when
        it starts a C tile, set the shape and strides, the matmuls, then release the blocks
        the next step does not reuse."""
        e, p, t, sem, comp, load = self.e, self.p, _TEMPS, self.sem, self.comp, self.load
        til = p.tiling
        i, j, kc = comp
        for name, zs in (("a", self.za), ("b", self.zb)):
            skip = e.label(f"have_{name}")
            e.unless_zero(self._regs(comp, zs), skip)
            e(f"wait mxu, {sem[name + '_full']}")
            e.place(skip)
        no_emit = e.label("no_emit")
        e.unless_zero(self._regs(load, self.zc), no_emit)
        e(f"wait mxu, {sem['c_empty']}")
        e.place(no_emit)
        e.tile_size(t[0], i, til.tm, p.M, t[3])
        e.tile_size(t[1], kc, til.tk, p.K, t[3])
        e.li(t[2], p.chunk)
        e(f"mxu.shape {t[0]}, {t[1]}, {t[2]}")
        e.li(t[0], p.a_stride)
        e.li(t[1], p.b_stride)
        e.li(t[2], p.rb)
        e(f"mxu.stride {t[0]}, {t[1]}, {t[2]}")
        e.tile_size(t[3], j, p.r, p.Nch, t[2])
        self._matmul_variants(kc)
        for name, zs, reg, bufs in (("a", self.za, self.au, ("A0", "A1")),
                                    ("b", self.zb, self.bu, ("B0", "B1"))):
            keep = e.label(f"keep_{name}")
            e.unless_zero(self._regs(load, zs), keep)
            e(f"signal mxu, {sem[name + '_empty']}")
            e.toggle(reg, self.vmem[bufs[0]], self.vmem[bufs[1]], t[3])
            e.place(keep)

    def _matmul_variants(self, kc):
        """The step's chunk matmuls, accumulating unless this is the first k-step (``kc``
        zero) and emitting on the last (the next step's kc is 0): four variants, chosen by
        branches."""
        e = self.e
        later, done = e.label("later"), e.label("matmuls")
        for first in (True, False):
            keep = e.label("keep")
            if first:
                e(f"bne {kc}, r0, {later}")
            else:
                e.place(later)
            e(f"bne {self.load[2]}, r0, {keep}")
            self._chunks("emit" if first else "accumulate, emit")
            e(f"jmp {done}")
            e.place(keep)
            self._chunks("" if first else "accumulate")
            if first:
                e(f"jmp {done}")
        e.place(done)

    def _chunks(self, flags):
        """The matmuls of one step, one per chunk of the N tile (``t[3]`` chunks)."""
        e, p, t = self.e, self.p, _TEMPS
        e(f"addi {t[0]}, {self.bu}, 0")
        e(f"addi {t[1]}, {self.cb}, 0")
        end = e.label("chunks_end")
        for s in range(_UNROLL):
            sep = ", " if flags else ""
            acc = s * p.acc_per_chunk if s < p.r else 0     # chunks past r never run
            e(f"matmul {self.au}, {t[0]}, {t[1]}, {acc}{sep}{flags}")
            if s < _UNROLL - 1:
                e(f"addi {t[3]}, {t[3]}, -1")
                e(f"beq {t[3]}, r0, {end}")
                e(f"addi {t[0]}, {t[0]}, {p.chunk * p.esize}")
                e(f"addi {t[1]}, {t[1]}, {p.tiling.tm * p.rb}")
        e.place(end)

    def _store(self):
        """When the step finished a C tile (the next step starts another): hand it from the
        MXU to the DMA and store it, then move to the other C buffer."""
        e, p, t, sem = self.e, self.p, _TEMPS, self.sem
        til = p.tiling
        i, j, _ = self.comp
        skip = e.label("no_store")
        e.unless_zero(self._regs(self.load, self.zc), skip)
        e(f"signal mxu, {sem['c_full']}")
        e(f"wait dma, {sem['c_full']}")
        e.affine(t[0], self.base["C"], [(i, til.tm * p.ldc), (j, til.tn * p.osize)], t[3])
        e.tile_size(t[1], j, p.r, p.Nch, t[3])
        e.li(t[2], p.rb)
        e.li(t[3], til.tm * p.rb)
        e(f"dma.shape 2, {t[1]}, {t[2]}, {t[3]}")
        e.tile_size(t[1], i, til.tm, p.M, t[3])
        e.li(t[3], p.ldc)
        e(f"dma.shape 1, {t[1]}, {t[3]}, {t[2]}")
        e(f"dma.shape 0, {t[2]}, r0, r0")
        e(f"dma.store {t[0]}, {self.cb}, {sem['c_empty']}")
        e.toggle(self.cb, self.vmem["C0"], self.vmem["C1"], t[3])
        e.place(skip)


def gemm(config, M, K, N, dtype=None, tiling=None):
    """A program computing ``C = A @ B`` for A (M x K) and B (K x N) in the MXU's operand
    format, C in its result format (int8 -> int32; bfloat16 / fp8 -> float32 or bfloat16).
    ``dtype`` (optional) must name the configuration's MXU format; ``tiling`` overrides the
    chosen :class:`GemmTiling`."""
    if not isinstance(config, TensorCoreConfig):
        raise CompileError(f"config must be a TensorCoreConfig, got {config!r}")
    for name, value in (("M", M), ("K", K), ("N", N)):
        _check_dim(name, value)
    in_dtype, out_dtype = _formats(config)
    if dtype is not None and dtype != in_dtype:
        raise CompileError(f"dtype must be the MXU's format {in_dtype!r} of this "
                           f"configuration, got {dtype!r}")
    tiling = tiling or _choose_tiling(config, M, K, N)
    plan = _GemmPlan(config, M, K, N, tiling)
    if tiling.tn % plan.tn_unit or tiling.tk % plan.tk_unit or not plan.fits():
        raise CompileError(f"tiling {tiling} must have tk a multiple of {plan.tk_unit}, tn "
                           f"of {plan.tn_unit}, and fit VMEM and the accumulator")
    vmem = _place(config, plan.sizes)
    a = Tensor(0, (M, K), in_dtype, plan.lda)
    b = Tensor(_roundup(a.address + a.nbytes, _HBM_ALIGN), (K, N), in_dtype, plan.ldb)
    c = Tensor(_roundup(b.address + b.nbytes, _HBM_ALIGN), (M, N), out_dtype, plan.ldc)
    if c.address + c.nbytes > 1 << 32:
        raise CompileError(f"a {M}x{K}x{N} GEMM needs {c.address + c.nbytes} bytes of HBM, "
                           f"past the 32-bit address space")
    base = {"A": a.address, "B": b.address, "C": c.address}
    sem = _semaphores(config, _GEMM_SEMS)
    text = _GemmCode(plan, base, vmem, sem).program()
    words = _assemble_checked(config, text)
    return Program(words=words, config=config,
                   hbm_capacity=_roundup(c.address + c.nbytes, _HBM_ALIGN),
                   inputs={"A": a, "B": b}, outputs={"C": c},
                   metadata={"kind": "gemm", "M": M, "K": K, "N": N, "dtype": in_dtype,
                             "tiling": [tiling.tm, tiling.tk, tiling.tn],
                             "grid": [plan.Mt, plan.Nt, plan.Kt], "vmem": vmem,
                             "assembly": text})


def gemm_reference(config, a, b):
    """What a compiled GEMM must give, as integers: for int8, numpy's product modulo 2**32;
    for the float formats the bit patterns the MXU golden model computes for one command
    over the whole GEMM (a compiled program's tiles and K chunks add in the same order)."""
    M, K = a.shape
    N = b.shape[1]
    fmt = config.mxu.fmt
    if fmt == "int8":
        return (a.astype(np.int64) @ b.astype(np.int64) + 2**31) % 2**32 - 2**31
    cols = config.mxu.cols
    model = MXUModel(config.mxu.rows, cols, M * -(-N // cols), fmt, config.mxu.output)
    beats = model.execute(Gemm(M, K, N), a.view(fp.BITS[fmt]), b.view(fp.BITS[fmt]))
    out = np.zeros((M, -(-N // cols) * cols), dtype=np.int64)
    for index, beat in enumerate(beats):
        j, r = divmod(index, M)
        out[r, j * cols:(j + 1) * cols] = beat.data
    return out[:, :N]


def result_bits(config, c):
    """A GEMM's result array as integers comparable with :func:`gemm_reference`."""
    if config.mxu.fmt == "int8":
        return c.astype(np.int64)
    return c.view(np.uint16 if config.osize == 2 else np.uint32).astype(np.int64)


def _assemble_checked(config, text):
    words = assemble(text)
    if len(words) > config.imem_depth:
        raise CompileError(f"the program needs {len(words)} instructions; config.imem_depth "
                           f"is {config.imem_depth}")
    return words


# ---------------------------------------------------------------------------------------
# MLP


_MLP_SEMS = ("x_full", "x_empty", "w_full", "bias_full", "h_full", "h_ready", "o_full",
             "o_empty")
_MLP_GROUPS = 4
"""A hidden layer's output chunks go to the VPU in about this many groups (``ceil(chunks /
4)`` chunks each) and its last chunk alone: each group is one MXU drain (its ``signal``),
and the last group's epilogue is short beside the next layer's first output chunk."""
_MLP_CONFLICTS = {"WX": 4, "WP": 4, "WH": 4, "XH": 4, "PH": 4, "OX": 1, "OW": 1}
"""Cost of two kinds of MLP buffer sharing a bank (whose one read port they then share):
the MXU's operand streams (weights W with the input X or the packed activations P) and the
VPU's epilogue reads of H run at a row per cycle each at the same time (4); the output
epilogue and store read a tile's O rows while the MXU starts the next tile (1). X0 / X1 and
P0 / P1 are written while the other is read, and P is written while X is read: separate
ports."""


class _MLPPlan:
    """Layouts of a fused MLP: weights and biases resident, row tiles of ``tm``, the VPU
    groups of each hidden layer, the VMEM buffers and their placement."""

    def __init__(self, config, widths, M, tm):
        cfg = self.config = config
        self.M, self.tm, self.widths = M, tm, widths
        self.esize, self.osize, self.rb = cfg.esize, cfg.osize, cfg.row_bytes
        beat = cfg.beat_bytes
        self.chunk = self.rb // self.osize
        self.ncc = [_roundup(n, self.chunk) for n in widths[1:]]
        self.nch = [n // self.chunk for n in self.ncc]
        self.k_rows = [widths[0]] + self.ncc[:-1]          # weight rows of each layer
        self.w_stride = [_roundup(n * self.esize, cfg.mxu.cols * self.esize)
                         for n in self.ncc]
        self.w_offset, at = [], 0
        for rows, stride in zip(self.k_rows, self.w_stride, strict=True):
            self.w_offset.append(at)
            at = _roundup(at + rows * stride, self.rb)
        self.w_bytes = _roundup(at, beat)
        self.bias_offset = [self.rb * sum(self.nch[:i]) for i in range(len(self.nch))]
        self.bias_bytes = self.rb * sum(self.nch)
        self.ldx = _roundup(widths[0] * self.esize, beat)
        self.x_stride = _roundup(self.ldx, cfg.mxu.rows * self.esize)
        self.ldo = self.ncc[-1] * self.osize
        self.Mt = -(-M // tm)
        hidden = self.nch[:-1]
        self.group = [-(-n // _MLP_GROUPS) for n in hidden]
        packed = [max(hidden[k::2], default=0) * tm * self.rb for k in (0, 1)]
        out = self.nch[-1] * tm * self.rb
        sizes = {"W": self.w_bytes + self.bias_bytes, "X0": tm * self.x_stride,
                 "X1": tm * self.x_stride, "P0": packed[0], "P1": packed[1], "O0": out,
                 "O1": out, "H": max(hidden, default=0) * tm * self.rb}
        self.sizes = {name: size for name, size in sizes.items() if size}
        acc = tm * -(-self.chunk // cfg.mxu.cols)
        self.conflicts, self.vmem = self._placement() if acc <= cfg.mxu.acc_depth else (
            None, None)

    def _placement(self):
        """(conflict cost, addresses) of the cheapest layout of the buffers, every choice of
        the buffers that start a bank tried; (None, None) when none fits."""
        cfg, names = self.config, list(self.sizes)
        best = (None, None)
        for fresh in itertools.product((True, False), repeat=len(names) - 1):
            starts = [n for n, f in zip(names[1:], fresh, strict=True) if f]
            vmem = _layout(cfg, self.sizes, starts)
            if vmem is None:
                continue
            banks = {n: _banks(cfg, vmem[n], self.sizes[n]) for n in names}
            cost = sum(_MLP_CONFLICTS.get(x[0] + y[0], 0) + _MLP_CONFLICTS.get(y[0] + x[0], 0)
                       for x, y in itertools.combinations(names, 2) if banks[x] & banks[y])
            if best[0] is None or cost < best[0]:
                best = (cost, vmem)
        return best

    def fits(self):
        return self.vmem is not None


class _MLPCode:
    """The assembly of a fused MLP (docs/tensorcore.md, "Compiler: MLP"), piece by piece: the
    resident weights' load and the loop over row tiles; in each tile every layer's groups of
    output chunks with their matmuls and the VPU's epilogue of the group before; and the tile
    boundary, which finishes the previous tile and fetches the next."""

    i, xu, ob, mt = "r1", "r2", "r3", "r4"         # row tile, its X and O buffers, its rows
    wb, cb = "r5", "r6"                            # an output chunk's weights and result
    left, grp = "r7", "r8"                         # chunks left in the layer, in the group
    vfirst, vcount = "r9", "r10"                   # the group whose epilogue comes next
    ra, wk = "r11", _TEMPS[0]                      # an input chunk (A) and its weights
    kin, countdown, tmp = _TEMPS[1:]               # input chunks left, to the next group

    def __init__(self, p, base, vmem, sem, activation, requant, float_act):
        self.p, self.base, self.vmem, self.sem = p, base, vmem, sem
        self.activation, self.requant, self.float_act = activation, requant, float_act
        self.e = _Asm()
        self.last_layer, self.w_vmem = len(p.nch) - 1, vmem["W"]
        self.dtype = "fp32" if float_act else "int32"
        self.tile_chunk = p.tm * p.rb              # a chunk of a row tile in VMEM

    def program(self):
        """The whole program: the weights and biases loaded once and the first row tile
        fetched, then the loop over row tiles, each through every layer; after the last
        tile, the boundary finishes it and ends the program."""
        e, p, vmem, sem, tmp = self.e, self.p, self.vmem, self.sem, self.tmp
        e.comment(f"MLP {'-'.join(map(str, p.widths))}, batch {p.M} in tiles of {p.tm}")
        e.li(self.xu, vmem["X0"])
        e.li(self.ob, vmem["O0"])
        for queue, name in (("dma", "x_empty"), ("mxu", "o_empty")):
            e(f"signal {queue}, {sem[name]}")
            e(f"signal {queue}, {sem[name]}")
        self._load_parameters()
        self._fetch_x(None)
        e.place("tile")
        e.tile_size(self.mt, self.i, p.tm, p.M, tmp)
        for n in range(len(p.nch)):
            self._layer(n)
        e.toggle(self.xu, vmem["X0"], vmem["X1"], tmp)
        e(f"addi {self.i}, {self.i}, 1")
        e.li(tmp, p.Mt)
        e(f"bne {self.i}, {tmp}, tile")
        e("jmp boundary")
        e.place("end")
        e("halt")
        return e.text()

    def _load_parameters(self):
        """DMA loads of the weights and the bias rows into VMEM, where they stay: the MXU
        waits for the weights, the VPU for the biases."""
        e, p, t, sem, w_vmem = self.e, self.p, _TEMPS, self.sem, self.w_vmem
        e.dma_shape(p.w_bytes, [], t)
        e.li(t[0], self.base["W"])
        e.li(t[1], w_vmem)
        e(f"dma.load {t[0]}, {t[1]}, {sem['w_full']}")
        e.li(t[0], p.bias_bytes)
        e(f"dma.shape 0, {t[0]}, r0, r0")
        e.li(t[0], self.base["W"] + p.w_bytes)
        e.li(t[1], w_vmem + p.w_bytes)
        e(f"dma.load {t[0]}, {t[1]}, {sem['bias_full']}")
        e(f"wait mxu, {sem['w_full']}")
        e(f"wait vpu, {sem['bias_full']}")

    def _fetch_x(self, index):
        """DMA load of row tile ``index`` (a register) into the X buffer ``xu`` does not
        name; with ``index`` None, of tile 0 (whole: ``tm <= M``) into X0."""
        e, p, t, vmem = self.e, self.p, _TEMPS, self.vmem
        e(f"wait dma, {self.sem['x_empty']}")
        if index is None:
            e.dma_shape(p.ldx, [(p.tm, p.ldx, p.x_stride)], (t[0], t[2], t[3]))
            e.li(t[0], self.base["X"])
            e.li(t[1], vmem["X0"])
        else:
            e.tile_size(t[1], index, p.tm, p.M, t[3])
            e.dma_shape(p.ldx, [(t[1], p.ldx, p.x_stride)], (t[0], t[2], t[3]))
            e.affine(t[0], self.base["X"], [(index, p.tm * p.ldx)], t[3])
            e.li(t[1], vmem["X0"] + vmem["X1"])
            e(f"sub {t[1]}, {t[1]}, {self.xu}")
        e(f"dma.load {t[0]}, {t[1]}, {self.sem['x_full']}")

    def _bias_add(self, rows, bias, count, relu):
        """``count`` (a register, at least 1) chunks from ``rows``: the bias row from
        ``bias`` on (one per chunk) added in place, with ReLU if ``relu``."""
        e = self.e
        loop = e.label("bias")
        e.place(loop)
        e(f"vop add.{self.dtype} {rows}, {rows}, {bias}, src2=broadcast"
          f"{', relu' if relu else ''}")
        e(f"addi {rows}, {rows}, {self.tile_chunk}")
        e(f"addi {bias}, {bias}, {self.p.rb}")
        e(f"addi {count}, {count}, -1")
        e(f"bne {count}, r0, {loop}")

    def _epilogue(self, n):
        """The VPU's work on hidden layer ``n``'s group (``vcount`` chunks from ``vfirst``):
        bias and activation in place in H, chunk by chunk, then one cast of the whole group
        into P, which the next layer reads; the cast's hazard wait comes once a group."""
        e, p, vmem = self.e, self.p, self.vmem
        ra, wk, kin, tmp, vfirst, vcount = (self.ra, self.wk, self.kin, self.tmp, self.vfirst,
                                            self.vcount)
        offset = self.countdown                     # of the group's first chunk
        e(f"wait vpu, {self.sem['h_full']}")
        e(f"vpu.cfg {self.mt}, r0, r0")
        e.li(tmp, self.tile_chunk)
        e(f"mul {offset}, {vfirst}, {tmp}")
        e.li(ra, vmem["H"])
        e(f"add {ra}, {ra}, {offset}")
        e.affine(wk, self.w_vmem + p.w_bytes + p.bias_offset[n], [(vfirst, p.rb)], tmp)
        e(f"addi {kin}, {vcount}, 0")
        self._bias_add(ra, wk, kin, self.activation == "relu")
        e.li(tmp, p.tm)                             # rows up to the last chunk's last
        e(f"mul {kin}, {vcount}, {tmp}")
        e(f"sub {kin}, {kin}, {tmp}")
        e(f"add {kin}, {kin}, {self.mt}")
        if self.float_act:
            e(f"vpu.cfg {kin}, r0, r0")
        else:
            e.li(wk, self.requant[n][0] & 0xFFFFFFFF)
            e.li(tmp, self.requant[n][1])
            e(f"vpu.cfg {kin}, {wk}, {tmp}")
        e.li(ra, vmem["H"])
        e(f"add {ra}, {ra}, {offset}")
        e.li(wk, vmem[f"P{n % 2}"])
        e(f"add {wk}, {wk}, {offset}")
        e(f"vcast {'f32_bf16' if self.float_act else 'i32_i8'} {wk}, {ra}")
        e(f"signal vpu, {self.sem['h_ready']}")

    def _finish_tile(self):
        """The output epilogue of the previous row tile (bias add in its O buffer) and its
        store, which frees the buffer for the tile after next."""
        e, p, t, sem = self.e, self.p, _TEMPS, self.sem
        rows, ra, wk, kin, tmp, ob = (self.countdown, self.ra, self.wk, self.kin, self.tmp,
                                      self.ob)
        e(f"addi {ra}, {self.i}, -1")
        e.tile_size(rows, ra, p.tm, p.M, tmp)
        e(f"wait vpu, {sem['h_full']}")
        e(f"vpu.cfg {rows}, r0, r0")
        e(f"addi {wk}, {ob}, 0")
        e.li(kin, self.w_vmem + p.w_bytes + p.bias_offset[-1])
        e.li(tmp, p.nch[-1])
        self._bias_add(wk, kin, tmp, False)
        e(f"signal vpu, {sem['o_full']}")
        e(f"wait dma, {sem['o_full']}")
        e.dma_shape(p.rb, [(rows, p.ldo, p.rb), (p.nch[-1], p.rb, self.tile_chunk)],
                    (t[0], t[1], t[3]))
        e.affine(t[0], self.base["O"], [(ra, p.tm * p.ldo)], t[3])
        e(f"dma.store {t[0]}, {ob}, {sem['o_empty']}")
        e.toggle(ob, self.vmem["O0"], self.vmem["O1"], t[3])

    def _tile_boundary(self):
        """The previous row tile's output and the next tile's input, dispatched behind this
        tile's first matmuls, so that the MXU has them while the VPU and the DMA finish.
        After the last tile the program jumps here (``i = Mt``) to finish it, and ends."""
        e, i, ra, tmp = self.e, self.i, self.ra, self.tmp
        first = e.label("first_tile")
        e.place("boundary")
        e(f"beq {i}, r0, {first}")
        self._finish_tile()
        e.place(first)
        e.li(tmp, self.p.Mt)
        e(f"beq {i}, {tmp}, end")
        e(f"addi {ra}, {i}, 1")
        e(f"beq {ra}, {tmp}, no_fetch")
        self._fetch_x(ra)
        e.place("no_fetch")

    def _chunk_matmuls(self, n):
        """The matmuls of output chunk ``cb`` of layer ``n``: one over the whole input for
        layer 0; otherwise one per packed input chunk, accumulated, the first output chunk
        waiting for each group of them as the VPU releases it (``h_ready``)."""
        e, p, ra, wk, kin, cb = self.e, self.p, self.ra, self.wk, self.kin, self.cb
        if n == 0:
            e(f"matmul {self.xu}, {self.wb}, {cb}, 0, emit")
            return
        nin = p.nch[n - 1]
        e.li(ra, self.vmem[f"P{(n - 1) % 2}"])
        e(f"addi {wk}, {self.wb}, 0")
        self._input_ready(n, "first")
        e(f"matmul {ra}, {wk}, {cb}, 0{', emit' if nin == 1 else ''}")
        if nin > 2:
            e.li(kin, nin - 2)
            middle = e.label("middle")
            e.place(middle)
            self._next_input_chunk(n)
            self._input_ready(n, "middle")
            e(f"matmul {ra}, {wk}, {cb}, 0, accumulate")
            e(f"addi {kin}, {kin}, -1")
            e(f"bne {kin}, r0, {middle}")
        if nin > 1:
            self._next_input_chunk(n)
            self._input_ready(n, "last")
            e(f"matmul {ra}, {wk}, {cb}, 0, accumulate, emit")

    def _input_ready(self, n, site):
        """In layer ``n``'s first output chunk, the wait for the group of the input that
        starts at the ``site`` ("first", "middle" or "last") input chunk: a group starts at
        the first and the last input chunk and every ``group``-th one between (counted
        down)."""
        e, tmp, countdown = self.e, self.tmp, self.countdown
        skip = e.label("ready")
        e.li(tmp, self.p.nch[n])
        e(f"bne {self.left}, {tmp}, {skip}")
        if site == "middle":
            e(f"addi {countdown}, {countdown}, -1")
            e(f"bne {countdown}, r0, {skip}")
        e(f"wait mxu, {self.sem['h_ready']}")
        if site != "last":
            e.li(countdown, self.p.group[n - 1])
        e.place(skip)

    def _next_input_chunk(self, n):
        """``ra`` and ``wk`` on to layer ``n``'s next packed input chunk and its weight
        rows."""
        e, p, ra, wk, tmp = self.e, self.p, self.ra, self.wk, self.tmp
        e(f"addi {ra}, {ra}, {self.tile_chunk}")
        e.li(tmp, p.chunk * p.w_stride[n])
        e(f"add {wk}, {wk}, {tmp}")

    def _layer(self, n):
        """Layer ``n`` of a row tile. A hidden layer is a loop over its groups, each pass the
        group's matmuls and the previous group's epilogue, and one pass more (``left`` 0)
        for the last group's epilogue; the last layer is one group, whose epilogue is the
        tile's finish."""
        e, p, sem = self.e, self.p, self.sem
        last = n == self.last_layer
        e.comment(f"layer {n}: {p.widths[n]} -> {p.widths[n + 1]}")
        if n == 0 and last:
            self._tile_boundary()   # a single layer writes O: the previous tile goes first
        if n == 0:
            e(f"wait mxu, {sem['x_full']}")
        if last:
            e(f"wait mxu, {sem['o_empty']}")
        self._layer_setup(n, last)
        if last:
            e(f"addi {self.grp}, {self.left}, 0")
        else:
            group, drained = self._open_group(n)
        self._group_matmuls(n)
        if not last:
            self._close_group(n, group, drained)

    def _layer_setup(self, n, last):
        """The MXU's shape and strides for layer ``n``, its first output chunk's weights and
        result (H, or the O buffer in the last layer), and its chunk count in ``left``."""
        e, p, t = self.e, self.p, _TEMPS
        e.li(t[0], p.widths[0] if n == 0 else p.chunk)
        e.li(t[1], p.chunk)
        e(f"mxu.shape {self.mt}, {t[0]}, {t[1]}")
        e.li(t[0], p.x_stride if n == 0 else p.rb)
        e.li(t[1], p.w_stride[n])
        e.li(t[2], p.rb)
        e(f"mxu.stride {t[0]}, {t[1]}, {t[2]}")
        e.li(self.wb, self.w_vmem + p.w_offset[n])
        if last:
            e(f"addi {self.cb}, {self.ob}, 0")
        else:
            e.li(self.cb, self.vmem["H"])
        e.li(self.left, p.nch[n])

    def _open_group(self, n):
        """The head of hidden layer ``n``'s loop over groups: no epilogue pending at first;
        each pass sizes its group in ``grp``, or with no chunk left goes to the last
        group's epilogue. Returns the labels (loop head, that epilogue)."""
        e, left, grp, tmp = self.e, self.left, self.grp, self.tmp
        e.li(self.vfirst, 0)
        e.li(self.vcount, 0)
        group = e.label("group")
        e.place(group)
        drained = e.label("drained")
        e(f"beq {left}, r0, {drained}")
        # this group: `group` chunks, fewer to leave the layer's last chunk on its own
        e(f"addi {grp}, {left}, -1")
        e.li(tmp, self.p.group[n])
        sized = e.label("sized")
        e(f"blt {grp}, {tmp}, {sized}")
        e(f"addi {grp}, {tmp}, 0")
        e.place(sized)
        some = e.label("some")
        e(f"bne {grp}, r0, {some}")
        e.li(grp, 1)
        e.place(some)
        return group, drained

    def _group_matmuls(self, n):
        """The matmuls of a group's ``grp`` output chunks of layer ``n``, then the group to
        the VPU (``h_full``); layer 0 frees its X buffer after its last chunk."""
        e, p, left, grp = self.e, self.p, self.left, self.grp
        out_chunk = e.label("out_chunk")
        e.place(out_chunk)
        self._chunk_matmuls(n)
        e(f"addi {self.wb}, {self.wb}, {p.chunk * p.esize}")
        e(f"addi {self.cb}, {self.cb}, {self.tile_chunk}")
        e(f"addi {left}, {left}, -1")
        e(f"addi {grp}, {grp}, -1")
        e(f"bne {grp}, r0, {out_chunk}")
        if n == 0:
            keep = e.label("keep_x")
            e(f"bne {left}, r0, {keep}")
            e(f"signal mxu, {self.sem['x_empty']}")
            e.place(keep)
        e(f"signal mxu, {self.sem['h_full']}")

    def _close_group(self, n, group, drained):
        """The tail of hidden layer ``n``'s loop over groups: the previous group's epilogue
        (the first pass has none: layer 0 does the tile boundary there), then the group just
        computed becomes the pending one and the loop goes on while one is pending."""
        e, tmp, vfirst, vcount = self.e, self.tmp, self.vfirst, self.vcount
        e.place(drained)
        # the previous group's epilogue, after this group's matmuls: the MXU has them
        # queued while the VPU waits for its group
        first, advance = e.label("first_group"), e.label("advance")
        e(f"beq {vcount}, r0, {first}")
        self._epilogue(n)
        e(f"jmp {advance}")
        e.place(first)
        if n == 0:
            self._tile_boundary()
        e.place(advance)
        # the group just computed is the next epilogue's: from where the last one ended
        e(f"add {vfirst}, {vfirst}, {vcount}")
        e.li(tmp, self.p.nch[n])
        e(f"sub {vcount}, {tmp}, {self.left}")
        e(f"sub {vcount}, {vcount}, {vfirst}")
        e(f"bne {vcount}, r0, {group}")


def _mlp_params(p, weights, biases, in_dtype, float_act):
    """The HBM bytes of the weights (VMEM layout) followed by the bias rows."""
    wdt = {"int8": np.int8}.get(in_dtype) or ml_dtypes.bfloat16
    block = np.zeros(p.w_bytes + p.bias_bytes, dtype=np.uint8)
    for n, (w, b) in enumerate(zip(weights, biases, strict=True)):
        raw = np.ascontiguousarray(np.asarray(w).astype(wdt)).view(np.uint8)
        raw = raw.reshape(w.shape[0], -1)
        for r in range(w.shape[0]):
            at = p.w_offset[n] + r * p.w_stride[n]
            block[at:at + raw.shape[1]] = raw[r]
        bias = np.asarray(b).astype(np.float32 if float_act else np.int32).view(np.uint8)
        at = p.w_bytes + p.bias_offset[n]
        block[at:at + len(bias)] = bias
    return block.tobytes()


def mlp(config, layers, batch, activation="relu", requant=None):
    """A program for the MLP ``layers`` (a list of (weights K x N, bias N) pairs, the weights
    in the MXU's operand format) on a batch of ``batch`` rows: input ``X`` (batch x K0),
    output ``Y`` (batch x N_last). Hidden layers compute ``activation(X @ W + b)`` and hand
    the next layer int8 values requantized with ``requant[n] = (multiplier, shift)``
    (``vcast i32_i8``) on an int8 MXU, or bfloat16 values (``vcast f32_bf16`` of the fp32
    sums) on a bfloat16 MXU with fp32 results. The last layer gives ``X @ W + b`` in the
    MXU's result format. Weights and biases must fit in VMEM with room for row tiles."""
    if not isinstance(config, TensorCoreConfig):
        raise CompileError(f"config must be a TensorCoreConfig, got {config!r}")
    in_dtype, out_dtype = _formats(config)
    if in_dtype not in ("int8", "bfloat16") or out_dtype not in ("int32", "float32"):
        raise CompileError(f"config.mxu must be int8 (int32 results) or bfloat16 (float32 "
                           f"results) for an MLP, got {in_dtype} -> {out_dtype}")
    if activation not in MLP_ACTIVATIONS:
        raise CompileError(f"activation must be one of {', '.join(MLP_ACTIVATIONS)}, got "
                           f"{activation!r}")
    _check_dim("batch", batch)
    if not layers:
        raise CompileError("layers must hold at least one (weights, bias) pair")
    weights = [np.asarray(w) for w, _ in layers]
    biases = [np.asarray(b) for _, b in layers]
    widths = [weights[0].shape[0]] + [w.shape[1] for w in weights]
    for n, (w, b) in enumerate(zip(weights, biases, strict=True)):
        if w.ndim != 2 or w.shape[0] != widths[n] or b.shape != (w.shape[1],):
            raise CompileError(f"layers[{n}] must be weights of shape ({widths[n]}, N) and a "
                               f"bias of shape (N,), got {w.shape} and {b.shape}")
        _check_dim(f"layers[{n}] width", w.shape[1])
    float_act = in_dtype == "bfloat16"
    if not float_act:
        requant = list(requant or [])
        if len(requant) != len(layers) - 1:
            raise CompileError(f"requant must give (multiplier, shift) for each of the "
                               f"{len(layers) - 1} hidden layers of an int8 MLP")
        for n, (mult, shift) in enumerate(requant):
            if not -2**31 <= mult < 2**31 or not 0 <= shift <= 62:
                raise CompileError(f"requant[{n}] must be (multiplier in -2**31..2**31-1, "
                                   f"shift in 0..62), got {(mult, shift)}")
    plan = None
    for tm in _candidates(batch, config.mxu.rows, batch):
        candidate = _MLPPlan(config, widths, batch, tm)
        if candidate.fits() and (plan is None or (candidate.conflicts, -tm)
                                 < (plan.conflicts, -plan.tm)):
            plan = candidate
    if plan is None:
        raise CompileError(f"the weights of an MLP {widths} do not fit vmem_bytes "
                           f"{config.vmem_bytes} with a row tile")
    vmem = plan.vmem
    params = _mlp_params(plan, weights, biases, in_dtype, float_act)
    w_addr = 0
    x = Tensor(_roundup(len(params), _HBM_ALIGN), (batch, widths[0]), in_dtype, plan.ldx)
    y = Tensor(_roundup(x.address + x.nbytes, _HBM_ALIGN), (batch, widths[-1]), out_dtype,
               plan.ldo)
    base = {"W": w_addr, "X": x.address, "O": y.address}
    sem = _semaphores(config, _MLP_SEMS)
    text = _MLPCode(plan, base, vmem, sem, activation, requant, float_act).program()
    words = _assemble_checked(config, text)
    return Program(words=words, config=config,
                   hbm_capacity=_roundup(y.address + y.nbytes, _HBM_ALIGN),
                   hbm={w_addr: params}, inputs={"X": x}, outputs={"Y": y},
                   metadata={"kind": "mlp", "widths": widths, "batch": batch,
                             "activation": activation, "dtype": in_dtype, "tm": plan.tm,
                             "requant": [list(r) for r in requant or []], "vmem": vmem,
                             "assembly": text})
