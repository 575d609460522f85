"""Delay lines: the skew and de-skew registers around a systolic array."""

from amaranth.hdl import Signal

__all__ = ["delay_taps"]


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
