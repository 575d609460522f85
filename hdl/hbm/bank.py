"""Bank machines of one HBM pseudo-channel: the open row of every bank and every timing
constraint, as LiteDRAM's bank machines and its multiplexer's ``tXXDController``s keep them.

They sit beside the scheduler (``scheduler.py``) in a :class:`~hdl.hbm.channel.PseudoChannel`:
they watch the row and column commands it issues (those the channel's arbiter granted) and
report, through :class:`~hdl.hbm.interface.BankStatusSignature`, which banks are open on which
rows and which commands their timing allows in the current cycle. Each constraint is a
:class:`~hdl.hbm.timing.Countdown` loaded by the commands that start it: per bank (tRP, tRC,
tRCD, tRAS, tRTP, WR to PRE, WR to RDA, auto-precharge, tRFCsb), per bank group (tRRD_L,
tCCD_L, WR to RD long, ACT to REFSB) and per pseudo-channel (tRRD_S, tFAW, tCCD_S, WR to RD
short, RD to WR, tRFC, tRREFD). Timings count from a command's first cycle, except that an
ACT's bank timings count from its reference cycle, ``act_origin`` cycles later
(``act_reference_cycle``, spec/hbm.py): tRCD, tRAS and tRC before a refresh from it, tRP,
tRFC and tRFCsb to it (DRAMSys ``CheckerHBM2.cpp``, commit 8e021ea: RD after ACT tRCDRD + tCK,
PREPB after ACT tRAS + tCK, REFAB / REFPB after ACT tRC + tCK, ACT after PREPB tRP - tCK,
after REFAB tRFC - tCK, after REFPB tRFCSB - tCK; Ramulator 2.1 ``spec.py``, commit 38c51d4,
the multi-cycle command adjustment). So every wait before a bank's ACT is the wait before
its refresh less ``act_origin``: one countdown per bank serves both (``act_ok`` when at most
``act_origin`` cycles are left), and one serves tRFC for REF and ACT.
"""

from amaranth.hdl import Const, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .interface import BankStatusSignature, RowOp, col_command_layout, row_command_layout
from .timing import ActivateWindow, Countdown

__all__ = ["BankMachine", "BankMachines"]


