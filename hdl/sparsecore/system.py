"""The SparseCore's standalone top: the SparseCore on port 0 of an HBM controller, the
controller's channel interfaces at the edge (the golden HBM device model in tests), the
SparseCore's control and status on ``csr``; or (``memory="axi"``, a test harness) the
SparseCore with its AXI4 port at the edge. Each block is the same Verilog module as on the
chip (emitted once, instantiated by name)."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from ..hbm.controller import HBMController
from ..hbm.interface import ChannelSignature
from ..lib.hier import Submodule
from ..top import Top
from .core import SparseCore

__all__ = ["SparseCoreSystem"]


class SparseCoreSystem(Top):
    """Members: ``csr``, ``running``, ``done``, ``error`` (the SparseCore's), ``hbm_ch<c>``,
    ``hbm_idle`` (the controller has drained: the device model holds every write answered);
    with ``memory="axi"`` the SparseCore's ``axi`` instead of the controller."""

    def __init__(self, config):
        self._sc = SparseCore(config.sparsecore)
        self._blocks = {"sc": Submodule(config.sparsecore.name, self._sc)}
        sc = self._sc.signature.members
        members = {name: sc[name] for name in ("csr", "running", "done", "error")}
        if config.memory == "axi":
            members["axi"] = sc["axi"]
        else:
            self._hbm = HBMController(config.hbm)
            self._blocks["hbm"] = Submodule(config.hbm.name, self._hbm,
                                            children=self._hbm.submodules)
            members.update({f"hbm_ch{c}": Out(ChannelSignature(config.hbm))
                            for c in range(config.hbm.channels)})
            members["hbm_idle"] = Out(1)
        super().__init__(config, members)

    @property
    def submodules(self):
        return list(self._blocks.values())

    @property
    def extras(self):
        return self._sc.extras

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        sc = self._blocks["sc"].instance(m, "sparsecore")
        wiring.connect(m, wiring.flipped(self.csr), sc.csr)
        m.d.comb += [self.running.eq(sc.running), self.done.eq(sc.done),
                     self.error.eq(sc.error)]
        if cfg.memory == "axi":
            wiring.connect(m, sc.axi, wiring.flipped(self.axi))
            return m
        hbm = self._blocks["hbm"].instance(m, "hbm")
        m.d.comb += self.hbm_idle.eq(hbm.idle)
        wiring.connect(m, sc.axi, hbm.s0_axi)
        for p in range(1, cfg.hbm.ports):
            # Unused ports: no requests, every response taken.
            port = getattr(hbm, f"s{p}_axi")
            m.d.comb += [port.bready.eq(1), port.rready.eq(1)]
        for c in range(cfg.hbm.channels):
            wiring.connect(m, getattr(hbm, f"ch{c}"), wiring.flipped(getattr(self, f"hbm_ch{c}")))
        return m
