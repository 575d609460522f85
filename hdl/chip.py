"""The chip: Podium's blocks composed into one top.

    Chip
    ├── TensorCore       control and status on ``csr`` (AXI4-Lite); its DMA is the manager of
    │                    HBM port 0
    ├── SparseCore       (optional) control and status on ``sc_csr``; the manager of HBM port 1
    ├── HBM controller   ports ``mem<p>`` (the ports no engine uses) for the host or later
    │                    engines; channel interfaces ``hbm_ch<c>`` to the PHY (the device model
    │                    in simulation); ``hbm_idle`` (every answered write is in the device)
    └── ICI router       one node of the pod: links ``ici_link_*``, local ports ``ici_inject`` /
                         ``ici_eject``, coordinates ``ici_coord``

Each block is the same Verilog module as when it is generated alone (emitted once, instantiated
by name), joined here with ``wiring.connect``. The engines still to come (SparseCore, the ICI
endpoint of the DMA) take over ports that reach the chip's edge today without reshaping the
blocks.
"""

import hashlib
import json
from dataclasses import dataclass

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import Config, ConfigError
from .hbm.axi_port import axi_signature
from .hbm.config import HBMConfig
from .hbm.controller import HBMController
from .hbm.interface import ChannelSignature
from .ici.config import ICIConfig
from .ici.packet import coord_layout
from .ici.router import Router
from .lib.hier import Submodule
from .sparsecore.config import SparseCoreConfig, check_matching_bus
from .sparsecore.core import SparseCore
from .tensorcore.config import TensorCoreConfig
from .tensorcore.core import TensorCore
from .top import Top

__all__ = ["ChipConfig", "Chip"]


@dataclass(frozen=True)
class ChipConfig(Config):
    """A chip: the configuration of each of its blocks.

    Parameters
    ----------
    tensorcore : TensorCoreConfig
        Its DMA bus must match the HBM controller's ports (data, address and ID widths).
    hbm : HBMConfig
    ici : ICIConfig
        The pod this chip is a node of (the router's ports and formats follow from it).
    sparsecore : SparseCoreConfig or None
        The SparseCore, on HBM port 1 (the controller needs at least 2 ports; its bus must
        match them); None: no SparseCore.
    """

    KIND = "chip"

    tensorcore: TensorCoreConfig = TensorCoreConfig()
    hbm: HBMConfig = HBMConfig()
    ici: ICIConfig = ICIConfig()
    sparsecore: SparseCoreConfig | None = None

    def validate(self):
        if self.sparsecore is not None:
            if self.hbm.ports < 2:
                raise ConfigError("hbm.ports", f"must be at least 2 with a SparseCore (it "
                                               f"takes port 1), got {self.hbm.ports}")
            check_matching_bus("sparsecore", self.sparsecore, self.hbm)
        tc, hbm = self.tensorcore, self.hbm
        for name, want in (("axi_data_width", hbm.access_bytes * 8),
                           ("axi_addr_width", hbm.addr_width), ("axi_id_width", hbm.id_width)):
            if getattr(tc, name) != want:
                raise ConfigError(f"tensorcore.{name}", f"must equal the HBM controller's "
                                                        f"({want}), got {getattr(tc, name)}")

    @property
    def name(self):
        digest = hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode())
        return f"podium_chip_{digest.hexdigest()[:8]}"