class BankMachine(wiring.Component):
    """One bank: its open row and its own timing constraints.

    Members
    -------
    act, pre, rd, wr, rda, wra, refsb : In(1)
        A command to this bank issues this cycle (``pre`` also for a PREA); ``row``: the row an
        ACT opens.
    is_open : Out(1), open_row : Out(row_bits)
        The bank's state from the cycle after the command: an ACT opens it; a PRE, RDA or WRA
        closes it (the scheduler never issues an ACT and a closing command together).
    ref_ok, act_ok, rd_ok, wr_ok, pre_ok, rda_ok : Out(1)
        The next REF or REFSB of the bank (tRC + ``act_origin``, or tRAS + tRP when longer;
        tRP after PRE; the auto-precharge's tRTP or WR to PRE, then tRP; tRFCsb after REFSB),
        ACT (the same, ``act_origin`` cycles sooner), RD (tRCD_RD), WR (tRCD_WR) (both from
        the ACT's reference cycle), PRE (tRAS from it, tRTP, WR to PRE), RDA (WR to PRE - tRTP
        after a WR: its precharge keeps the write recovery, DRAMSys ``CheckerHBM2.cpp`` lines
        117-122) may issue this cycle (combinational from the counters). ``pre_left``: cycles
        until ``pre_ok``.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        t = cfg.timing
        self._delays = {
            "ref": {"act": t.act_to_ref, "pre": t.rp, "rda": t.rda_to_ref, "wra": t.wra_to_ref,
                    "refsb": t.rfc_sb},
            "rd": {"act": t.act_to_rd},
            "wr": {"act": t.act_to_wr},
            "pre": {"act": t.act_to_pre, "rd": t.rtp, "wr": t.wr_to_pre},
            "rda": {"wr": t.wr_to_rda},
        }
        super().__init__({
            **{name: In(1) for name in ("act", "pre", "rd", "wr", "rda", "wra", "refsb")},
            "row": In(cfg.row_bits),
            "is_open": Out(1), "open_row": Out(cfg.row_bits),
            "ref_ok": Out(1), "act_ok": Out(1), "rd_ok": Out(1), "wr_ok": Out(1),
            "pre_ok": Out(1), "rda_ok": Out(1),
            "pre_left": Out(range(max(t.act_to_pre, t.rtp, t.wr_to_pre) + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        for gate, delays in self._delays.items():
            m.submodules[gate] = counter = Countdown(delays)
            for trigger in delays:
                m.d.comb += getattr(counter, trigger).eq(getattr(self, trigger))
            m.d.comb += getattr(self, f"{gate}_ok").eq(counter.ready)
            if gate == "ref":
                m.d.comb += self.act_ok.eq(counter.left <= self._cfg.timing.act_origin)
            if gate == "pre":
                m.d.comb += self.pre_left.eq(counter.left)
        with m.If(self.act):
            m.d.sync += [self.is_open.eq(1), self.open_row.eq(self.row)]
        with m.If(self.pre | self.rda | self.wra):
            m.d.sync += self.is_open.eq(0)
        return m


class BankMachines(wiring.Component):
    """Every bank of a pseudo-channel and the constraints between banks.

    Members
    -------
    row : In(row_command_layout)
        The row command issued this cycle (ACT, PRE, PREA, REF or REFSB).
    col : In(col_command_layout)
        The column command issued this cycle (RD, WR, RDA or WRA).
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
        act, pre, prea, ref, refsb = (row.valid & (row.op == op) for op in (
            RowOp.ACT, RowOp.PRE, RowOp.PREA, RowOp.REF, RowOp.REFSB))
        wr = col.valid & col.op.as_value()[0]
        rd = col.valid & ~col.op.as_value()[0]
        ap = col.op.as_value()[1]

        for b in range(cfg.banks):
            m.submodules[f"bank{b}"] = bank = BankMachine(cfg)
            at_row, at_col = row.bank == b, col.bank == b
            m.d.comb += [
                bank.act.eq(act & at_row), bank.pre.eq((pre & at_row) | prea),
                bank.refsb.eq(refsb & at_row),
                bank.rd.eq(rd & at_col), bank.wr.eq(wr & at_col),
                bank.rda.eq(rd & ap & at_col), bank.wra.eq(wr & ap & at_col),
                bank.row.eq(row.row),
                st.open[b].eq(bank.is_open), st.open_row[b].eq(bank.open_row),
                st.ref_ok[b].eq(bank.ref_ok), st.act_ok[b].eq(bank.act_ok),
                st.rd_ok[b].eq(bank.rd_ok),
                st.wr_ok[b].eq(bank.wr_ok), st.pre_ok[b].eq(bank.pre_ok),
                st.rda_ok[b].eq(bank.rda_ok),
                st.pre_left[b].eq(bank.pre_left),
            ]

        act_group, col_group = self._group(row.bank), self._group(col.bank)
        for g in range(cfg.bank_groups):
            for name, delay, trigger, ok in (
                    ("rrd_l", t.rrd_l, act & (act_group == g), st.rrd_l_ok),
                    ("ccd_l", t.ccd_l, col.valid & (col_group == g), st.ccd_l_ok),
                    ("wtr_l", t.wr_to_rd_l, wr & (col_group == g), st.wtr_l_ok),
                    ("refsb_l", t.act_to_refsb_l, act & (act_group == g), st.refsb_l_ok)):
                m.submodules[f"{name}{g}"] = counter = Countdown({"start": delay})
                m.d.comb += [counter.start.eq(trigger), ok[g].eq(counter.ready)]

        for name, delays, triggers in (
                ("rrd_s", {"act": t.rrd_s, "refsb": t.refsb_to_act}, (act, refsb)),
                ("refsb", {"act": t.act_to_refsb_s, "refsb": t.rrefd}, (act, refsb)),
                ("ccd_s", {"start": t.ccd_s}, (col.valid,)),
                ("wtr_s", {"start": t.wr_to_rd_s}, (wr,)),
                ("rtw", {"start": t.rd_to_wr}, (rd,)),
                ("rfc", {"start": t.rfc}, (ref,))):
            m.submodules[name] = counter = Countdown(delays)
            for trigger, value in zip(delays, triggers, strict=True):
                m.d.comb += getattr(counter, trigger).eq(value)
            m.d.comb += getattr(st, f"{name}_ok").eq(counter.ready)
            if name == "rfc":
                m.d.comb += st.rfc_act_ok.eq(counter.left <= t.act_origin)
        m.submodules.faw = faw = ActivateWindow(t.faw)
        m.d.comb += [faw.act.eq(act), st.faw_ok.eq(faw.ready)]
        return m
