"""Golden model of the MXU, written from its specification (docs/mxu.md), not from the RTL.

Arithmetic (int8): products of two int8 values are exact; sums are taken modulo 2**32 and read
as two's complement int32, which is what a 32-bit accumulator that wraps on overflow holds. Because
that arithmetic is associative, the order of the additions does not matter: the result of a
GEMM is ``(A @ B) mod 2**32`` whatever the tiling. (Within one GEMM, |sum| <= K * 2**14 never wraps
for K < 2**17; accumulation over many GEMMs can.)

Arithmetic (bfloat16, float8_e4m3fn, float8_e5m2): fp32 rounding depends on order, so the model
performs the hardware's operations in the hardware's order, each one IEEE binary32 with round to
nearest even (numpy float32; verification/models/fp.py). Per column tile, per k-tile: a sum
starts at -0 and adds, for tile rows 0 .. rows-1 in order, the fp32-rounded product of the
activation and the weight; rows past ``k`` have weight -0 and activation +0 (their product -0
leaves the sum unchanged), lanes past ``n`` have weight -0. The first k-tile's sum overwrites the
accumulator row (unless ``accumulate``); each later one is added to it, again rounded to fp32.
NaNs are canonical (0x7FC00000). Results leave as fp32 bits, or rounded to bfloat16.

Command semantics: ``Gemm(m, k, n, acc_addr, accumulate, emit)`` computes ``A @ B`` for ``A`` of
``m x k`` and ``B`` of ``k x n``; output row ``r`` of column tile ``j`` (``cols`` lanes) lives in
accumulator row ``acc_addr + j*m + r``. ``accumulate`` adds to the rows' contents instead of
overwriting them. Lanes past ``n`` in the last column tile compute with zero weights (so they are
overwritten with zero, or left as they were when accumulating) and read out as zero. ``emit``
streams each finished column tile out, ``last`` on the final row. A command with ``m``, ``k`` or
``n`` zero, or with ``acc_addr + ceil(n/cols)*m > acc_depth``, is refused: the accumulator is not
touched and the only output is one beat with ``error`` and ``last`` set.
"""

from dataclasses import dataclass

import numpy as np

from verification.models import fp

__all__ = ["Gemm", "Beat", "matmul", "MXUModel", "DIM_MAX", "tile_order"]

DIM_MAX = 2**16 - 1


def _wrap32(x):
    return ((np.asarray(x, dtype=np.int64) + 2**31) % 2**32 - 2**31).astype(np.int64)


def matmul(a, b):
    """``a @ b`` for int8 matrices, accumulated modulo 2**32 as int32."""
    return _wrap32(np.asarray(a, dtype=np.int64) @ np.asarray(b, dtype=np.int64))


@dataclass(frozen=True)
class Gemm:
    m: int
    k: int
    n: int
    acc_addr: int = 0
    accumulate: bool = False
    emit: bool = True


@dataclass(frozen=True)
class Beat:
    """One beat on the MXU's result stream."""

    data: tuple
    last: bool
    error: bool