class Chip(Top):
    """A chip (see the module docstring).

    Members
    -------
    csr : In(AXI4LiteSignature)
        The TensorCore's control and status.
    running, done, error : Out(1)
        The TensorCore's STATUS bits.
    sc_csr : In(AXI4LiteSignature), sc_running, sc_done, sc_error : Out(1)
        The SparseCore's control and status (with a SparseCore).
    mem<p> : In(AXI4Signature)
        HBM controller port ``p`` for ``p >= 1`` (``p >= 2`` with a SparseCore).
    hbm_idle : Out(1)
        The controller has drained (a host that reads HBM through the device's backdoor waits
        for it).
    hbm_ch<c> : Out(ChannelSignature)
        HBM channel ``c``'s command and data interface (to the PHY, or the device model).
    ici_coord : In(coord_layout)
        This chip's coordinates in the pod.
    ici_link_out, ici_link_in, ici_inject, ici_eject : the router's links and local ports.
    """

    def __init__(self, config):
        self._tc = TensorCore(config.tensorcore)
        self._hbm = HBMController(config.hbm)
        self._router = Router(config.ici)
        self._blocks = {
            "tc": Submodule(config.tensorcore.name, self._tc, children=self._tc.submodules),
            "hbm": Submodule(config.hbm.name, self._hbm, children=self._hbm.submodules),
            "ici": Submodule(config.ici.router_name, self._router),
        }
        tc = self._tc.signature.members
        members = {name: tc[name] for name in ("csr", "running", "done", "error")}
        self._first_mem = 1
        if config.sparsecore is not None:
            self._sc = SparseCore(config.sparsecore)
            self._blocks["sc"] = Submodule(config.sparsecore.name, self._sc)
            sc = self._sc.signature.members
            members.update({f"sc_{name}": sc[name]
                            for name in ("csr", "running", "done", "error")})
            self._first_mem = 2
        members.update({f"mem{p}": In(axi_signature(config.hbm))
                        for p in range(self._first_mem, config.hbm.ports)})
        members["hbm_idle"] = Out(1)
        members.update({f"hbm_ch{c}": Out(ChannelSignature(config.hbm))
                        for c in range(config.hbm.channels)})
        router = self._router.signature.members
        members["ici_coord"] = In(coord_layout(config.ici))
        for name in ("link_out", "link_in", "inject", "eject"):
            members[f"ici_{name}"] = router[name]
        super().__init__(config, members)

    @property
    def submodules(self):
        return list(self._blocks.values())

    @property
    def extras(self):
        extras = dict(self._tc.extras)
        if "sc" in self._blocks:
            extras["sc_csr"] = self._sc.extras["csr"]
        return extras

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        tc = self._blocks["tc"].instance(m, "tensorcore")
        hbm = self._blocks["hbm"].instance(m, "hbm")
        ici = self._blocks["ici"].instance(m, "ici")
        wiring.connect(m, wiring.flipped(self.csr), tc.csr)
        m.d.comb += [self.running.eq(tc.running), self.done.eq(tc.done),
                     self.error.eq(tc.error)]
        wiring.connect(m, tc.axi, hbm.s0_axi)
        m.d.comb += self.hbm_idle.eq(hbm.idle)
        if "sc" in self._blocks:
            sc = self._blocks["sc"].instance(m, "sparsecore")
            wiring.connect(m, wiring.flipped(self.sc_csr), sc.csr)
            m.d.comb += [self.sc_running.eq(sc.running), self.sc_done.eq(sc.done),
                         self.sc_error.eq(sc.error)]
            wiring.connect(m, sc.axi, hbm.s1_axi)
        for p in range(self._first_mem, cfg.hbm.ports):
            wiring.connect(m, wiring.flipped(getattr(self, f"mem{p}")),
                           getattr(hbm, f"s{p}_axi"))
        for c in range(cfg.hbm.channels):
            wiring.connect(m, getattr(hbm, f"ch{c}"), wiring.flipped(getattr(self, f"hbm_ch{c}")))
        m.d.comb += ici.coord.eq(self.ici_coord)
        for p in range(cfg.ici.net_ports):
            wiring.connect(m, ici.link_out[p], wiring.flipped(self.ici_link_out[p]))
            wiring.connect(m, wiring.flipped(self.ici_link_in[p]), ici.link_in[p])
        for lp in range(cfg.ici.local_ports):
            wiring.connect(m, wiring.flipped(self.ici_inject[lp]), ici.inject[lp])
            wiring.connect(m, ici.eject[lp], wiring.flipped(self.ici_eject[lp]))
        return m
