"""Golden model of the MXU, written from its specification (docs/mxu.md), not from the RTL.

Arithmetic (int8): products of two int8 values are exact; sums are taken modulo 2**32 and read
as two's complement int32, which is what a 32-bit accumulator that wraps on overflow holds. Because
that arithmetic is associative, the order of the additions does not matter: the result of a
GEMM is ``(A @ B) mod 2**32`` whatever the tiling. (Within one GEMM, |sum| <= K * 2**14 never wraps
for K < 2**17; accumulation over many GEMMs can.)

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

__all__ = ["Gemm", "Beat", "matmul", "MXUModel", "DIM_MAX"]

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
    """The MXU at command level: accumulator contents and the result stream."""

    def __init__(self, rows, cols, acc_depth):
        self.rows, self.cols, self.acc_depth = rows, cols, acc_depth
        self.acc = np.zeros((acc_depth, cols), dtype=np.int64)

    def n_tiles(self, n):
        return -(-n // self.cols)

    def accepts(self, cmd):
        return (1 <= cmd.m <= DIM_MAX and 1 <= cmd.k <= DIM_MAX and 1 <= cmd.n <= DIM_MAX
                and cmd.acc_addr >= 0
                and cmd.acc_addr + self.n_tiles(cmd.n) * cmd.m <= self.acc_depth)

    def execute(self, cmd, a=None, b=None):
        """Apply one command; return the list of :class:`Beat` it puts on the result stream."""
        if not self.accepts(cmd):
            return [Beat(tuple([0] * self.cols), True, True)]
        a = np.asarray(a, dtype=np.int64).reshape(cmd.m, cmd.k)
        b = np.asarray(b, dtype=np.int64).reshape(cmd.k, cmd.n)
        C = self.cols
        tiles = self.n_tiles(cmd.n)
        b_padded = np.zeros((cmd.k, tiles * C), dtype=np.int64)
        b_padded[:, : cmd.n] = b
        beats = []
        for j in range(tiles):
            rows = slice(cmd.acc_addr + j * cmd.m, cmd.acc_addr + (j + 1) * cmd.m)
            product = a @ b_padded[:, j * C:(j + 1) * C]
            self.acc[rows] = _wrap32(product + (self.acc[rows] if cmd.accumulate else 0))
            if cmd.emit:
                lanes = min(C, cmd.n - j * C)
                for r in range(cmd.m):
                    data = np.zeros(C, dtype=np.int64)
                    data[:lanes] = self.acc[rows][r, :lanes]
                    last = j == tiles - 1 and r == cmd.m - 1
                    beats.append(Beat(tuple(int(x) for x in data), last, False))
        return beats
