"""The command arbiter of one HBM channel: shares the channel's row and column command buses
between its two pseudo-channels.

In pseudo-channel mode the two pseudo-channels of a channel have their own banks and data
buses but one row command bus and one column command bus (each command names its
pseudo-channel). Each pseudo-channel's scheduler offers a row and a column command every cycle;
the arbiter grants each bus to one of them, round robin when both offer (the one granted last
waits), so neither can starve the other. An ACT holds the row bus for two cycles: in the cycle
after an ACT no row command is granted. In legacy mode a channel has one controller and the
arbiter only keeps the ACT's second cycle free.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..lib.arbiter import RoundRobin
from .interface import CommandBusSignature, RowOp, col_command_layout, row_command_layout

__all__ = ["CommandArbiter"]


class CommandArbiter(wiring.Component):
    """Grants a channel's row and column command buses.

    Combinational grants (an offer is granted in the cycle it is made); one row command and one
    column command per cycle; the cycle after a granted ACT grants no row command.

    Members
    -------
    row, col : In(array of row_command_layout / col_command_layout)
        Each pseudo-channel's offers.
    row_grant, col_grant : Out(pcs_per_channel)
        The offer of pseudo-channel ``k`` has the bus (bit ``k``).
    bus : Out(CommandBusSignature)
        The granted commands, with the pseudo-channel they are for.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        n = cfg.pcs_per_channel
        super().__init__({
            "row": In(row_command_layout(cfg)).array(n),
            "col": In(col_command_layout(cfg)).array(n),
            "row_grant": Out(n), "col_grant": Out(n),
            "bus": Out(CommandBusSignature(cfg)),
        })

    def elaborate(self, platform):
        m = Module()
        n, bus = self._cfg.pcs_per_channel, self.bus
        act_second = Signal()           # the cycle after a granted ACT
        for kind, offers, grants in (("row", self.row, self.row_grant),
                                     ("col", self.col, self.col_grant)):
            m.submodules[f"{kind}_pick"] = pick = RoundRobin(n)
            asks = Cat(*[o.valid for o in offers])
            if kind == "row":
                asks = asks & ~act_second.replicate(n)
            m.d.comb += [pick.requests.eq(asks), pick.advance.eq(1),
                         getattr(bus, f"{kind}_valid").eq(pick.valid),
                         getattr(bus, f"{kind}_pc").eq(pick.grant)]
            for k, offer in enumerate(offers):
                m.d.comb += grants[k].eq(pick.valid & (pick.grant == k))
                with m.If(pick.grant == k):
                    m.d.comb += [getattr(bus, f"{kind}_op").eq(offer.op),
                                 getattr(bus, f"{kind}_bank").eq(offer.bank)]
                    if kind == "row":
                        m.d.comb += bus.row_addr.eq(offer.row)
                    else:
                        m.d.comb += bus.col_addr.eq(offer.col)
        m.d.sync += act_second.eq(bus.row_valid & (bus.row_op == RowOp.ACT))
        return m
