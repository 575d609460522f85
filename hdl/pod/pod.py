"""The pod top (`podium generate pod`): an X x Y [x Z] torus of chips on the ICI network
(:class:`~hdl.ici.network.Network`), each chip's three local ports on its router's; the chip
(emitted once and instantiated per chip with its coordinates) is a simulation chip
(:class:`~.node.PodNode`) or, with ``tensorcore``, a TensorCore running programs
(:class:`~.tensor_node.TensorNode`).

The host side of every chip is a port of the top, as an array over the chips (chip ``n`` has
coordinates ``c0 + X * (c1 + Y * c2)`` = ``n``, as in the ICI): its memory port, and its
messages, collectives and completions (simulation chips) or its TensorCore's control and
status (``csr``, ``running``, ``done``, ``error``).
"""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..ici.config import node_coords
from ..ici.network import Network
from ..ici.router import COUNTERS
from ..lib.axi import AXI4LiteSignature, manager_signature
from ..lib.counter import COUNTER_WIDTH
from ..lib.hier import Submodule
from ..lib.sram import SRAM
from ..lib.tree import tree_sum
from ..tensorcore.core import CSR_ADDR_WIDTH, TensorCore
from ..top import Top
from .collective import descriptor_layout
from .config import LOCAL_PORTS
from .endpoint import command_layout, completion_layout, read_beat_layout, write_beat_layout
from .hbm_port import hbm_signature
from .node import READ_GROUPS, READERS, WRITE_GROUPS, PodNode
from .tensor_node import TensorNode

__all__ = ["Pod", "CHIP_COUNTERS"]

CHIP_COUNTERS = ("dropped", "seq_errors", "errors")
"""The chips' counters, summed over the pod."""


class Pod(Top):
    """A pod of ``chips`` chips.

    Members
    -------
    host_write : In(stream of write_beat_layout).array(chips)
    host_read : In(stream of read_beat_layout).array(chips)
    host_read_data : Out(stream of flit_bits).array(chips)
    message : In(stream of command_layout).array(chips)
    collective : In(stream of descriptor_layout).array(chips)
    busy : Out(1).array(chips)
    done : Out(stream of completion_layout).array(chips)
        Each simulation chip's :class:`~.node.PodNode` ports.
    hbm : Out(hbm_signature).array(chips)
        With ``hbm``: each chip's HBM port (its endpoint's accesses).
    dma : Out(AXI4Signature).array(chips)
        With ``hbm`` and ``tensorcore``: each chip's DMA port to the same HBM.
    csr : In(AXI4LiteSignature).array(chips), running, done, error : Out(1).array(chips)
        With ``tensorcore``, instead of ``message`` .. ``done``: each chip's TensorCore.
    dropped, seq_errors, errors : Out(32)
        The chips' counters, summed.
    crc_errors, retries, net_dropped : Out(32)
        The network's counters, summed.
    fault_rate : In(16), fault_seed : In(32), faults : Out(32)
        With ``faults``: as the network's (docs/ici.md).
    """

    def __init__(self, config):
        cfg = config
        ep, ici, n = cfg.endpoint, cfg.ici, cfg.chips
        self._net = Network(ici, faults=cfg.faults)
        members = {
            "host_write": In(stream.Signature(write_beat_layout(ep))).array(n),
            "host_read": In(stream.Signature(read_beat_layout(ep))).array(n),
            "host_read_data": Out(stream.Signature(ici.flit_bits)).array(n),
        }
        if cfg.tensorcore is None:
            sram = SRAM(f"{cfg.name}_mem", width=ici.flit_bits, depth=cfg.memory_words,
                        read_ports=len(READ_GROUPS), write_ports=len(WRITE_GROUPS),
                        byte_enable=True)
            self._node = Submodule(f"{cfg.name}_chip", PodNode(cfg, sram), children=[sram])
            members.update({
                "message": In(stream.Signature(command_layout(ep))).array(n),
                "collective": In(stream.Signature(descriptor_layout(ep))).array(n),
                "busy": Out(1).array(n),
                "done": Out(stream.Signature(completion_layout(ep))).array(n),
            })
        else:
            self._tc = TensorCore(cfg.tensorcore)
            tc = Submodule(cfg.tensorcore.name, self._tc, children=self._tc.submodules)
            self._node = Submodule(f"{cfg.name}_chip", TensorNode(cfg, tc), children=[tc])
            members.update({
                "csr": In(AXI4LiteSignature(addr_width=CSR_ADDR_WIDTH)).array(n),
                **{name: Out(1).array(n) for name in ("running", "done", "error")},
            })
            if cfg.hbm:
                members["dma"] = Out(manager_signature(cfg.tensorcore)).array(n)
        if cfg.hbm:
            members["hbm"] = Out(hbm_signature(ep, READERS)).array(n)
        members.update({
            **{name: Out(COUNTER_WIDTH) for name in CHIP_COUNTERS},
            **{("net_" + name if name == "dropped" else name): Out(COUNTER_WIDTH)
               for name in COUNTERS},
        })
        if cfg.faults:
            members.update({"fault_rate": In(16), "fault_seed": In(32),
                            "faults": Out(COUNTER_WIDTH)})
        super().__init__(config, members)

    @property
    def submodules(self):
        return [*self._net.submodules, self._node]

    @property
    def extras(self):
        """With ``tensorcore``: its register map (every chip's ``csr``)."""
        return {"csr": self._tc.extras["csr"]} if self._config.tensorcore else {}

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        m.submodules.net = net = self._net
        chips = []
        for c in range(cfg.chips):
            coords = node_coords(cfg.ici, c)
            chip = self._node.instance(m, f"chip{'_'.join(map(str, coords))}")
            for d, k in enumerate(coords):
                m.d.comb += chip.coords[f"c{d}"].eq(k)
            for port in range(LOCAL_PORTS):
                wiring.connect(m, chip.inject[port], net.inject[LOCAL_PORTS * c + port])
                wiring.connect(m, net.eject[LOCAL_PORTS * c + port], chip.eject[port])
            if cfg.tensorcore is None:
                ins, outs, bits = ("message", "collective"), ("done",), ("busy",)
            else:
                ins, outs, bits = ("csr",), ("dma",) * cfg.hbm, ("running", "done", "error")
            outs += ("hbm",) * cfg.hbm
            for name in ("host_write", "host_read", *ins):
                wiring.connect(m, wiring.flipped(getattr(self, name)[c]), getattr(chip, name))
            for name in ("host_read_data", *outs):
                wiring.connect(m, getattr(chip, name), wiring.flipped(getattr(self, name)[c]))
            for name in bits:
                m.d.comb += getattr(self, name)[c].eq(getattr(chip, name))
            chips.append(chip)
        for name in CHIP_COUNTERS:
            m.d.comb += getattr(self, name).eq(tree_sum(getattr(chip, name) for chip in chips))
        for name in COUNTERS:
            out = "net_" + name if name == "dropped" else name
            m.d.comb += getattr(self, out).eq(getattr(net, name))
        if cfg.faults:
            m.d.comb += [net.fault_rate.eq(self.fault_rate), net.fault_seed.eq(self.fault_seed),
                         self.faults.eq(net.faults)]
        return m
