"""Delay lines: the skew and de-skew registers around a systolic array, and the fixed delay
of a long link (ICI links between chips)."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from spec.config import check_int

__all__ = ["delay_taps", "skew", "DelayLine"]


def delay_taps(m, value, length, *, enable, name, reset_less=True):
    """Return ``[value, value delayed 1, ..., value delayed length]`` in ``enable`` cycles.

    Registers shift only when ``enable`` is high, so a frozen pipeline keeps its contents. Data
    lines are ``reset_less``; pass ``reset_less=False`` for valid and control bits.
    """
    taps = [value]
    for i in range(length):
        reg = Signal(value.shape(), name=f"{name}_d{i + 1}", reset_less=reset_less)
        with m.If(enable):
            m.d.sync += reg.eq(taps[-1])
        taps.append(reg)
    return taps


def skew(m, lanes, *, enable, name, reverse=False):
    """Delay lane ``i`` of ``lanes`` by ``i`` cycles (``len - 1 - i`` with ``reverse``).

    A triangle of delay registers built as one wide register per stage (stage ``d`` holds the
    lanes that still need more than ``d`` cycles), so a 256-lane skew is 255 registers rather than
    32,640: the same bits, far less work for Yosys and Verilator.
    """
    n = len(lanes)
    order = list(reversed(range(n))) if reverse else list(range(n))
    out = [None] * n
    stage = [lanes[i] for i in order]          # stage d: lanes order[d:], delayed d cycles
    for d in range(n):
        out[order[d]] = stage[0]
        if d == n - 1:
            break
        rest = Cat(*stage[1:])
        reg = Signal(len(rest), name=f"{name}_s{d + 1}", reset_less=True)
        with m.If(enable):
            m.d.sync += reg.eq(rest)
        width = len(stage[1])
        stage = [reg[i * width:(i + 1) * width] for i in range(len(stage) - 1)]
    return out


class DelayLine(wiring.Component):
    """``o`` is ``i`` as it was ``cycles`` cycles ago (zero for the first ``cycles`` cycles
    after every reset, whatever went in before it): a pipeline of registers; from
    ``SHIFT_LIMIT`` cycles on, built as a ring buffer in a memory (one write and one read a
    cycle whatever the length, which is what long lines want in simulation).

    Parameters
    ----------
    width : int
    cycles : int
        1 or more.

    Members
    -------
    i : In(width)
    o : Out(width)
    """

    def __init__(self, width, cycles):
        self._width = check_int("width", width, 1)
        self._cycles = check_int("cycles", cycles, 1)
        super().__init__({"i": In(width), "o": Out(width)})

    SHIFT_LIMIT = 4

    def elaborate(self, platform):
        m = Module()
        n = self._cycles
        if n < self.SHIFT_LIMIT:
            stages = [self.i] + [Signal(self._width, name=f"stage{k}") for k in range(n - 1)]
            stages.append(self.o)
            m.d.sync += [b.eq(a) for a, b in zip(stages, stages[1:], strict=False)]
            return m
        m.submodules.line = line = memory.Memory(shape=self._width, depth=n - 1, init=[])
        wp, rp = line.write_port(), line.read_port(domain="comb")
        at = Signal(range(n - 1))
        # A memory keeps its contents through a reset: until every entry has been written
        # since, what it holds is from before the reset and the line gives zero instead.
        primed = Signal()
        m.d.comb += [wp.addr.eq(at), rp.addr.eq(at), wp.data.eq(self.i), wp.en.eq(1)]
        m.d.sync += [at.eq(Mux(at == n - 2, 0, at + 1)), self.o.eq(Mux(primed, rp.data, 0))]
        with m.If(at == n - 2):
            m.d.sync += primed.eq(1)
        return m
