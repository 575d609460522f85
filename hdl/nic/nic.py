"""A chip's network interface (docs/nic.md): the endpoint (:class:`~.interface.ChipEndpoint`:
Senders, Receivers, Responder, collective engine, message unit) around the chip's local
memory, on its router's three local ports, with the host's port on that memory.

Who drives it depends on the chip:

* a chip without a TensorCore (a pod's simulation chip): the host, on ``message`` and
  ``collective``; its completions queue for the host on ``done``; the local memory is an SRAM
  of its own (``words`` flits, emitted once by the chip);
* a chip with a TensorCore: the TensorCore's ICI queue, through an
  :class:`~.ici_unit.IciUnit`; a message that lands here and names one of the TensorCore's
  semaphores signals it (``arrive``), one that names none (``NO_SEM``) signals nothing, and
  one naming a semaphore the TensorCore does not have is counted in ``errors``; the local
  memory is the TensorCore's VMEM, on the VMEM ports its ICI queue brings.

With ``hbm`` the endpoint's (and the host's) accesses to space HBM leave on ``hbm``, an AXI4
manager port of the chip's HBM (:mod:`~.hbm_port`); without it they are counted in
``errors`` (a write dropped, a read answered with zeros).
"""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec.nic import READERS
from spec.protocol import LOCAL_PORTS, NO_SEM

from ..ici.packet import coord_layout, eject_layout
from ..lib.counter import COUNTER_WIDTH, EventCounter
from ..lib.queue import Queue
from ..lib.tree import tree_sum
from ..tensorcore.ici_port import ici_command_layout
from ..tensorcore.vmem_ports import vmem_read_signature, vmem_write_signature
from .collective import descriptor_layout
from .endpoint import command_layout, completion_layout, read_beat_layout, write_beat_layout
from .ici_unit import IciUnit
from .interface import (
    COMPLETION_DEPTH,
    READ_GROUPS,
    WRITE_GROUPS,
    ChipEndpoint,
    endpoint_memory,
    hbm_clients,
)
from .memory import LocalMemory

__all__ = ["NetworkInterface"]


