"""Bank machines of one HBM pseudo-channel: the open row of every bank and every timing
constraint, as LiteDRAM's bank machines and its multiplexer's ``tXXDController``s keep them.

They sit beside the scheduler (``scheduler.py``) in a :class:`~hdl.hbm.channel.PseudoChannel`:
they watch the row and column commands it issues and report, through
:class:`~hdl.hbm.interface.BankStatusSignature`, which banks are open on which rows and which
commands their timing allows in the current cycle. Each constraint is a
:class:`~hdl.hbm.timing.Countdown` loaded by the commands that start it: per bank (tRP, tRC,
tRCD, tRAS, tRTP, WR to PRE), per bank group (tRRD_L, tCCD_L, WR to RD long) and per
pseudo-channel (tRRD_S, tFAW, tCCD_S, WR to RD short, RD to WR, tRFC).
"""

from amaranth.hdl import Const, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .interface import BankStatusSignature, ColOp, RowOp, col_command_layout, row_command_layout
from .timing import ActivateWindow, Countdown

__all__ = ["BankMachine", "BankMachines"]


class BankMachine(wiring.Component):
    """One bank: its open row and its own timing constraints.

    Members
    -------
    act, pre, rd, wr : In(1)
        A command to this bank issues this cycle (``pre`` also for a PREA); ``row``: the row an
        ACT opens.
    is_open : Out(1), open_row : Out(row_bits)
        The bank's state from the cycle after the ACT / PRE (a PRE in the same cycle as an ACT
        wins; the scheduler never issues both).
    act_ok, rd_ok, wr_ok, pre_ok : Out(1)
        tRP and tRC; tRCD_RD; tRCD_WR; tRAS, tRTP and WR to PRE are met this cycle
        (combinational from the counters). ``pre_left``: cycles until ``pre_ok``.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        t = cfg.timing
        self._delays = {"act": {"act": t.rc, "pre": t.rp}, "rd": {"act": t.rcd_rd},
                        "wr": {"act": t.rcd_wr},
                        "pre": {"act": t.ras, "rd": t.rtp, "wr": t.wr_to_pre}}
        super().__init__({
            "act": In(1), "pre": In(1), "rd": In(1), "wr": In(1), "row": In(cfg.row_bits),
            "is_open": Out(1), "open_row": Out(cfg.row_bits),
            "act_ok": Out(1), "rd_ok": Out(1), "wr_ok": Out(1), "pre_ok": Out(1),
            "pre_left": Out(range(max(t.ras, t.rtp, t.wr_to_pre) + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        for gate, delays in self._delays.items():
            m.submodules[gate] = counter = Countdown(delays)
            for trigger in delays:
                m.d.comb += getattr(counter, trigger).eq(getattr(self, trigger))
            m.d.comb += getattr(self, f"{gate}_ok").eq(counter.ready)
            if gate == "pre":
                m.d.comb += self.pre_left.eq(counter.left)
        with m.If(self.act):
            m.d.sync += [self.is_open.eq(1), self.open_row.eq(self.row)]
        with m.If(self.pre):
            m.d.sync += self.is_open.eq(0)
        return m


class BankMachines(wiring.Component):
    """Every bank of a pseudo-channel and the constraints between banks.

    Members
    -------
    row : In(row_command_layout)
        The row command issued this cycle (ACT, PRE, PREA or REF).
    col : In(col_command_layout)
        The column command issued this cycle (RD or WR).
    status : Out(BankStatusSignature)
        Bank states and timing, valid in the cycle after a command (commands of this cycle
        take effect at the clock edge, so the scheduler's choices never loop through here).
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "row": In(row_command_layout(cfg)),
            "col": In(col_command_layout(cfg)),
            "status": Out(BankStatusSignature(cfg)),
        })

    def _group(self, bank):
        cfg = self._cfg
        return bank >> cfg.ba_bits if cfg.bg_bits else Const(0, 1)

    def elaborate(self, platform):
        m = Module()
        cfg, t, st = self._cfg, self._cfg.timing, self.status
        row, col = self.row, self.col
        act = row.valid & (row.op == RowOp.ACT)
        pre = row.valid & (row.op == RowOp.PRE)
        prea = row.valid & (row.op == RowOp.PREA)
        ref = row.valid & (row.op == RowOp.REF)
        rd = col.valid & (col.op == ColOp.RD)
        wr = col.valid & (col.op == ColOp.WR)

        for b in range(cfg.banks):
            m.submodules[f"bank{b}"] = bank = BankMachine(cfg)
            m.d.comb += [
                bank.act.eq(act & (row.bank == b)),
                bank.pre.eq((pre & (row.bank == b)) | prea),
                bank.rd.eq(rd & (col.bank == b)), bank.wr.eq(wr & (col.bank == b)),
                bank.row.eq(row.row),
                st.open[b].eq(bank.is_open), st.open_row[b].eq(bank.open_row),
                st.act_ok[b].eq(bank.act_ok), st.rd_ok[b].eq(bank.rd_ok),
                st.wr_ok[b].eq(bank.wr_ok), st.pre_ok[b].eq(bank.pre_ok),
                st.pre_left[b].eq(bank.pre_left),
            ]

        act_group, col_group = self._group(row.bank), self._group(col.bank)
        for g in range(cfg.bank_groups):
            for name, delay, trigger, ok in (
                    ("rrd_l", t.rrd_l, act & (act_group == g), st.rrd_l_ok),
                    ("ccd_l", t.ccd_l, col.valid & (col_group == g), st.ccd_l_ok),
                    ("wtr_l", t.wr_to_rd_l, wr & (col_group == g), st.wtr_l_ok)):
                m.submodules[f"{name}{g}"] = counter = Countdown({"start": delay})
                m.d.comb += [counter.start.eq(trigger), ok[g].eq(counter.ready)]

        for name, delay, trigger in (("rrd_s", t.rrd_s, act), ("ccd_s", t.ccd_s, col.valid),
                                     ("wtr_s", t.wr_to_rd_s, wr), ("rtw", t.rd_to_wr, rd),
                                     ("rfc", t.rfc, ref)):
            m.submodules[name] = counter = Countdown({"start": delay})
            m.d.comb += [counter.start.eq(trigger), getattr(st, f"{name}_ok").eq(counter.ready)]
        m.submodules.faw = faw = ActivateWindow(t.faw)
        m.d.comb += [faw.act.eq(act), st.faw_ok.eq(faw.ready)]
        return m