class MXUModel:
    """The MXU at command level: accumulator contents and the result stream.

    Operands are integers for int8 and raw bit patterns (unsigned integers) for the float
    formats; result lanes are signed int32 values, or raw fp32 / bfloat16 bit patterns.
    """

    def __init__(self, rows, cols, acc_depth, fmt="int8", out_fmt=None):
        self.rows, self.cols, self.acc_depth = rows, cols, acc_depth
        self.fmt = fmt
        self.is_float = fmt != "int8"
        self.out_fmt = out_fmt or ("float32" if self.is_float else "int32")
        self.acc = np.zeros((acc_depth, cols), dtype=np.uint32 if self.is_float else np.int64)

    def n_tiles(self, n):
        return -(-n // self.cols)

    def accepts(self, cmd):
        return (1 <= cmd.m <= DIM_MAX and 1 <= cmd.k <= DIM_MAX and 1 <= cmd.n <= DIM_MAX
                and cmd.acc_addr >= 0
                and cmd.acc_addr + self.n_tiles(cmd.n) * cmd.m <= self.acc_depth)

    def _column_tile(self, cmd, a, b, j, old):
        """New accumulator rows of column tile ``j``, given their old contents."""
        R, C = self.rows, self.cols
        lanes = min(C, cmd.n - j * C)
        if not self.is_float:
            tile = np.zeros((cmd.k, C), dtype=np.int64)
            tile[:, :lanes] = b[:, j * C: j * C + lanes]
            return _wrap32(a @ tile + (old if cmd.accumulate else 0))
        acc = old.view(np.float32)
        with np.errstate(all="ignore"):
            for i in range(-(-cmd.k // R)):
                ks = slice(i * R, min(cmd.k, (i + 1) * R))
                rows_used = ks.stop - ks.start
                a_t = np.zeros((cmd.m, R), dtype=np.float32)
                a_t[:, :rows_used] = a[:, ks]
                w_t = np.full((R, C), -0.0, dtype=np.float32)
                w_t[:rows_used, :lanes] = b[ks, j * C: j * C + lanes]
                total = np.full((cmd.m, C), -0.0, dtype=np.float32)
                for r in range(R):
                    total = total + a_t[:, r:r + 1] * w_t[r:r + 1, :]
                acc = acc + total if (i > 0 or cmd.accumulate) else total
        return fp.from_float32(acc)

    def _lanes_out(self, row):
        if self.out_fmt == "bfloat16":
            return [int(v) for v in fp.to_bf16(row)]
        return [int(v) for v in row]

    def execute(self, cmd, a=None, b=None):
        """Apply one command; return the list of :class:`Beat` it puts on the result stream."""
        if not self.accepts(cmd):
            return [Beat(tuple([0] * self.cols), True, True)]
        if self.is_float:
            a = fp.to_float32(np.asarray(a).reshape(cmd.m, cmd.k), self.fmt)
            b = fp.to_float32(np.asarray(b).reshape(cmd.k, cmd.n), self.fmt)
        else:
            a = np.asarray(a, dtype=np.int64).reshape(cmd.m, cmd.k)
            b = np.asarray(b, dtype=np.int64).reshape(cmd.k, cmd.n)
        C = self.cols
        tiles = self.n_tiles(cmd.n)
        beats = []
        for j in range(tiles):
            rows = slice(cmd.acc_addr + j * cmd.m, cmd.acc_addr + (j + 1) * cmd.m)
            self.acc[rows] = self._column_tile(cmd, a, b, j, self.acc[rows].copy())
            if cmd.emit:
                lanes = min(C, cmd.n - j * C)
                for r in range(cmd.m):
                    data = self._lanes_out(self.acc[rows][r])
                    data[lanes:] = [0] * (C - lanes)
                    last = j == tiles - 1 and r == cmd.m - 1
                    beats.append(Beat(tuple(data), last, False))
        return beats


def tile_order(cmd, a, b, rows, cols, garbage):
    """The operands of ``cmd`` as the MXU takes them: for each column tile, for each k-tile,
    the weight tile's real rows and the ``m`` activation vectors, with ``garbage(shape)`` in
    every lane the MXU must ignore (lanes past ``n`` and past ``k``)."""
    R, C = rows, cols
    for j in range(-(-cmd.n // C)):
        for i in range(-(-cmd.k // R)):
            ks = slice(i * R, min(cmd.k, (i + 1) * R))
            lanes = min(C, cmd.n - j * C)
            tile_b = garbage((ks.stop - ks.start, C))
            tile_b[:, :lanes] = b[ks, j * C: j * C + lanes]
            tile_a = garbage((cmd.m, R))
            tile_a[:, : ks.stop - ks.start] = a[:, ks]
            yield tile_b, tile_a
