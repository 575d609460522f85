"""FlashAttention on the TensorCore: ``O = softmax(Q K^T / sqrt(d) [+ causal mask]) V`` for
every (batch, head), the score matrix never leaving VMEM (docs/tensorcore.md, "Compiler:
attention").

Layout. Q, K and V are bfloat16 (the MXU's operand format), O is float32, each of shape
``(batch * heads * seq, head_dim)`` in HBM: the rows of (batch ``b``, head ``h``) are the
contiguous ``seq x head_dim`` matrix starting at row ``(b * heads + h) * seq``; rows are dense
(``head_dim * 2`` bytes for the inputs, ``head_dim * 4`` for O).

Tiling. A *step* is (head, Q block ``qi`` of ``bq`` rows, K/V block ``j`` of ``bk`` rows); the
steps run in that order (``j`` fastest; with ``causal`` only ``j <= qi``, ``bq == bk``), one
software-pipelined loop over all of them, so the pipeline never drains between blocks or
heads. Per step:

- DMA: K block ``t+2`` (in the tile layout ``vtrans`` transposes: square tiles of ``n =
  row_bytes / 2`` keys x ``n`` dimensions, each ``n`` consecutive VMEM rows), the Q block of
  step ``t+2`` when it starts a Q block, V block ``t+1``; K and V rows past ``seq`` are zeros
  (a second transfer from a zero row in HBM), never stale data;
- VPU: ``vtrans`` of K block ``t+1`` in place (K^T: for each tile of ``n`` keys, ``d``
  consecutive rows), and, when the scale is exact, Q *= 1/sqrt(d) once per Q block;
- MXU: ``S = Q K^T`` of step ``t+1`` (one ``matmul`` per ``n`` keys, fp32) into one of two S
  buffers;
- VPU: the online softmax of step ``t`` on the other S buffer (the mask added on the last
  block of a Q block when there is one; running max ``m`` and sum ``l`` per row), then P =
  bfloat16(exp(S - m)) cast in place;
- MXU: ``PV = P V`` of step ``t`` (one ``matmul`` per ``row_bytes / 4`` keys, accumulated in
  the MXU accumulator) into one of two PV buffers;
- VPU: ``O = alpha O + PV`` of step ``t-1`` (``O = PV`` on a Q block's first step), and on its
  last step ``O /= l`` and the DMA stores O.

So while the VPU computes the softmax of step ``t``, the MXU computes S of step ``t+1`` and
then P V of step ``t``. Semaphores (``full`` producer -> consumer, ``empty`` back with two
credits for two buffers) order every buffer; every ``wait`` is dispatched after the
``signal`` it needs.

The scale: ``1/sqrt(d)`` is folded into Q (a bfloat16 multiply, exact) when it is a power of
two (``d`` 16, 64, 256, ...), else applied in fp32 on S (one more VPU pass per score).
"""

import math

import numpy as np

from spec.tensorcore import TensorCoreConfig

from .compiler import (
    _HBM_ALIGN,
    CompileError,
    _Asm,
    _assemble_checked,
    _check_dim,
    _layout,
    _roundup,
    _semaphores,
)
from .program import Program, Tensor
from .transformer import Block, VpuOps

__all__ = ["attention", "TOLERANCE", "useful_macs"]

TOLERANCE = 2.0**-8
"""Documented bound of the error against the float64 reference on the same bfloat16 Q, K,
V: ``max |O - ref| <= TOLERANCE * max |V|`` per (batch, head). P is rounded to bfloat16
before ``P V`` (at most 2^-9 relative per probability, so at most ``2^-9 max |V|`` in a row
of O whose probabilities sum to 1); the rest (fp32 scores and sums, ``exp`` within 1 ULP) is
far smaller. Measured maximum 8.8e-4 (docs/tensorcore.md, "Compiler: attention")."""

_SEMS = ("mask_full", "k_full", "kt_full", "k_empty", "q_full", "q_empty", "v_full",
         "v_empty", "s_full", "p_full", "pv_full", "pv_empty", "o_full", "o_empty")
_CAND_BQ = (16, 32, 64, 128, 256)
_CAND_BK = (32, 64, 128, 256, 512)
_DMA_BYTES_PER_CYCLE = 20
_STEP_OVERHEAD = 300
"""Cycles a step costs beyond its busiest engine in the tiling's cost model (instruction
latencies, semaphores): the cost favours fewer, larger steps."""


def useful_macs(seq, head_dim, heads=1, batch=1, causal=False):
    """The multiply-accumulates attention needs: ``2 * pairs * head_dim`` per head (``Q K^T``
    and ``P V``), ``pairs`` the (query, key) pairs not masked: ``seq^2``, causal ``seq (seq +
    1) / 2``."""
    pairs = seq * (seq + 1) // 2 if causal else seq * seq
    return 2 * pairs * head_dim * heads * batch


