"""Delay lines: the skew and de-skew registers around a systolic array."""

from amaranth.hdl import Cat, Signal

__all__ = ["delay_taps", "skew"]


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
