"""The VPU alone on ports (block ``vpu``): the test top the VPU's testbench drives, with Python
in the place of the VMEM (verification/tb/vpu.py)."""


from amaranth.hdl import Module
from amaranth.lib import wiring

from ..top import Top
from .vpu import VPU

__all__ = ["VPUTop"]


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
                        "vmem_rows": tc.vmem_rows, "vmath": tc.vmath,
                        "vtrans": tc.vtrans}}

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
