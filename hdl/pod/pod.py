"""The pod top (`podium generate pod`): an X x Y [x Z] torus of chips on the ICI network
(:class:`~hdl.ici.network.Network`), each chip (:class:`~hdl.chip.Chip`, emitted once and
instantiated per node with its coordinates) on its router's three local ports.

The host side of every chip is a port of the top, as an array over the chips (chip ``n`` has
coordinates ``c0 + X * (c1 + Y * c2)`` = ``n``, spec/topology.py): its memory port, and its
messages, collectives and completions (chips without a TensorCore) or its TensorCore's
control and status (``csr``, ``running``, ``done``, ``error``); with ``memory`` "axi" each
chip's HBM ports (``dma``, ``hbm``), with ``memory`` "hbm" its HBM controller's channels.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from spec.protocol import LOCAL_PORTS
from spec.topology import node_coords

from ..chip import NIC_COUNTERS, Chip
from ..ici.network import Network
from ..ici.router import COUNTERS
from ..lib.counter import COUNTER_WIDTH
from ..lib.hier import Submodule
from ..lib.tree import tree_sum
from ..top import Top

__all__ = ["Pod", "CHIP_COUNTERS"]

CHIP_COUNTERS = NIC_COUNTERS
"""The chips' counters, summed over the pod."""

_HOST = ("host_write", "host_read", "host_read_data")
_SIMULATION = ("message", "collective", "busy", "done")
_TENSORCORE = ("csr", "running", "done", "error")
_AXI = {"dma": "dma", "nic_hbm": "hbm"}
"""A chip's HBM ports with ``memory`` "axi" and their names on the pod."""


class Pod(Top):
    """A pod of ``chips`` chips.

    Members
    -------
    host_write, host_read : In(stream).array(chips), host_read_data : Out(stream).array(chips)
    message, collective : In(stream).array(chips), busy : Out(1).array(chips)
    done : Out(stream of completion_layout).array(chips)
        Each chip's (without a TensorCore) network interface ports.
    csr : In(AXI4LiteSignature).array(chips), running, done, error : Out(1).array(chips)
        With a TensorCore, instead of ``message`` .. ``done``: each chip's TensorCore.
    dma, hbm : Out(AXI4Signature).array(chips)
        With ``memory`` "axi": each chip's DMA port (with a TensorCore) and network
        interface port to its HBM.
    hbm_idle : Out(1).array(chips), hbm_ch<c> : Out(ChannelSignature).array(chips)
        With ``memory`` "hbm": each chip's HBM controller's drain flag and channel ``c``'s
        command and data interface (to the device models); its free ports stay unused.
    dropped, seq_errors, errors : Out(32)
        The chips' counters, summed.
    crc_errors, retries, net_dropped : Out(32)
        The network's counters, summed.
    fault_rate : In(16), fault_seed : In(32), faults : Out(32)
        With ``faults``: as the network's (docs/ici.md).
    """

    def __init__(self, config):
        cfg = config
        self._net = Network(cfg.ici, faults=cfg.faults)
        chip = Chip(cfg.chip)
        self._chip = Submodule(f"{cfg.name}_chip", chip, children=chip.submodules)
        ports = chip.signature.members
        hbm = ("hbm_idle", *(f"hbm_ch{c}" for c in range(cfg.chip.hbm.channels)))
        self._ports = [p for p in (*_HOST, *_SIMULATION, *_TENSORCORE, *_AXI, *hbm)
                       if p in ports]
        members = {_AXI.get(p, p): ports[p].array(cfg.chips) for p in self._ports}
        members.update({
            **{name: Out(COUNTER_WIDTH) for name in CHIP_COUNTERS},
            **{("net_" + name if name == "dropped" else name): Out(COUNTER_WIDTH)
               for name in COUNTERS},
        })
        if cfg.faults:
            members.update({"fault_rate": In(16), "fault_seed": In(32),
                            "faults": Out(COUNTER_WIDTH)})
        self._chip_cfg = chip
        super().__init__(config, members)

    @property
    def submodules(self):
        return [*self._net.submodules, self._chip]

    @property
    def extras(self):
        """With a TensorCore: its register map (every chip's ``csr``)."""
        return self._chip_cfg.extras

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        m.submodules.net = net = self._net
        chips = []
        for c in range(cfg.chips):
            coords = node_coords(cfg.ici.dims, c)
            chip = self._chip.instance(m, f"chip{'_'.join(map(str, coords))}")
            for d, k in enumerate(coords):
                m.d.comb += chip.ici_coord[f"c{d}"].eq(k)
            for port in range(LOCAL_PORTS):
                wiring.connect(m, chip.ici_inject[port], net.inject[LOCAL_PORTS * c + port])
                wiring.connect(m, net.eject[LOCAL_PORTS * c + port], chip.ici_eject[port])
            for name in self._ports:
                _join(m, self.signature.members[_AXI.get(name, name)],
                      getattr(self, _AXI.get(name, name))[c], getattr(chip, name))
            chips.append(chip)
        for name in CHIP_COUNTERS:
            m.d.comb += getattr(self, name).eq(
                tree_sum(getattr(chip, f"nic_{name}") for chip in chips))
        for name in COUNTERS:
            out = "net_" + name if name == "dropped" else name
            m.d.comb += getattr(self, out).eq(getattr(net, name))
        if cfg.faults:
            m.d.comb += [net.fault_rate.eq(self.fault_rate), net.fault_seed.eq(self.fault_seed),
                         self.faults.eq(net.faults)]
        return m


def _join(m, member, outer, inner):
    """Connect a port of the pod (``outer``, an element of the array ``member``) to its chip's
    ``inner``."""
    flow = member.flow
    if member.is_signature:
        if flow == In:
            wiring.connect(m, wiring.flipped(outer), inner)
        else:
            wiring.connect(m, inner, wiring.flipped(outer))
    elif flow == In:
        m.d.comb += inner.eq(outer)
    else:
        m.d.comb += outer.eq(inner)
