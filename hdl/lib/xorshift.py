"""Xorshift pseudo-random generators in gateware: cheap randomness for synthesizable traffic
generators, fault injectors and backpressure in test tops (ICI harness).

Marsaglia's xorshift32 (shifts 13, 17, 5) and xorshift64 (13, 7, 17): one state register, a
new full-period value every step, and never zero when seeded with a non-zero value.
"""

from amaranth.hdl import Mux, Signal

__all__ = ["xorshift"]

_SHIFTS = {32: (13, 17, 5), 64: (13, 7, 17)}


def xorshift(m, width, seed, *, name, step=1):
    """A ``width``-bit (32 or 64) xorshift state that advances in cycles where ``step`` is high.

    ``seed`` (a value, e.g. a port) is loaded in the first cycle after reset, so the state is
    random from the second cycle on; a zero seed is replaced by 1 (zero is the one fixed point).
    """
    a, b, c = _SHIFTS[width]
    state = Signal(width, name=name, init=1)
    loaded = Signal(name=f"{name}_loaded")
    x1 = state ^ (state << a)[:width]
    x2 = x1 ^ (x1 >> b)
    x3 = x2 ^ (x2 << c)[:width]
    with m.If(~loaded):
        m.d.sync += [state.eq(Mux(seed == 0, 1, seed)), loaded.eq(1)]
    with m.Elif(step):
        m.d.sync += state.eq(x3)
    return state
