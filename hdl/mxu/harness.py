"""A self-running MXU for long simulations: operands in memories, results into a memory.

Driving every cycle from Python costs tens of microseconds a cycle, so a long GEMM in cocotb
measures Python, not the simulator. This top puts an MXU between memories that a testbench
fills through the simulator's VPI before the run (``cmd_mem``, ``w_mem``, ``a_mem``) and reads
after it (``c_mem``): the testbench pulses ``start``, waits for ``done`` and reads the cycle
counter. Streams run at full rate (results are always taken), so the cycle count is the MXU's.
"""


from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.queue import Queue
from ..top import Top, describe_shape
from .accumulator import output_layout
from .formats import arithmetic
from .unit import MXU, command_layout

__all__ = ["MXUHarness"]


class _MemoryStreamer(wiring.Component):
    """Streams entries ``0 .. count-1`` of a memory at one per cycle, through a small FIFO that
    absorbs the read latency, so backpressure never loses a beat."""

    def __init__(self, port, width, depth):
        self._port, self._width, self._depth = port, width, depth
        super().__init__({
            "start": In(1),
            "count": In(range(depth + 1)),
            "o": Out(stream.Signature(width)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        port = self._port
        m.submodules.queue = buf = Queue(self._width, 3)
        ptr = Signal(range(self._depth + 1))
        end = Signal(range(self._depth + 1))
        inflight = Signal()
        issue = (ptr != end) & (buf.level + inflight < 3)
        with m.If(self.start):
            m.d.sync += [ptr.eq(0), end.eq(self.count)]
        with m.Elif(issue):
            m.d.sync += ptr.eq(ptr + 1)
        m.d.sync += inflight.eq(issue & ~self.start)
        m.d.comb += [
            port.addr.eq(ptr),
            buf.i.payload.eq(port.data),
            buf.i.valid.eq(inflight),
            self.busy.eq((ptr != end) | inflight | buf.o.valid),
        ]
        wiring.connect(m, buf.o, wiring.flipped(self.o))
        return m


class MXUHarness(Top):
    """An MXU fed from memories and drained into one.

    Members
    -------
    start : In(1)
        Pulse: stream ``n_cmd`` commands, ``n_w`` weight rows and ``n_a`` activation vectors
        from the start of their memories; results go to ``c_mem`` from entry 0.
    n_cmd, n_w, n_a : In
        Entries to stream from ``cmd_mem``, ``w_mem``, ``a_mem``.
    done : Out(1)
        Everything streamed, the MXU idle and every result stored.
    cycles : Out(32)
        Cycles from ``start`` to ``done``.
    n_c : Out
        Result beats stored.
    """

    def __init__(self, config):
        mxu_cfg = config.mxu
        self._mxu = MXU(mxu_cfg)
        fmt = arithmetic(mxu_cfg.format)
        self._layouts = {
            "cmd": command_layout(mxu_cfg),
            "w": data.ArrayLayout(fmt.in_shape, mxu_cfg.cols),
            "a": data.ArrayLayout(fmt.in_shape, mxu_cfg.rows),
            "c": output_layout(mxu_cfg),
        }
        super().__init__(config, {
            "start": In(1),
            "n_cmd": In(range(config.cmd_depth + 1)),
            "n_w": In(range(config.w_depth + 1)),
            "n_a": In(range(config.a_depth + 1)),
            "done": Out(1),
            "cycles": Out(32),
            "n_c": Out(range(config.c_depth + 1)),
        })

    @property
    def submodules(self):
        return self._mxu.submodules

    @property
    def extras(self):
        """The layouts of the memories a testbench fills and reads (``<name>_mem``)."""
        return {"memories": {name: describe_shape(layout)
                             for name, layout in self._layouts.items()}}

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        m.submodules.mxu = mxu = self._mxu
        mems = {}
        for name, depth in (("cmd", cfg.cmd_depth), ("w", cfg.w_depth), ("a", cfg.a_depth),
                            ("c", cfg.c_depth)):
            width = self._layouts[name].size
            mems[name] = memory.Memory(shape=width, depth=depth, init=[])

        counts = {"cmd": self.n_cmd, "w": self.n_w, "a": self.n_a}
        streamers = []
        for name, depth in (("cmd", cfg.cmd_depth), ("w", cfg.w_depth), ("a", cfg.a_depth)):
            s = _MemoryStreamer(mems[name].read_port(), self._layouts[name].size, depth)
            m.submodules[f"{name}_streamer"] = s
            streamers.append(s)
            sink = getattr(mxu, name)
            m.d.comb += [
                s.start.eq(self.start),
                s.count.eq(counts[name]),
                sink.payload.eq(s.o.payload),
                sink.valid.eq(s.o.valid),
                s.o.ready.eq(sink.ready),
            ]

        c_wr = mems["c"].write_port()
        for name, mem in mems.items():
            m.submodules[f"{name}_mem"] = mem
        n_c = Signal(range(cfg.c_depth + 1))
        m.d.comb += [
            mxu.c.ready.eq(1),
            c_wr.addr.eq(n_c),
            c_wr.data.eq(mxu.c.payload),
            c_wr.en.eq(mxu.c.valid & (n_c != cfg.c_depth)),
            self.n_c.eq(n_c),
        ]

        running = Signal()
        settle = Signal(2)     # streamers start one cycle after `start`
        busy = Signal()
        m.d.comb += busy.eq(~mxu.idle | settle.any() | Cat(s.busy for s in streamers).any())
        with m.If(self.start):
            m.d.sync += [running.eq(1), self.cycles.eq(0), n_c.eq(0), settle.eq(3),
                         self.done.eq(0)]
        with m.Elif(running):
            m.d.sync += [self.cycles.eq(self.cycles + 1), settle.eq(settle >> 1)]
            with m.If(~busy):
                m.d.sync += [running.eq(0), self.done.eq(1)]
            with m.If(mxu.c.valid & (n_c != cfg.c_depth)):
                m.d.sync += n_c.eq(n_c + 1)
        return m