class _Plan:
    def __init__(self, config, seq, d, bh, causal, bq, bk):
        self.config, self.seq, self.d, self.bh, self.causal = config, seq, d, bh, causal
        self.bq, self.bk = bq, bk
        rb = config.row_bytes
        self.rb, self.n, self.L = rb, rb // 2, rb // 4
        self.ct = max(1, d // self.n)                   # column tiles of a K block
        self.dp = self.ct * self.n                      # d padded to whole tiles
        self.run_k = min(d, self.n) * 2                 # bytes of a K tile row from HBM
        self.span = bk * 4 // rb                        # VMEM rows of a score row
        self.dspan = d * 4 // rb                        # VMEM rows of an O row
        self.nq, self.nk = -(-seq // bq), -(-seq // bk)
        self.vq, self.vk = seq - (self.nq - 1) * bq, seq - (self.nk - 1) * bk
        self.steps_per_head = (self.nq * (self.nq + 1) // 2 if causal
                               else self.nq * self.nk)
        self.steps = bh * self.steps_per_head
        self.fold = (d & (d - 1)) == 0 and int(math.log2(d)) % 2 == 0   # 1/sqrt(d) = 2^-k
        self.mask = causal or self.vk < bk
        sizes = {}
        for name, size in (("S", bq * bk * 4), ("K", bk * self.dp * 2), ("V", bk * d * 2),
                           ("Q", bq * d * 2), ("PV", bq * d * 4), ("O", bq * d * 4)):
            sizes[f"{name}0"], sizes[f"{name}1"] = size, size
        if self.mask:
            sizes["MASK"] = bq * bk * 4
        for name in ("m0", "m1", "l0", "l1", "alpha0", "alpha1", "tmp"):
            sizes[name] = bq * rb
        self.sizes = sizes
        acc = config.mxu.acc_depth
        cols = config.mxu.cols
        # S matmuls alternate between two accumulator ranges, P V accumulates in a third
        self.acc_s = bq * -(-self.n // cols)
        self.acc_ok = 2 * self.acc_s + bq * -(-d // cols) <= acc
        self.vmem = _placement(config, sizes) if self.acc_ok else None

    def cost(self):
        """Cycles of the steps (each its busiest engine: MXU, VPU or DMA) and of the
        pipeline's fill and drain, in a small model."""
        rows, cols, lanes = self.config.mxu.rows, self.config.mxu.cols, self.config.lanes
        bq, bk, d, span = self.bq, self.bk, self.d, self.span
        mxu = (math.ceil(d / rows) * math.ceil(self.n / cols) * bq * (bk // self.n)
               + math.ceil(self.L / rows) * math.ceil(d / cols) * bq * (bk // self.L))
        log = int(math.log2(lanes))
        vpu = (2 * bq * (span + log) + 9 * bq + (3 + (not self.fold)) * bq * span
               + 2 * bq * self.dspan + (bk // self.n) * self.ct * self.n + 30 * 8)
        # K and V each step, Q and O once a Q block, at the rate the DMA reached on the RTL
        # beside the MXU and VPU (about 20 of the HBM's 32 bytes a cycle); the DMA's VMEM
        # writes also take bank ports from the engines (dma / 16)
        per_q = self.steps_per_head / self.nq
        dma = (bk * d * 4 + bq * d * 6 / per_q) / _DMA_BYTES_PER_CYCLE
        # the pipeline's fill and drain: the first S and the last softmax and P V overlap
        # nothing
        return (self.steps * (max(mxu, vpu, dma) + _STEP_OVERHEAD + dma / 16)
                + mxu + vpu)


_FRESH = (("S0", "S1", "K0", "K1", "V0", "V1", "Q0", "O0"), ("S0", "S1", "K0", "K1", "V0", "V1"),
          ("S0", "S1"), ())
"""Buffers that start on a bank boundary, the first of these that fits: the two score
buffers, then K and V, apart, so that the MXU's operand reads and the VPU's softmax seldom
meet on a bank's read port."""


def _placement(config, sizes):
    for fresh in _FRESH:
        vmem = _layout(config, sizes, fresh)
        if vmem is not None:
            return vmem
    return None


def _check_config(config):
    if not isinstance(config, TensorCoreConfig):
        raise CompileError(f"config must be a TensorCoreConfig, got {config!r}")
    if config.mxu.fmt != "bfloat16":
        raise CompileError(f"config.mxu.fmt must be bfloat16 for attention (Q, K, V and P are "
                           f"the MXU's operands), got {config.mxu.fmt}")
    if config.mxu.output != "float32":
        raise CompileError(f"config.mxu.out_fmt must be float32 for attention (the scores are "
                           f"fp32), got {config.mxu.output}")
    if not config.vmath:
        raise CompileError("config.vmath must be True for attention (the softmax needs exp)")
    if not config.vtrans:
        raise CompileError(f"config.vtrans must be True for attention (K^T is formed with "
                           f"vtrans, which needs config.row_bytes <= 128, got "
                           f"{config.row_bytes})")


def _check_head_dim(config, d):
    rb = config.row_bytes
    n = rb // 2
    unit = math.lcm(config.axi_data_width // 16, config.mxu.rows, config.mxu.cols, rb // 4)
    if d % unit or (d > n and d % n):
        allowed = (f"a multiple of {unit} up to {n} or a multiple of {n}" if unit < n
                   else f"a multiple of {unit}")
        raise CompileError(f"head_dim must be {allowed} (the AXI beat, the MXU and the "
                           f"{n}-element transpose tile of config.row_bytes {rb}), got {d}")


def _choose(config, seq, d, bh, causal, kv_block, q_block):
    n = config.row_bytes // 2
    bks = [kv_block] if kv_block is not None else [b for b in _CAND_BK if b % n == 0]
    bqs = [q_block] if q_block is not None else list(_CAND_BQ)
    best = None
    for bk in bks:
        for bq in bqs:
            if causal and bq != bk:
                continue
            if kv_block is None and bk > max(n, _roundup(seq, n)):
                continue
            if q_block is None and bq > max(n if causal else 16, _roundup(seq, 16)):
                continue
            plan = _Plan(config, seq, d, bh, causal, bq, bk)
            if plan.vmem is None:
                continue
            if best is None or plan.cost() < best.cost():
                best = plan
    return best


def _max_head_dim(config, seq, bh, causal, kv_block, q_block):
    """The largest head_dim that compiles with these blocks (0: none)."""
    n = config.row_bytes // 2
    for d in range(65535 // n * n, 0, -n):
        if _choose(config, seq, d, bh, causal, kv_block, q_block) is not None:
            return d
    return 0


def _check_block(name, value, unit):
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < unit or value % unit \
            or value > 4096:
        raise CompileError(f"{name} must be a multiple of {unit} in {unit}..4096, got "
                           f"{value!r}")


def attention(config, seq, head_dim, heads=1, batch=1, causal=False, kv_block=None,
              q_block=None):
    """A program: ``O = softmax(Q K^T / sqrt(head_dim) [+ causal mask]) V`` per (batch, head).

    Inputs ``Q``, ``K``, ``V`` (bfloat16) and output ``O`` (float32), each ``(batch * heads *
    seq, head_dim)``, the rows of (batch ``b``, head ``h``) contiguous from row ``(b * heads +
    h) * seq``. ``causal``: query ``i`` attends keys ``<= i``. ``kv_block`` / ``q_block``:
    the block sizes (default: chosen by a cost model; causal needs them equal)."""
    _check_config(config)
    _check_dim("seq", seq)
    _check_dim("head_dim", head_dim)
    _check_dim("heads", heads)
    _check_dim("batch", batch)
    if not isinstance(causal, bool):
        raise CompileError(f"causal must be True or False, got {causal!r}")
    _check_head_dim(config, head_dim)
    n = config.row_bytes // 2
    _check_block("kv_block", kv_block, n)
    _check_block("q_block", q_block, max(16, config.mxu.rows))
    if causal and kv_block is not None and q_block is not None and kv_block != q_block:
        raise CompileError(f"q_block must equal kv_block for causal attention, got q_block "
                           f"{q_block} and kv_block {kv_block}")
    if causal:
        q_block = q_block or kv_block
        kv_block = kv_block or q_block
        if q_block is not None and q_block % n:
            raise CompileError(f"q_block must be a multiple of {n} for causal attention (it "
                               f"equals kv_block), got {q_block}")
    bh = heads * batch
    plan = _choose(config, seq, head_dim, bh, causal, kv_block, q_block)
    if plan is None:
        smallest = _Plan(config, seq, head_dim, bh, causal, q_block or (n if causal else 16),
                         kv_block or n)
        need = sum(_roundup(s, config.row_bytes) for s in smallest.sizes.values())
        raise CompileError(
            f"head_dim {head_dim} does not fit vmem_bytes {config.vmem_bytes} (or "
            f"mxu.acc_depth {config.mxu.acc_depth}): the smallest blocks (q_block "
            f"{smallest.bq}, kv_block {smallest.bk}) need {need} bytes of VMEM for two Q, K, V, "
            f"S, PV and O buffers{', a mask' if smallest.mask else ''} and the statistic rows, "
            f"and {smallest.bq * -(-max(head_dim, n) // config.mxu.cols)} accumulator rows; "
            f"at most head_dim {_max_head_dim(config, seq, bh, causal, kv_block, q_block)}")
    d = head_dim
    rows = bh * seq
    # HBM: the constants (mask, zero row) at 0, then Q, K, V, O
    consts, offsets = _constants(plan)
    at = _roundup(len(consts), _HBM_ALIGN) if consts else 0
    tensors = {}
    for name, dtype, width in (("Q", "bfloat16", 2), ("K", "bfloat16", 2),
                               ("V", "bfloat16", 2), ("O", "float32", 4)):
        tensors[name] = Tensor(at, (rows, d), dtype, d * width)
        at = _roundup(at + rows * d * width, _HBM_ALIGN)
    if at > 1 << 32:
        raise CompileError(f"batch {batch} x heads {heads} x seq {seq} x head_dim {d} need {at} "
                           f"bytes of HBM, past the 32-bit address space")
    sem = _semaphores(config, _SEMS)
    text = _Code(plan, sem, {k: t.address for k, t in tensors.items()}, offsets).program()
    words = _assemble_checked(config, text)
    return Program(
        words=words, config=config, hbm_capacity=at, hbm={0: consts} if consts else {},
        inputs={k: tensors[k] for k in "QKV"}, outputs={"O": tensors["O"]},
        metadata={"kind": "attention", "seq": seq, "head_dim": d, "heads": heads,
                  "batch": batch, "causal": causal, "q_block": plan.bq, "kv_block": plan.bk,
                  "steps": plan.steps, "scale": "folded into Q" if plan.fold else "fp32 on S",
                  "useful_macs": useful_macs(seq, d, heads, batch, causal),
                  "vmem": plan.vmem, "assembly": text})


def _constants(plan):
    """The HBM image of the constants: the mask (causal: the ``bq x bk`` block with -inf
    above the diagonal; padding: one row, -inf past the last key) and a zero row."""
    parts, offsets, at = [], {}, 0
    if plan.mask:
        if plan.causal:
            r = np.arange(plan.bq)[:, None]
            c = np.arange(plan.bk)[None, :]
            mask = np.where(c > r, -np.inf, 0.0).astype(np.float32)
        else:
            mask = np.where(np.arange(plan.bk) < plan.vk, 0.0, -np.inf).astype(np.float32)
        data = mask.tobytes()
        offsets["MASK"] = at
        parts.append(data)
        at += len(data)
    zero = _roundup(max(plan.d * 2, plan.run_k, plan.config.axi_data_width // 8), 32)
    offsets["ZERO"] = at
    parts.append(bytes(zero))
    return b"".join(parts), offsets


class _Ops(VpuOps):
    """VpuOps with counts that may be integers (loaded into a temporary for ``vpu.cfg``)."""

    def cfg(self, count, scalar=0):
        if isinstance(count, int):
            self.e.li(self.temps[1], count)
            count = self.temps[1]
        super().cfg(count, scalar)


class _Code:
    """The program: one loop over iterations ``i = 0 .. steps + 2``; iteration ``i`` loads for
    step ``c2 = i``, transposes and computes S for ``c1 = i - 1``, the softmax and P V of
    ``c0 = i - 2`` and updates O of ``cm1 = i - 3`` (each where that step exists). The loop
    body is unrolled twice (``i`` even, odd), so the buffers of the step parities are
    immediates; a Q block's buffers (Q, m, l, O) follow the Q block's parity, a flag."""

    # registers
    i, bh, qi, j = "r1", "r2", "r3", "r4"          # iteration; (head, Q block, K block) of c2
    f1, f0, fm1, kv1 = "r5", "r6", "r7", "r8"       # flags of c1, c0, cm1; K row of c1
    x, y, z = "r9", "r10", "r11"                    # scratch
    T = ("r12", "r13", "r14", "r15")                 # temporaries (VpuOps' too)
    FIRST, LAST, QPAR, PARTQ, PADK, ROW = 0, 1, 2, 3, 4, 5   # flag bits; ROW: the Q row

    def __init__(self, plan, sem, hbm, offsets):
        self.p, self.sem, self.hbm, self.off = plan, sem, hbm, offsets
        self.e = _Asm()
        self.ops = _Ops(self.e, self.T)
        self.v = plan.vmem

    # -- helpers ----------------------------------------------------------------------

    def bit(self, dst, flags, k):
        """``dst = (flags >> k) & 1``."""
        e, t = self.e, self.T[0]
        e(f"srli {dst}, {flags}, {k}")
        e(f"srli {t}, {flags}, {k + 1}")
        e(f"slli {t}, {t}, 1")
        e(f"sub {dst}, {dst}, {t}")

    def by_parity(self, dst, flags, name):
        """``dst`` = the VMEM address of buffer ``name`` 0 or 1 by the Q-block parity."""
        self.bit(dst, flags, self.QPAR)
        self.e.li(self.T[0], self.v[f"{name}1"] - self.v[f"{name}0"])
        self.e(f"mul {dst}, {dst}, {self.T[0]}")
        self.e(f"addi {dst}, {dst}, {self.v[f'{name}0']}")

    def skip_unless(self, flags, k, label):
        self.bit(self.z, flags, k)
        self.e(f"beq {self.z}, r0, {label}")

    def skip_if(self, flags, k, label):
        self.bit(self.z, flags, k)
        self.e(f"bne {self.z}, r0, {label}")

    def guard(self, lo, hi):
        """Branch past the section unless ``lo <= i <= hi``; returns the label."""
        e, label = self.e, self.e.label("skip")
        if lo > 0:
            e.li(self.T[0], lo - 1)
            e(f"blt {self.T[0]}, {self.i}, {label}_in")
            e(f"jmp {label}")
            e.place(f"{label}_in")
        e.li(self.T[0], hi)
        e(f"blt {self.T[0]}, {self.i}, {label}")
        return label

    def transfer(self, load, hbm, vmem, run, dims, sem):
        """One DMA transfer: ``hbm`` and ``vmem`` registers or integers."""
        e, t = self.e, self.T
        e.dma_shape(run, dims, (t[0], t[1], t[2]))
        h = hbm if isinstance(hbm, str) else None
        if h is None:
            e.li(t[0], hbm)
            h = t[0]
        if isinstance(vmem, str):
            vr = vmem
        else:
            e.li(t[1], vmem)
            vr = t[1]
        e(f"dma.{'load' if load else 'store'} {h}, {vr}, {sem}")

    # -- the program ------------------------------------------------------------------

    def program(self):
        e, p, sem = self.e, self.p, self.sem
        e.comment(f"attention: {p.bh} heads x seq {p.seq} x head_dim {p.d}"
                  f"{' causal' if p.causal else ''}; blocks q {p.bq} x kv {p.bk}, "
                  f"{p.steps} steps")
        for reg in (self.i, self.bh, self.qi, self.j, self.f1, self.f0, self.fm1, self.kv1):
            e.li(reg, 0)
        for name, queue in (("k_empty", "dma"), ("q_empty", "dma"), ("v_empty", "dma"),
                            ("pv_empty", "mxu"), ("o_empty", "vpu")):
            e(f"signal {queue}, {sem[name]}")
            e(f"signal {queue}, {sem[name]}")
        if p.mask:
            dims = [] if p.causal else [(p.bq, 0, p.bk * 4)]
            run = p.bq * p.bk * 4 if p.causal else p.bk * 4
            self.transfer(True, self.off["MASK"], self.v["MASK"], run, dims, sem["mask_full"])
            e(f"wait vpu, {sem['mask_full']}")
        e.place("even")
        self.body(0)
        e(f"addi {self.i}, {self.i}, 1")
        e.li(self.T[0], p.steps + 3)
        e(f"beq {self.i}, {self.T[0]}, done")
        self.body(1)
        e(f"addi {self.i}, {self.i}, 1")
        e.li(self.T[0], p.steps + 3)
        e(f"bne {self.i}, {self.T[0]}, even")
        e.place("done")
        e("halt")
        return e.text()

    def body(self, par):
        p = self.p
        skip = self.guard(0, p.steps - 1)
        self.load_k_q(par)
        self.e.place(skip)
        skip = self.guard(1, p.steps)
        self.load_v(1 - par)
        self.transpose(1 - par)
        self.scores(1 - par)
        self.e.place(skip)
        skip = self.guard(2, p.steps + 1)
        self.softmax(par)
        self.pv(par)
        self.e.place(skip)
        skip = self.guard(3, p.steps + 2)
        self.update(1 - par)
        self.e.place(skip)
        self.advance()

    # -- c2: K (and Q) loads ------------------------------------------------------------

    def load_k_q(self, par):
        e, p, sem, t = self.e, self.p, self.sem, self.T
        x, y = self.x, self.y
        # x = the K/V row of c2: bh * seq + j * bk
        e.li(t[0], p.seq)
        e(f"mul {x}, {self.bh}, {t[0]}")
        e.li(t[0], p.bk)
        e(f"mul {t[0]}, {self.j}, {t[0]}")
        e(f"add {x}, {x}, {t[0]}")
        e.li(t[0], p.d * 2)
        e(f"mul {y}, {x}, {t[0]}")
        e(f"addi {y}, {y}, {self.hbm['K']}")
        e(f"wait dma, {sem['k_empty']}")
        kbuf = self.v[f"K{par}"]
        tile = p.n * p.rb                                # bytes of a transpose tile
        full_dims = lambda count: [(p.n, p.d * 2, p.rb), (p.ct, p.n * 2, tile),  # noqa: E731
                                   (count, p.n * p.d * 2, p.ct * tile)]
        if p.vk < p.bk:
            last, done = e.label("klast"), e.label("kdone")
            e.li(t[0], p.nk - 1)
            e(f"beq {self.j}, {t[0]}, {last}")
        self.transfer(True, y, kbuf, p.run_k, full_dims(p.bk // p.n), sem["k_full"])
        if p.vk < p.bk:
            e(f"jmp {done}")
            e.place(last)
            parts = []
            fa, rem = divmod(p.vk, p.n)
            if fa:
                parts.append((y, 0, full_dims(fa)))
            if rem:
                parts.append(("rem", fa, [(rem, p.d * 2, p.rb), (p.ct, p.n * 2, tile)]))
                parts.append(("zero", fa * p.ct * tile + rem * p.rb,
                              [(p.n - rem, 0, p.rb), (p.ct, 0, tile)]))
            z = p.bk // p.n - -(-p.vk // p.n)
            if z:
                parts.append(("zero", -(-p.vk // p.n) * p.ct * tile,
                              [(p.n, 0, p.rb), (p.ct, 0, tile), (z, 0, p.ct * tile)]))
            for k, (src, at, dims) in enumerate(parts):
                s = sem["k_full"] if k == len(parts) - 1 else "none"
                if src == "zero":
                    self.transfer(True, self.off["ZERO"], kbuf + at, p.run_k, dims, s)
                elif src == "rem":
                    e(f"addi {self.z}, {y}, {fa * p.n * p.d * 2}")
                    self.transfer(True, self.z, kbuf + fa * p.ct * tile, p.run_k, dims, s)
                else:
                    self.transfer(True, y, kbuf, p.run_k, dims, s)
            e.place(done)
        # Q, when c2 starts a Q block
        noq = e.label("noq")
        e(f"bne {self.j}, r0, {noq}")
        e(f"wait dma, {sem['q_empty']}")
        # x = the Q row: bh * seq + qi * bq; y = its rows
        e.li(t[0], p.seq)
        e(f"mul {x}, {self.bh}, {t[0]}")
        e.li(t[0], p.bq)
        e(f"mul {t[0]}, {self.qi}, {t[0]}")
        e(f"add {x}, {x}, {t[0]}")
        e.tile_size(y, self.qi, p.bq, p.seq, t[0])
        e.li(t[0], p.d * 2)
        e(f"mul {y}, {y}, {t[0]}")
        e(f"mul {x}, {x}, {t[0]}")
        e(f"addi {x}, {x}, {self.hbm['Q']}")
        # the Q block's parity: (bh * nq + qi) & 1
        e.li(t[0], p.nq)
        e(f"mul {t[1]}, {self.bh}, {t[0]}")
        e(f"add {t[1]}, {t[1]}, {self.qi}")
        e(f"slli {t[1]}, {t[1]}, {self.QPAR}")
        self.by_parity(self.z, t[1], "Q")
        e(f"dma.shape 0, {y}, r0, r0")
        e.li(t[0], 1)
        for dim in (1, 2, 3):
            e(f"dma.shape {dim}, {t[0]}, r0, r0")
        e(f"dma.load {x}, {self.z}, {sem['q_full']}")
        e.place(noq)

    # -- c1: V load, K^T, S -------------------------------------------------------------

    def load_v(self, par):
        e, p, sem, t = self.e, self.p, self.sem, self.T
        e.li(t[0], p.d * 2)
        e(f"mul {self.x}, {self.kv1}, {t[0]}")
        e(f"addi {self.x}, {self.x}, {self.hbm['V']}")
        e(f"wait dma, {sem['v_empty']}")
        vbuf = self.v[f"V{par}"]
        if p.vk < p.bk:
            last, done = e.label("vlast"), e.label("vdone")
            self.skip_if(self.f1, self.PADK, last)
        self.transfer(True, self.x, vbuf, p.bk * p.d * 2, [], sem["v_full"])
        if p.vk < p.bk:
            e(f"jmp {done}")
            e.place(last)
            self.transfer(True, self.x, vbuf, p.vk * p.d * 2, [], "none")
            self.transfer(True, self.off["ZERO"], vbuf + p.vk * p.d * 2, p.d * 2,
                          [(p.bk - p.vk, 0, p.d * 2)], sem["v_full"])
            e.place(done)

    def transpose(self, par):
        e, p, sem = self.e, self.p, self.sem
        if p.fold:
            noscale = e.label("noscale")
            self.skip_unless(self.f1, self.FIRST, noscale)
            e(f"wait vpu, {sem['q_full']}")
            self.by_parity(self.x, self.f1, "Q")
            self.ops.scalar_op("mul", "bf16", p.bq * p.d * 2 // p.rb, self.x,
                               1 / math.sqrt(p.d))
            e.place(noscale)
        e(f"wait vpu, {sem['k_full']}")
        self.ops.cfg((p.bk // p.n) * p.ct)
        k = self.v[f"K{par}"]
        e.li(self.T[2], k)
        e(f"vtrans bf16 {self.T[2]}, {self.T[2]}")
        e(f"signal vpu, {sem['kt_full']}")

    def scores(self, par):
        e, p, sem, t = self.e, self.p, self.sem, self.T
        e(f"wait mxu, {sem['kt_full']}")
        if not p.fold:
            noq = e.label("noqw")
            self.skip_unless(self.f1, self.FIRST, noq)
            e(f"wait mxu, {sem['q_full']}")
            e.place(noq)
        self.by_parity(self.x, self.f1, "Q")
        e.li(t[0], p.bq)
        e.li(t[1], p.d)
        e.li(t[2], p.n)
        e(f"mxu.shape {t[0]}, {t[1]}, {t[2]}")
        e.li(t[0], p.d * 2)
        e.li(t[1], p.rb)
        e.li(t[2], p.bk * 4)
        e(f"mxu.stride {t[0]}, {t[1]}, {t[2]}")
        kt, s = self.v[f"K{par}"], self.v[f"S{par}"]
        for a in range(p.bk // p.n):
            e.li(t[1], kt + a * p.ct * p.n * p.rb)
            e.li(t[2], s + a * p.n * 4)
            e(f"matmul {self.x}, {t[1]}, {t[2]}, {(a % 2) * p.acc_s}, emit")
        e(f"signal mxu, {sem['k_empty']}")
        notlast = e.label("qkeep")
        self.skip_unless(self.f1, self.LAST, notlast)
        e(f"signal mxu, {sem['q_empty']}")
        e.place(notlast)
        e(f"signal mxu, {sem['s_full']}")

    # -- c0: softmax, P V ---------------------------------------------------------------

    def softmax(self, par):
        e, p, sem, ops = self.e, self.p, self.sem, self.ops
        e(f"wait vpu, {sem['s_full']}")
        m, total = self.x, self.y
        self.by_parity(m, self.f0, "m")
        self.by_parity(total, self.f0, "l")
        b = Block(p.bq, p.bq * p.span, p.span, "fp32")
        s = self.v[f"S{par}"]
        notfirst = e.label("nfirst")
        self.skip_unless(self.f0, self.FIRST, notfirst)
        ops.online_start(b, m, total)
        e.place(notfirst)
        if not p.fold:
            ops.scalar_op("mul", "fp32", b.vrows, s, 1 / math.sqrt(p.d))
        if p.mask:
            nomask = e.label("nomask")
            self.skip_unless(self.f0, self.LAST, nomask)
            ops.cfg(b.vrows)
            ops.vop("add", "fp32", s, s, self.v["MASK"])
            e.place(nomask)
        ops.online_softmax(b, s, m, total, self.v[f"alpha{par}"], self.v["tmp"])
        ops.cfg(b.vrows)
        e.li(self.T[2], s)
        e(f"vcast f32_bf16 {self.T[2]}, {self.T[2]}")
        e(f"signal vpu, {sem['p_full']}")

    def pv(self, par):
        e, p, sem, t = self.e, self.p, self.sem, self.T
        e(f"wait mxu, {sem['p_full']}")
        e(f"wait mxu, {sem['v_full']}")
        e(f"wait mxu, {sem['pv_empty']}")
        e.li(t[0], p.bq)
        e.li(t[1], p.L)
        e.li(t[2], p.d)
        e(f"mxu.shape {t[0]}, {t[1]}, {t[2]}")
        e.li(t[0], p.bk * 4)
        e.li(t[1], p.d * 2)
        e.li(t[2], p.d * 4)
        e(f"mxu.stride {t[0]}, {t[1]}, {t[2]}")
        s, v, out = self.v[f"S{par}"], self.v[f"V{par}"], self.v[f"PV{par}"]
        e.li(t[2], out)
        chunks = p.bk // p.L
        for c in range(chunks):
            e.li(t[0], s + c * p.rb)
            e.li(t[1], v + c * p.L * p.d * 2)
            flags = (", accumulate" if c else "") + (", emit" if c == chunks - 1 else "")
            e(f"matmul {t[0]}, {t[1]}, {t[2]}, {2 * p.acc_s}{flags}")
        e(f"signal mxu, {sem['v_empty']}")
        e(f"signal mxu, {sem['pv_full']}")

    # -- cm1: O update, finish, store ---------------------------------------------------

    def update(self, par):
        e, p, sem, ops, t = self.e, self.p, self.sem, self.ops, self.T
        e(f"wait vpu, {sem['pv_full']}")
        o = self.x
        self.by_parity(o, self.fm1, "O")
        b = Block(p.bq, p.bq * p.dspan, p.dspan, "fp32")
        pv = self.v[f"PV{par}"]
        later, done = e.label("later"), e.label("updated")
        self.skip_unless(self.fm1, self.FIRST, later)
        e(f"wait vpu, {sem['o_empty']}")
        ops.cfg(b.vrows)
        ops.vop("copy", "fp32", o, pv)
        e(f"jmp {done}")
        e.place(later)
        ops.apply_stat("mul", b, o, self.v[f"alpha{par}"])
        ops.cfg(b.vrows)
        ops.vop("add", "fp32", o, o, pv)
        e.place(done)
        e(f"signal vpu, {sem['pv_empty']}")
        nolast = e.label("nstore")
        self.skip_unless(self.fm1, self.LAST, nolast)
        self.by_parity(self.y, self.fm1, "l")
        ops.divide_by_sum(b, o, self.y)
        e(f"signal vpu, {sem['o_full']}")
        e(f"wait dma, {sem['o_full']}")
        # rows: vq for the last Q block of a head, else bq
        e.li(self.y, p.bq * p.d * 4)
        if p.vq < p.bq:
            full = e.label("full")
            self.skip_unless(self.fm1, self.PARTQ, full)
            e.li(self.y, p.vq * p.d * 4)
            e.place(full)
        e(f"srli {self.z}, {self.fm1}, {self.ROW}")
        e.li(t[0], p.d * 4)
        e(f"mul {self.z}, {self.z}, {t[0]}")
        e(f"addi {self.z}, {self.z}, {self.hbm['O']}")
        e(f"dma.shape 0, {self.y}, r0, r0")
        e.li(t[0], 1)
        for dim in (1, 2, 3):
            e(f"dma.shape {dim}, {t[0]}, r0, r0")
        e(f"dma.store {self.z}, {o}, {sem['o_empty']}")
        e.place(nolast)

    # -- the pipeline's shift and the step odometer -------------------------------------

    def _row(self, dst, index, block):
        """``dst = bh * seq + index * block``: a (batch, head)'s row ``index * block``."""
        e, t = self.e, self.T
        e.li(t[0], self.p.seq)
        e(f"mul {dst}, {self.bh}, {t[0]}")
        e.li(t[0], block)
        e(f"mul {t[0]}, {index}, {t[0]}")
        e(f"add {dst}, {dst}, {t[0]}")

    def _flag_if(self, reg, other, bit):
        """Flag ``bit`` set in ``x`` when ``reg`` equals ``other`` (a register or a
        constant)."""
        e, t = self.e, self.T
        lab = e.label("f")
        if not isinstance(other, str):
            e.li(t[0], other)
            other = t[0]
        e(f"bne {reg}, {other}, {lab}")
        e(f"addi {self.x}, {self.x}, {1 << bit}")
        e.place(lab)

    def advance(self):
        e, p, t = self.e, self.p, self.T
        x, z = self.x, self.z
        e(f"addi {self.fm1}, {self.f0}, 0")
        e(f"addi {self.f0}, {self.f1}, 0")
        end = e.label("adv")
        e.li(t[0], p.steps - 1)
        e(f"blt {t[0]}, {self.i}, {end}")
        # flags of c2: first, last, Q parity, partial Q block, padded K block, Q row
        self._row(x, self.qi, p.bq)
        e(f"slli {x}, {x}, {self.ROW}")
        self._flag_if(self.j, "r0", self.FIRST)
        self._flag_if(self.j, self.qi if p.causal else p.nk - 1, self.LAST)
        e.li(t[0], p.nq)
        e(f"mul {z}, {self.bh}, {t[0]}")
        e(f"add {z}, {z}, {self.qi}")
        e(f"srli {t[1]}, {z}, 1")
        e(f"slli {t[1]}, {t[1]}, 1")
        e(f"sub {z}, {z}, {t[1]}")
        e(f"slli {z}, {z}, {self.QPAR}")
        e(f"add {x}, {x}, {z}")
        if p.vq < p.bq:
            self._flag_if(self.qi, p.nq - 1, self.PARTQ)
        if p.vk < p.bk:
            self._flag_if(self.j, p.nk - 1, self.PADK)
        e(f"addi {self.f1}, {x}, 0")
        # the K/V row of c2, for its V load next iteration
        self._row(self.kv1, self.j, p.bk)
        # the odometer: j, then qi, then the head
        e(f"addi {self.j}, {self.j}, 1")
        if p.causal:
            e(f"addi {t[0]}, {self.qi}, 1")
        else:
            e.li(t[0], p.nk)
        e(f"bne {self.j}, {t[0]}, {end}")
        e.li(self.j, 0)
        e(f"addi {self.qi}, {self.qi}, 1")
        e.li(t[0], p.nq)
        e(f"bne {self.qi}, {t[0]}, {end}")
        e.li(self.qi, 0)
        e(f"addi {self.bh}, {self.bh}, 1")
        e.place(end)
