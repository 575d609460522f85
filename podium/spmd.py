"""SPMD programs for a pod of TensorCores (docs/pod.md, "Programs on the pod"): the
collectives as library routines that a program calls, and the data-parallel training step of
a linear layer built from them.

Every chip runs the same program on its own VMEM. A routine returns assembly lines
(podium/asm.py); it uses the registers and semaphores it is given and leaves the others alone.
``all_reduce(...)`` and the other collectives wait for the data they reduce (a semaphore that
the producing queue signals) and signal a semaphore when the result is in VMEM; the program
waits on it before it reads the result.

``data_parallel_step(pod, d_in, batch, d_out)``: each chip holds its shard of a batch, the
layer's input ``X`` (``batch x d_in``, stored transposed) and the loss gradient of its output
``dY`` (``batch x d_out``), and the same weights ``W`` (``d_in x d_out``); the step computes
the local weight gradient ``G = X^T dY`` on the MXU, all-reduces it over the pod (int32 for
an int8 MXU, fp32 for the float formats, in the collectives' documented order: the 2-D
all-reduce on a 2-D pod, else ring all-reduces along each dimension in turn), and updates
``W = W - lr G`` on the VPU (int8: ``lr`` 1; float: ``lr`` any fp32), so every chip ends with
the same new weights.
"""

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from spec.config import ConfigError

__all__ = ["collective", "data_parallel_step", "DataParallelStep", "Buffer"]

_COLLECTIVES = ("reduce_scatter", "all_gather", "all_reduce", "all_to_all", "all_reduce_2d")
_FORMATS = ("int32", "fp32", "bf16")


def collective(op, *, address, length, fmt="fp32", dim=0, ready=None, done,
               registers=(14, 15)):
    """Assembly of collective ``op`` on the buffer at VMEM ``address`` (``length`` elements
    of ``fmt``; for ``all_to_all`` the table of one entry per chip), along torus dimension
    ``dim``: it waits for semaphore ``ready`` in the ICI queue first (when given), and
    signals ``done`` once the chip's part is complete. ``registers``: two scratch registers."""
    if op not in _COLLECTIVES:
        raise ConfigError("op", f"must be one of {', '.join(_COLLECTIVES)}, got {op!r}")
    if fmt not in _FORMATS:
        raise ConfigError("fmt", f"must be one of {', '.join(_FORMATS)}, got {fmt!r}")
    ra, rl = registers
    lines = [f"wait ici, s{ready}"] if ready is not None else []
    return lines + [f"li r{ra}, {address}", f"li r{rl}, {length}",
                    f"ici.coll {op}, {dim}, {fmt}, r{ra}, r{rl}", f"signal ici, s{done}"]


@dataclass(frozen=True)
class Buffer:
    """A matrix in every chip's VMEM: ``shape`` elements of ``dtype`` (a numpy type) from
    ``address``, row by row, rows ``stride`` bytes apart."""

    address: int
    shape: tuple
    dtype: type
    stride: int

    def pack(self, array):
        """``(address, bytes)`` that put ``array`` in place (row padding zero)."""
        array = np.asarray(array, dtype=self.dtype)
        if array.shape != tuple(self.shape):
            raise ValueError(f"array of shape {array.shape} for a buffer of {self.shape}")
        rows = np.zeros((self.shape[0], self.stride), np.uint8)
        raw = array.view(np.uint8).reshape(self.shape[0], -1)
        rows[:, :raw.shape[1]] = raw
        return self.address, rows.tobytes()

    def unpack(self, vmem):
        """The matrix held in a chip's ``vmem`` (bytes or a uint8 array)."""
        data = np.frombuffer(bytes(vmem[self.address:self.address
                                        + self.shape[0] * self.stride]), np.uint8)
        width = self.shape[1] * np.dtype(self.dtype).itemsize
        return data.reshape(self.shape[0], self.stride)[:, :width].copy().view(self.dtype)


@dataclass(frozen=True)
class DataParallelStep:
    """The step's program (assembly, the same on every chip) and where its matrices live:
    ``x_t`` (``d_in x batch``), ``dy`` (``batch x d_out``), ``w`` and ``g`` (``d_in x
    d_out``, the gradient all-reduced in place)."""

    text: str
    x_t: Buffer
    dy: Buffer
    w: Buffer
    g: Buffer
    lr: float


