"""A pre-LN transformer encoder as one fused TensorCore program: an input projection, any
number of encoder blocks (LN -> QKV -> multi-head attention -> output projection -> residual
-> LN -> MLP with GELU -> residual), a final LN and a linear classifier on token 0 (a Vision
Transformer's class token); docs/tensorcore.md, "Compiler: encoder".

Weights and vectors stay in VMEM for the whole program; the batch streams through in tiles
of ``group`` sequences, every activation of a tile resident in VMEM, the sequences one after
another (``T = group * seq`` rows), a tile in two halves (``group`` even) with activation
buffers of their own. Only the keys are padded: each sequence's are copied to ``stride =
ceil(seq / n) * n`` rows of KT (``n = row_bytes / 2``, the bfloat16 tile of ``vtrans``),
whose padding rows stay zero, and transposed there in place.

Layout. Activations are *chunk-major*, as the MLP compiler's (podium/compiler.py): chunk
``c`` of a ``T x F`` block holds columns ``c*L .. c*L+L-1`` (``L = row_bytes / 4`` fp32
lanes) of every row, one VMEM row per token, chunk after chunk; a bias, LN scale or shift row
is then one ``src2=broadcast`` per chunk, a per-token statistic one ``src2=stat`` per chunk,
a ``vcast f32_bf16`` in place makes each row the bfloat16 operand chunk of the next
``matmul`` (``k = L``, accumulated over chunks). Weights are row-major bfloat16 (rows
``w_stride`` bytes apart); vectors fp32, one VMEM row per chunk. The attention scores of one
(sequence, head) are row-major (``stride / L`` VMEM rows per query) so that VpuOps' softmax
(podium/transformer.py) runs on them as they are.

Attention. Per head, ``K_h`` (cast to bfloat16: L elements in the first half of each row)
is transposed tile by tile with ``vtrans`` (a tile of ``n`` keys gives ``L`` rows of ``n``
keys, the rest zero); per (sequence, head) ``S = Q_h K_h^T`` (``1/sqrt(head_dim)`` folded
into ``W_q`` and ``b_q`` before rounding), padding keys masked with -inf, softmax, cast, and
``O_h = P V_h``. Scores alternate between two buffers: the MXU computes ``S`` of the next
(sequence, head) while the VPU runs the softmax of this one.

Synchronization. Each dependency between two engines is a ``signal`` on the producer's queue
and a ``wait`` on the consumer's, every wait dispatched after its signal: queues are in
order, so the k-th wait on a semaphore consumes its k-th signal. The block's phases are
emitted for the two halves a phase apart (one half's GEMM on the MXU beside the other's
LayerNorm, GELU or softmax on the VPU); the MXU and the VPU have a semaphore per direction
and half, and a phase signals its successor as soon as it is emitted, so that its signal
follows only its own work in its queue.
"""

import math

import ml_dtypes
import numpy as np

from spec.tensorcore import TensorCoreConfig

from .compiler import _HBM_ALIGN, CompileError, _Asm, _assemble_checked, _check_dim, _roundup
from .program import Program, Tensor
from .transformer import Block, VpuOps

__all__ = ["encoder", "EncoderPlan", "block_names"]

_BLOCK = ("ln1_g", "ln1_b", "qkv_w", "qkv_b", "proj_w", "proj_b", "ln2_g", "ln2_b", "fc1_w",
          "fc1_b", "fc2_w", "fc2_b")
_SEMS = ("dma_mxu", "mxu_vpu0", "vpu_mxu0", "mxu_vpu1", "vpu_mxu1", "mxu_dma", "vpu_dma",
         "w", "v", "st")
_NEG = -np.inf


def block_names(blocks):
    """Every parameter name an encoder of ``blocks`` blocks takes."""
    return (["embed_w", "embed_b"] + [f"b{i}.{n}" for i in range(blocks) for n in _BLOCK]
            + ["ln_g", "ln_b", "head_w", "head_b"])


