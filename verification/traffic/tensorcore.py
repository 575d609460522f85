"""Random TensorCore programs, generated from the ISA (hdl/tensorcore/isa.py): stimulus for
the benches, checked against the golden ISA simulator.

A program runs two independent *chains* of engine work, each in its own half of VMEM and
its own HBM region, with their instructions interleaved at random. A chain is a sequence of
DMA loads and stores with random 1- to 3-D shapes, VPU operations of every kind, dtype and
operand mode, and ``matmul`` commands, each step waiting for the previous one. A chain has one
semaphore per engine queue, and a step signals the semaphore of the queue its successor waits
in: every ``wait`` on a semaphore is then in that one queue, served in program order, so no
wait can take a count meant for an earlier one, and the program has one result whatever the
timing. Scalar arithmetic and a counted loop run between the steps. Each chain starts by
loading its whole VMEM half from HBM, and ``matmul`` never accumulates onto earlier sums, so
nothing depends on what VMEM or the MXU's accumulator held before the program. What the
program leaves in HBM, its registers and its semaphores are its result.
"""

from spec.isa import VOPS, Cast, DType, Op, Queue, ROp, Src2, encode
from verification.models.vpu import tile_rows

__all__ = ["random_program"]


class _Chain:
    """One chain's VMEM half, HBM region, semaphores and the steps it has made."""

    def __init__(self, cfg, rng, vmem_base, hbm_base, hbm_bytes, sems):
        self.cfg, self.rng = cfg, rng
        self.vmem_base, self.vmem_bytes = vmem_base, cfg.vmem_bytes // 2
        self.hbm_base, self.hbm_bytes = hbm_base, hbm_bytes
        self.sems = sems            # queue -> this chain's semaphore for waits in it
        self.first = True
        self.next_queue = None      # the queue of the step after the one being made

    def _wait(self, queue):
        """The wait for the previous step (none before the first)."""
        first, self.first = self.first, False
        return [] if first else [encode(Op.WAIT, queue=queue, sem=self.sems[queue])]

    def _sem(self):
        """The semaphore the step being made signals: its successor's queue's."""
        return self.sems[self.next_queue]

    def _vrow(self, rows):
        """A random row-aligned VMEM address with ``rows`` rows after it in this half."""
        rb = self.cfg.row_bytes
        return self.vmem_base + rb * self.rng.randrange(self.vmem_bytes // rb - rows + 1)

    def _step(self, queue, body):
        """Wait for the previous step, then ``body`` (instructions), then signal."""
        return (self._wait(queue) + body
                + [encode(Op.SIGNAL, queue=queue, sem=self._sem())])

    def fill(self):
        """Load the chain's whole VMEM half from the start of its HBM region."""
        beat = self.cfg.beat_bytes
        return self._transfer(Op.DMA_LOAD, self.hbm_base, self.vmem_base, beat,
                              [(self.vmem_bytes // beat, beat, beat), (1, 0, 0), (1, 0, 0)])

    def _transfer(self, op, hbm, vmem, run, dims):
        body = [_li(1, hbm), _li(2, vmem), _li(3, run), encode(Op.DMA_SHAPE, dim=0, b=3)]
        for d, (count, hstride, vstride) in enumerate(dims):
            body += [_li(3, count), _li(4, hstride), _li(5, vstride),
                     encode(Op.DMA_SHAPE, dim=d + 1, b=3, c=4, d=5)]
        return self._wait(Queue.DMA) + body + [encode(op, b=1, c=2, sem=self._sem())]

    def dma(self, store):
        cfg, rng = self.cfg, self.rng
        beat = cfg.beat_bytes
        run = beat * rng.randint(1, max(1, min(4, cfg.row_bytes * 2 // beat)))
        counts = [rng.randint(1, 3) for _ in range(3)]
        rows = counts[0] * counts[1] * counts[2]
        vstride = [run * k for k in (1, counts[0], counts[0] * counts[1])]
        hstride = [beat * rng.randint(run // beat, run // beat + 2) for _ in range(3)]
        hspan = sum((c - 1) * h for c, h in zip(counts, hstride, strict=True)) + run
        hbm = self.hbm_base + beat * rng.randrange((self.hbm_bytes - hspan) // beat)
        vspan = rows * run
        vmem = self.vmem_base + beat * rng.randrange((self.vmem_bytes - vspan) // beat)
        return self._transfer(Op.DMA_STORE if store else Op.DMA_LOAD, hbm, vmem, run,
                              list(zip(counts, hstride, vstride, strict=True)))

    def _dst(self, rows, sources):
        """A destination of ``rows`` rows that overlaps each source (``(base, rows)``) only
        from below (docs/tensorcore.md): a random one, moved down onto the first source it
        would overlap from above."""
        rb = self.cfg.row_bytes
        dst = self._vrow(rows)
        for base, n in sources:
            if base < dst < base + n * rb and rows:
                dst = base
        return dst

    def vpu(self):
        rng = self.rng
        count = rng.randint(0, 4)
        kind = rng.choice([Op.VOP, Op.VOP, Op.VCAST, Op.VRED]
                          + ([Op.VTRANS] if self.cfg.vtrans else []))
        body = [_li(6, count), _li(7, rng.getrandbits(32)), _li(8, rng.randrange(64)),
                encode(Op.VPU_CFG, b=6, c=7, d=8)]
        if kind == Op.VOP:
            mode = rng.choice(list(Src2))
            group = 1
            if mode == Src2.STAT:       # count groups of `scalar` rows, a statistic row each
                group = rng.randint(1, 3)
                body[1] = _li(7, group)
            rows = count * group
            src1 = self._vrow(rows)
            rows2 = count if mode in (Src2.ROWS, Src2.STAT) else 1
            src2 = self._vrow(rows2)
            sources = [(src1, rows)] + ([(src2, rows2)] if mode == Src2.ROWS else [])
            dst = self._dst(rows, sources)
            rb = self.cfg.row_bytes
            while mode == Src2.STAT and dst < src2 + rows2 * rb and src2 < dst + rows * rb:
                dst = self._dst(rows, sources)      # statistic rows are never overwritten
            op = rng.choice([v.op for v in VOPS.values()
                             if self.cfg.vmath or v.latency != "vmath"])
            body += [_li(1, dst), _li(2, src1), _li(3, src2),
                     encode(Op.VOP, vop=op, dtype=rng.choice(VOPS[op].dtypes),
                            b=1, c=2, d=3, src2=mode, relu=rng.randint(0, 1))]
        elif kind == Op.VTRANS:      # count tiles of a row's elements in rows, if they fit
            dtype = rng.choice(list(DType))
            rows = count * tile_rows(dtype, self.cfg.row_bytes)
            if rows > self.vmem_bytes // self.cfg.row_bytes:
                rows, body[0] = 0, _li(6, 0)
            src = self._vrow(rows)
            body += [_li(1, self._dst(rows, [(src, rows)])), _li(2, src),
                     encode(Op.VTRANS, dtype=dtype, b=1, c=2)]
        elif kind == Op.VCAST:
            src = self._vrow(count)
            body += [_li(1, self._dst(count, [(src, count)])), _li(2, src),
                     encode(Op.VCAST, cast=rng.choice(list(Cast)), b=1, c=2)]
        else:
            span = rng.randint(1, 3)
            src = self._vrow(count * span)
            body += [_li(1, self._dst(count, [(src, count * span)])), _li(2, src),
                     _li(3, span), encode(Op.VRED, rop=rng.choice(list(ROp)),
                                          dtype=rng.choice(list(DType)), b=1, c=2, d=3)]
        return self._step(Queue.VPU, body)

    def matmul(self):
        cfg, rng = self.cfg, self.rng
        R, C = cfg.mxu.rows, cfg.mxu.cols
        m, k, n = rng.randint(1, 2 * R + 1), rng.randint(1, 2 * R + 1), rng.randint(1, 2 * C)
        av, bv, cv = R * cfg.esize, C * cfg.esize, C * cfg.osize
        a_stride = av * -(-k // R)
        b_stride = bv * -(-n // C)
        c_stride = cv * -(-n // C)
        third = self.vmem_bytes // 3 // cfg.row_bytes * cfg.row_bytes
        a = self.vmem_base + av * rng.randrange(max(1, (third - m * a_stride) // av))
        b = self.vmem_base + third + bv * rng.randrange(max(1, (third - k * b_stride) // bv))
        c = self.vmem_base + 2 * third + cv * rng.randrange(max(1, (third - m * c_stride) // cv))
        acc = rng.randrange(cfg.mxu.acc_depth - m * -(-n // C) + 1)
        body = [_li(1, m), _li(2, k), _li(3, n), encode(Op.MXU_SHAPE, b=1, c=2, d=3),
                _li(1, a_stride), _li(2, b_stride), _li(3, c_stride),
                encode(Op.MXU_STRIDE, b=1, c=2, d=3), _li(1, a), _li(2, b), _li(3, c),
                encode(Op.MATMUL, b=1, c=2, d=3, acc_addr=acc, emit=1)]
        return self._step(Queue.MXU, body)


def _li(reg, value):
    return encode(Op.LI, a=reg, imm32=value & 0xFFFFFFFF)


def _scalar(rng):
    """Random arithmetic on r11..r15 and a short counted loop on r10."""
    words = []
    for _ in range(rng.randint(1, 3)):
        op = rng.choice([Op.ADD, Op.SUB, Op.MUL, Op.ADDI, Op.SLLI, Op.SRLI, Op.LI])
        a, b, c = (rng.randint(11, 15) for _ in range(3))
        if op in (Op.ADD, Op.SUB, Op.MUL):
            words.append(encode(op, a=a, b=b, c=c))
        elif op in (Op.SLLI, Op.SRLI):
            words.append(encode(op, a=a, b=b, shamt=rng.randrange(32)))
        else:
            fields = {"a": a, "imm32": rng.getrandbits(32)}
            if op == Op.ADDI:
                fields["b"] = b
            words.append(encode(op, **fields))
    return words


def random_program(cfg, rng, *, steps=8, hbm_bytes=1 << 16):
    """``(words, image, regions)``: a random program for TensorCoreConfig ``cfg``, the HBM
    image it starts from (address -> bytes) and the HBM ranges ``(address, length)`` it may
    change; ``rng`` a ``random.Random``."""
    half = hbm_bytes // 2
    queues = (Queue.DMA, Queue.MXU, Queue.VPU)
    chains = [_Chain(cfg, rng, 0, 0, half, dict(zip(queues, (0, 1, 2), strict=True))),
              _Chain(cfg, rng, cfg.vmem_bytes // 2, half, half,
                     dict(zip(queues, (3, 4, 5), strict=True)))]
    image = {0: bytes(rng.getrandbits(8) for _ in range(hbm_bytes))}
    kinds = {"load": (Queue.DMA, lambda c: c.dma(False)), "store": (Queue.DMA,
                                                                    lambda c: c.dma(True)),
             "vpu": (Queue.VPU, _Chain.vpu), "matmul": (Queue.MXU, _Chain.matmul)}
    pieces = []
    for chain in chains:
        plan = (["fill"] + [rng.choice(list(kinds)) for _ in range(steps)] + ["store"])
        queue_of = [Queue.DMA if k == "fill" else kinds[k][0] for k in plan]
        work = []
        for k, kind in enumerate(plan):
            chain.next_queue = queue_of[k + 1] if k + 1 < len(plan) else Queue.DMA
            work.append(chain.fill() if kind == "fill" else kinds[kind][1](chain))
        pieces.append(work)
    words = [_li(10, rng.randint(1, 3))]
    loop = len(words)
    words += _scalar(rng) + [encode(Op.ADDI, a=10, b=10, imm32=0xFFFFFFFF),
                             encode(Op.BNE, b=10, c=0, target=loop)]
    while any(pieces):
        chain = rng.choice([p for p in pieces if p])
        words += chain.pop(0) + _scalar(rng)
    for chain in chains:
        words.append(encode(Op.WAIT, queue=Queue.DMA, sem=chain.sems[Queue.DMA]))
    words.append(encode(Op.HALT))
    return words, image, [(0, hbm_bytes)]

