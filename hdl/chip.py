"""The chip: Podium's blocks composed into one top, the only chip there is (a pod instantiates
it per node).

    Chip
    ├── TensorCore         (optional) control and status on ``csr`` (AXI4-Lite); its DMA is
    │                      the first manager of HBM
    ├── SparseCore         (optional) control and status on ``sc_csr``; the next manager
    ├── network interface  (optional, a pod's chip: hdl/nic/) the router's local ports
    │                      ``ici_inject`` / ``ici_eject``, coordinates ``ici_coord``, the
    │                      host's port on its local memory; driven by the TensorCore's ICI
    │                      queue, or without a TensorCore by the host (``message``,
    │                      ``collective``, ``done``); the last manager of HBM
    └── HBM                ``memory`` "hbm": the HBM controller, a port per manager in that
                           order, ports ``mem<p>`` (the ports no engine uses) for the host,
                           channel interfaces ``hbm_ch<c>`` to the PHY (the device model in
                           simulation), ``hbm_idle`` (every answered write is in the device);
                           "axi": each manager's AXI4 port at the edge (``dma``, ``sc_axi``,
                           ``nic_hbm``) for a memory model; "none": no HBM (the DMA's port is
                           answered DECERR, the network interface counts HBM accesses)

Each block is the same Verilog module as when it is generated alone (emitted once, instantiated
by name), joined here with ``wiring.connect``.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from spec.nic import READERS
from spec.protocol import LOCAL_PORTS

from .hbm.controller import HBMController
from .hbm.interface import ChannelSignature
from .lib.axi import AxiNoMemory, axi4_signature
from .lib.hier import Submodule
from .lib.sram import SRAM
from .nic.hbm_port import hbm_signature
from .nic.interface import READ_GROUPS, WRITE_GROUPS
from .nic.nic import NetworkInterface
from .sparsecore.core import SparseCore
from .tensorcore.core import TensorCore
from .top import Top

__all__ = ["Chip", "NIC_COUNTERS"]

NIC_COUNTERS = ("dropped", "seq_errors", "errors")
"""The network interface's counters (``nic_<name>`` on the chip)."""

_STATUS = ("csr", "running", "done", "error")
_NIC_PORTS = {"coords": "ici_coord", "inject": "ici_inject", "eject": "ici_eject",
              **{name: f"nic_{name}" for name in NIC_COUNTERS}}
"""The network interface's ports the chip renames at its edge (the others keep their names)."""


