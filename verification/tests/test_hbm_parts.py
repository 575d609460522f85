"""The HBM controller's parts on their own, in Amaranth's Python simulator: bank machines (every
timing constraint is not ready one cycle early and ready on time), command queue (age order,
collapse, hazards, merge state), refresher (all-bank and per bank), channel command arbiter
(fair shares, two-cycle ACT), write buffer (ECC codewords CWL cycles after WR,
merges, slots), read return (decoding, responses, merge data), front end (burst splitting,
local errors), write tracker and reorder buffer (order per lane, any order across lanes).

Expected values come from the documented behaviour and the timing table, not from the RTL; the
ECC reference below is built from the SECDED construction in the ``hdl.hbm.ecc`` docstring.
The controller as a whole is verified by the cocotb suite (test_hbm.py).
"""

import random

import pytest
from amaranth.sim import Simulator

from hdl.hbm.arbiter import CommandArbiter
from hdl.hbm.bank import BankMachines
from hdl.hbm.command_queue import CommandQueue
from hdl.hbm.front_end import FrontEnd
from hdl.hbm.interface import ColOp, RowOp
from hdl.hbm.read_return import RRESP_DEPTH, ReadReturn
from hdl.hbm.refresher import IDLE_REFRESH, Refresher
from hdl.hbm.reorder import ReorderBuffer
from hdl.hbm.scheduler import LEAVE_LIMIT, ModeControl
from hdl.hbm.timing import ActivateWindow
from hdl.hbm.write_path import WriteBuffer
from hdl.hbm.write_tracker import WriteTracker
from hdl.lib.axi import AxiBurst, AxiResp
from spec.hbm import ACT_REFERENCE_CYCLES, HBMConfig

CFG = HBMConfig(bank_groups=2, banks_per_group=2, queue_depth=4, write_buffer=2, write_high=2,
                write_low=0, starvation_cap=8, refresh_postpone=2, id_lanes=2, rob_depth=8,
                write_bursts=2)
T = CFG.timing


