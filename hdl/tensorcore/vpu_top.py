"""The VPU alone on ports (block ``vpu``): the test top the VPU's testbench drives, with Python
in the place of the VMEM (verification/tb/vpu.py)."""

from dataclasses import dataclass

from amaranth.hdl import Module
from amaranth.lib import wiring

from spec.config import Config
from spec.tensorcore import TensorCoreConfig

from ..top import Top
from .vpu import VPU

__all__ = ["VPUTopConfig", "VPUTop"]


@dataclass(frozen=True)
class VPUTopConfig(Config):
    """A VPU sized by a TensorCore configuration (only ``row_bytes`` and ``vmem_bytes`` shape
    it: the lanes and the row index width).

    Parameters
    ----------
    tensorcore : TensorCoreConfig
    """

    KIND = "VPU top"

    tensorcore: TensorCoreConfig = TensorCoreConfig()

    @property
    def name(self):
        tc = self.tensorcore
        return f"podium_vpu_{tc.lanes}l_{tc.vmem_rows}r"


class VPUTop(Top):
    """The VPU's ports as the top's (see :class:`~hdl.tensorcore.vpu.VPU`)."""

    def __init__(self, config):
        self._vpu = VPU(config.tensorcore, prefix=config.name)
        super().__init__(config, dict(self._vpu.signature.members))

    @property
    def submodules(self):
        return self._vpu.submodules

    @property
    def extras(self):
        tc = self._config.tensorcore
        return {"vpu": {"lanes": tc.lanes, "row_bytes": tc.row_bytes,
                        "vmem_rows": tc.vmem_rows}}

    def elaborate(self, platform):
        m = Module()
        m.submodules.vpu = vpu = self._vpu
        for name, member in self.signature.members.items():
            if member.is_port:
                m.d.comb += (getattr(self, name).eq(getattr(vpu, name)) if member.flow ==
                             wiring.Out else getattr(vpu, name).eq(getattr(self, name)))
            else:
                inner, outer = getattr(vpu, name), getattr(self, name)
                wiring.connect(m, wiring.flipped(outer), inner)
        return m
