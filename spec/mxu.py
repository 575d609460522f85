"""Configuration of the MXU generator, validated on construction."""

from dataclasses import dataclass

from .config import Config, check_choice, check_int
from .formats import FORMATS, get_format

__all__ = ["MXUConfig", "MXUHarnessConfig", "MAX_DIM", "MAX_ACC_DEPTH", "GEMM_DIM_BITS"]

MAX_DIM = 256
"""Largest array side: Trillium's MXU is 256 x 256."""

MAX_ACC_DEPTH = 65536
"""Largest accumulator memory, in rows of ``cols`` lanes."""

GEMM_DIM_BITS = 16
"""Width of the M, K and N fields of a GEMM command: each of them is at most 2**16 - 1."""


@dataclass(frozen=True)
class MXUConfig(Config):
    """Parameters of one MXU: a ``rows`` x ``cols`` weight-stationary array and its accumulators.

    Parameters
    ----------
    rows : int
        Array rows, 1..256: the K extent of one weight tile.
    cols : int
        Array columns, 1..256: the N extent of one weight tile and the lanes of a result.
    fmt : str
        Operand format: ``"int8"`` (int32 sums), or ``"bfloat16"``, ``"float8_e4m3fn"``,
        ``"float8_e5m2"`` (fp32 sums in every PE).
    acc_depth : int
        Accumulator rows of ``cols`` lanes, 1..65536. A GEMM needs ``ceil(N/cols) * M`` of them.
    out_fmt : str or None
        Result format on ``c``: ``"int32"`` for int8; ``"float32"`` or ``"bfloat16"`` (rounded to
        nearest even on the way out) for the float formats. ``None``: the accumulator's own.
    """

    KIND = "MXU"

    rows: int = 8
    cols: int = 8
    fmt: str = "int8"
    acc_depth: int = 1024
    out_fmt: str | None = None

    def validate(self):
        check_int("rows", self.rows, 1, MAX_DIM)
        check_int("cols", self.cols, 1, MAX_DIM)
        check_choice("fmt", self.fmt, tuple(FORMATS))
        check_int("acc_depth", self.acc_depth, 1, MAX_ACC_DEPTH)
        if self.out_fmt is not None:
            check_choice("out_fmt", self.out_fmt, FORMATS[self.fmt].outputs)

    @property
    def output(self):
        """The result format on ``c``."""
        return self.out_fmt or self.format.outputs[0]

    @property
    def format(self):
        return get_format(self.fmt)

    @property
    def name(self):
        """Verilog module name of the MXU top for this configuration."""
        out = "" if self.output == self.format.outputs[0] else f"_to_{self.output}"
        return f"podium_mxu_{self.rows}x{self.cols}_{self.fmt}{out}_a{self.acc_depth}"


@dataclass(frozen=True)
class MXUHarnessConfig(Config):
    """An MXU and the depths of the harness memories, in entries (2..2**20).

    Parameters
    ----------
    mxu : MXUConfig
        The MXU under test.
    cmd_depth, w_depth, a_depth, c_depth : int
        Entries of the command, weight, activation and result memories, 2..2**20.
    """

    KIND = "MXU harness"

    mxu: MXUConfig = MXUConfig(rows=16, cols=16)
    cmd_depth: int = 16
    w_depth: int = 2048
    a_depth: int = 8192
    c_depth: int = 4096

    def validate(self):
        for name in ("cmd_depth", "w_depth", "a_depth", "c_depth"):
            check_int(name, getattr(self, name), 2, 1 << 20)

    @property
    def name(self):
        return self.mxu.name.replace("podium_mxu_", "podium_mxu_harness_")
