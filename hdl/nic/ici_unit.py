"""The network interface's engine of a TensorCore's ICI queue (docs/nic.md, "Programs"): each
``ici.send``, ``ici.read`` and ``ici.coll`` the TensorCore dispatches becomes a message for
the message unit or a descriptor for the collective engine; one the pod cannot carry is
refused with its PC.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec import protocol
from spec.protocol import REQUEST_PORT, RING_COLLECTIVES

from ..ici.packet import node_coordinates
from ..lib.codes import hw
from ..lib.counter import COUNTER_WIDTH
from ..tensorcore.ici_port import IciKind, ici_command_layout
from .collective import descriptor_layout
from .endpoint import command_layout

__all__ = ["IciUnit"]

PacketKind = hw(protocol.PacketKind)


class IciUnit(wiring.Component):
    """The TensorCore's ICI engine: each command of its ICI queue becomes a message for the
    :class:`~.interface.MessageUnit` (``ici.send``: a ``WRITE`` of ``bytes`` local bytes to
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

    def __init__(self, cfg, tensorcore):
        self._cfg = cfg
        super().__init__({
            "cmd": In(stream.Signature(ici_command_layout(tensorcore))),
            "message": Out(stream.Signature(command_layout(cfg))),
            "collective": Out(stream.Signature(descriptor_layout(cfg))),
            "messages_idle": In(1), "engine_busy": In(1), "engine_errors": In(COUNTER_WIDTH),
            "idle": Out(1), "error": Out(1), "error_pc": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        ici = cfg.ici
        c = self.cmd.payload
        coll = c.kind == IciKind.COLL
        ring = c.coll.as_value().matches(*RING_COLLECTIVES)
        bad = Mux(coll, ring & (c.dim >= ici.ndims),
                  (c.chip >= ici.nodes) | (c.bytes > cfg.max_message))
        msg = self.message.payload
        for d, coord in enumerate(node_coordinates(ici, c.chip)):
            m.d.comb += msg.dst[f"c{d}"].eq(coord)
        m.d.comb += [
            msg.kind.eq(Mux(c.kind == IciKind.SEND, PacketKind.WRITE, PacketKind.READ)),
            msg.dst_port.eq(REQUEST_PORT), msg.space.eq(c.rspace),
            msg.address.eq(c.remote), msg.bytes.eq(c.bytes), msg.op.eq(c.op), msg.fmt.eq(c.fmt),
            msg.sem.eq(c.sem), msg.reply_space.eq(c.lspace),
            msg.reply_address.eq(c.local),
        ]
        desc = self.collective.payload
        m.d.comb += [desc.op.eq(c.coll), desc.dim.eq(c.dim), desc.fmt.eq(c.fmt),
                     desc.space.eq(c.lspace), desc.address.eq(c.local),
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