class Chip(Top):
    """A chip (see the module docstring).

    Members
    -------
    csr : In(AXI4LiteSignature), running, done, error : Out(1)
        With a TensorCore: its control and status.
    sc_csr : In(AXI4LiteSignature), sc_running, sc_done, sc_error : Out(1)
        With a SparseCore: its control and status.
    mem<p> : In(AXI4Signature)
        ``memory`` "hbm": the HBM controller's ports no engine takes.
    hbm_idle : Out(1), hbm_ch<c> : Out(ChannelSignature)
        ``memory`` "hbm": the controller has drained (a host that reads HBM through the
        device's backdoor waits for it); channel ``c``'s command and data interface.
    dma, sc_axi, nic_hbm : Out(AXI4Signature)
        ``memory`` "axi": the TensorCore's, SparseCore's and network interface's HBM ports.
    ici_coord : In(coord_layout), ici_inject : Out(stream).array(3), ici_eject : In(...).array(3)
        With a network interface: the chip's coordinates and its router's local ports.
    host_write, host_read : In(stream), host_read_data : Out(stream)
        With a network interface: the host's port on its local memory (and HBM).
    message, collective : In(stream), busy : Out(1), done : Out(stream)
        With a network interface and no TensorCore: the host drives it.
    nic_dropped, nic_seq_errors, nic_errors : Out(32)
        With a network interface: its counters.
    """

    def __init__(self, config):
        self._blocks = {}
        members = {}
        if config.tensorcore is not None:
            self._tc = TensorCore(config.tensorcore)
            self._blocks["tc"] = Submodule(config.tensorcore.name, self._tc,
                                           children=self._tc.submodules)
            members.update({name: self._tc.signature.members[name] for name in _STATUS})
        if config.sparsecore is not None:
            self._sc = SparseCore(config.sparsecore)
            self._blocks["sc"] = Submodule(config.sparsecore.name, self._sc)
            members.update({f"sc_{name}": self._sc.signature.members[name] for name in _STATUS})
        if config.nic is not None:
            self._nic_members(config, members)
        self._memory_members(config, members)
        super().__init__(config, members)

    def _nic_members(self, config, members):
        nic, ici = config.nic, config.nic.ici
        sram = None
        if config.tensorcore is None:
            sram = SRAM(f"{config.name}_mem", width=ici.flit_bits, depth=config.nic_words,
                        read_ports=len(READ_GROUPS), write_ports=len(WRITE_GROUPS),
                        byte_enable=True)
            self._blocks["sram"] = sram
        self._nic = NetworkInterface(nic, words=config.nic_words,
                                     staging_base=config.staging_base,
                                     tensorcore=config.tensorcore, sram=sram,
                                     hbm=self._manager_signature(config, "nic")
                                     if config.has_hbm else None)
        ports = self._nic.signature.members
        driven = ("message", "collective", "busy", "done") if config.tensorcore is None else ()
        members.update({_NIC_PORTS.get(name, name): ports[name] for name in (
            "coords", "inject", "eject", "host_write", "host_read", "host_read_data", *driven,
            *NIC_COUNTERS)})

    def _memory_members(self, config, members):
        if config.memory == "hbm":
            self._hbm = HBMController(config.hbm)
            self._blocks["hbm"] = Submodule(config.hbm.name, self._hbm,
                                            children=self._hbm.submodules)
            first = len(config.hbm_managers)
            members.update({f"mem{p}": In(axi4_signature(config.hbm))
                            for p in range(first, config.hbm.ports)})
            members["hbm_idle"] = Out(1)
            members.update({f"hbm_ch{c}": Out(ChannelSignature(config.hbm))
                            for c in range(config.hbm.channels)})
        elif config.memory == "axi":
            for name, port in self._axi_ports(config).items():
                members[port] = Out(self._manager_signature(config, name))

    @staticmethod
    def _axi_ports(config):
        """The edge port of each HBM manager with ``memory`` "axi"."""
        names = {"tensorcore": "dma", "sparsecore": "sc_axi", "nic": "nic_hbm"}
        return {name: names[name] for name in config.hbm_managers}

    @staticmethod
    def _manager_signature(config, name):
        """The AXI4 bus of an HBM manager: its own, or the controller's port it takes."""
        if config.memory == "hbm":
            return axi4_signature(config.hbm)
        if name == "nic":
            return hbm_signature(config.nic, READERS)
        return axi4_signature(getattr(config, name))

    @property
    def submodules(self):
        return list(self._blocks.values())

    @property
    def extras(self):
        extras = {}
        if "tc" in self._blocks:
            extras.update(self._tc.extras)
        if "sc" in self._blocks:
            extras["sc_csr"] = self._sc.extras["csr"]
        return extras

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        managers = {}
        if "tc" in self._blocks:
            tc = self._blocks["tc"].instance(m, "tensorcore")
            self._status(m, tc, "")
            managers["tensorcore"] = tc.axi
        if "sc" in self._blocks:
            sc = self._blocks["sc"].instance(m, "sparsecore")
            self._status(m, sc, "sc_")
            managers["sparsecore"] = sc.axi
        if cfg.nic is not None:
            m.submodules.nic = nic = self._nic
            self._connect_nic(m, nic, tc if "tc" in self._blocks else None)
            if cfg.has_hbm:
                managers["nic"] = nic.hbm
        self._connect_memory(m, managers)
        return m

    def _status(self, m, engine, prefix):
        wiring.connect(m, wiring.flipped(getattr(self, f"{prefix}csr")), engine.csr)
        m.d.comb += [getattr(self, f"{prefix}{name}").eq(getattr(engine, name))
                     for name in ("running", "done", "error")]

    def _connect_nic(self, m, nic, tc):
        m.d.comb += nic.coords.eq(self.ici_coord)
        for port in range(LOCAL_PORTS):
            wiring.connect(m, nic.inject[port], wiring.flipped(self.ici_inject[port]))
            wiring.connect(m, wiring.flipped(self.ici_eject[port]), nic.eject[port])
        wiring.connect(m, wiring.flipped(self.host_write), nic.host_write)
        wiring.connect(m, wiring.flipped(self.host_read), nic.host_read)
        wiring.connect(m, nic.host_read_data, wiring.flipped(self.host_read_data))
        if tc is None:
            wiring.connect(m, wiring.flipped(self.message), nic.message)
            wiring.connect(m, wiring.flipped(self.collective), nic.collective)
            wiring.connect(m, nic.done, wiring.flipped(self.done))
            m.d.comb += self.busy.eq(nic.busy)
        else:
            wiring.connect(m, tc.ici, nic.ici)
            m.d.comb += [tc.ici_idle.eq(nic.ici_idle), tc.ici_error.eq(nic.ici_error),
                         tc.ici_error_pc.eq(nic.ici_error_pc), tc.arrive.eq(nic.arrive),
                         tc.arrive_sem.eq(nic.arrive_sem)]
            for a, b in zip(nic.vmem_rd, tc.vmem_rd, strict=True):
                wiring.connect(m, a, b)
            for a, b in zip(nic.vmem_wr, tc.vmem_wr, strict=True):
                wiring.connect(m, a, b)
        m.d.comb += [getattr(self, f"nic_{name}").eq(getattr(nic, name))
                     for name in NIC_COUNTERS]

    def _connect_memory(self, m, managers):
        """Each HBM manager to its port of the controller, to the chip's edge, or (no HBM: only
        the TensorCore's DMA) to a subordinate that answers DECERR."""
        cfg = self.config
        if cfg.memory == "hbm":
            hbm = self._blocks["hbm"].instance(m, "hbm")
            for p, bus in enumerate(managers.values()):
                wiring.connect(m, bus, getattr(hbm, f"s{p}_axi"))
            for p in range(len(managers), cfg.hbm.ports):
                wiring.connect(m, wiring.flipped(getattr(self, f"mem{p}")),
                               getattr(hbm, f"s{p}_axi"))
            for c in range(cfg.hbm.channels):
                wiring.connect(m, getattr(hbm, f"ch{c}"),
                               wiring.flipped(getattr(self, f"hbm_ch{c}")))
            m.d.comb += self.hbm_idle.eq(hbm.idle)
        elif cfg.memory == "axi":
            for name, port in self._axi_ports(cfg).items():
                wiring.connect(m, managers[name], wiring.flipped(getattr(self, port)))
        elif "tensorcore" in managers:
            m.submodules.no_hbm = no_hbm = AxiNoMemory(axi4_signature(cfg.tensorcore))
            wiring.connect(m, managers["tensorcore"], no_hbm.axi)
