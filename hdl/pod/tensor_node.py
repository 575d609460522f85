"""A pod chip that runs programs (docs/pod.md, "Programs on the pod"): a TensorCore whose ICI
queue drives the chip's ICI endpoint, its VMEM the endpoint's memory.

    csr ─► TensorCore ─ ici queue ─► IciUnit ─┬─► MessageUnit (ici.send, ici.read)
              ▲  VMEM ◄─ LocalMemory ◄─┐      └─► CollectiveEngine (ici.coll)
              │                        └── ChipEndpoint ◄─► router ports 0..2
              └── arrive (a landed message's semaphore) ◄── completions
    host_write, host_read ─► LocalMemory (the host's VMEM port)

With ``PodConfig.hbm`` the chip has an HBM: its DMA's AXI4 port is ``dma`` and its endpoint's
(and the host's) accesses to space HBM leave on ``hbm`` (:mod:`~.hbm_port`), two ports of the
chip's one HBM controller (as hdl/chip.py joins its TensorCore and SparseCore). Without it the
chip is VMEM-only: the DMA's port ends in :class:`~hdl.lib.axi.AxiNoMemory`, so a ``dma.load``
or ``dma.store`` fails with DMA_RESPONSE, and an ICI access to HBM is counted in ``errors``
(a write dropped, a read answered with zeros). A message that lands here and names a
semaphore of this TensorCore signals it (``ici.send``'s ``sem``, an ``ici.read``'s own);
one that names none (31) signals nothing, and one naming a semaphore this TensorCore does not
have is counted in ``errors``.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..ici.packet import coord_layout, eject_layout
from ..lib.axi import AXI4LiteSignature, AxiNoMemory, manager_signature
from ..lib.counter import COUNTER_WIDTH, EventCounter
from ..lib.tree import tree_sum
from ..tensorcore.core import CSR_ADDR_WIDTH
from ..tensorcore.ici_port import IciKind, ici_command_layout
from ..tensorcore.isa import Coll, IciSpace
from .collective import descriptor_layout
from .config import LOCAL_PORTS, NO_SEM, REQUEST_PORT
from .endpoint import Kind, Space, command_layout, read_beat_layout, write_beat_layout
from .hbm_port import hbm_signature
from .memory import LocalMemory
from .node import (
    READ_GROUPS,
    READERS,
    WRITE_GROUPS,
    ChipEndpoint,
    endpoint_memory,
    hbm_clients,
)

__all__ = ["IciUnit", "TensorNode"]


def _space(ici_space):
    """The endpoint's :class:`~.endpoint.Space` of an instruction's memory field."""
    return Mux(ici_space == IciSpace.HBM, Space.HBM, Space.VMEM)


class IciUnit(wiring.Component):
    """The TensorCore's ICI engine: each command of its ICI queue becomes a message for the
    :class:`~.node.MessageUnit` (``ici.send``: a ``WRITE`` of ``bytes`` local bytes to
    ``remote`` on ``chip``; ``ici.read``: a ``READ`` of ``bytes`` remote bytes into
    ``local``; each address in the memory its ``lspace`` / ``rspace`` names) or a
    descriptor for the :class:`~.collective.CollectiveEngine` (``ici.coll``, its buffer in
    ``lspace``), taken as soon as its unit takes it. A message to a chip past the pod or
    longer than ``max_message``, or a ring collective along a dimension the pod does not have
    (the descriptor could not name it), is consumed and reported on ``error`` with its PC, as
    is a collective the engine refuses (its ``errors`` counter moved). ``idle``: the message
    unit has read every byte of the messages given to it, and no collective is running.

    Members
    -------
    cmd : In(stream of ici_command_layout)
    message : Out(stream of command_layout)
    collective : Out(stream of descriptor_layout)
    messages_idle, engine_busy : In(1), engine_errors : In(32)
    idle, error : Out(1), error_pc : Out(16)
    """

    def __init__(self, cfg):
        self._cfg = cfg
        ep = cfg.endpoint
        super().__init__({
            "cmd": In(stream.Signature(ici_command_layout(cfg.tensorcore))),
            "message": Out(stream.Signature(command_layout(ep))),
            "collective": Out(stream.Signature(descriptor_layout(ep))),
            "messages_idle": In(1), "engine_busy": In(1), "engine_errors": In(COUNTER_WIDTH),
            "idle": Out(1), "error": Out(1), "error_pc": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        ici = cfg.ici
        c = self.cmd.payload
        coll = c.kind == IciKind.COLL
        ring = c.coll.as_value() <= Coll.ALL_REDUCE.value
        bad = Mux(coll, ring & (c.dim >= ici.ndims),
                  (c.chip >= ici.nodes) | (c.bytes > cfg.endpoint.max_message))
        msg = self.message.payload
        stride = 1
        for d, k in enumerate(ici.dims):
            m.d.comb += msg.dst[f"c{d}"].eq((c.chip // stride) % k)
            stride *= k
        m.d.comb += [
            msg.kind.eq(Mux(c.kind == IciKind.SEND, Kind.WRITE, Kind.READ)),
            msg.dst_port.eq(REQUEST_PORT), msg.space.eq(_space(c.rspace)),
            msg.address.eq(c.remote), msg.bytes.eq(c.bytes), msg.op.eq(c.op), msg.fmt.eq(c.fmt),
            msg.sem.eq(c.sem), msg.reply_space.eq(_space(c.lspace)),
            msg.reply_address.eq(c.local),
        ]
        desc = self.collective.payload
        m.d.comb += [desc.op.eq(c.coll), desc.dim.eq(c.dim), desc.fmt.eq(c.fmt),
                     desc.space.eq(_space(c.lspace)), desc.address.eq(c.local),
                     desc.length.eq(c.bytes)]
        m.d.comb += [
            self.message.valid.eq(self.cmd.valid & ~coll & ~bad),
            self.collective.valid.eq(self.cmd.valid & coll & ~bad),
            self.cmd.ready.eq(bad | Mux(coll, self.collective.ready, self.message.ready)),
            self.idle.eq(self.messages_idle & ~self.engine_busy),
        ]
        # The engine counts a refused descriptor (or an all-to-all entry too long to send):
        # the collective it was given last is at fault.
        coll_pc, seen = Signal(16), Signal(COUNTER_WIDTH)
        with m.If(self.collective.valid & self.collective.ready):
            m.d.sync += coll_pc.eq(c.pc)
        m.d.sync += seen.eq(self.engine_errors)
        with m.If(self.cmd.valid & bad):
            m.d.comb += [self.error.eq(1), self.error_pc.eq(c.pc)]
        with m.Elif(self.engine_errors != seen):
            m.d.comb += [self.error.eq(1), self.error_pc.eq(coll_pc)]
        return m


class TensorNode(wiring.Component):
    """One program-running chip of a pod (see the module docstring).

    ``cfg`` is the PodConfig (its ``tensorcore`` set), ``tensorcore`` the
    :class:`~hdl.lib.hier.Submodule` of its TensorCore, emitted once by the top.

    Members
    -------
    coords : In(coord_layout)
    inject : Out(stream of flit_bits).array(3), eject : In(stream of eject_layout).array(3)
        The router's local ports.
    csr : In(AXI4LiteSignature)
        The TensorCore's control and status (docs/tensorcore.md).
    running, done, error : Out(1)
        Its STATUS bits.
    host_write : In(stream of write_beat_layout), host_read : In(stream of read_beat_layout)
    host_read_data : Out(stream of flit_bits)
        The host's port on VMEM (load operands, read results; a flit is a VMEM row) and,
        with ``hbm``, on HBM.
    dma : Out(AXI4Signature), hbm : Out(hbm_signature)
        With ``hbm``: the DMA's and the endpoint's ports of the chip's HBM controller.
    dropped, seq_errors, errors : Out(32)
        The endpoint's bad packets and sequence mismatches; refused messages and
        collectives, VMEM accesses outside VMEM, messages naming no semaphore of this chip,
        HBM error responses to the endpoint.
    """

    def __init__(self, cfg, tensorcore):
        self._cfg, self._tc = cfg, tensorcore
        ep, ici = cfg.endpoint, cfg.ici
        super().__init__({
            "coords": In(coord_layout(ici)),
            "inject": Out(stream.Signature(ici.flit_bits)).array(LOCAL_PORTS),
            "eject": In(stream.Signature(eject_layout(ici))).array(LOCAL_PORTS),
            "csr": In(AXI4LiteSignature(addr_width=CSR_ADDR_WIDTH)),
            "running": Out(1), "done": Out(1), "error": Out(1),
            "host_write": In(stream.Signature(write_beat_layout(ep))),
            "host_read": In(stream.Signature(read_beat_layout(ep))),
            "host_read_data": Out(stream.Signature(ici.flit_bits)),
            "dropped": Out(COUNTER_WIDTH), "seq_errors": Out(COUNTER_WIDTH),
            "errors": Out(COUNTER_WIDTH),
            **({"dma": Out(manager_signature(cfg.tensorcore)),
                "hbm": Out(hbm_signature(ep, READERS))} if cfg.hbm else {}),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        ep_cfg, tc_cfg = cfg.endpoint, cfg.tensorcore
        tc = self._tc.instance(m, "tensorcore")
        m.submodules.endpoint = ep = ChipEndpoint(ep_cfg, staging_base=cfg.staging_base)
        m.submodules.memory = memory = LocalMemory(
            ep_cfg, words=cfg.memory_words, writers=4, readers=READERS, read_groups=READ_GROUPS,
            write_groups=WRITE_GROUPS, vmem=tc_cfg)
        clients, errors = memory, [ep.engine_errors, ep.message_errors, memory.errors]
        if cfg.hbm:
            clients, hbm_errors = hbm_clients(m, ep_cfg, ep, memory, wiring.flipped(self.hbm))
            errors.append(hbm_errors)
            wiring.connect(m, tc.axi, wiring.flipped(self.dma))
        else:
            m.submodules.no_hbm = no_hbm = AxiNoMemory(manager_signature(tc_cfg))
            wiring.connect(m, tc.axi, no_hbm.axi)
        endpoint_memory(m, ep, clients, wiring.flipped(self.host_write),
                        wiring.flipped(self.host_read), wiring.flipped(self.host_read_data))
        for port, vmem in zip(memory.rd, tc.vmem_rd, strict=True):
            wiring.connect(m, port, vmem)
        for port, vmem in zip(memory.wr, tc.vmem_wr, strict=True):
            wiring.connect(m, port, vmem)
        m.d.comb += ep.coords.eq(self.coords)
        for port in range(LOCAL_PORTS):
            wiring.connect(m, ep.inject[port], wiring.flipped(self.inject[port]))
            wiring.connect(m, wiring.flipped(self.eject[port]), ep.eject[port])

        wiring.connect(m, wiring.flipped(self.csr), tc.csr)
        m.d.comb += [self.running.eq(tc.running), self.done.eq(tc.done),
                     self.error.eq(tc.error)]

        m.submodules.ici = unit = IciUnit(cfg)
        wiring.connect(m, tc.ici, unit.cmd)
        wiring.connect(m, unit.message, ep.message)
        wiring.connect(m, unit.collective, ep.collective)
        m.d.comb += [unit.messages_idle.eq(ep.messages_idle), unit.engine_busy.eq(ep.busy),
                     unit.engine_errors.eq(ep.engine_errors), tc.ici_idle.eq(unit.idle),
                     tc.ici_error.eq(unit.error), tc.ici_error_pc.eq(unit.error_pc)]

        # Completions signal the semaphore they name; acknowledgements name none.
        done = ep.done.payload
        ours = done.sem < tc_cfg.semaphores
        m.d.comb += [ep.done.ready.eq(1), tc.arrive.eq(ep.done.valid & ours),
                     tc.arrive_sem.eq(done.sem)]
        m.submodules.lost = lost = EventCounter(width=COUNTER_WIDTH)
        m.d.comb += lost.event.eq(ep.done.valid & ~ours & (done.sem != NO_SEM))
        m.d.comb += [self.dropped.eq(ep.dropped), self.seq_errors.eq(ep.seq_errors),
                     self.errors.eq(tree_sum([*errors, lost.count]))]
        return m