def simulate(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def set_fields(ctx, view, **fields):
    for name, value in fields.items():
        ctx.set(getattr(view, name), value)


# ECC reference, from the construction: data bits at the Hamming positions 1..71 that are not
# powers of two; check bit c the parity of the data bits whose position has bit c set; check
# bit 7 the parity of the other 71 bits.

POSITIONS = [p for p in range(1, 72) if p & (p - 1)]


def secded(word):
    checks = 0
    for c in range(7):
        bits = [word >> i & 1 for i, p in enumerate(POSITIONS) if p >> c & 1]
        checks |= (sum(bits) & 1) << c
    code = word | checks << 64
    return code | (bin(code).count("1") & 1) << 71


def codewords(words):
    return sum(secded(w) << (72 * k) for k, w in enumerate(words))


# Bank machines ---------------------------------------------------------------------------------

ACT, PRE, REF, REFSB = (("row", op) for op in (RowOp.ACT, RowOp.PRE, RowOp.REF, RowOp.REFSB))
RD, WR, RDA, WRA = (("col", op) for op in (ColOp.RD, ColOp.WR, ColOp.RDA, ColOp.WRA))
BANK = 1                # bank 1 of group 0; groups have 2 banks


def _constraints(t):
    """name: (command to bank BANK, status member, index or None, delay, members it must not
    touch), for timing ``t``: an ACT's bank timings count from its reference cycle, ``a``
    cycles after its first (``act_reference_cycle``: 0 first, 1 second), and tRP, tRFC, tRFCsb
    count to it; before a REF or REFSB they are counted in full."""
    a = {"first": 0, "second": 1}[t.act_reference_cycle]
    return {
        "tRC": (ACT, "act_ok", BANK, t.rc, [("act_ok", 0), ("act_ok", 2)]),
        "tRC before REF": (ACT, "ref_ok", BANK, max(t.rc, t.ras + t.rp) + a, [("ref_ok", 0)]),
        "tRP": (PRE, "act_ok", BANK, t.rp - a, [("act_ok", 0)]),
        "tRP before REF": (PRE, "ref_ok", BANK, t.rp, [("ref_ok", 0)]),
        "tRCD_RD": (ACT, "rd_ok", BANK, t.rcd_rd + a, [("rd_ok", 0)]),
        "tRCD_WR": (ACT, "wr_ok", BANK, t.rcd_wr + a, [("wr_ok", 3)]),
        "tRAS": (ACT, "pre_ok", BANK, t.ras + a, [("pre_ok", 0)]),
        "tRTP": (RD, "pre_ok", BANK, t.rtp, [("pre_ok", 0)]),
        "WR to PRE": (WR, "pre_ok", BANK, t.wr_to_pre, [("pre_ok", 2)]),
        "WR to RDA": (WR, "rda_ok", BANK, t.wr_to_pre - t.rtp, [("rda_ok", 0), ("pre_ok", 0)]),
        "tRRD_L": (ACT, "rrd_l_ok", 0, t.rrd_l, [("rrd_l_ok", 1)]),
        "tRRD_S": (ACT, "rrd_s_ok", None, t.rrd_s, []),
        "tCCD_L": (RD, "ccd_l_ok", 0, t.ccd_l, [("ccd_l_ok", 1)]),
        "tCCD_S": (WR, "ccd_s_ok", None, t.ccd_s, []),
        "WR to RD, same group": (WR, "wtr_l_ok", 0, t.wr_to_rd_l, [("wtr_l_ok", 1)]),
        "WR to RD": (WR, "wtr_s_ok", None, t.wr_to_rd_s, [("rtw_ok", None)]),
        "RD to WR": (RD, "rtw_ok", None, t.rd_to_wr, [("wtr_s_ok", None)]),
        "tRFC": (REF, "rfc_ok", None, t.rfc, [("act_ok", BANK)]),
        "tRFC before ACT": (REF, "rfc_act_ok", None, t.rfc - a, [("act_ok", BANK)]),
        "RDA to ACT": (RDA, "act_ok", BANK, t.rtp + t.rp - a, [("act_ok", 0)]),
        "RDA to REF": (RDA, "ref_ok", BANK, t.rtp + t.rp, [("ref_ok", 0)]),
        "WRA to ACT": (WRA, "act_ok", BANK, t.wr_to_pre + t.rp - a, [("act_ok", 3)]),
        "tRFCsb": (REFSB, "act_ok", BANK, t.rfc_sb - a, [("act_ok", 0), ("rfc_ok", None)]),
        "tRFCsb before REFSB": (REFSB, "ref_ok", BANK, t.rfc_sb, [("ref_ok", 0)]),
        "REFSB to ACT, other bank": (REFSB, "rrd_s_ok", None, t.rrefd - 1, []),
        "tRREFD": (REFSB, "refsb_ok", None, t.rrefd, [("refsb_l_ok", 0)]),
        "ACT to REFSB": (ACT, "refsb_ok", None, t.rrd_s + 1, []),
        "ACT to REFSB, same group": (ACT, "refsb_l_ok", 0, t.rrd_l + 1, [("refsb_l_ok", 1)]),
    }


@pytest.mark.parametrize("reference", ACT_REFERENCE_CYCLES)
@pytest.mark.parametrize("name", _constraints(T))
def test_bank_machines_timing(name, reference):
    """A command in cycle t: the constraint it starts is not met in t + d - 1 and met in
    t + d; the members of other banks and groups are untouched; under either ACT reference
    cycle."""
    cfg = CFG.replace(act_reference_cycle=reference)
    (bus, op), member, index, delay, others = _constraints(cfg.timing)[name]
    dut = BankMachines(cfg)

    def get(ctx, member, index):
        value = ctx.get(getattr(dut.status, member))
        return value if index is None else value >> index & 1

    async def bench(ctx):
        set_fields(ctx, getattr(dut, bus), valid=1, op=op, bank=BANK)
        await ctx.tick()
        ctx.set(getattr(dut, bus).valid, 0)
        for k in range(1, delay + 2):
            assert get(ctx, member, index) == (k >= delay), f"{name}: cycle t + {k}"
            for other, at in others:
                assert get(ctx, other, at) == 1, f"{name} touched {other}[{at}]"
            await ctx.tick()

    simulate(dut, bench)


def test_bank_machines_rows():
    """ACT opens its bank on its row from the next cycle; PRE closes one bank, PREA all, an
    auto-precharge its own."""
    dut = BankMachines(CFG)

    async def bench(ctx):
        for bank, row in ((1, 9), (2, 5)):
            set_fields(ctx, dut.row, valid=1, op=RowOp.ACT, bank=bank, row=row)
            await ctx.tick()
        ctx.set(dut.row.valid, 0)
        assert ctx.get(dut.status.open) == 0b0110
        assert [ctx.get(dut.status.open_row)[b] for b in (1, 2)] == [9, 5]
        set_fields(ctx, dut.row, valid=1, op=RowOp.PRE, bank=1)
        await ctx.tick()
        assert ctx.get(dut.status.open) == 0b0100
        set_fields(ctx, dut.row, valid=1, op=RowOp.PREA, bank=0)
        await ctx.tick()
        assert ctx.get(dut.status.open) == 0
        set_fields(ctx, dut.row, valid=1, op=RowOp.ACT, bank=3, row=2)
        await ctx.tick()
        ctx.set(dut.row.valid, 0)
        set_fields(ctx, dut.col, valid=1, op=ColOp.WRA, bank=3)
        assert ctx.get(dut.status.open) == 0b1000
        await ctx.tick()
        assert ctx.get(dut.status.open) == 0

    simulate(dut, bench)


def test_activate_window():
    """tFAW: after four ACTs the fifth may go tFAW after the first, not a cycle earlier."""
    faw = 20
    dut = ActivateWindow(faw)

    async def bench(ctx):
        for k in range(faw + 1):
            if k in (0, 4, 8, 12):
                assert ctx.get(dut.ready)
            elif k > 12:
                assert ctx.get(dut.ready) == (k >= faw), f"cycle {k}"
            ctx.set(dut.act, k in (0, 4, 8, 12))
            await ctx.tick()

    simulate(dut, bench)


# Command queue ---------------------------------------------------------------------------------

def _offer(ctx, q, *, write=0, bank=0, row=1, col=1, tag=0, strb=None):
    strb = (1 << CFG.access_bytes) - 1 if strb is None else strb
    set_fields(ctx, q.req.payload, write=write, bank=bank, row=row, col=col, tag=tag, strb=strb)
    ctx.set(q.req.valid, 1)


def test_command_queue_order_and_hazards():
    """Entries stay in age order; a served entry leaves and the younger move down; a request is
    blocked by an older one to the same access when either is a write; a full queue refuses."""
    dut = CommandQueue(CFG)

    async def bench(ctx):
        ctx.set(dut.admit, 1)
        reqs = [dict(tag=0), dict(tag=1, write=1), dict(tag=2, bank=2), dict(tag=3)]
        for r in reqs:
            assert ctx.get(dut.req.ready)
            _offer(ctx, dut, **r)
            await ctx.tick()
        ctx.set(dut.req.valid, 0)
        assert ctx.get(dut.level) == 4 and not ctx.get(dut.req.ready)
        assert [ctx.get(dut.entries)[i].tag for i in range(4)] == [0, 1, 2, 3]
        assert ctx.get(dut.blocked) == 0b1010      # the write behind a read, a read behind it
        set_fields(ctx, dut, served_index=1, served_remove=1)
        await ctx.tick()
        ctx.set(dut.served_remove, 0)
        assert ctx.get(dut.level) == 3
        assert [ctx.get(dut.entries)[i].tag for i in range(3)] == [0, 2, 3]
        assert ctx.get(dut.blocked) == 0           # two reads of one access may pass
        ctx.set(dut.admit, 0)
        _offer(ctx, dut, tag=7)
        await ctx.tick()
        assert ctx.get(dut.level) == 3, "taken although not admitted"

    simulate(dut, bench)


def test_command_queue_merge_and_wait():
    """A partial write is marked busy by its merge read and becomes a full write (or a dropped
    one) when the merge data returns; every entry's wait saturates at the starvation cap."""
    dut = CommandQueue(CFG)

    async def bench(ctx):
        ctx.set(dut.admit, 1)
        for slot, strb in ((1, 0x0f), (0, 0x3)):
            ctx.set(dut.wslot, slot)
            _offer(ctx, dut, write=1, strb=strb, col=slot)
            await ctx.tick()
        ctx.set(dut.req.valid, 0)
        e = ctx.get(dut.entries)
        assert (e[0].rmw, e[0].posted, e[0].wslot) == (1, 0, 1)
        set_fields(ctx, dut, served_index=0, served_read=1)
        await ctx.tick()
        ctx.set(dut.served_read, 0)
        assert ctx.get(dut.entries)[0].rmw_busy == 1
        set_fields(ctx, dut, merge=1, merge_slot=0, merge_double=1)    # the other write's
        await ctx.tick()
        assert ctx.get(dut.entries)[1].cancel == 0, "merge of a write that was not reading"
        set_fields(ctx, dut, merge=1, merge_slot=1, merge_double=1)
        await ctx.tick()
        ctx.set(dut.merge, 0)
        e = ctx.get(dut.entries)[0]
        assert (e.rmw, e.rmw_busy, e.cancel) == (0, 0, 1)
        for _ in range(2 * CFG.starvation_cap):
            await ctx.tick()
        assert ctx.get(dut.entries)[0].wait == CFG.starvation_cap

    simulate(dut, bench)


# Read/write mode -------------------------------------------------------------------------------

def test_mode_control():
    """Reads until write_high writes wait; the switch raises ``leaving`` first and turns the
    mode when the old mode's hits are gone, or after LEAVE_LIMIT cycles at most."""
    dut = ModeControl(CFG)

    async def bench(ctx):
        set_fields(ctx, dut, valid=0b0111, writes=0b0110, mode_hits=1)
        await ctx.tick()
        assert ctx.get(dut.leaving) and not ctx.get(dut.write_mode)
        for _ in range(LEAVE_LIMIT + 1):
            assert not ctx.get(dut.write_mode)
            await ctx.tick()
        assert ctx.get(dut.write_mode) and not ctx.get(dut.leaving)
        ctx.set(dut.valid, 0b0101)              # one write left (write_low 0): stay
        await ctx.tick()
        assert not ctx.get(dut.leaving)
        set_fields(ctx, dut, valid=0b0001, mode_hits=0)     # no write left, a read waits
        await ctx.tick()
        assert ctx.get(dut.leaving)
        await ctx.tick()
        assert not ctx.get(dut.write_mode) and not ctx.get(dut.leaving)

    simulate(dut, bench)


# Refresher -------------------------------------------------------------------------------------

def _closed_banks(ctx, status):
    set_fields(ctx, status, open=0, ref_ok=(1 << CFG.banks) - 1, pre_ok=(1 << CFG.banks) - 1,
               rfc_ok=1, refsb_ok=1, refsb_l_ok=(1 << CFG.bank_groups) - 1)


async def _issue(ctx, dut):
    """One cycle in which the refresher's command, if any, is granted; returns it."""
    cmd = ctx.get(dut.cmd)
    set_fields(ctx, dut.row, valid=cmd.valid, op=cmd.op, bank=cmd.bank)
    await ctx.tick()
    ctx.set(dut.row.valid, 0)
    return (cmd.op, cmd.bank) if cmd.valid else None


def test_refresher_forced():
    """Busy traffic: the refresh is forced in the cycle ``refresh_postpone`` are owed (one falls
    due every tREFI from reset), REF is asked for at once with the banks closed, and the
    refresh ends the cycle after."""
    dut = Refresher(CFG)

    async def bench(ctx):
        _closed_banks(ctx, dut.status)
        for cycle in range(CFG.refresh_postpone * T.refi + 3):
            assert ctx.get(dut.forced) == (cycle == CFG.refresh_postpone * T.refi), cycle
            active = cycle == CFG.refresh_postpone * T.refi + 1
            assert ctx.get(dut.active) == active and ctx.get(dut.block) == (15 if active else 0)
            assert await _issue(ctx, dut) == ((RowOp.REF, 0) if active else None)

    simulate(dut, bench)


def test_refresher_early_and_prea():
    """Idle queue: an owed refresh starts early, before it is forced (its delay is timed by
    ``test_refresher_idle_delay``); with a bank open PREA is asked for when the bank allows its
    PRE, REF only once all are closed."""
    dut = Refresher(CFG)

    async def bench(ctx):
        _closed_banks(ctx, dut.status)
        set_fields(ctx, dut.status, open=0b10, pre_ok=0b01)
        ctx.set(dut.idle, 1)
        for cycle in range(T.refi + 1):
            assert not ctx.get(dut.active), f"cycle {cycle}"
            await ctx.tick()
        assert ctx.get(dut.active) and not ctx.get(dut.cmd.valid)
        ctx.set(dut.status.pre_ok, 0b11)
        assert await _issue(ctx, dut) == (RowOp.PREA, 0)
        ctx.set(dut.status.open, 0)
        assert await _issue(ctx, dut) == (RowOp.REF, 0)
        assert not ctx.get(dut.active)

    simulate(dut, bench)
    assert IDLE_REFRESH < T.refi


def test_refresher_idle_delay():
    """An owed all-bank refresh under traffic waits (until forced); once the queue is idle it
    starts after exactly IDLE_REFRESH idle cycles, counted afresh after any busy cycle: the
    refresher's ``active`` rises IDLE_REFRESH + 1 cycles after ``idle`` does (the count's
    register, then ``active``'s), not one sooner or later."""
    dut = Refresher(CFG)

    async def wait_active(ctx):
        for cycle in range(4 * IDLE_REFRESH):
            if ctx.get(dut.active):
                return cycle
            await ctx.tick()
        return None

    async def bench(ctx):
        _closed_banks(ctx, dut.status)
        ctx.set(dut.idle, 0)
        for cycle in range(T.refi + 1):                   # one refresh owed, the queue busy
            assert not ctx.get(dut.active), f"cycle {cycle}"
            await ctx.tick()
        ctx.set(dut.idle, 1)
        await ctx.tick().repeat(IDLE_REFRESH - 1)         # one idle cycle short, then busy again
        ctx.set(dut.idle, 0)
        await ctx.tick()
        assert not ctx.get(dut.active), "an interrupted idle stretch counted"
        ctx.set(dut.idle, 1)
        assert await wait_active(ctx) == IDLE_REFRESH + 1

    simulate(dut, bench)


@pytest.mark.parametrize("per_bank", [False, True])
def test_refresher_waits_for_ref_gate(per_bank):
    """A REF (REFSB) waits for the banks' refresh gate ``ref_ok`` (tRC from the ACT's
    reference cycle, tRP, tRFCsb counted in full), not for ``act_ok`` (an ACT may come a
    cycle sooner): with every ``act_ok`` set and ``ref_ok`` only for bank 0 (which a queued
    request wants), no REF and no REFSB until the others' are set; then the REF, or the REFSB
    to bank 1."""
    cfg = CFG.replace(per_bank_refresh=per_bank)
    dut = Refresher(cfg)
    due = cfg.refi_sb if per_bank else cfg.refresh_postpone * T.refi + 1
    op = RowOp.REFSB if per_bank else RowOp.REF

    async def bench(ctx):
        _closed_banks(ctx, dut.status)
        set_fields(ctx, dut.status, act_ok=(1 << cfg.banks) - 1, ref_ok=0b0001)
        ctx.set(dut.wanted, 0b0001)
        for cycle in range(due + 5):
            assert await _issue(ctx, dut) is None, f"cycle {cycle}"
        ctx.set(dut.status.ref_ok, 0b1111)
        assert await _issue(ctx, dut) == (op, 1 if per_bank else 0)

    simulate(dut, bench)


def test_refresher_per_bank():
    """Per bank: a REFSB falls due every tREFI / banks and goes at once to a closed bank of the
    round that no queued request wants; every bank once per round; with every bank wanted the
    refresh waits until ``refresh_postpone`` are owed, then forces the round's next bank: its
    PRE first if it is open, and no queued request may use it meanwhile."""
    cfg = CFG.replace(per_bank_refresh=True)
    dut = Refresher(cfg)
    interval = cfg.refi_sb

    async def bench(ctx):
        _closed_banks(ctx, dut.status)
        ctx.set(dut.wanted, 0b0001)
        done = []
        for cycle in range(4 * interval + 2):
            issued = await _issue(ctx, dut)
            if issued:
                assert cycle % interval == 0 and cycle > 0, f"REFSB in cycle {cycle}"
                done.append(issued[1])
        assert done == [1, 2, 3], done           # bank 0 is wanted; one per interval
        ctx.set(dut.wanted, 0b1111)
        set_fields(ctx, dut.status, open=0b0001, pre_ok=0)
        for _ in range(cfg.refresh_postpone * interval):
            assert await _issue(ctx, dut) is None
        assert ctx.get(dut.block) == 0b0001 and not ctx.get(dut.cmd.valid)
        ctx.set(dut.status.pre_ok, 0b0001)
        assert await _issue(ctx, dut) == (RowOp.PRE, 0)
        ctx.set(dut.status.open, 0)
        assert ctx.get(dut.forced) == 0
        assert ctx.get(dut.cmd.op) == RowOp.REFSB and ctx.get(dut.cmd.valid)
        cmd = ctx.get(dut.cmd)
        set_fields(ctx, dut.row, valid=1, op=cmd.op, bank=cmd.bank)
        assert ctx.get(dut.forced) == 1
        await ctx.tick()
        ctx.set(dut.row.valid, 0)
        # That completed the round; still 8 owed, so the new round's first bank is forced.
        assert ctx.get(dut.block) == 0b0001 and ctx.get(dut.cmd.bank) == 0

    simulate(dut, bench)


# Channel command arbiter -----------------------------------------------------------------------

def test_command_arbiter():
    """Both pseudo-channels offering: the buses alternate between them; an ACT holds the row
    bus for a second cycle; a lone offer is granted at once."""
    dut = CommandArbiter(CFG)

    async def bench(ctx):
        for k in range(2):
            set_fields(ctx, dut.col[k], valid=1, op=ColOp.RD, bank=k, col=k)
            set_fields(ctx, dut.row[k], valid=1, op=RowOp.PRE, bank=k)
        grants = []
        for _ in range(4):
            grants.append((ctx.get(dut.row_grant), ctx.get(dut.col_grant),
                           ctx.get(dut.bus.col_pc), ctx.get(dut.bus.col_addr)))
            await ctx.tick()
        assert [g[:2] for g in grants] == [(0b01, 0b01), (0b10, 0b10)] * 2
        assert [g[2:] for g in grants] == [(0, 0), (1, 1)] * 2
        ctx.set(dut.row[0].op, RowOp.ACT)
        ctx.set(dut.row[1].valid, 0)
        assert ctx.get(dut.row_grant) == 0b01 and ctx.get(dut.bus.row_op) == RowOp.ACT
        await ctx.tick()
        assert ctx.get(dut.row_grant) == 0 and not ctx.get(dut.bus.row_valid)
        await ctx.tick()
        assert ctx.get(dut.row_grant) == 0b01

    simulate(dut, bench)


# Write buffer ----------------------------------------------------------------------------------

def test_write_buffer():
    """Slots are handed out lowest first; a merge fills the bytes a partial write leaves out;
    the WR's codewords (SECDED of each word) are on the bus exactly CWL and CWL + 1 cycles after
    it, and its slot is free again after them; a dropped write frees its slot."""
    dut = WriteBuffer(CFG)
    rng = random.Random(1)
    ab = CFG.access_bytes
    first, second, merge = (rng.getrandbits(8 * ab) for _ in range(3))
    strb = 0x00ff00ff

    async def bench(ctx):
        for data, mask in ((first, (1 << ab) - 1), (second, strb)):
            assert ctx.get(dut.free_any)
            set_fields(ctx, dut, alloc=1, alloc_data=data, alloc_strb=mask)
            await ctx.tick()
        ctx.set(dut.alloc, 0)
        assert not ctx.get(dut.free_any)
        set_fields(ctx, dut, merge=1, merge_slot=1, merge_data=merge)
        await ctx.tick()
        ctx.set(dut.merge, 0)
        merged = sum(((second if strb >> k & 1 else merge) >> (8 * k) & 0xff) << (8 * k)
                     for k in range(ab))
        words = [merged >> (64 * k) & (2**64 - 1) for k in range(CFG.words)]
        half = CFG.words // 2
        set_fields(ctx, dut, issue=1, issue_slot=1)
        for k in range(T.cwl + 3):
            await ctx.tick()
            ctx.set(dut.issue, 0)
            cycle = k + 1
            beat = {T.cwl: words[:half], T.cwl + 1: words[half:]}.get(cycle)
            assert ctx.get(dut.wrdata_valid) == (beat is not None), f"t + {cycle}"
            if beat is not None:
                assert ctx.get(dut.wrdata) == codewords(beat)
        assert ctx.get(dut.free_any) and ctx.get(dut.free_slot) == 1
        set_fields(ctx, dut, cancel=1, cancel_slot=0)
        await ctx.tick()
        ctx.set(dut.cancel, 0)
        assert ctx.get(dut.free_slot) == 0

    simulate(dut, bench)


# Read return -----------------------------------------------------------------------------------

def test_read_return():
    """Reads come back in issue order with their tags, a single flipped bit corrected and
    counted, a double flip answered ``err``; a merge read goes to the write buffer, not out;
    ``rd_room`` falls when RRESP_DEPTH reads are spoken for."""
    dut = ReadReturn(CFG)
    rng = random.Random(2)
    accesses = [[rng.getrandbits(64) for _ in range(CFG.words)] for _ in range(4)]
    flips = [[], [5], [3, 70], []]             # bits of word 0 flipped in each access
    half = CFG.words // 2

    async def bench(ctx):
        for k in range(4):
            set_fields(ctx, dut, issue=1, rmw=int(k == 3), tag=4 + k, wslot=1)
            await ctx.tick()
        ctx.set(dut.issue, 0)
        got, merges, sbe, dbe = [], [], 0, 0
        for k, words in enumerate(accesses):
            code = codewords(words)
            for b in flips[k]:
                code ^= 1 << b
            for beat in range(2):
                set_fields(ctx, dut, rddata_valid=1,
                           rddata=code >> (beat * 72 * half) & (2**(72 * half) - 1))
                sbe += ctx.get(dut.sbe)
                dbe += ctx.get(dut.dbe)
                await ctx.tick()
                ctx.set(dut.rddata_valid, 0)
                if ctx.get(dut.merge):
                    merges.append((ctx.get(dut.merge_slot), ctx.get(dut.merge_data)))
        ctx.set(dut.rresp.ready, 1)
        for _ in range(8):
            if ctx.get(dut.rresp.valid):
                p = ctx.get(dut.rresp.payload)
                got.append((p.tag, p.data, p.err))
            await ctx.tick()
        value = [sum(w << (64 * i) for i, w in enumerate(ws)) for ws in accesses]
        assert [(t, e) for t, _, e in got] == [(4, 0), (5, 0), (6, 1)]
        assert [d for _, d, _ in got[:2]] == value[:2]
        assert merges == [(1, value[3])]
        assert (sbe, dbe) == (1, 1)
        ctx.set(dut.rresp.ready, 0)
        for _ in range(RRESP_DEPTH):
            assert ctx.get(dut.rd_room)
            ctx.set(dut.issue, 1)
            await ctx.tick()
        assert not ctx.get(dut.rd_room)

    simulate(dut, bench)


# AXI port parts --------------------------------------------------------------------------------

def test_front_end_bursts():
    """An unaligned INCR write burst becomes one request per beat at the aligned addresses after
    the first, decoded by the mapping and tagged with its entry; a read past the capacity is
    answered locally with DECERR, a FIXED read with SLVERR, and neither reaches memory."""
    cfg = HBMConfig(id_lanes=2, write_bursts=2, rob_depth=8)
    dut = FrontEnd(cfg)
    ab = cfg.access_bytes
    start = 0x12345 + 3

    async def bench(ctx):
        set_fields(ctx, dut, awid=1, awaddr=start, awlen=2, awsize=5, awburst=AxiBurst.INCR,
                   awvalid=1)
        set_fields(ctx, dut.wburst, room=1, slot=1)
        ctx.set(dut.wreq.ready, 1)
        await ctx.tick()
        ctx.set(dut.awvalid, 0)
        seen = []
        for beat in range(3):
            set_fields(ctx, dut, wvalid=1, wdata=beat + 7, wstrb=(1 << ab) - 1)
            assert ctx.get(dut.wreq.valid) and ctx.get(dut.wready)
            p = ctx.get(dut.wreq.payload)
            seen.append((p.pc, p.req.bank, p.req.row, p.req.col, p.req.tag, p.req.data))
            await ctx.tick()
        ctx.set(dut.wvalid, 0)
        addrs = [start] + [(start & -ab) + k * ab for k in (1, 2)]
        assert seen == [(*cfg.decode(a), 0b11, k + 7) for k, a in enumerate(addrs)]

        set_fields(ctx, dut.rbeat, room=1, slot=2)
        ctx.set(dut.rreq.ready, 1)
        for addr, burst, resp in ((cfg.capacity + 64, AxiBurst.INCR, AxiResp.DECERR),
                                  (64, AxiBurst.FIXED, AxiResp.SLVERR)):
            set_fields(ctx, dut, arid=0, araddr=addr, arlen=1, arsize=5, arburst=burst,
                       arvalid=1)
            await ctx.tick()
            ctx.set(dut.arvalid, 0)
            for last in (0, 1):
                assert not ctx.get(dut.rreq.valid)
                b = dut.rbeat
                assert (ctx.get(b.valid), ctx.get(b.local), ctx.get(b.last),
                        ctx.get(b.resp)) == (1, 1, last, resp)
                await ctx.tick()

    simulate(dut, bench)


def test_write_tracker_order():
    """A burst is answered once all its beats are done, with the worst response of them; a
    lane's bursts in order; another lane's complete burst passes an incomplete one."""
    dut = WriteTracker(CFG)

    async def alloc(ctx, ident, length):
        set_fields(ctx, dut.wburst, valid=1, id=ident, len=length)
        slot = ctx.get(dut.wburst.slot)
        await ctx.tick()
        ctx.set(dut.wburst.valid, 0)
        return slot

    async def complete(ctx, lane, slot, err=0):
        set_fields(ctx, dut.bret, valid=1)
        set_fields(ctx, dut.bret.payload, tag=slot | lane << 1, err=err)
        await ctx.tick()
        ctx.set(dut.bret.valid, 0)

    async def bench(ctx):
        ctx.set(dut.bready, 1)
        a = await alloc(ctx, 0, 1)          # lane 0, two beats
        b = await alloc(ctx, 2, 0)          # lane 0, behind a
        c = await alloc(ctx, 1, 0)          # lane 1
        await complete(ctx, 0, b)
        await complete(ctx, 1, c)
        await complete(ctx, 0, a, err=1)
        answers = []
        for k in range(6):
            if ctx.get(dut.bvalid):
                answers.append((ctx.get(dut.bid), ctx.get(dut.bresp)))
            if k == 0:
                await complete(ctx, 0, a)
            else:
                await ctx.tick()
        assert answers == [(1, AxiResp.OKAY), (0, AxiResp.SLVERR), (2, AxiResp.OKAY)]

    simulate(dut, bench)


def test_reorder_buffer_order():
    """Beats leave in order per lane and in any order across lanes; a local beat carries its
    response and zero data."""
    dut = ReorderBuffer(CFG)

    async def take(ctx, ident, local=0, last=1):
        set_fields(ctx, dut.rbeat, valid=1, id=ident, local=local, last=last,
                   resp=AxiResp.DECERR if local else AxiResp.OKAY)
        slot = ctx.get(dut.rbeat.slot)
        await ctx.tick()
        ctx.set(dut.rbeat.valid, 0)
        return slot

    async def fill(ctx, lane, slot, data):
        set_fields(ctx, dut.rret, valid=1)
        set_fields(ctx, dut.rret.payload, tag=slot | lane << 2, data=data, err=0)
        await ctx.tick()
        ctx.set(dut.rret.valid, 0)

    async def bench(ctx):
        ctx.set(dut.rready, 1)
        a = await take(ctx, 0, last=0)
        b = await take(ctx, 2)
        c = await take(ctx, 1)
        d = await take(ctx, 3, local=1)
        await fill(ctx, 0, b, 0xb)
        await fill(ctx, 1, c, 0xc)
        beats = []
        for k in range(12):
            if k == 4:
                await fill(ctx, 0, a, 0xa)
            else:
                await ctx.tick()
            if ctx.get(dut.rvalid):
                beats.append((ctx.get(dut.rid), ctx.get(dut.rdata), ctx.get(dut.rresp),
                              ctx.get(dut.rlast)))
        assert beats == [(1, 0xc, AxiResp.OKAY, 1), (3, 0, AxiResp.DECERR, 1),
                         (0, 0xa, AxiResp.OKAY, 0), (2, 0xb, AxiResp.OKAY, 1)]
        assert d == 1

    simulate(dut, bench)