def _pod_all_reduce(pod, address, length, fmt, *, ready, done):
    """An all-reduce over every chip of ``pod``: the 2-D all-reduce on a 2-D torus (both
    dimensions of 2 chips or more), else a ring all-reduce along each dimension of more than
    one chip, one after the other (semaphore ``done`` carries each to the next)."""
    dims = [d for d, k in enumerate(pod.ici.dims) if k > 1]
    if len(dims) == 2 and pod.ici.ndims == 2:
        return collective("all_reduce_2d", address=address, length=length, fmt=fmt,
                          ready=ready, done=done)
    lines = []
    for d in dims:
        lines += collective("all_reduce", address=address, length=length, fmt=fmt, dim=d,
                            ready=ready if d == dims[0] else done, done=done)
    return lines


def _row(n, align):
    return -(-n // align) * align


def data_parallel_step(pod, *, d_in, batch, d_out, lr=1.0):
    """The data-parallel step of a linear layer on pod ``pod`` (a PodConfig with
    ``tensorcore``): see the module docstring. ``d_out`` must be a whole number of VMEM rows
    of the gradient (``row_bytes / 4`` elements), ``lr`` 1 for an int8 MXU."""
    tc = pod.tensorcore
    if tc is None:
        raise ConfigError("pod.tensorcore", "must be set: the step runs on TensorCores")
    mxu, rb = tc.mxu, tc.row_bytes
    floats = mxu.fmt != "int8"
    if not floats and lr != 1.0:
        raise ConfigError("lr", f"must be 1 with an int8 MXU (integer gradients), got {lr}")
    lanes = rb // 4
    for name, value in (("d_in", d_in), ("batch", batch), ("d_out", d_out)):
        if not isinstance(value, int) or value < 1:
            raise ConfigError(name, f"must be a positive integer, got {value!r}")
    if d_out % lanes:
        raise ConfigError("d_out", f"must be a multiple of {lanes} (a VMEM row of fp32 or "
                                   f"int32), got {d_out}")
    esize = tc.esize
    in_type = ml_dtypes.bfloat16 if mxu.fmt == "bfloat16" else np.int8
    if mxu.fmt not in ("int8", "bfloat16"):
        raise ConfigError("pod.tensorcore.mxu.fmt", f"must be int8 or bfloat16 for the step, "
                                                    f"got {mxu.fmt}")
    acc_type = np.float32 if floats else np.int32
    a_stride = _row(batch * esize, max(rb, mxu.rows * esize))
    b_stride = _row(d_out * esize, mxu.cols * esize)
    x_t = Buffer(0, (d_in, batch), in_type, a_stride)
    dy = Buffer(_row(x_t.address + d_in * a_stride, rb), (batch, d_out), in_type, b_stride)
    g = Buffer(_row(dy.address + batch * b_stride + mxu.cols * esize, rb), (d_in, d_out),
               acc_type, 4 * d_out)
    w = Buffer(g.address + d_in * 4 * d_out, (d_in, d_out), acc_type, 4 * d_out)
    end = w.address + d_in * 4 * d_out
    if end > pod.chip.staging_base:
        raise ConfigError("d_in", f"the step's buffers ({end} bytes) do not fit below the "
                                  f"staging area ({pod.chip.staging_base} bytes of VMEM)")
    fmt = "fp32" if floats else "int32"
    rows = d_in * 4 * d_out // rb
    lr_bits = int(np.float32(lr).view(np.uint32))
    lines = [
        f"li r1, {x_t.address}", f"li r2, {dy.address}", f"li r3, {g.address}",
        f"li r4, {d_in}", f"li r5, {batch}", f"li r6, {d_out}", "mxu.shape r4, r5, r6",
        f"li r7, {a_stride}", f"li r8, {b_stride}", f"li r9, {4 * d_out}",
        "mxu.stride r7, r8, r9",
        "matmul r1, r2, r3, 0, emit",
        "signal mxu, s0",                                   # the local gradient is in VMEM
        *_pod_all_reduce(pod, g.address, d_in * d_out, fmt, ready=0, done=1),
        "wait vpu, s1",
        f"li r10, {rows}", f"li r11, {lr_bits}", "vpu.cfg r10, r11, r0",
        *([f"vop mul.{fmt} r3, r3, r0, src2=scalar"] if floats else []),
        f"li r12, {w.address}", f"vop sub.{fmt} r12, r12, r3",
        "halt",
    ]
    return DataParallelStep("\n".join(lines), x_t, dy, w, g, lr)
