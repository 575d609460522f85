"""Processing element of the systolic array: one multiply-accumulate and its weight registers.

Each PE holds three weights: ``chain`` is a stage of the column's weight shift register, through
which the next tile is loaded; ``bank0`` and ``bank1`` are the double buffer the MACs read. A
commit copies ``chain`` into one bank in one cycle, so loading never disturbs the bank in use.
Every activation carries the bank bit of its fold, so a bank switch travels through the array
with the data, diagonally, exactly as the folds do.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["ProcessingElement"]


class ProcessingElement(wiring.Component):
    """One PE. All state advances only in cycles where ``advance`` is high.

    Latency: one cycle from ``a_in``/``psum_in`` to ``a_out``/``psum_out``; the product uses
    the bank that ``bank_in`` selects, as it stands in the cycle the activation arrives.

    Members
    -------
    advance : In(1)
        Clock enable of the whole array (low while the result path is full).
    a_in, bank_in : In
        Activation and its weight bank, from the left neighbour.
    psum_in : In
        Partial sum from the PE above (zero in the first row).
    chain_in : In
        Weight shift register input, from the PE below (the skewed weight row in the last row).
    shift : In(1)
        Shift ``chain_in`` into ``chain``.
    commit, commit_bank : In(1)
        Copy ``chain`` into ``bank0`` or ``bank1``.
    a_out, bank_out, psum_out, chain_out : Out
        Registered outputs to the right, down and up neighbours.
    """

    def __init__(self, fmt):
        self._fmt = fmt
        super().__init__({
            "advance": In(1),
            "a_in": In(fmt.in_shape),
            "bank_in": In(1),
            "psum_in": In(fmt.acc_shape),
            "chain_in": In(fmt.in_shape),
            "shift": In(1),
            "commit": In(1),
            "commit_bank": In(1),
            "a_out": Out(fmt.in_shape),
            "bank_out": Out(1),
            "psum_out": Out(fmt.acc_shape),
            "chain_out": Out(fmt.in_shape),
        })

    def elaborate(self, platform):
        m = Module()
        fmt = self._fmt
        a = Signal(fmt.in_shape, reset_less=True)
        bank = Signal(reset_less=True)
        psum = Signal(fmt.acc_shape, reset_less=True)
        chain = Signal(fmt.in_shape, reset_less=True)
        banks = [Signal(fmt.in_shape, reset_less=True, name=f"bank{i}") for i in range(2)]

        weight = Mux(self.bank_in, banks[1], banks[0])
        # The multiply-accumulate's named intermediate signals are made here, outside the
        # If: made inside, each would be zeroed when ``advance`` is low, a mask the
        # simulators evaluate on every one of them every cycle for nothing.
        mac = fmt.mac(m, self.psum_in, self.a_in, weight)
        with m.If(self.advance):
            m.d.sync += [
                a.eq(self.a_in),
                bank.eq(self.bank_in),
                psum.eq(mac),
            ]
            with m.If(self.shift):
                m.d.sync += chain.eq(self.chain_in)
            for i, reg in enumerate(banks):
                with m.If(self.commit & (self.commit_bank == i)):
                    m.d.sync += reg.eq(chain)

        m.d.comb += [
            self.a_out.eq(a),
            self.bank_out.eq(bank),
            self.psum_out.eq(psum),
            self.chain_out.eq(chain),
        ]
        return m
