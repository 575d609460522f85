"""The TensorCore's matrix engine: the MXU, fed from VMEM and writing its results to VMEM.

A ``matmul`` command (operands already checked by the sequencer) goes to the MXU as an MXU
command and, as loop jobs, to three VMEM movers that follow the MXU's tile order
(docs/mxu.md): the weight reader streams, for each column tile ``j`` and k-tile ``i``, the
tile's real rows ``B[i*rows + r][j*cols ...]``; the activation reader streams, for each
``(j, i)``, the ``m`` vectors ``A[r][i*rows ...]``; the result writer puts each result row of
column tile ``j`` at ``C + r*c_stride + j*cols*osize``, writing only the lanes below ``n``.
Each mover reads (writes) one VMEM row per cycle when its port is granted, so the MXU runs at
its full rate when its operands sit in banks no other engine uses at the same time.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.mxu import GEMM_DIM_BITS

from ..lib.hier import Submodule
from ..lib.queue import Queue
from ..mxu.unit import MXU
from .vmem import place_vector, vector_slot
from .vmem_ports import vmem_read_signature, vmem_write_signature

__all__ = ["MatmulEngine", "matmul_command_layout", "VectorReader", "loop_layout"]

JOBS = 4        # matmul commands queued ahead in each mover
BUFFER = 4      # vectors a reader holds ahead of the MXU


def vmem_addr_bits(cfg):
    return (cfg.vmem_bytes - 1).bit_length()


def matmul_command_layout(cfg):
    """A checked ``matmul``: shape, accumulator use, VMEM byte addresses and row strides."""
    a = vmem_addr_bits(cfg)
    return data.StructLayout({
        "m": GEMM_DIM_BITS, "k": GEMM_DIM_BITS, "n": GEMM_DIM_BITS,
        "acc_addr": max(1, (cfg.mxu.acc_depth - 1).bit_length()), "accumulate": 1, "emit": 1,
        "a": a, "b": a, "c": a, "a_stride": a, "b_stride": a, "c_stride": a,
    })


def loop_layout(cfg):
    """A mover's job: three nested loops (outer, middle, inner) of VMEM byte addresses; the
    inner loop runs ``inner_last`` times on the middle loop's last iteration."""
    a = vmem_addr_bits(cfg)
    return data.StructLayout({
        "base": a, "outer": GEMM_DIM_BITS, "outer_stride": a, "mid": GEMM_DIM_BITS,
        "mid_stride": a, "inner": GEMM_DIM_BITS, "inner_stride": a,
        "inner_last": GEMM_DIM_BITS, "lanes_last": range(cfg.mxu.cols + 1),
    })


class _Loop:
    """The position in a job's nested loops, stepped one address at a time."""

    def __init__(self, m, cfg, job, name):
        a = vmem_addr_bits(cfg)
        self.addr = Signal(a, name=f"{name}_addr")
        self.mid_base = Signal(a, name=f"{name}_mid_base")
        self.outer_base = Signal(a, name=f"{name}_outer_base")
        self.i = Signal(GEMM_DIM_BITS, name=f"{name}_i")
        self.j = Signal(GEMM_DIM_BITS, name=f"{name}_j")
        self.r = Signal(GEMM_DIM_BITS, name=f"{name}_r")
        self.active = Signal(name=f"{name}_active")
        self.last_mid = self.i == job.mid - 1
        self.last_outer = self.j == job.outer - 1
        end = Mux(self.last_mid, job.inner_last, job.inner)
        self.last = (self.r == end - 1) & self.last_mid & self.last_outer
        self._m, self._job, self._end = m, job, end

    def start(self, job):
        """Statements starting ``job`` (the incoming one; it is latched at the same time)."""
        self._m.d.sync += [self._job.eq(job), self.active.eq(1), self.addr.eq(job.base),
                           self.mid_base.eq(job.base), self.outer_base.eq(job.base),
                           self.i.eq(0), self.j.eq(0), self.r.eq(0)]

    def step(self):
        """Statements moving to the next address (and ending the job after the last)."""
        m, job = self._m, self._job
        with m.If(self.r != self._end - 1):
            m.d.sync += [self.r.eq(self.r + 1), self.addr.eq(self.addr + job.inner_stride)]
        with m.Elif(~self.last_mid):
            nxt = self.mid_base + job.mid_stride
            m.d.sync += [self.r.eq(0), self.i.eq(self.i + 1), self.mid_base.eq(nxt),
                         self.addr.eq(nxt)]
        with m.Elif(~self.last_outer):
            nxt = self.outer_base + job.outer_stride
            m.d.sync += [self.r.eq(0), self.i.eq(0), self.j.eq(self.j + 1),
                         self.outer_base.eq(nxt), self.mid_base.eq(nxt), self.addr.eq(nxt)]
        with m.Else():
            m.d.sync += self.active.eq(0)


