"""A stream front end for a VMEM read port (hdl/tensorcore/vmem_ports.py): row indices in, rows
out, in order. The port hands its data over exactly one cycle after the handshake and cannot
wait, so the reader issues a read only when its row queue is sure to have room for the answer
(counting the read in flight); the engine behind it then takes rows when it likes.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.queue import Queue
from .vmem_ports import row_bits, vmem_read_signature

__all__ = ["RowReader"]


class RowReader(wiring.Component):
    """Reads the rows whose indices arrive on ``addr`` and delivers them on ``rows``.

    Parameters
    ----------
    config : TensorCoreConfig
    depth : int
        Rows the queue holds. Three keep one read per cycle going when the consumer takes a
        row in the cycle it arrives at the head (a row is counted from its read to the cycle
        after it leaves).
    addr_depth : int
        Row indices waiting for the port.

    Members
    -------
    addr : In(stream of row index)
    port : Out(vmem_read_signature)
    rows : Out(stream of a row)
    idle : Out(1)
        Nothing queued and no read in flight.

    Latency: a row index taken on ``addr`` is on the port from the next cycle; its row is on
    ``rows`` two cycles after the port's handshake. Throughput: one row per cycle while the
    port is ready and ``rows`` is taken. Backpressure: ``port.ready`` low holds the request;
    ``rows`` not taken stops new reads once the queue is full.
    """

    def __init__(self, config, *, depth=3, addr_depth=2):
        self._depth = depth
        self._addr_depth = addr_depth
        self._config = config
        super().__init__({
            "addr": In(stream.Signature(row_bits(config))),
            "port": Out(vmem_read_signature(config)),
            "rows": Out(stream.Signature(8 * config.row_bytes)),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.addr_queue = addr = Queue(row_bits(self._config), self._addr_depth)
        m.submodules.row_queue = rows = Queue(8 * self._config.row_bytes, self._depth)
        wiring.connect(m, wiring.flipped(self.addr), addr.i)
        wiring.connect(m, rows.o, wiring.flipped(self.rows))

        in_flight = Signal()
        room = rows.level + in_flight < self._depth
        issue = self.port.valid & self.port.ready
        m.d.comb += [
            self.port.valid.eq(addr.o.valid & room),
            self.port.addr.eq(addr.o.payload),
            addr.o.ready.eq(self.port.ready & room),
            rows.i.valid.eq(in_flight),
            rows.i.payload.eq(self.port.data),
            self.idle.eq(~addr.o.valid & ~in_flight & ~rows.o.valid),
        ]
        m.d.sync += in_flight.eq(issue)
        return m
