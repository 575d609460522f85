"""The VMEM's port signatures and the VPU's command, shared by the VMEM and the engines that
use it (MXU feeder and result writer, VPU, DMA).

A read port moves one row per handshake: the engine drives ``addr`` (a row index) with
``valid``; in the cycle ``valid & ready`` (the bank granted it) the read is issued, and
``data`` holds the row in the next cycle, always (the engine must take it then). A write port
writes ``data`` under the byte mask ``strb`` to row ``addr`` in the cycle ``valid & ready``.
``ready`` may be low in any cycle (another engine holds the bank's port), so an engine keeps
``valid`` and its request until the handshake.
"""

from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

from spec import isa

from ..lib.codes import hw

__all__ = ["vmem_read_signature", "vmem_write_signature", "VPUKind", "vpu_command_layout",
           "row_bits"]

Cast, DType, ROp = hw(isa.Cast), hw(isa.DType), hw(isa.ROp)
Src2, VOp = hw(isa.Src2), hw(isa.VOp)


def row_bits(cfg):
    """Bits of a VMEM row index."""
    return max(1, (cfg.vmem_rows - 1).bit_length())


def vmem_read_signature(cfg):
    """A read port, seen from the engine (``Out`` members are the engine's)."""
    return wiring.Signature({"addr": Out(row_bits(cfg)), "valid": Out(1), "ready": In(1),
                             "data": In(8 * cfg.row_bytes)})


def vmem_write_signature(cfg):
    """A write port, seen from the engine."""
    return wiring.Signature({"addr": Out(row_bits(cfg)), "data": Out(8 * cfg.row_bytes),
                             "strb": Out(cfg.row_bytes), "valid": Out(1), "ready": In(1)})


class VPUKind(enum.Enum, shape=2):
    VOP = 0
    VCAST = 1
    VRED = 2
    VTRANS = 3


def vpu_command_layout(cfg):
    """One VPU instruction as the sequencer hands it to the VPU, operands already checked:
    every row inside VMEM, bases as row indices, ``count`` rows (``vop``, ``vcast``),
    reductions (``vred``) of ``span`` rows each or tiles (``vtrans``) of a row's elements in
    rows, ``shift`` at most 62."""
    rows = row_bits(cfg)
    return data.StructLayout({
        "kind": VPUKind, "vop": VOp, "dtype": DType, "src2_mode": Src2, "relu": 1,
        "cast": Cast, "rop": ROp,
        "count": range(cfg.vmem_rows + 1), "span": range(cfg.vmem_rows + 1),
        "dst": rows, "src1": rows, "src2": rows,
        "scalar": 32, "shift": range(63),
    })
