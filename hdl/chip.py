"""The chip: Podium's blocks composed into one top.

    Chip
    ├── HBM controller   AXI4 ports ``mem<p>`` in, channel interfaces ``hbm_ch<c>`` out
    ├── ICI router       one node of the pod: links ``ici_link_*``, local ports ``ici_inject`` /
    │                    ``ici_eject``, coordinates ``ici_coord``
    └── MXU              ``mxu_cmd``, ``mxu_w``, ``mxu_a`` in, ``mxu_c`` out

Each block is the same Verilog module as when it is generated alone (emitted once, instantiated
by name), joined here with ``wiring.connect``. What is not yet on the chip reaches the ports:
the engines that will drive the MXU and the HBM ports (TensorCore, SparseCore, DMA) take them
over without reshaping the blocks.
"""

import hashlib
import json
from dataclasses import dataclass

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import Config
from .hbm.axi_port import axi_signature
from .hbm.config import HBMConfig
from .hbm.controller import HBMController
from .hbm.interface import ChannelSignature
from .ici.config import ICIConfig
from .ici.packet import coord_layout
from .ici.router import Router
from .lib.hier import Submodule
from .mxu.config import MXUConfig
from .mxu.unit import MXU
from .top import Top

__all__ = ["ChipConfig", "Chip"]


@dataclass(frozen=True)
class ChipConfig(Config):
    """A chip: the configuration of each of its blocks.

    Parameters
    ----------
    mxu : MXUConfig
    hbm : HBMConfig
    ici : ICIConfig
        The pod this chip is a node of (the router's ports and formats follow from it).
    """

    KIND = "chip"

    mxu: MXUConfig = MXUConfig()
    hbm: HBMConfig = HBMConfig()
    ici: ICIConfig = ICIConfig()

    @property
    def name(self):
        digest = hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode())
        return f"podium_chip_{digest.hexdigest()[:8]}"


class Chip(Top):
    """A chip (see the module docstring for its blocks).

    Members
    -------
    mem<p> : In(AXI4Signature)
        HBM controller port ``p``.
    hbm_ch<c> : Out(ChannelSignature)
        HBM channel ``c``'s command and data interface (to the PHY, or the device model).
    ici_coord : In(coord_layout)
        This chip's coordinates in the pod.
    ici_link_out, ici_link_in : arrays of the router's links, one per network port.
    ici_inject, ici_eject : the router's local ports.
    mxu_cmd, mxu_w, mxu_a, mxu_c : the MXU's streams.
    """

    def __init__(self, config):
        self._hbm = HBMController(config.hbm)
        self._router = Router(config.ici)
        self._mxu = MXU(config.mxu)
        self._blocks = {
            "hbm": Submodule(config.hbm.name, self._hbm, children=self._hbm.submodules),
            "ici": Submodule(config.ici.router_name, self._router),
            "mxu": Submodule(config.mxu.name, self._mxu, children=self._mxu.submodules),
        }
        members = {f"mem{p}": In(axi_signature(config.hbm)) for p in range(config.hbm.ports)}
        members.update({f"hbm_ch{c}": Out(ChannelSignature(config.hbm))
                        for c in range(config.hbm.channels)})
        router = self._router.signature.members
        members["ici_coord"] = In(coord_layout(config.ici))
        for name in ("link_out", "link_in", "inject", "eject"):
            members[f"ici_{name}"] = router[name]
        for name in ("cmd", "w", "a", "c"):
            members[f"mxu_{name}"] = self._mxu.signature.members[name]
        super().__init__(config, members)

    @property
    def submodules(self):
        return list(self._blocks.values())

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        hbm = self._blocks["hbm"].instance(m, "hbm")
        ici = self._blocks["ici"].instance(m, "ici")
        mxu = self._blocks["mxu"].instance(m, "mxu")
        for p in range(cfg.hbm.ports):
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
        for name in ("cmd", "w", "a"):
            wiring.connect(m, wiring.flipped(getattr(self, f"mxu_{name}")), getattr(mxu, name))
        wiring.connect(m, mxu.c, wiring.flipped(self.mxu_c))
        return m
