"""Configuration of the TensorCore generator, validated on construction."""

from dataclasses import dataclass

from .config import Config, ConfigError, check_bool, check_choice, check_int
from .isa import MAX_SEMAPHORES
from .mxu import MXUConfig

__all__ = ["TensorCoreConfig", "VPUTopConfig"]

_POW2 = tuple(2**i for i in range(31))
VMATH_MAX_ROW_BYTES = 512
"""The widest VPU with transcendental units: 128 lanes generate in 51 s and 1.1 GB; at 256
lanes the generator's Yosys (WebAssembly, 4 GiB) runs out of memory."""
VTRANS_MAX_ROW_BYTES = 128
"""The widest VPU with the transpose unit (``vtrans``): its tile buffer holds a tile of a
row's elements squared, ``row_bytes**2 / 2`` bytes for bfloat16 (8 KiB of registers at 128
bytes); wider rows go without it."""


@dataclass(frozen=True)
class TensorCoreConfig(Config):
    """Parameters of one TensorCore: its MXU, VMEM, queues and DMA.

    Parameters
    ----------
    mxu : MXUConfig
        The matrix unit; ``rows`` and ``cols`` must be powers of two here (operand vectors
        tile a VMEM row).
    vmem_bytes : int
        VMEM capacity, a power of two, 1 KiB .. 16 MiB.
    vmem_banks : int
        Banks, 1..64, a power of two; each has one read and one write port.
    row_bytes : int or None
        VMEM row width: a power of two at least ``4 * mxu.cols`` (a result row), the A and B
        operand vectors (``mxu.rows`` operands) and the AXI data width
        (``axi_data_width / 8``), at most 1024. None (the default): the smallest of these.
    imem_depth : int
        Instructions the instruction memory holds, 16..4096, a power of two (the IMEM window of
        the AXI4-Lite map).
    queue_depth : int
        Entries of each engine queue, 2..64.
    semaphores : int
        1..31.
    deadlock_cycles : int
        Cycles without progress before the sequencer stops with DEADLOCK, 16..2**20.
    axi_data_width, axi_addr_width, axi_id_width : int
        The DMA's AXI4 bus (the HBM controller's port): data 64..1024 bits, address 12..48,
        ID 1..8 bits.
    dma_ids : int
        IDs the DMA uses in turn, 1..2**axi_id_width (at most 16).
    dma_bursts : int
        Bursts in flight, 1..64.
    max_burst : int
        Beats per burst, 1..256.
    ici : bool
        An ICI queue (``ici.send``, ``ici.read``, ``ici.coll``; docs/pod.md) whose commands
        leave on the ``ici`` port, with VMEM ports for the endpoint: a pod chip's TensorCore.
    vmath : bool
        The VPU's transcendental function unit (docs/vmath.md), one per lane: ``vop`` ``exp``,
        ``reciprocal``, ``rsqrt``, ``tanh``, ``sigmoid``, ``log`` (without it they are illegal
        instructions). It is about five times a lane's floating-point units in size, so small
        test pods go without; at most ``row_bytes`` 512 (128 lanes).
    vtrans : bool or None
        The VPU's transpose unit (``vtrans``; without it an illegal instruction): a tile
        buffer of ``n x n`` elements, ``n`` a row's elements. Default: present up to
        ``row_bytes`` 128 (its registers grow with the square of the row), its limit.
    """

    KIND = "TensorCore"

    mxu: MXUConfig = MXUConfig()
    vmem_bytes: int = 64 * 1024
    vmem_banks: int = 8
    row_bytes: int | None = None
    imem_depth: int = 1024
    queue_depth: int = 8
    semaphores: int = 16
    deadlock_cycles: int = 1024
    axi_data_width: int = 256
    axi_addr_width: int = 32
    axi_id_width: int = 4
    dma_ids: int = 4
    dma_bursts: int = 16
    max_burst: int = 16
    ici: bool = False
    vmath: bool = True
    vtrans: bool | None = None

    def validate(self):
        mxu = self.mxu
        check_choice("mxu.rows", mxu.rows, tuple(2**i for i in range(9)))
        check_choice("mxu.cols", mxu.cols, tuple(2**i for i in range(9)))
        check_choice("vmem_bytes", self.vmem_bytes, _POW2[10:25])
        check_choice("vmem_banks", self.vmem_banks, _POW2[:7])
        check_choice("axi_data_width", self.axi_data_width, _POW2[6:11])
        needs = {"4 * mxu.cols": (4 * mxu.cols, "a result row"),
                 f"mxu.rows * {self.esize}": (mxu.rows * self.esize, "an operand vector"),
                 "axi_data_width / 8": (self.axi_data_width // 8, "a beat")}
        why = max(needs, key=lambda k: needs[k][0])
        least, what = needs[why]
        if self.row_bytes is None:
            self.derive("row_bytes", least)
        allowed = tuple(p for p in _POW2 if least <= p <= 1024)
        if self.row_bytes not in allowed or isinstance(self.row_bytes, bool):
            raise ConfigError("row_bytes", f"must be one of {', '.join(map(str, allowed))} (a "
                                           f"power of two from {why} = {least}, {what}, up "
                                           f"to 1024), got {self.row_bytes!r}")
        if self.vmem_bytes < self.vmem_banks * self.row_bytes:
            raise ConfigError("vmem_bytes", f"must hold at least one row per bank "
                                            f"({self.vmem_banks * self.row_bytes}), got "
                                            f"{self.vmem_bytes}")
        # the AXI4-Lite map's IMEM window, 0x8000 + 8i below 0x10000, holds 4096 words
        check_choice("imem_depth", self.imem_depth, _POW2[4:13])
        check_int("queue_depth", self.queue_depth, 2, 64)
        check_int("semaphores", self.semaphores, 1, MAX_SEMAPHORES)
        check_int("deadlock_cycles", self.deadlock_cycles, 16, 1 << 20)
        check_int("axi_addr_width", self.axi_addr_width, 12, 48)
        check_int("axi_id_width", self.axi_id_width, 1, 8)
        check_int("dma_ids", self.dma_ids, 1, min(16, 1 << self.axi_id_width))
        check_int("dma_bursts", self.dma_bursts, 1, 64)
        check_int("max_burst", self.max_burst, 1, 256)
        check_bool("ici", self.ici)
        check_bool("vmath", self.vmath)
        if self.vmath and self.row_bytes > VMATH_MAX_ROW_BYTES:
            raise ConfigError("vmath", f"must be False for row_bytes {self.row_bytes}: the "
                                       f"transcendental units of more than "
                                       f"{VMATH_MAX_ROW_BYTES // 4} lanes (row_bytes "
                                       f"{VMATH_MAX_ROW_BYTES}) exhaust the generator's "
                                       f"memory")
        if self.vtrans is None:
            self.derive("vtrans", self.row_bytes <= VTRANS_MAX_ROW_BYTES)
        check_bool("vtrans", self.vtrans)
        if self.vtrans and self.row_bytes > VTRANS_MAX_ROW_BYTES:
            raise ConfigError("vtrans", f"must be False for row_bytes {self.row_bytes}: the "
                                        f"transpose unit's tile buffer grows with the "
                                        f"square of the row; it is built up to row_bytes "
                                        f"{VTRANS_MAX_ROW_BYTES}")

    # Derived sizes ---------------------------------------------------------------------

    @property
    def lanes(self):
        """32-bit lanes of a VMEM row: the VPU's width."""
        return self.row_bytes // 4

    @property
    def vmem_rows(self):
        return self.vmem_bytes // self.row_bytes

    @property
    def bank_rows(self):
        return self.vmem_rows // self.vmem_banks

    @property
    def beat_bytes(self):
        return self.axi_data_width // 8

    @property
    def esize(self):
        """Bytes of an MXU operand."""
        return self.mxu.format.in_width // 8

    @property
    def osize(self):
        """Bytes of an MXU result."""
        return 2 if self.mxu.output == "bfloat16" else 4

    @property
    def name(self):
        """Verilog module name: the MXU's shape and format and a hash of every parameter."""
        mxu = self.mxu
        return f"podium_tc_{mxu.rows}x{mxu.cols}_{mxu.fmt}_{self.digest()}"


@dataclass(frozen=True)
class VPUTopConfig(Config):
    """A VPU sized by a TensorCore configuration (only ``row_bytes`` and ``vmem_bytes`` shape
    it: the lanes and the row index width).

    Parameters
    ----------
    tensorcore : TensorCoreConfig
        The TensorCore whose VPU this is.
    """

    KIND = "VPU top"

    tensorcore: TensorCoreConfig = TensorCoreConfig()

    @property
    def name(self):
        tc = self.tensorcore
        return (f"podium_vpu_{tc.lanes}l_{tc.vmem_rows}r" + ("_vmath" if tc.vmath else "")
                + ("_vtrans" if tc.vtrans else ""))