class EncoderPlan:
    """Shapes, VMEM buffers and parameter layout of one encoder program."""

    def __init__(self, config, *, seq, features, width, heads, mlp, blocks, classes, batch,
                 group):
        cfg = self.config = config
        self.seq, self.kin, self.D, self.heads, self.M = seq, features, width, heads, mlp
        self.blocks, self.classes, self.batch, self.G = blocks, classes, batch, group
        self.halves = 2 if group % 2 == 0 else 1         # interleaved halves of a tile
        self.gh = group // self.halves                  # sequences of a half
        self.rb = rb = cfg.row_bytes
        self.L = rb // 4
        self.n = rb // 2
        self.stride = _roundup(seq, self.n)             # a sequence's keys in KT
        self.T = group * seq                            # rows of a tile
        self.Th = self.gh * seq                         # rows of a half
        self.hd = width // heads
        self.hc = self.hd // self.L                     # chunks of a head
        self.span = self.stride // self.L               # VMEM rows of a query's scores
        self.nd, self.nm = width // self.L, mlp // self.L
        self.nc = -(-classes // self.L)
        self.x_stride = _roundup(features * 2, rb)
        self.ldx = _roundup(features * 2, cfg.beat_bytes)
        self.ldo = self.nc * rb
        cols = cfg.mxu.cols * 2
        # weights: name -> (VMEM offset in W, rows, w_stride)
        self.weights, at = {}, 0
        shapes = [("embed_w", features, width)]
        for i in range(blocks):
            shapes += [(f"b{i}.qkv_w", width, 3 * width), (f"b{i}.proj_w", width, width),
                       (f"b{i}.fc1_w", width, mlp), (f"b{i}.fc2_w", mlp, width)]
        shapes.append(("head_w", width, self.nc * self.L))
        for name, k, nn in shapes:
            stride = _roundup(nn * 2, cols)
            self.weights[name] = (at, k, stride)
            at = _roundup(at + k * stride, rb)
        self.w_bytes = _roundup(at, cfg.beat_bytes)
        self.block_w = (self.weights["b1.qkv_w"][0] - self.weights["b0.qkv_w"][0]
                        if blocks > 1 else 0)
        # vectors: name -> (row offset in V, chunks)
        self.vectors, row = {}, 0
        for i in range(blocks):
            for name, chunks in (("ln1_g", self.nd), ("ln1_b", self.nd), ("qkv_b", 3 * self.nd),
                                 ("proj_b", self.nd), ("ln2_g", self.nd), ("ln2_b", self.nd),
                                 ("fc1_b", self.nm), ("fc2_b", self.nd)):
                self.vectors[f"b{i}.{name}"] = (row, chunks)
                row += chunks
        self.block_v = row // blocks * rb
        for name, chunks in (("ln_g", self.nd), ("ln_b", self.nd), ("head_b", self.nc)):
            self.vectors[name] = (row, chunks)
            row += chunks
        self.v_bytes = _roundup(row * rb, cfg.beat_bytes)
        self.masked = seq < self.stride
        Th, chunk = self.Th, self.Th * rb
        sizes = {"W": self.w_bytes, "V": self.v_bytes, "E": self.nd * chunk,
                 "IN": self.T * self.x_stride, "LG": self.nc * self.T * rb}
        if self.masked:
            sizes["MASK"] = seq * self.span * rb
        for k in range(self.halves):
            sizes.update({
                f"X{k}": self.nd * chunk, f"H{k}": self.nd * chunk, f"Y{k}": self.nd * chunk,
                f"QKV{k}": 3 * self.nd * chunk + self.L * rb,
                f"KT{k}": self.nd * self.gh * self.stride * rb, f"O{k}": self.nd * chunk,
                f"MH{k}": self.nm * chunk, f"GT{k}": self.nm * chunk, f"ST{k}": Th * rb,
                f"S0{k}": seq * self.span * rb, f"S1{k}": seq * self.span * rb,
                f"SS{k}": seq * rb})
        self.sizes = sizes
        self.vmem, at = {}, 0
        for name, size in sizes.items():
            self.vmem[name] = at
            at += _roundup(size, rb)
        self.vmem_used = at

    def fits(self):
        """VMEM holds the buffers and the accumulator a GEMM's (T rows) and a score block's
        (seq rows, two column tiles)."""
        acc = self.config.mxu.acc_depth
        return (self.vmem_used <= self.config.vmem_bytes and self.Th <= acc
                and self.seq * -(-self.n // self.config.mxu.cols) <= acc)

    def addr(self, buf, half, c=0, row=0):
        """VMEM address of row ``row`` of chunk ``c`` of chunk-major buffer ``buf`` of tile
        half ``half``: its own buffer, or its rows of the tile's IN and LG; E is the same
        for both halves."""
        if buf == "IN":
            return self.vmem["IN"] + (half * self.Th + row) * self.x_stride
        if buf == "LG":
            return self.vmem["LG"] + (c * self.T + half * self.Th + row) * self.rb
        base = self.vmem["E"] if buf == "E" else self.vmem[f"{buf}{half}"]
        return base + (c * self.Th + row) * self.rb

    def kt(self, half, c, g, row=0):
        """VMEM address of row ``row`` of sequence ``g``'s tiles in key chunk ``c`` of KT."""
        return self.vmem[f"KT{half}"] + ((c * self.gh + g) * self.stride + row) * self.rb

    def weight(self, name, k_chunk, n_chunk):
        """VMEM address of the ``L x L`` block (k rows ``k_chunk*L ..``, columns ``n_chunk*L
        ..``) of weight ``name``, and its row stride."""
        at, _, stride = self.weights[name]
        return self.vmem["W"] + at + k_chunk * self.L * stride + n_chunk * self.L * 2, stride

    def vector(self, name, c=0):
        row, _ = self.vectors[name]
        return self.vmem["V"] + (row + c) * self.rb


def _bf16_bytes(matrix, rows, stride):
    out = np.zeros((rows, stride), np.uint8)
    raw = np.ascontiguousarray(np.asarray(matrix, np.float32).astype(ml_dtypes.bfloat16))
    raw = raw.view(np.uint8).reshape(matrix.shape[0], -1)
    out[:raw.shape[0], :raw.shape[1]] = raw
    return out


def _constants(p, params):
    """HBM bytes of the weights block (VMEM layout), the vectors block, the embedding bias
    (one sequence, chunk-major) and the softmax mask row (one query's scores)."""
    w = np.zeros(p.w_bytes, np.uint8)
    scale = 1 / math.sqrt(p.hd)
    for name, (at, rows, stride) in p.weights.items():
        m = np.asarray(params[name], np.float64)
        if name.endswith("qkv_w"):
            m = m.copy()
            m[:, :p.D] *= scale
        block = _bf16_bytes(m, rows, stride)
        w[at:at + block.size] = block.reshape(-1)
    v = np.zeros(p.v_bytes, np.uint8)
    for name, (row, chunks) in p.vectors.items():
        vec = np.asarray(params[name], np.float64)
        if name.endswith("qkv_b"):
            vec = vec.copy()
            vec[:p.D] *= scale
        padded = np.zeros(chunks * p.L, np.float32)
        padded[:vec.size] = vec
        v[row * p.rb:(row + chunks) * p.rb] = padded.view(np.uint8)
    emb = np.asarray(params["embed_b"], np.float32)
    e = np.stack([emb[:, c * p.L:(c + 1) * p.L] for c in range(p.nd)])
    mask = np.zeros(p.span * p.L, np.float32)
    mask[p.seq:] = _NEG
    return w.tobytes(), v.tobytes(), e.tobytes(), mask.tobytes()


class _Code:
    """The program's assembly, phase by phase (see the module docstring)."""

    tile, hin, hout, cnt = "r1", "r2", "r3", "r4"       # tile index, HBM in/out, sequences
    off, koff, sbuf = "r2", "r3", "r4"                  # in the attention: see there
    rw, rv = "r5", "r6"                                 # block i's offset in W, in V
    t = ("r7", "r8", "r9", "r10", "r11")                # scratch of this class

    def __init__(self, p, base, sem, eps):
        self.p, self.base, self.sem, self.eps = p, base, sem, eps
        self.e = _Asm()
        self.ops = VpuOps(self.e)
        self.known = {}
        self.half = 0

    def a(self, buf, c=0, row=0):
        """VMEM address of row ``row`` of chunk ``c`` of ``buf`` of the current half."""
        return self.p.addr(buf, self.half, c, row)

    # -- small idioms -----------------------------------------------------------------------

    def li(self, k, value):
        """Scratch register ``k`` holding ``value``: loaded unless it still holds it (the
        code is straight-line between :meth:`forget` calls)."""
        if self.known.get(k) != value:
            self.e.li(self.t[k], value)
            self.known[k] = value
        return self.t[k]

    def forget(self):
        """The scratch registers' values unknown: after a label, or after code that uses
        them without :meth:`li`."""
        self.known = {}

    def sem_of(self, src, dst):
        """The semaphore from engine ``src`` to ``dst``: the MXU's and the VPU's have one per
        tile half."""
        pair = f"{src}_{dst}"
        return self.sem[pair + str(self.half) if pair in ("mxu_vpu", "vpu_mxu") else pair]

    def dep(self, src, dst):
        """``dst`` waits for everything dispatched to ``src`` so far."""
        self.e(f"signal {src}, {self.sem_of(src, dst)}")
        self.e(f"wait {dst}, {self.sem_of(src, dst)}")

    def cfg(self, count, scalar=0):
        self.e(f"vpu.cfg {self.li(0, count)}, {self.li(1, scalar) if scalar else 'r0'}, r0")

    def vop(self, op, dtype, dst, src1, src2=None, mode=None):
        s2 = "r0" if src2 is None else src2 if isinstance(src2, str) else self.li(4, src2)
        self.e(f"vop {op}.{dtype} {self.li(2, dst)}, {self.li(3, src1)}, {s2}"
               + (f", src2={mode}" if mode else ""))

    def mxu_setup(self, m, k, n, sa, sb, sc):
        self.e(f"mxu.shape {self.li(0, m)}, {self.li(1, k)}, {self.li(2, n)}")
        self.e(f"mxu.stride {self.li(0, sa)}, {self.li(1, sb)}, {self.li(2, sc)}")

    def matmul(self, a, b, c, first, last):
        flags = ("" if first else ", accumulate") + (", emit" if last else "")
        self.e(f"matmul {self.li(0, a)}, {self.li(1, b)}, {self.li(2, c)}, 0{flags}")

    # -- the program -----------------------------------------------------------------------

    def program(self):
        e, p, sem = self.e, self.p, self.sem
        e.comment(f"encoder: {p.blocks} blocks, width {p.D}, {p.heads} heads, mlp {p.M}, "
                  f"seq {p.seq} (stride {p.stride}), {p.G} sequences a tile")
        self._load_constants()
        e.li(self.tile, 0)
        e(f"signal mxu, {sem['st']}")           # no store in flight before the first tile
        self._fetch()
        e.place("tile")
        self.forget()
        self._embed()
        self._blocks()
        self._head()
        e(f"addi {self.tile}, {self.tile}, 1")
        self.forget()
        e(f"bne {self.tile}, {self.li(0, -(-p.batch // p.G))}, tile")
        e(f"wait mxu, {sem['st']}")
        e("halt")
        return e.text()

    def _load_constants(self):
        """Weights, vectors, the embedding bias (replicated over a half's sequences by an
        HBM stride of 0) and the mask, loaded once; the K^T buffers zeroed (their padding
        keys stay zero) and the row after the last of QKV (the last value chunk's P V reads
        a padding key's row there, whose P is 0)."""
        e, p, t, sem = self.e, self.p, self.t, self.sem
        self.forget()
        e.dma_shape(p.w_bytes, [], t)
        e(f"dma.load {self.li(0, self.base['W'])}, {self.li(1, p.vmem['W'])}, {sem['w']}")
        self.forget()
        e.dma_shape(p.v_bytes, [], t)
        e(f"dma.load {self.li(0, self.base['V'])}, {self.li(1, p.vmem['V'])}, {sem['v']}")
        chunk = p.seq * p.rb
        self.forget()
        e.dma_shape(chunk, [(p.nd, chunk, p.Th * p.rb), (p.gh, 0, chunk)], t)
        e(f"dma.load {self.li(0, self.base['E'])}, {self.li(1, p.vmem['E'])}, {sem['v']}")
        if p.masked:
            self.forget()
            e.dma_shape(p.span * p.rb, [(p.seq, 0, p.span * p.rb)], t)
            e(f"dma.load {self.li(0, self.base['MASK'])}, {self.li(1, p.vmem['MASK'])}, "
              f"{sem['v']}")
        self.forget()
        for self.half in range(p.halves):
            self.cfg(p.sizes[f"KT{self.half}"] // p.rb)
            self.vop("mul", "int32", self.a("KT"), self.a("KT"), mode="scalar")
            self.cfg(p.L)
            tail = self.a("QKV", 3 * p.nd)
            self.vop("mul", "int32", tail, tail, mode="scalar")
        e(f"wait mxu, {sem['w']}")
        for _ in range(3 if p.masked else 2):
            e(f"wait vpu, {sem['v']}")

    def _fetch(self):
        """DMA load of tile ``tile``'s sequences (``cnt`` of them: fewer in the last tile)
        into IN, signalling the MXU (whose wait is the tile's embedding's)."""
        e, p, t = self.e, self.p, self.t
        self.forget()
        e.tile_size(self.cnt, self.tile, p.G, p.batch, t[0])
        e.dma_shape(p.ldx, [(p.seq, p.ldx, p.x_stride),
                            (self.cnt, p.seq * p.ldx, p.seq * p.x_stride)],
                    (t[0], t[1], t[2]))
        e.affine(self.hin, self.base["IN"], [(self.tile, p.G * p.seq * p.ldx)], t[0])
        self.forget()
        e(f"dma.load {self.hin}, {self.li(1, p.vmem['IN'])}, none")
        e(f"signal dma, {self.sem['dma_mxu']}")

    def _embed(self):
        """X = IN @ embed_w + E (per position); then the next tile's input is fetched."""
        p = self.p
        self.e(f"wait mxu, {self.sem['dma_mxu']}")
        self.mxu_setup(p.Th, p.kin, p.L, p.x_stride, p.weights["embed_w"][2], p.rb)
        for self.half in range(p.halves):
            for c in range(p.nd):
                b, _ = p.weight("embed_w", 0, c)
                self.matmul(self.a("IN"), b, self.a("X", c), True, True)
        self.dep("mxu", "dma")
        e = self.e
        e(f"addi {self.tile}, {self.tile}, 1")
        skip = e.label("last_tile")
        e(f"beq {self.tile}, {self.li(0, -(-p.batch // p.G))}, {skip}")
        self._fetch()
        e.place(skip)
        self.forget()
        e(f"addi {self.tile}, {self.tile}, -1")
        self.dep("mxu", "vpu")
        self.cfg(p.nd * p.Th)
        for self.half in range(p.halves):
            self.vop("add", "fp32", self.a("X"), self.a("X"), self.a("E"))

    def _gemm(self, src, weight, dst, nk, nn):
        """``dst = src @ weight`` on chunk-major buffers: ``nn`` output chunks, each
        accumulated over ``nk`` bfloat16 input chunks; a loop over the output chunks (its
        body the ``nk`` matmuls), so the program's length does not grow with the widths."""
        e, p = self.e, self.p
        ra, rb, rb0, rc, rn = self.t
        _, stride = p.weight(weight, 0, 0)
        self.mxu_setup(p.Th, p.L, p.L, p.rb, stride, p.rb)
        self.forget()
        e.li(rb0, p.weight(weight, 0, 0)[0])
        if weight.startswith("b0."):
            e(f"add {rb0}, {rb0}, {self.rw}")
        e.li(rc, self.a(dst))
        e.li(rn, nn)
        loop = e.label("gemm")
        e.place(loop)
        e.li(ra, self.a(src))
        e(f"addi {rb}, {rb0}, 0")
        for k in range(nk):
            if k:
                e(f"addi {ra}, {ra}, {self.a(src, 1) - self.a(src)}")
                e(f"addi {rb}, {rb}, {p.L * stride}")
            flags = ("" if k == 0 else ", accumulate") + (", emit" if k == nk - 1 else "")
            e(f"matmul {ra}, {rb}, {rc}, 0{flags}")
        e(f"addi {rb0}, {rb0}, {p.L * 2}")
        e(f"addi {rc}, {rc}, {self.a(dst, 1) - self.a(dst)}")
        e(f"addi {rn}, {rn}, -1")
        e(f"bne {rn}, r0, {loop}")
        self.forget()

    def vector(self, name, c=0):
        """Chunk ``c`` of vector ``name``: an address, or in a block (``b0.`` names) a
        scratch register holding it plus ``rv``."""
        address = self.p.vector(name, c)
        return self._plus(4, address, self.rv) if name.startswith("b0.") else address

    def block(self, rows, span=1):
        """A VpuOps Block of ``rows`` logical rows of ``span`` VMEM rows, its registers
        scratch registers 3 and 4."""
        self.li(3, rows)
        self.li(4, rows * span)
        return Block(self.t[3], self.t[4], span, "fp32")

    def _bias(self, buf, name, chunks):
        self.cfg(self.p.Th)
        for c in range(chunks):
            self.vop("add", "fp32", self.a(buf, c), self.a(buf, c), self.vector(name, c),
                     mode="broadcast")

    def _cast(self, buf, chunks):
        self.cfg(chunks * self.p.Th)
        self.e(f"vcast f32_bf16 {self.li(2, self.a(buf))}, {self.li(3, self.a(buf))}")

    def _chunk_sum(self, dst, src, chunks):
        """Row ``r`` of ``dst`` (one chunk) = the sum over the chunks of row ``r`` of
        ``src``, elementwise (chunk 0 + chunk 1 + ...)."""
        p = self.p
        self.cfg(p.Th)
        if chunks == 1:
            self.vop("copy", "fp32", self.a(dst, 0), self.a(src, 0))
        else:
            self.vop("add", "fp32", self.a(dst, 0), self.a(src, 0), self.a(src, 1))
        for c in range(2, chunks):
            self.vop("add", "fp32", self.a(dst, 0), self.a(dst, 0), self.a(src, c))

    def _per_token(self, op, dst, src, chunks):
        """``dst = src op stat`` chunk by chunk, each token's statistic (ST) over its row."""
        self.cfg(self.p.Th, 1)
        for c in range(chunks):
            self.vop(op, "fp32", self.a(dst, c), self.a(src, c), self.a("ST"), mode="stat")

    def _layernorm(self, gamma, beta):
        """H = LN(X) * gamma + beta, cast to bfloat16 in place (fp32 statistics: the sum of
        the chunks elementwise, then ``vred sum`` of that row; Y is the temporary)."""
        p, ops = self.p, self.ops
        st = self.a("ST")
        self._chunk_sum("Y", "X", p.nd)
        self.cfg(p.Th)
        ops.vred("sum", "fp32", st, self.a("Y", 0), 1)
        self.cfg(p.Th, _f32(1 / p.D))
        self.vop("mul", "fp32", st, st, mode="scalar")
        self._per_token("sub", "H", "X", p.nd)
        self.cfg(p.nd * p.Th)
        self.vop("mul", "fp32", self.a("Y"), self.a("H"), self.a("H"))
        self._chunk_sum("Y", "Y", p.nd)
        self.cfg(p.Th)
        ops.vred("sum", "fp32", st, self.a("Y", 0), 1)
        self.cfg(p.Th, _f32(1 / p.D))
        self.vop("mul", "fp32", st, st, mode="scalar")
        self.cfg(p.Th, _f32(self.eps))
        self.vop("add", "fp32", st, st, mode="scalar")
        self.cfg(p.Th)
        self.vop("rsqrt", "fp32", st, st)
        self._per_token("mul", "H", "H", p.nd)
        self.cfg(p.Th)
        for c in range(p.nd):
            h = self.a("H", c)
            self.vop("mul", "fp32", h, h, self.vector(gamma, c), mode="broadcast")
            self.vop("add", "fp32", h, h, self.vector(beta, c), mode="broadcast")
        self._cast("H", p.nd)

    def _interleave(self, phases):
        """The phases of both halves (``phases(half)``: a list of (first engine, last
        engine, emitter)), half 1 a phase behind half 0, so that while one half's work is on
        the MXU the other's is on the VPU. A phase whose next runs on the other engine
        signals it as soon as it is emitted (so the signal follows only its own work in its
        queue), and the next waits for it; each half has its own semaphores for this, so
        the k-th wait of each pairs with its k-th signal. Both halves start and end on the
        VPU."""
        p = self.p
        lists = [phases(h) for h in range(p.halves)]
        n = len(lists[0])
        order = [(h, i - h) for i in range(n + p.halves - 1)
                 for h in range(p.halves) if 0 <= i - h < n]
        for h, i in order:
            self.half = h
            first, end, emit = lists[h][i]
            before = lists[h][i - 1][1] if i else "vpu"
            if first != before:
                self.e(f"wait {first}, {self.sem_of(before, first)}")
            emit()
            after = lists[h][i + 1][0] if i + 1 < n else "vpu"
            if after != end:
                self.e(f"signal {end}, {self.sem_of(end, after)}")

    def _blocks(self):
        """The blocks, a loop: block ``i``'s weights and vectors lie ``i`` block strides
        after block 0's (``rw``, ``rv``)."""
        e, p = self.e, self.p
        e.li(self.rw, 0)
        e.li(self.rv, 0)
        loop = e.label("block")
        e.place(loop)
        self.forget()
        self._interleave(self._block)
        e(f"addi {self.rw}, {self.rw}, {p.block_w}")
        e(f"addi {self.rv}, {self.rv}, {p.block_v}")
        self.forget()
        e(f"bne {self.rw}, {self.li(0, p.blocks * p.block_w)}, {loop}")

    def _block(self, half):
        """The phases of one block (its parameters named as block 0's) on tile half
        ``half``."""
        p = self.p
        return [
            ("vpu", "vpu", lambda: self._layernorm("b0.ln1_g", "b0.ln1_b")),
            ("mxu", "mxu", lambda: self._gemm("H", "b0.qkv_w", "QKV", p.nd, 3 * p.nd)),
            ("vpu", "vpu", self._keys),
            ("mxu", "mxu", self._attention),
            ("vpu", "vpu", lambda: self._cast("O", p.nd)),
            ("mxu", "mxu", lambda: self._gemm("O", "b0.proj_w", "Y", p.nd, p.nd)),
            ("vpu", "vpu", lambda: (self._residual("b0.proj_b"),
                                    self._layernorm("b0.ln2_g", "b0.ln2_b"))),
            ("mxu", "mxu", lambda: self._gemm("H", "b0.fc1_w", "MH", p.nd, p.nm)),
            ("vpu", "vpu", self._gelu),
            ("mxu", "mxu", lambda: self._gemm("MH", "b0.fc2_w", "Y", p.nm, p.nd)),
            ("vpu", "vpu", lambda: self._residual("b0.fc2_b")),
        ]

    def _keys(self):
        """QKV's bias and cast; each sequence's key chunks copied to whole vtrans tiles of
        KT and transposed there in place."""
        e, p = self.e, self.p
        self._bias("QKV", "b0.qkv_b", 3 * p.nd)
        self._cast("QKV", 3 * p.nd)
        self.cfg(p.seq)
        for c in range(p.nd):
            for g in range(p.gh):
                self.vop("copy", "int32", p.kt(self.half, c, g),
                         self.a("QKV", p.nd + c, g * p.seq))
        self.cfg(p.gh * p.stride // p.n)
        for c in range(p.nd):
            kt = p.kt(self.half, c, 0)
            e(f"vtrans bf16 {self.li(2, kt)}, {self.li(3, kt)}")

    def _gelu(self):
        p = self.p
        self._bias("MH", "b0.fc1_b", p.nm)
        self.ops.gelu_tanh(self.block(p.nm * p.Th), self.a("MH"), self.a("GT"))
        self._cast("MH", p.nm)

    def _residual(self, bias):
        """X += Y + bias."""
        p = self.p
        self._bias("Y", bias, p.nd)
        self.cfg(p.nd * p.Th)
        self.vop("add", "fp32", self.a("X"), self.a("X"), self.a("Y"))

    def _attention(self):
        """Every (sequence, head) of the half, a loop over the sequences (``off`` its first
        row's offset, ``koff`` its keys' in KT) unrolled over the heads: S = Q K^T into the
        score buffer ``sbuf`` (S0 and S1 by turns), softmax and cast on the VPU, then the P V
        of the pair before, so the MXU computes the next S while the VPU works on this one."""
        e, p = self.e, self.p
        s0, s1 = self.a("S0"), self.a("S1")
        e.li(self.off, 0)
        e.li(self.koff, 0)
        e.li(self.sbuf, s0)
        loop = e.label("sequence")
        e.place(loop)
        self.forget()
        for h in range(p.heads):
            self._scores(h)
            self._softmax()
            first = e.label("first_pair")
            if h == 0:
                e(f"beq {self.off}, r0, {first}")
            self._pv((h - 1) % p.heads, h == 0)
            e.place(first)
            self.forget()
            e.toggle(self.sbuf, s0, s1, self.t[0])
        e(f"addi {self.off}, {self.off}, {p.seq * p.rb}")
        e(f"addi {self.koff}, {self.koff}, {p.stride * p.rb}")
        e(f"bne {self.off}, {self.li(0, p.Th * p.rb)}, {loop}")
        self._pv(p.heads - 1, True)
        self.forget()

    def _plus(self, k, value, reg):
        """Scratch register ``k`` = ``value + reg``."""
        self.e.li(self.t[k], value)
        self.e(f"add {self.t[k]}, {self.t[k]}, {reg}")
        self.known.pop(k, None)
        return self.t[k]

    def _scores(self, h):
        e, p = self.e, self.p
        self.mxu_setup(p.seq, p.L, p.n, p.rb, p.rb, p.span * p.rb)
        for tile in range(p.stride // p.n):
            for c in range(p.hc):
                q = self._plus(0, self.a("QKV", h * p.hc + c), self.off)
                kt = self._plus(1, p.kt(self.half, h * p.hc + c, 0, tile * p.n), self.koff)
                s = self._plus(2, tile * 2 * p.rb, self.sbuf)
                flags = ("" if c == 0 else ", accumulate") + (", emit" if c == p.hc - 1 else "")
                e(f"matmul {q}, {kt}, {s}, 0{flags}")
        self.dep("mxu", "vpu")

    def _softmax(self):
        p = self.p
        self.ops.softmax(self.block(p.seq, p.span), self.sbuf, self.a("SS"),
                         p.vmem["MASK"] if p.masked else None)
        self.cfg(p.seq * p.span)
        self.e(f"vcast f32_bf16 {self.sbuf}, {self.sbuf}")
        self.dep("vpu", "mxu")

    def _pv(self, h, previous):
        """O_h = P V_h of head ``h`` of the pair before: this sequence's, or with
        ``previous`` the sequence before's (``off - seq`` rows); its scores are in the other
        buffer (``S0 + S1 - sbuf``)."""
        e, p, t = self.e, self.p, self.t
        keys = -(-p.seq // p.L)                 # key chunks holding a real key
        self.mxu_setup(p.seq, p.L, p.L, p.span * p.rb, p.rb, p.rb)
        self.forget()
        off = t[3]
        e(f"addi {off}, {self.off}, {-p.seq * p.rb if previous else 0}")
        e.li(t[4], self.a("S0") + self.a("S1"))
        e(f"sub {t[4]}, {t[4]}, {self.sbuf}")
        for c in range(p.hc):
            o = self._plus(2, self.a("O", h * p.hc + c), off)
            for kc in range(keys):
                v = self._plus(1, self.a("QKV", 2 * p.nd + h * p.hc + c, kc * p.L), off)
                e(f"addi {t[0]}, {t[4]}, {kc * p.rb}")
                flags = ("" if kc == 0 else ", accumulate") + (", emit" if kc == keys - 1
                                                               else "")
                e(f"matmul {t[0]}, {v}, {o}, 0{flags}")
        self.forget()

    def _head(self):
        """logits = LN(X) @ head_w + head_b per half; row 0 of each sequence stored."""
        e, p, t, sem = self.e, self.p, self.t, self.sem

        def gemm():
            if self.half == 0:
                e(f"wait mxu, {sem['st']}")     # the previous tile's logits are stored
            self._gemm("H", "head_w", "LG", p.nd, p.nc)

        self._interleave(lambda half: [
            ("vpu", "vpu", lambda: self._layernorm("ln_g", "ln_b")),
            ("mxu", "mxu", gemm),
            ("vpu", "vpu", lambda: self._bias("LG", "head_b", p.nc))])
        self.dep("vpu", "dma")
        self.forget()
        e.tile_size(self.cnt, self.tile, p.G, p.batch, t[0])
        e.dma_shape(p.rb, [(p.nc, p.rb, p.T * p.rb), (self.cnt, p.ldo, p.seq * p.rb)],
                    (t[0], t[1], t[2]))
        e.affine(self.hout, self.base["OUT"], [(self.tile, p.G * p.ldo)], t[0])
        self.forget()
        e(f"dma.store {self.hout}, {self.li(1, p.vmem['LG'])}, {sem['st']}")


def _f32(value):
    return int(np.array(value, np.float32).view(np.uint32))


def _shape_of(params, name, shape):
    if name not in params:
        raise CompileError(f"params must hold {name!r} of shape {shape}")
    a = np.asarray(params[name])
    if a.shape != shape:
        raise CompileError(f"params[{name!r}] must have shape {shape}, got {a.shape}")
    if not np.isfinite(a).all():
        raise CompileError(f"params[{name!r}] must be finite")
    return a


def encoder(config, params, *, seq, heads, batch, eps=1e-5, group=None):
    """A program running the encoder ``params`` (name -> array, :func:`block_names`:
    ``embed_w`` (F x D), ``embed_b`` (seq x D, a per-position bias), per block ``b{i}.`` LN
    scales and shifts (D), ``qkv_w`` (D x 3D, columns: the queries of every head, then the
    keys, then the values, a head's ``D / heads`` columns together), ``qkv_b``, ``proj_w``
    (D x D), ``proj_b``, ``fc1_w`` (D x M), ``fc1_b``, ``fc2_w`` (M x D), ``fc2_b``, then
    ``ln_g``, ``ln_b``, ``head_w`` (D x C), ``head_b``) on ``batch`` sequences of ``seq``
    tokens of F features: input ``X`` (batch*seq x F, bfloat16, sequence after sequence),
    output ``Y`` (batch x C, float32: the logits of each sequence's token 0). ``group``
    sequences go through VMEM at a time, in two halves when it is even (default: the most
    that fit, even, at most the batch rounded up to even)."""
    if not isinstance(config, TensorCoreConfig):
        raise CompileError(f"config must be a TensorCoreConfig, got {config!r}")
    if config.mxu.fmt != "bfloat16" or config.mxu.output != "float32":
        raise CompileError(f"config.mxu must be bfloat16 with float32 results for an "
                           f"encoder, got {config.mxu.fmt} -> {config.mxu.output}")
    if not config.vmath or not config.vtrans:
        raise CompileError("config.vmath and config.vtrans must be True for an encoder (its "
                           f"softmax, LN and GELU, and K^T); got vmath={config.vmath}, "
                           f"vtrans={config.vtrans}")
    _check_dim("seq", seq)
    _check_dim("batch", batch)
    _check_dim("heads", heads)
    if group is not None:
        _check_dim("group", group)
    if not isinstance(params, dict) or "embed_w" not in params:
        raise CompileError("params must be a dict of arrays holding 'embed_w'")
    ew = np.asarray(params["embed_w"])
    if ew.ndim != 2:
        raise CompileError(f"params['embed_w'] must be 2-D (features x width), got {ew.shape}")
    features, width = ew.shape
    blocks = sum(1 for name in params if name.endswith(".qkv_w"))
    if blocks < 1:
        raise CompileError("params must hold at least one block (b0.qkv_w ...)")
    mlp = np.asarray(params.get("b0.fc1_w", np.zeros((0, 0)))).shape[-1]
    classes = np.asarray(params.get("head_w", np.zeros((0, 0)))).shape[-1]
    lanes = config.row_bytes // 4
    for name, value in (("width", width), ("mlp", mlp)):
        if value < 1 or value % lanes:
            raise CompileError(f"{name} must be a multiple of {lanes} (row_bytes / 4 lanes), "
                               f"got {value}")
    if width % heads or (width // heads) % lanes:
        raise CompileError(f"heads must divide width {width} into heads of a multiple of "
                           f"{lanes} columns, got {heads}")
    if features > 65535 or classes < 1:
        raise CompileError(f"embed_w must have 1..65535 rows and head_w at least one column, "
                           f"got {features} and {classes}")
    shapes = {"embed_w": (features, width), "embed_b": (seq, width), "ln_g": (width,),
              "ln_b": (width,), "head_w": (width, classes), "head_b": (classes,)}
    for i in range(blocks):
        for name in _BLOCK:
            shapes[f"b{i}.{name}"] = {
                "qkv_w": (width, 3 * width), "qkv_b": (3 * width,), "proj_w": (width, width),
                "fc1_w": (width, mlp), "fc1_b": (mlp,), "fc2_w": (mlp, width)}.get(
                    name, (width,))
    unknown = sorted(set(params) - set(shapes))
    if unknown:
        raise CompileError(f"params has unknown names {unknown}; allowed: "
                           f"{', '.join(block_names(blocks))}")
    checked = {name: _shape_of(params, name, shape) for name, shape in shapes.items()}

    def plan(g):
        return EncoderPlan(config, seq=seq, features=features, width=width, heads=heads,
                           mlp=mlp, blocks=blocks, classes=classes, batch=batch, group=g)

    if config.semaphores < len(_SEMS):
        raise CompileError(f"config.semaphores must be at least {len(_SEMS)} for an "
                           f"encoder, got {config.semaphores}")
    if group is None:       # two halves of as many sequences as fit, or one sequence
        group = 1
        while 1 < batch and group // 2 < -(-batch // 2) and plan(2 * (group // 2 + 1)).fits():
            group = 2 * (group // 2 + 1)
    p = plan(group)
    if not p.fits():
        raise CompileError(f"an encoder of width {width}, mlp {mlp}, {blocks} blocks and seq "
                           f"{seq} (stride {p.stride}) needs {p.vmem_used} bytes of VMEM for "
                           f"{group} sequence(s) a tile; config.vmem_bytes is "
                           f"{config.vmem_bytes}")
    return _program(p, checked, eps)


def _program(p, checked, eps):
    config, batch, classes, features = p.config, p.batch, p.classes, p.kin
    w, v, e, mask = _constants(p, checked)
    base, at = {}, 0
    for name, data in (("W", w), ("V", v), ("E", e), ("MASK", mask)):
        base[name] = at
        at = _roundup(at + len(data), _HBM_ALIGN)
    x = Tensor(at, (batch * p.seq, features), "bfloat16", p.ldx)
    y = Tensor(_roundup(x.address + x.nbytes, _HBM_ALIGN), (batch, classes), "float32",
               p.ldo)
    base.update(IN=x.address, OUT=y.address)
    sem = {name: f"s{k}" for k, name in enumerate(_SEMS)}
    text = _Code(p, base, sem, eps).program()
    words = _assemble_checked(config, text)
    hbm = {base["W"]: w, base["V"]: v, base["E"]: e}
    if p.masked:
        hbm[base["MASK"]] = mask
    return Program(words=words, config=config,
                   hbm_capacity=_roundup(y.address + y.nbytes, _HBM_ALIGN), hbm=hbm,
                   inputs={"X": x}, outputs={"Y": y},
                   metadata={"kind": "encoder", "seq": p.seq, "stride": p.stride,
                             "features": features,
                             "width": p.D, "heads": p.heads, "mlp": p.M, "blocks": p.blocks,
                             "classes": classes, "batch": batch, "group": p.G,
                             "eps": eps, "vmem": p.vmem, "assembly": text})
