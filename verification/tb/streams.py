"""Valid/ready stream drivers and monitors with pluggable idle and backpressure.

One clocked loop (:class:`StreamBench`) drives every stream of a DUT: at each falling edge it
sets the sources' ``valid``/``payload`` and the sinks' ``ready``, waits for the combinational
logic to settle, and records which handshakes will complete at the next rising edge. One loop
for all streams keeps the Python cost per simulated cycle low.

Ports follow Amaranth's flattening: ``<name>__valid``, ``<name>__ready``, ``<name>__payload``.
Idle and backpressure are pause generators (:mod:`verification.tb.bench`), set with
``set_idle_generator`` / ``set_backpressure_generator`` as on cocotbext-axi's drivers.
"""

import itertools

from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

__all__ = ["StreamBench", "Source", "Sink"]


class _End:
    def __init__(self, dut, name, pauses):
        self.name = name
        self._valid = getattr(dut, f"{name}__valid")
        self._ready = getattr(dut, f"{name}__ready")
        self._payload = getattr(dut, f"{name}__payload")
        self._pauses = pauses if pauses is not None else itertools.repeat(False)

    def _paused(self):
        return next(self._pauses)


class Source(_End):
    """Drives beats (ints) from a queue onto an input stream."""

    def __init__(self, dut, name, idle=None):
        super().__init__(dut, name, idle)
        self.queue = []
        self._head = 0
        self._offered = False
        self.sent = 0

    def set_idle_generator(self, generator):
        """Pause generator: the source offers no beat on cycles it yields True."""
        self._pauses = generator

    def send(self, beats):
        self.queue.extend(int(b) for b in beats)

    @property
    def pending(self):
        return len(self.queue) - self._head

    def _drive(self):
        self._offered = self._head < len(self.queue) and not self._paused()
        self._valid.value = int(self._offered)
        if self._offered:
            self._payload.value = self.queue[self._head]

    def _sample(self, cycle):
        if self._offered and self._ready.value:
            self._head += 1
            self.sent += 1
            if self._head > 4096:
                del self.queue[: self._head]
                self._head = 0


class Sink(_End):
    """Collects beats (ints) from an output stream, holding ``ready`` low as told.

    It also checks the stream rule: once ``valid`` is high, it stays high with the same payload
    until the beat is taken.
    """

    def __init__(self, dut, name, backpressure=None):
        super().__init__(dut, name, backpressure)
        self._accepting = False
        self._held = None
        self.beats = []
        self.last_cycle = None

    def set_backpressure_generator(self, generator):
        """Pause generator: the sink is not ready on cycles it yields True."""
        self._pauses = generator

    def _drive(self):
        self._accepting = not self._paused()
        self._ready.value = int(self._accepting)

    def _sample(self, cycle):
        valid = bool(self._valid.value)
        payload = self._payload.value.to_unsigned() if valid else None
        if self._held is not None:
            assert valid and payload == self._held, (
                f"{self.name}: valid dropped or payload changed while waiting for ready")
        if valid and self._accepting:
            self.beats.append(payload)
            self.last_cycle = cycle
        self._held = payload if valid and not self._accepting else None


class StreamBench:
    """Clock-driven loop over a DUT's streams; counts cycles from its start (cycle 0).
    ``checks`` are called after every cycle's sampling."""

    def __init__(self, dut, clk):
        self._dut = dut
        self._clk = clk
        self.sources = {}
        self.sinks = {}
        self.others = []
        self.cycle = 0
        self.checks = []

    def source(self, name, idle=None):
        self.sources[name] = Source(self._dut, name, idle)
        return self.sources[name]

    def sink(self, name, backpressure=None):
        self.sinks[name] = Sink(self._dut, name, backpressure)
        return self.sinks[name]

    def attach(self, end):
        """Run ``end`` in the loop as well: any object with the sources' and sinks' ``_drive()``
        (at the falling edge) and ``_sample(cycle)`` (once the cycle has settled), such as a
        model of a memory behind the DUT's own port protocol."""
        self.others.append(end)

    def quiesce(self):
        for s in self.sources.values():
            s._valid.value = 0
        for k in self.sinks.values():
            k._ready.value = 0

    async def run(self):
        ends = list(self.sources.values()) + list(self.sinks.values()) + self.others
        while True:
            await FallingEdge(self._clk)
            for end in ends:
                end._drive()
            await ReadOnly()
            for end in ends:
                end._sample(self.cycle)
            for check in self.checks:
                check()
            await RisingEdge(self._clk)
            self.cycle += 1
