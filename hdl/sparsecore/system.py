"""The SparseCore's standalone top: the SparseCore on port 0 of an HBM controller, the
controller's channel interfaces at the edge (the golden HBM device model in tests), the
SparseCore's control and status on ``csr``. Each block is the same Verilog module as on the
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
    ``hbm_idle`` (the controller has drained: the device model holds every write answered)."""

    def __init__(self, config):
        self._sc = SparseCore(config.sparsecore)
        self._hbm = HBMController(config.hbm)
        self._blocks = {
            "sc": Submodule(config.sparsecore.name, self._sc),
            "hbm": Submodule(config.hbm.name, self._hbm, children=self._hbm.submodules),
        }
        sc = self._sc.signature.members
        members = {name: sc[name] for name in ("csr", "running", "done", "error")}
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
        hbm = self._blocks["hbm"].instance(m, "hbm")
        wiring.connect(m, wiring.flipped(self.csr), sc.csr)
        m.d.comb += [self.running.eq(sc.running), self.done.eq(sc.done),
                     self.error.eq(sc.error), self.hbm_idle.eq(hbm.idle)]
        wiring.connect(m, sc.axi, hbm.s0_axi)
        for p in range(1, cfg.hbm.ports):
            # Unused ports: no requests, every response taken.
            port = getattr(hbm, f"s{p}_axi")
            m.d.comb += [port.bready.eq(1), port.rready.eq(1)]
        for c in range(cfg.hbm.channels):
            wiring.connect(m, getattr(hbm, f"ch{c}"), wiring.flipped(getattr(self, f"hbm_ch{c}")))
        return m