class NetworkInterface(wiring.Component):
    """A chip's network interface (see the module docstring).

    Parameters
    ----------
    cfg : NICConfig
    words : int
        Flits of the local memory.
    staging_base : int
        Byte address of the bfloat16 reductions' staging area in it.
    tensorcore : TensorCoreConfig or None
        The TensorCore that drives it (its VMEM the local memory), or None: the host does.
    sram : SRAM or None
        Without a TensorCore: the local memory's macro (a read port per ``READ_GROUPS``
        group, a write port per ``WRITE_GROUPS`` group, byte enables, a flit wide).
    hbm : AXI4Signature or None
        The bus of the HBM port (an ``hbm_signature``), or None: no HBM.

    Members
    -------
    coords : In(coord_layout)
    inject : Out(stream of flit_bits).array(3), eject : In(stream of eject_layout).array(3)
        The router's local ports (0 requests, 1 responses, 2 the - ring's requests).
    host_write : In(stream of write_beat_layout), host_read : In(stream of read_beat_layout)
    host_read_data : Out(stream of flit_bits)
        The host's port on the local memory (and, with ``hbm``, on HBM).
    message : In(stream of command_layout), collective : In(stream of descriptor_layout)
    busy : Out(1), done : Out(stream of completion_layout)
        Without a TensorCore: the host's messages and collectives; the engine is running;
        completions, ``COMPLETION_DEPTH`` of them queued.
    ici : In(stream of ici_command_layout), ici_idle, ici_error : Out(1), ici_error_pc : Out(16)
    arrive : Out(1), arrive_sem : Out(5)
    vmem_rd : Out(vmem_read_signature).array(4), vmem_wr : Out(vmem_write_signature).array(2)
        With a TensorCore: its ICI queue and status, semaphore arrivals, VMEM ports.
    hbm : Out(AXI4Signature)
        With ``hbm``: the HBM port.
    dropped, seq_errors, errors : Out(32)
        Bad packets dropped and sequence mismatches (the Receivers'); refused messages and
        collectives, local memory accesses outside it, HBM error responses, messages naming
        no semaphore of the TensorCore.
    """

    def __init__(self, cfg, *, words, staging_base, tensorcore=None, sram=None, hbm=None):
        self._cfg, self._words, self._staging = cfg, words, staging_base
        self._tc, self._sram, self._hbm = tensorcore, sram, hbm
        ici = cfg.ici
        members = {
            "coords": In(coord_layout(ici)),
            "inject": Out(stream.Signature(ici.flit_bits)).array(LOCAL_PORTS),
            "eject": In(stream.Signature(eject_layout(ici))).array(LOCAL_PORTS),
            "host_write": In(stream.Signature(write_beat_layout(cfg))),
            "host_read": In(stream.Signature(read_beat_layout(cfg))),
            "host_read_data": Out(stream.Signature(ici.flit_bits)),
        }
        if tensorcore is None:
            members.update({
                "message": In(stream.Signature(command_layout(cfg))),
                "collective": In(stream.Signature(descriptor_layout(cfg))),
                "busy": Out(1),
                "done": Out(stream.Signature(completion_layout(cfg))),
            })
        else:
            members.update({
                "ici": In(stream.Signature(ici_command_layout(tensorcore))),
                "ici_idle": Out(1), "ici_error": Out(1), "ici_error_pc": Out(16),
                "arrive": Out(1), "arrive_sem": Out(5),
                "vmem_rd": Out(vmem_read_signature(tensorcore)).array(len(READ_GROUPS)),
                "vmem_wr": Out(vmem_write_signature(tensorcore)).array(len(WRITE_GROUPS)),
            })
        if hbm is not None:
            members["hbm"] = Out(hbm)
        members.update({name: Out(COUNTER_WIDTH) for name in ("dropped", "seq_errors",
                                                              "errors")})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        m.submodules.endpoint = ep = ChipEndpoint(cfg, staging_base=self._staging)
        m.submodules.memory = memory = LocalMemory(
            cfg, self._sram, words=self._words, writers=4, readers=READERS,
            read_groups=READ_GROUPS, write_groups=WRITE_GROUPS, vmem=self._tc)
        clients, errors = memory, [ep.engine_errors, ep.message_errors, memory.errors]
        if self._hbm is not None:
            clients, hbm_errors = hbm_clients(m, cfg, ep, memory, wiring.flipped(self.hbm),
                                              self._hbm)
            errors.append(hbm_errors)
        endpoint_memory(m, ep, clients, wiring.flipped(self.host_write),
                        wiring.flipped(self.host_read), wiring.flipped(self.host_read_data))
        m.d.comb += ep.coords.eq(self.coords)
        for port in range(LOCAL_PORTS):
            wiring.connect(m, ep.inject[port], wiring.flipped(self.inject[port]))
            wiring.connect(m, wiring.flipped(self.eject[port]), ep.eject[port])
        if self._tc is None:
            self._host_front(m, ep)
        else:
            errors.append(self._tensorcore_front(m, ep, memory))
        m.d.comb += [self.dropped.eq(ep.dropped), self.seq_errors.eq(ep.seq_errors),
                     self.errors.eq(tree_sum(errors))]
        return m

    def _host_front(self, m, ep):
        """The host's messages and collectives in, its completions queued out."""
        wiring.connect(m, wiring.flipped(self.message), ep.message)
        wiring.connect(m, wiring.flipped(self.collective), ep.collective)
        m.submodules.done_queue = queue = Queue(completion_layout(self._cfg), COMPLETION_DEPTH)
        wiring.connect(m, ep.done, queue.i)
        wiring.connect(m, queue.o, wiring.flipped(self.done))
        m.d.comb += self.busy.eq(ep.busy)

    def _tensorcore_front(self, m, ep, memory):
        """The TensorCore's ICI queue in, its semaphores signalled by completions; returns the
        counter of completions naming a semaphore it does not have."""
        for port, vmem in zip(memory.rd, self.vmem_rd, strict=True):
            wiring.connect(m, port, wiring.flipped(vmem))
        for port, vmem in zip(memory.wr, self.vmem_wr, strict=True):
            wiring.connect(m, port, wiring.flipped(vmem))
        m.submodules.ici = unit = IciUnit(self._cfg, self._tc)
        wiring.connect(m, wiring.flipped(self.ici), unit.cmd)
        wiring.connect(m, unit.message, ep.message)
        wiring.connect(m, unit.collective, ep.collective)
        m.d.comb += [unit.messages_idle.eq(ep.messages_idle), unit.engine_busy.eq(ep.busy),
                     unit.engine_errors.eq(ep.engine_errors), self.ici_idle.eq(unit.idle),
                     self.ici_error.eq(unit.error), self.ici_error_pc.eq(unit.error_pc)]
        done = ep.done.payload
        ours = done.sem < self._tc.semaphores
        m.d.comb += [ep.done.ready.eq(1), self.arrive.eq(ep.done.valid & ours),
                     self.arrive_sem.eq(done.sem)]
        m.submodules.lost = lost = EventCounter(width=COUNTER_WIDTH)
        m.d.comb += lost.event.eq(ep.done.valid & ~ours & (done.sem != NO_SEM))
        return lost.count
