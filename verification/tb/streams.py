"""Valid/ready stream drivers and monitors with pluggable idle and backpressure.

One clocked loop (:class:`StreamBench`) drives every stream of a DUT: at each falling edge it
sets the sources' ``valid``/``payload`` and the sinks' ``ready``, waits for the combinational
logic to settle, and records which handshakes will complete at the next rising edge. One loop
for all streams keeps the Python cost per simulated cycle low.

Ports follow Amaranth's flattening: ``<name>__valid``, ``<name>__ready``, ``<name>__payload``.
Idle and backpressure are patterns: callables returning True on cycles to hold back.
"""

import itertools

from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

__all__ = ["StreamBench", "Source", "Sink", "pattern", "PATTERNS", "FLOWS"]

PATTERNS = ("none", "random", "bursty")

# The idle x backpressure matrix every test runs.
FLOWS = [(i, b) for i in ("none", "random") for b in ("none", "random", "bursty")]


def pattern(kind, rng):
    """A hold-back pattern: ``none`` never, ``random`` 30% of cycles, ``bursty`` in long runs
    (4 cycles go, 12 hold, with random jitter), which fills every buffer on the way."""
    if kind == "none":
        return lambda: False
    if kind == "random":
        return lambda: rng.random() < 0.3
    if kind == "bursty":
        runs = itertools.cycle([False] * 4 + [True] * 12)
        return lambda: next(runs) if rng.random() < 0.9 else True
    raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, got {kind!r}")


class Source:
    """Drives beats (ints) from a queue onto an input stream."""

    def __init__(self, dut, name, idle):
        self.name = name
        self._valid = getattr(dut, f"{name}__valid")
        self._ready = getattr(dut, f"{name}__ready")
        self._payload = getattr(dut, f"{name}__payload")
        self._idle = idle
        self.queue = []
        self._head = 0
        self._offered = False
        self.sent = 0

    def send(self, beats):
        self.queue.extend(int(b) for b in beats)

    @property
    def pending(self):
        return len(self.queue) - self._head

    def _drive(self):
        self._offered = self._head < len(self.queue) and not self._idle()
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


class Sink:
    """Collects beats (ints) from an output stream, holding ``ready`` low as told.

    It also checks the stream rule: once ``valid`` is high, it stays high with the same payload
    until the beat is taken.
    """

    def __init__(self, dut, name, backpressure):
        self.name = name
        self._valid = getattr(dut, f"{name}__valid")
        self._ready = getattr(dut, f"{name}__ready")
        self._payload = getattr(dut, f"{name}__payload")
        self._backpressure = backpressure
        self._accepting = False
        self._held = None
        self.beats = []
        self.last_cycle = None

    def _drive(self):
        self._accepting = not self._backpressure()
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
    """Clock-driven loop over a DUT's streams; counts cycles from its start (cycle 0)."""

    def __init__(self, dut, clk):
        self._dut = dut
        self._clk = clk
        self.sources = {}
        self.sinks = {}
        self.cycle = 0
        self.checks = []

    def source(self, name, idle):
        self.sources[name] = Source(self._dut, name, idle)
        return self.sources[name]

    def sink(self, name, backpressure):
        self.sinks[name] = Sink(self._dut, name, backpressure)
        return self.sinks[name]

    def quiesce(self):
        for s in self.sources.values():
            s._valid.value = 0
        for k in self.sinks.values():
            k._ready.value = 0

    async def run(self):
        ends = list(self.sources.values()) + list(self.sinks.values())
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
