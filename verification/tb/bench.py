"""The testbench vocabulary every block's bench shares: clock and reset, idle and backpressure
generators, the flow matrix, and the report a measurement writes.

Idle and backpressure have cocotbext-axi's shape: a *pause generator* yields one bool per
cycle, True on cycles the driver holds back (a source does not offer a beat, a sink is not
ready). Drivers take them with ``set_idle_generator`` / ``set_backpressure_generator``
(:mod:`verification.tb.streams`), or ``set_pause_generator`` on cocotbext-axi channels
(:mod:`verification.tb.axi`). A *flow* names one idle pattern and one backpressure pattern,
``"<idle>_<backpressure>"``; every test runs a matrix of flows.

Randomness comes from Python's ``random``, which cocotb seeds from the test's seed (printed by
pytest, replayed with PODIUM_SEED); each generator gets its own ``random.Random`` drawn from it.
"""

import itertools
import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles

__all__ = ["start", "pause", "flow_pauses", "new_rng", "PAUSES", "FLOWS", "SHORT_FLOWS",
           "perf_spec", "write_report", "env_int", "only_if", "measurement"]

PAUSES = ("none", "random", "bursty")

FLOWS = [f"{i}_{b}" for i in ("none", "random") for b in PAUSES]
"""The idle x backpressure matrix: idle none or random, backpressure none, random or bursty."""

SHORT_FLOWS = ["none_none", "random_random", "none_bursty"]
"""Three corners of the matrix, for tests too long to run six times."""


def new_rng():
    """An independent ``random.Random``, seeded from the test's seed."""
    return random.Random(random.getrandbits(64))


def pause(kind, rng=None):
    """A pause generator: ``none`` never pauses, ``random`` pauses 30% of cycles, ``bursty``
    runs 4 cycles then holds 12 (with 10% jitter), which fills every buffer on the way."""
    rng = rng or new_rng()
    if kind == "none":
        return itertools.repeat(False)
    if kind == "random":
        return (rng.random() < 0.3 for _ in itertools.count())
    if kind == "bursty":
        return (k >= 4 or rng.random() < 0.1 for _ in itertools.count() for k in range(16))
    raise ValueError(f"pause kind must be one of {', '.join(PAUSES)}, got {kind!r}")


def flow_pauses(flow):
    """``(idle, backpressure)`` pause kinds of a flow name such as ``"random_bursty"``."""
    idle, backpressure = flow.split("_")
    for kind in (idle, backpressure):
        if kind not in PAUSES:
            raise ValueError(f"flow {flow!r}: pause kind must be one of {', '.join(PAUSES)}")
    return idle, backpressure


async def start(dut, *, reset_cycles=3, period_ns=10, clock_impl=None):
    """Start ``dut.clk`` and hold ``dut.rst`` for ``reset_cycles`` cycles; returns after the
    reset is released (at a rising edge). ``clock_impl``: cocotb's clock implementation,
    ``"gpi"`` (in the simulator, no Python per cycle: for long runs in which the testbench only
    waits) or ``"py"``; by default cocotb's choice."""
    cocotb.start_soon(Clock(dut.clk, period_ns, unit="ns", impl=clock_impl).start())
    dut.rst.value = 1
    await ClockCycles(dut.clk, reset_cycles)
    dut.rst.value = 0


def env_int(name, default):
    """An integer knob from the environment (test sizes: soak lengths, operation counts)."""
    return int(os.environ.get(name, default))


def only_if(predicate):
    """Decorator (above ``@cocotb.test()``): the test applies only to configurations whose
    parameters (the sidecar's ``parameters`` dict) satisfy ``predicate``. The pytest suites
    collect it only for those, and in a simulation of another configuration it is skipped."""
    def mark(test):
        test.podium_only_if = predicate
        if "PODIUM_SIDECAR" in os.environ:
            with open(os.environ["PODIUM_SIDECAR"]) as f:
                test.skip = not predicate(json.load(f)["parameters"])
        return test
    return mark


def measurement(test):
    """Decorator (above ``@cocotb.test()``): a benchmark measurement, run only when a benchmark
    asks for it (``PODIUM_PERF``); never part of the regression."""
    test.podium_measurement = True
    test.skip = "PODIUM_PERF" not in os.environ
    return test


def perf_spec():
    """The measurement a benchmark asked for (``PODIUM_PERF``, JSON; empty outside a
    benchmark)."""
    return json.loads(os.environ.get("PODIUM_PERF", "{}"))


def write_report(spec, report):
    """Write a measurement's ``report`` (JSON) to the file the benchmark named in ``spec``."""
    if "report" in spec:
        with open(spec["report"], "w") as f:
            json.dump(report, f)
