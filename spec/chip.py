"""Configuration of the chip (hdl/chip.py, docs/architecture.md), validated on construction:
the configuration of each of its blocks and how they meet."""

from dataclasses import dataclass

from .config import Config, ConfigError, check_choice, check_int
from .hbm import HBMConfig, check_matching_bus
from .nic import READERS, NICConfig
from .protocol import ADDR_BITS, LOCAL_PORTS, MINUS_PORT, REQUEST_PORT, RESPONSE_PORT
from .sparsecore import SparseCoreConfig
from .tensorcore import TensorCoreConfig

__all__ = ["ChipConfig", "MEMORIES"]

MEMORIES = ("hbm", "axi", "none")
"""What a chip's engines reach as HBM: the chip's HBM controller (its PHY channel
interfaces at the chip's edge, a device model in simulation), each engine's AXI4 port at the
chip's edge (a memory model in simulation: fast tests), or nothing (VMEM only: a DMA
transfer fails with DMA_RESPONSE, an ICI access to HBM is counted as an error)."""

SIMULATION_WORDS = 1024
"""Flits of the local memory of a chip without a TensorCore, by default."""


@dataclass(frozen=True)
class ChipConfig(Config):
    """A chip: the configuration of each of its blocks.

    Parameters
    ----------
    tensorcore : TensorCoreConfig or None
        The TensorCore; its DMA is the first manager of HBM. None: no TensorCore (a chip whose
        network interface the host drives directly, as a pod's collective benchmarks do).
    memory : str
        What the engines reach as HBM (``MEMORIES``): ``"hbm"``, the chip's HBM controller;
        ``"axi"``, each engine's AXI4 port at the chip's edge (a memory model in simulation);
        ``"none"``, no HBM (VMEM only).
    hbm : HBMConfig
        The HBM controller (with ``memory`` ``"hbm"``): at least one port per engine that
        reaches HBM (TensorCore, SparseCore, network interface), in that order; each engine's
        AXI4 bus must match its ports.
    sparsecore : SparseCoreConfig or None
        The SparseCore (needs a TensorCore's chip and an HBM).
    nic : NICConfig or None
        The network interface (a pod's chip); its ``ici`` is the pod's network. With a
        TensorCore, the TensorCore's ICI queue drives it and its local memory is the VMEM.
    local_words : int or None
        Flits of the network interface's local memory: a power of two, 16..65536, holding its
        staging area. None: the TensorCore's VMEM rows, or 1024 without a TensorCore.
    """

    KIND = "chip"

    tensorcore: TensorCoreConfig | None = TensorCoreConfig()
    memory: str = "hbm"
    hbm: HBMConfig = HBMConfig()
    sparsecore: SparseCoreConfig | None = None
    nic: NICConfig | None = None
    local_words: int | None = None

    def validate(self):
        tc, nic = self.tensorcore, self.nic
        check_choice("memory", self.memory, MEMORIES)
        if tc is None and nic is None:
            raise ConfigError("tensorcore", "must be given on a chip without a network "
                                            "interface (nic)")
        if self.sparsecore is not None:
            if tc is None or self.memory == "none":
                raise ConfigError("sparsecore", "needs a TensorCore's chip with an HBM "
                                                "(memory 'hbm' or 'axi')")
        if nic is not None and nic.ici.local_ports != LOCAL_PORTS:
            raise ConfigError("nic.ici.local_ports",
                              f"must be {LOCAL_PORTS} (requests on port {REQUEST_PORT}, "
                              f"responses on port {RESPONSE_PORT}, the - ring's requests on "
                              f"port {MINUS_PORT}), got {nic.ici.local_ports}")
        if tc is not None:
            if tc.ici != (nic is not None):
                raise ConfigError("tensorcore.ici", f"must be {nic is not None} (the "
                                                    f"TensorCore's ICI queue drives the "
                                                    f"chip's network interface, nic)")
            if nic is not None and 8 * tc.row_bytes != nic.ici.flit_bits:
                raise ConfigError("tensorcore.row_bytes",
                                  f"must be a flit ({nic.ici.flit_bits // 8} bytes: "
                                  f"nic.ici.flit_bits / 8), got {tc.row_bytes}")
        if self.memory == "hbm":
            self._check_hbm_ports()
        if self.local_words is not None:
            check_int("local_words", self.local_words, 16, 65536)
            if self.local_words & (self.local_words - 1):
                raise ConfigError("local_words", f"must be a power of two, got "
                                                 f"{self.local_words}")
            if tc is not None and self.local_words != tc.vmem_rows:
                raise ConfigError("local_words", f"must be the TensorCore's VMEM rows "
                                                 f"({tc.vmem_rows}: tensorcore.vmem_bytes / "
                                                 f"tensorcore.row_bytes) or None, got "
                                                 f"{self.local_words}")
        if nic is not None and self.local_bytes < nic.staging_bytes:
            raise ConfigError("local_words", f"must hold the bfloat16 staging area "
                                             f"({nic.staging_bytes} bytes: "
                                             f"nic.staging_slot x 4), got {self.nic_words} words "
                                             f"of {nic.flit_bytes} bytes")

    def _check_hbm_ports(self):
        managers = self.hbm_managers
        if self.hbm.ports < len(managers):
            raise ConfigError("hbm.ports", f"must be at least {len(managers)} (one per engine "
                                           f"that reaches HBM: {', '.join(managers)}), got "
                                           f"{self.hbm.ports}")
        for name in managers:
            if name != "nic":
                check_matching_bus(name, getattr(self, name), self.hbm)
        if "nic" in managers:
            self._check_nic_port()

    def _check_nic_port(self):
        """The network interface's HBM port is a flit wide, an AXI ID per memory reader, the
        messages' addresses whole: it must fit the controller's port as it is."""
        hbm, flit = self.hbm, self.nic.ici.flit_bits
        if flit != hbm.axi_data_width:
            raise ConfigError("nic.ici.flit_bits", f"must equal the HBM controller's data "
                                                   f"width ({hbm.axi_data_width}) with memory "
                                                   f"'hbm', got {flit}")
        ids = (READERS - 1).bit_length()
        if hbm.axi_id_width < ids:
            raise ConfigError("hbm.id_width", f"must be at least {ids} (an AXI ID for each of "
                                              f"the network interface's {READERS} readers), "
                                              f"got {hbm.axi_id_width}")
        if hbm.axi_addr_width < ADDR_BITS:
            raise ConfigError("hbm.addr_width", f"must be at least {ADDR_BITS} (the network "
                                                f"interface's addresses) with a network "
                                                f"interface, got {hbm.axi_addr_width}")

    @property
    def has_hbm(self):
        """The engines reach an HBM (the controller or a memory model at the edge)."""
        return self.memory != "none"

    @property
    def hbm_managers(self):
        """The engines that reach HBM, in the order of the ports they take."""
        if not self.has_hbm:
            return ()
        names = ("tensorcore", "sparsecore", "nic")
        return tuple(n for n in names if getattr(self, n) is not None)

    @property
    def nic_words(self):
        """Flits of the network interface's local memory."""
        if self.local_words is not None:
            return self.local_words
        return self.tensorcore.vmem_rows if self.tensorcore is not None else SIMULATION_WORDS

    @property
    def local_bytes(self):
        return self.nic_words * self.nic.flit_bytes

    @property
    def staging_base(self):
        """Byte address of the network interface's staging area: the top of its memory."""
        return self.local_bytes - self.nic.staging_bytes

    @property
    def name(self):
        return f"podium_chip_{self.digest()}"