class VectorReader(wiring.Component):
    """Streams the ``vector_bytes``-byte vectors a job's loops address, one per cycle while
    the port is granted and ``o`` keeps up; up to ``JOBS`` jobs queued.

    Members
    -------
    job : In(stream of loop_layout)
    rd : Out(vmem_read_signature)
    o : Out(stream of 8 * vector_bytes)
    idle : Out(1)
    """

    def __init__(self, cfg, vector_bytes):
        self._cfg, self._bytes = cfg, vector_bytes
        super().__init__({
            "job": In(stream.Signature(loop_layout(cfg))),
            "rd": Out(vmem_read_signature(cfg)),
            "o": Out(stream.Signature(8 * vector_bytes)),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        m.submodules.jobs = jobs = Queue(loop_layout(cfg), JOBS)
        m.submodules.buffer = buf = Queue(8 * self._bytes, BUFFER)
        wiring.connect(m, wiring.flipped(self.job), jobs.i)
        wiring.connect(m, buf.o, wiring.flipped(self.o))
        job = Signal(loop_layout(cfg))
        loop = _Loop(m, cfg, job, "rd")
        m.d.comb += jobs.o.ready.eq(~loop.active)
        with m.If(jobs.o.valid & jobs.o.ready):
            loop.start(jobs.o.payload)
        inflight = Signal()
        offset = Signal(range(cfg.row_bytes))
        row_shift = (cfg.row_bytes - 1).bit_length()
        m.d.comb += [self.rd.valid.eq(loop.active & (buf.level + inflight < BUFFER)),
                     self.rd.addr.eq(loop.addr[row_shift:])]
        issue = self.rd.valid & self.rd.ready
        m.d.sync += [inflight.eq(issue), offset.eq(loop.addr)]
        with m.If(issue):
            loop.step()
        m.d.comb += [buf.i.valid.eq(inflight),
                     buf.i.payload.eq(vector_slot(self.rd.data, offset, self._bytes,
                                                  cfg.row_bytes)),
                     self.idle.eq(~loop.active & ~jobs.o.valid & ~inflight & ~buf.o.valid)]
        return m


class ResultWriter(wiring.Component):
    """Writes the MXU's result rows to VMEM as jobs say: column tile ``j``'s rows at
    ``base + j*outer_stride + r*inner_stride``, ``cols`` lanes (``lanes_last`` on the last
    tile) of ``osize`` bytes.

    Members
    -------
    job : In(stream of loop_layout)
    i : In(stream of result rows, ``cols * osize`` bytes)
    wr : Out(vmem_write_signature)
    idle : Out(1)
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "job": In(stream.Signature(loop_layout(cfg))),
            "i": In(stream.Signature(8 * cfg.mxu.cols * cfg.osize)),
            "wr": Out(vmem_write_signature(cfg)),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        vector = cfg.mxu.cols * cfg.osize
        m.submodules.jobs = jobs = Queue(loop_layout(cfg), JOBS)
        wiring.connect(m, wiring.flipped(self.job), jobs.i)
        job = Signal(loop_layout(cfg))
        loop = _Loop(m, cfg, job, "wr")
        m.d.comb += jobs.o.ready.eq(~loop.active)
        with m.If(jobs.o.valid & jobs.o.ready):
            loop.start(jobs.o.payload)
        lanes = Mux(loop.last_outer, job.lanes_last, cfg.mxu.cols)
        wdata, strb = place_vector(self.i.payload, loop.addr, vector, cfg.row_bytes,
                                   lanes * cfg.osize)
        m.d.comb += [
            self.wr.valid.eq(loop.active & self.i.valid),
            self.wr.addr.eq(loop.addr[(cfg.row_bytes - 1).bit_length():]),
            self.wr.data.eq(wdata), self.wr.strb.eq(strb),
            self.i.ready.eq(loop.active & self.wr.ready),
            self.idle.eq(~loop.active & ~jobs.o.valid),
        ]
        with m.If(self.wr.valid & self.wr.ready):
            loop.step()
        return m


class MatmulEngine(wiring.Component):
    """The MXU with its VMEM movers (see the module docstring).

    Members
    -------
    cmd : In(stream of matmul_command_layout)
    a_rd, w_rd : Out(vmem_read_signature)
    c_wr : Out(vmem_write_signature)
    idle : Out(1)
        No command queued or in progress, every result written.
    mxu_busy, mac, stall, weight_wait : Out
        The MXU not idle (a level), and its counters (docs/mxu.md).
    """

    def __init__(self, cfg):
        self._cfg = cfg
        self._mxu = MXU(cfg.mxu)
        self._mxu_module = Submodule(cfg.mxu.name, self._mxu, children=self._mxu.submodules)
        super().__init__({
            "cmd": In(stream.Signature(matmul_command_layout(cfg))),
            "a_rd": Out(vmem_read_signature(cfg)),
            "w_rd": Out(vmem_read_signature(cfg)),
            "c_wr": Out(vmem_write_signature(cfg)),
            "idle": Out(1), "mxu_busy": Out(1),
            "mac": Out(32), "stall": Out(32), "weight_wait": Out(32),
        })

    @property
    def submodules(self):
        return [self._mxu_module]

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        R, C = cfg.mxu.rows, cfg.mxu.cols
        mxu = self._mxu_module.instance(m, "mxu")
        m.submodules.a_reader = a_reader = VectorReader(cfg, R * cfg.esize)
        m.submodules.w_reader = w_reader = VectorReader(cfg, C * cfg.esize)
        m.submodules.writer = writer = ResultWriter(cfg)
        wiring.connect(m, a_reader.rd, wiring.flipped(self.a_rd))
        wiring.connect(m, w_reader.rd, wiring.flipped(self.w_rd))
        wiring.connect(m, writer.wr, wiring.flipped(self.c_wr))
        m.d.comb += [mxu.a.payload.eq(a_reader.o.payload), mxu.a.valid.eq(a_reader.o.valid),
                     a_reader.o.ready.eq(mxu.a.ready),
                     mxu.w.payload.eq(w_reader.o.payload), mxu.w.valid.eq(w_reader.o.valid),
                     w_reader.o.ready.eq(mxu.w.ready),
                     writer.i.payload.eq(mxu.c.payload.data), writer.i.valid.eq(mxu.c.valid),
                     mxu.c.ready.eq(writer.i.ready)]

        cmd = self.cmd.payload
        tiles_k = (cmd.k + (R - 1)) >> (R - 1).bit_length()
        tiles_n = (cmd.n + (C - 1)) >> (C - 1).bit_length()
        jobs = {
            a_reader.job: dict(base=cmd.a, outer=tiles_n, outer_stride=0, mid=tiles_k,
                               mid_stride=R * cfg.esize, inner=cmd.m, inner_stride=cmd.a_stride,
                               inner_last=cmd.m),
            w_reader.job: dict(base=cmd.b, outer=tiles_n, outer_stride=C * cfg.esize,
                               mid=tiles_k, mid_stride=cmd.b_stride << (R - 1).bit_length(),
                               inner=R, inner_stride=cmd.b_stride,
                               inner_last=cmd.k - ((tiles_k - 1) << (R - 1).bit_length())),
            writer.job: dict(base=cmd.c, outer=tiles_n, outer_stride=C * cfg.osize, mid=1,
                             mid_stride=0, inner=cmd.m, inner_stride=cmd.c_stride,
                             inner_last=cmd.m,
                             lanes_last=cmd.n - ((tiles_n - 1) << (C - 1).bit_length())),
        }
        room = mxu.cmd.ready & a_reader.job.ready & w_reader.job.ready & (
            writer.job.ready | ~cmd.emit)
        m.d.comb += [self.cmd.ready.eq(room),
                     mxu.cmd.valid.eq(self.cmd.valid & room),
                     mxu.cmd.payload.m.eq(cmd.m), mxu.cmd.payload.k.eq(cmd.k),
                     mxu.cmd.payload.n.eq(cmd.n), mxu.cmd.payload.acc_addr.eq(cmd.acc_addr),
                     mxu.cmd.payload.accumulate.eq(cmd.accumulate),
                     mxu.cmd.payload.emit.eq(cmd.emit)]
        for port, fields in jobs.items():
            m.d.comb += port.valid.eq(self.cmd.valid & room & (cmd.emit if port is writer.job
                                                                else 1))
            for name, value in fields.items():
                m.d.comb += getattr(port.payload, name).eq(value)
        m.d.comb += [
            self.mxu_busy.eq(~mxu.idle),
            self.idle.eq(mxu.idle & a_reader.idle & w_reader.idle & writer.idle),
            self.mac.eq(mxu.mac), self.stall.eq(mxu.stall),
            self.weight_wait.eq(mxu.weight_wait),
        ]
        return m
