"""HBM controller regression: configuration checks, the device model's checker on hand-built
command sequences, and cocotb testbenches in Verilator for a few configurations."""

from dataclasses import replace

import numpy as np
import pytest

from hdl.generate import generate
from sim.runner import lint
from spec.hbm import (
    ACT_REFERENCE_CYCLES,
    BENCH_CONFIG,
    MAPPINGS,
    PRESETS,
    HBMConfig,
    TimingOverrides,
)
from verification.models.hbm import (
    MAX_INTERVAL,
    MAX_POSTPONED,
    MAX_PULLED_IN,
    HBMDeviceModel,
    Violation,
)
from verification.tests.suite import cases, cocotb_tests

TB = "verification.tb.hbm"

CONFIGS = {
    # HBM2-2000, one channel of two pseudo-channels, open page, FR-FCFS, all-bank refresh.
    "default": HBMConfig(),
    # Closed page (auto-precharge), FCFS, per-bank refresh, two ports; tRC made longer than
    # tRAS + tRP, so that row conflicts in one bank wait for tRC alone.
    "two-ports-closed-fcfs": HBMConfig(
        speed="1600", ports=2, page_policy="closed", scheduler="fcfs", xor_bank=True,
        mapping="RoCoBaBgPc", queue_depth=8, write_buffer=4, write_high=3, write_low=1,
        id_lanes=2, rob_depth=16, row_bits=10, refresh_postpone=2, per_bank_refresh=True,
        timing_overrides=TimingOverrides(rc=40)),
    # HBM3-6400 (tFAW 48 > 4 x tRRD_S 8: random reads are tFAW-bound), two channels, closed
    # page, per-bank refresh.
    "hbm3": HBMConfig(standard="HBM3", speed="6400", pseudo_channels=4, page_policy="closed",
                      per_bank_refresh=True, queue_depth=16),
    # Legacy mode: one 128-bit HBM2E channel (64 B accesses) that owns its buses.
    "legacy": HBMConfig(standard="HBM2E", speed="3200", channel_mode="legacy",
                        pseudo_channels=1, id_lanes=2),
    # The ACT's bank timings counted from its first cycle (the others count from its second,
    # the default), closed page: ACT after PRE and auto-precharge, tRCD, tRAS, tRC to REF.
    "act-first": HBMConfig(act_reference_cycle="first", page_policy="closed"),
}
# The configurations beyond the first two run these tests in `make test`, the rest in
# `make test-all`: random traffic (and tFAW reached by saturating random reads on HBM3).
# Legacy mode runs only in `make test-all` and CI's slow shards (its build and random mix,
# about 1.5 minutes of a core, moved to keep `make test` under 25 minutes).
QUICK = {"hbm3": {"test_random_mix", "test_write_then_last_read"},
         "legacy": set(),
         "act-first": {"test_random_mix", "test_refresh_under_load"}}


def _marks(name, test):
    return pytest.mark.slow if name in QUICK and test not in QUICK[name] else ()


# The benchmark's configuration (64-entry queue, 32 write slots, closed page): the scheduler's
# widest build, on the tests that stress the queue, in `make test-all` and CI's slow shards
# (its build and tests take about 4 minutes of a core).
DEEP_TESTS = ["test_random_mix", "test_read_after_write", "test_write_not_starved",
              "test_write_then_last_read"]


@pytest.mark.parametrize("name, test", cases(TB, CONFIGS, marks=_marks))
def test_hbm(cocotb_run, name, test):
    cocotb_run("hbm", CONFIGS[name], TB, test)


@pytest.mark.slow
@pytest.mark.parametrize("test", DEEP_TESTS)
def test_hbm_deep(cocotb_run, test):
    cocotb_run("hbm", BENCH_CONFIG, TB, test)


def test_generate_lint(tmp_path):
    design = generate("hbm", HBMConfig(channel_mode="legacy", pseudo_channels=2, bank_groups=2,
                                       banks_per_group=2, speed="2400", id_lanes=1))
    lint(design.write(tmp_path), design.name)


# The device model's checker on its own --------------------------------------------------------

# A timing where every constraint binds on its own: tRC longer than tRAS + tRP, tFAW longer
# than four tRRD_S, tRREFD longer than tRRD_L + 1, and two idle cycles from read to write data.
T = replace(HBMConfig().timing, rc=HBMConfig().timing.ras + HBMConfig().timing.rp + 5,
            faw=4 * HBMConfig().timing.rrd_s + 5, rrefd=HBMConfig().timing.rrd_l + 4, rtw=2)
B0, B1, B4 = 0, 1, 4        # banks 0 and 1 share bank group 0; bank 4 is in group 1
ROW = 3
LATE = 500                  # a start long after every constraint of the setup


def _model(timing=T):
    """Two pseudo-channels of one channel."""
    return HBMDeviceModel(timing, 2, 4, 4)


def _a(d):
    """Cycles from an ACT's first cycle to the one its bank timings count from (and tRP, tRFC,
    tRFCsb count to): 0 with ``act_reference_cycle="first"``, 1 with ``"second"``."""
    return {"first": 0, "second": 1}[d.t.act_reference_cycle]


def _open(d, *banks, pc=0):
    """ACT ``banks`` from cycle 0 (pseudo-channel 1: cycle 2, after the row bus is free), far
    enough apart that no ACT constraint binds later."""
    for k, b in enumerate(banks):
        d.act(pc, 2 * pc + k * max(T.rrd_l, T.faw), b, ROW)


def _seq_rp(d, x):
    _open(d, B0)
    d.pre(0, LATE, B0)
    d.act(0, LATE + T.rp - _a(d) + x, B0, ROW)


def _seq_rc(d, x):
    # Both ACTs count from the same cycle: tRC is the same under either convention.
    d.act(0, 0, B0, ROW)
    d.pre(0, T.ras + _a(d), B0)
    d.act(0, T.rc + x, B0, ROW)


def _seq_rrd_l(d, x):
    d.act(0, 0, B0, ROW)
    d.act(0, T.rrd_l + x, B1, ROW)


def _seq_rrd_s(d, x):
    d.act(0, 0, B0, ROW)
    d.act(0, T.rrd_s + x, B4, ROW)


def _seq_faw(d, x):
    for k, b in enumerate((0, 4, 8, 12)):
        d.act(0, k * T.rrd_s, b, ROW)
    d.act(0, T.faw + x, 1, ROW)


def _seq_rfc_act(d, x):
    d.ref(0, LATE)
    d.act(0, LATE + T.rfc - _a(d) + x, B0, ROW)


def _seq_rfc_ref(d, x):
    d.ref(0, LATE)
    d.ref(0, LATE + T.rfc + x)


def _seq_rp_ref(d, x):
    _open(d, B0)
    d.pre(0, LATE, B0)
    d.ref(0, LATE + T.rp + x)


def _seq_rc_ref(d, x):
    d.act(0, LATE, B0, ROW)
    d.pre(0, LATE + T.ras + _a(d), B0)
    d.ref(0, LATE + T.rc + _a(d) + x)


def _seq_rc_refsb(d, x):
    d.act(0, LATE, B0, ROW)
    d.pre(0, LATE + T.ras + _a(d), B0)
    d.refsb(0, LATE + T.rc + _a(d) + x, B0)


def _seq_ras(d, x):
    d.act(0, LATE, B0, ROW)
    d.pre(0, LATE + T.ras + _a(d) + x, B0)


def _seq_rtp(d, x):
    _open(d, B0)
    d.rd(0, LATE, B0, 0)
    d.pre(0, LATE + T.rtp + x, B0)


def _seq_wr(d, x):
    _open(d, B0)
    d.wr(0, LATE, B0, 0)
    d.pre(0, LATE + T.cwl + T.burst_cycles + T.wr + x, B0)


def _seq_rcd_rd(d, x):
    d.act(0, LATE, B0, ROW)
    d.rd(0, LATE + T.rcd_rd + _a(d) + x, B0, 0)


def _seq_rcd_wr(d, x):
    d.act(0, LATE, B0, ROW)
    d.wr(0, LATE + T.rcd_wr + _a(d) + x, B0, 0)


def _seq_ccd_l(d, x):
    _open(d, B0, B1)
    d.rd(0, LATE, B0, 0)
    d.rd(0, LATE + T.ccd_l + x, B1, 0)


def _seq_ccd_s(d, x):
    _open(d, B0, B4)
    d.wr(0, LATE, B0, 0)
    d.wr(0, LATE + T.ccd_s + x, B4, 0)


def _seq_wtr_l(d, x):
    _open(d, B0, B1)
    d.wr(0, LATE, B0, 0)
    d.rd(0, LATE + T.cwl + T.burst_cycles + T.wtr_l + x, B1, 0)


def _seq_wtr_s(d, x):
    _open(d, B0, B4)
    d.wr(0, LATE, B0, 0)
    d.rd(0, LATE + T.cwl + T.burst_cycles + T.wtr_s + x, B4, 0)


def _seq_rtw(d, x):
    _open(d, B0, B4)
    d.rd(0, LATE, B0, 0)
    d.wr(0, LATE + T.cl + T.burst_cycles + T.rtw - T.cwl + x, B4, 0)


def _seq_act_second_cycle(d, x):
    # Any row command of either pseudo-channel waits for the ACT's second cycle.
    d.act(0, LATE, B0, ROW)
    d.pre(1, LATE + 2 + x, B0)


def _seq_column_bus(d, x):
    _open(d, B0)
    _open(d, B0, pc=1)
    d.rd(0, LATE, B0, 0)
    d.rd(1, LATE + 1 + x, B0, 0)


def _seq_data_collision(d, x):
    # With tCCD_S below the burst, only the data bus itself keeps two reads apart.
    _open(d, B0, B4)
    d.rd(0, LATE, B0, 0)
    d.rd(0, LATE + T.burst_cycles + x, B4, 0)


def _seq_rda_act(d, x):
    _open(d, B0)
    d.rd(0, LATE, B0, 0, auto=True)
    d.act(0, LATE + T.rtp + T.rp - _a(d) + x, B0, ROW)


def _seq_rda_ras(d, x):
    # The auto-precharge waits for tRAS after the ACT (the timing has tRC < tRAS + tRP); tRAS
    # from one ACT's reference cycle, tRP to the next one's: the same either way.
    d.act(0, LATE, B0, ROW)
    d.rd(0, LATE + T.rcd_rd + _a(d), B0, 0, auto=True)
    d.act(0, LATE + T.ras + T.rp + x, B0, ROW)


def _seq_wra_act(d, x):
    _open(d, B0)
    d.wr(0, LATE, B0, 0, auto=True)
    d.act(0, LATE + T.wr_to_pre + T.rp - _a(d) + x, B0, ROW)


def _seq_wr_rda(d, x):
    # The RDA's precharge (tRTP after it) must not start before the WR's recovery ends.
    t = d.t
    _open(d, B0)
    d.wr(0, LATE, B0, 0)
    d.rd(0, LATE + t.wr_to_pre - t.rtp + x, B0, 1, auto=True)


def _seq_wr_rda_ras(d, x):
    # The RDA goes at once (WR to RD), tRAS holds its precharge back: the precharge, not the
    # command, must clear the write recovery.
    t = d.t
    d.act(0, LATE, B0, ROW)
    wr = LATE + t.ras + _a(d) - t.wr_to_pre - x
    d.wr(0, wr, B0, 0)
    d.rd(0, wr + t.wr_to_rd_l, B0, 1, auto=True)


def _seq_refsb_act(d, x):
    d.refsb(0, LATE, B0)
    d.act(0, LATE + T.rfc_sb - _a(d) + x, B0, ROW)


def _seq_refsb_act_other(d, x):
    d.refsb(0, LATE, B0)
    d.act(0, LATE + T.rrefd - 1 + x, B4, ROW)


def _seq_refsb_refsb(d, x):
    d.refsb(0, LATE, B0)
    d.refsb(0, LATE + T.rrefd + x, B4)


def _seq_act_refsb_s(d, x):
    d.act(0, LATE, B4, ROW)
    d.refsb(0, LATE + T.rrd_s + 1 + x, B0)


def _seq_act_refsb_l(d, x):
    d.act(0, LATE, B1, ROW)
    d.refsb(0, LATE + T.rrd_l + 1 + x, B0)


def _seq_rp_refsb(d, x):
    _open(d, B0)
    d.pre(0, LATE, B0)
    d.refsb(0, LATE + T.rp + x, B0)


def _seq_ref_refsb(d, x):
    d.ref(0, LATE)
    d.refsb(0, LATE + T.rfc + x, B0)


def _seq_refsb_ref(d, x):
    d.refsb(0, LATE, B0)
    d.ref(0, LATE + T.rfc_sb + x)


def _seq_refresh_overdue(d, x):
    # Refreshes late but within the interval limit, until 8 are owed: the next may come no
    # later than the cycle the ninth falls due.
    first = MAX_INTERVAL * T.refi - 3
    d.ref(0, first)
    d.ref(1, first + 2)
    last = (MAX_POSTPONED + 2) * T.refi - x
    d.tick(last - 1)
    d.ref(0, last)
    d.ref(1, last + 2)
    d.tick(last)


def _seq_refresh_interval(d, x):
    d.ref(0, 5)
    d.ref(1, 7)
    d.tick(5 + MAX_INTERVAL * T.refi - 1)
    d.ref(0, 5 + MAX_INTERVAL * T.refi - x)


def _seq_refresh_pulled_in(d, x):
    # Eight refreshes ahead of due are allowed; a ninth only once one more has fallen due.
    for k in range(MAX_PULLED_IN):
        d.ref(0, 5 + k * T.rfc)
    d.ref(0, T.refi + x)


CONSTRAINTS = {
    "tRP": _seq_rp, "tRC": _seq_rc, "tRRD_L": _seq_rrd_l, "tRRD_S": _seq_rrd_s,
    "tFAW": _seq_faw, "tRFC (REF to ACT)": _seq_rfc_act, "tRFC (REF to REF)": _seq_rfc_ref,
    "tRP (PRE to REF)": _seq_rp_ref, "tRC (ACT to REF)": _seq_rc_ref,
    "tRC (ACT to REFSB)": _seq_rc_refsb, "tRAS": _seq_ras,
    "tRTP": _seq_rtp, "tWR": _seq_wr, "tRCD_RD": _seq_rcd_rd, "tRCD_WR": _seq_rcd_wr,
    "tCCD_L": _seq_ccd_l, "tCCD_S": _seq_ccd_s, "tWTR_L": _seq_wtr_l, "tWTR_S": _seq_wtr_s,
    "RD to WR turnaround (tRTW)": _seq_rtw,
    "row bus: ACT takes two cycles": _seq_act_second_cycle,
    "column bus: one command per cycle": _seq_column_bus,
    "data bus collision": _seq_data_collision,
    "RDA to ACT (tRTP + tRP)": _seq_rda_act, "RDA to ACT (tRAS + tRP)": _seq_rda_ras,
    "WRA to ACT": _seq_wra_act,
    "tWR (WR to RDA's auto-precharge)": _seq_wr_rda,
    "tWR (WR to RDA's auto-precharge), HBM3": _seq_wr_rda,
    "tWR (WR to RDA's auto-precharge held by tRAS)": _seq_wr_rda_ras,
    "tRFCsb (REFSB to ACT)": _seq_refsb_act, "tRREFD (REFSB to ACT, other bank)":
        _seq_refsb_act_other,
    "tRREFD (REFSB to REFSB)": _seq_refsb_refsb, "ACT to REFSB (tRRD_S + 1)": _seq_act_refsb_s,
    "ACT to REFSB (tRRD_L + 1)": _seq_act_refsb_l, "tRP (PRE to REFSB)": _seq_rp_refsb,
    "tRFC (REF to REFSB)": _seq_ref_refsb, "tRFCsb (REFSB to REF)": _seq_refsb_ref,
    "refresh overdue": _seq_refresh_overdue, "refresh interval (9 x tREFI)":
        _seq_refresh_interval, "refresh pulled in (8)": _seq_refresh_pulled_in,
}
def _seq_write_data(d, x):
    _open(d, B0)
    d.wr(0, LATE, B0, 0)
    for k in range(T.burst_cycles):
        d.write_data(0, LATE + T.cwl + k + x + 1, 1, 0)


# Timings for the sequences that need a constraint the default T lets pass first.
TIMINGS = {"data bus collision": replace(T, ccd_s=1, ccd_l=1),
           "RDA to ACT (tRAS + tRP)": replace(T, rc=T.ras + T.rp - 5),
           "tWR (WR to RDA's auto-precharge), HBM3": HBMConfig(standard="HBM3",
                                                              speed="6400").timing,
           "tWR (WR to RDA's auto-precharge held by tRAS)": replace(
               T, ras=T.rcd_wr + T.wr_to_pre + 5, rc=T.rcd_wr + T.wr_to_pre + 5 + T.rp)}


def test_checker_wra_after_wr():
    """A WRA's own write recovery ends after any earlier WR's: WR then WRA to the bank at
    tCCD_L, and the next ACT tRP after the WRA's recovery, pass."""
    d = _model()
    _open(d, B0)
    d.wr(0, LATE, B0, 0)
    d.wr(0, LATE + T.ccd_l, B0, 1, auto=True)
    d.act(0, LATE + T.ccd_l + T.wr_to_pre + T.rp, B0, ROW)


@pytest.mark.parametrize("reference", ACT_REFERENCE_CYCLES)
@pytest.mark.parametrize("name", CONSTRAINTS)
def test_checker_one_cycle(name, reference):
    """Illegal by one cycle fails; the same sequence one cycle later (for a maximum: earlier)
    passes; under either ACT reference cycle (``act_reference_cycle``)."""
    seq = CONSTRAINTS[name]
    timing = replace(TIMINGS.get(name, T), act_reference_cycle=reference)
    with pytest.raises(Violation):
        seq(_model(timing), -1)
    seq(_model(timing), 0)


def test_checker_write_data_window():
    """Write data one cycle early fails (no WR CWL cycles earlier); at CWL it passes; missing
    write data fails."""
    with pytest.raises(Violation, match="no WR"):
        _seq_write_data(_model(), -2)
    _seq_write_data(_model(), -1)
    d = _model()
    _open(d, B0)
    d.wr(0, LATE, B0, 0)
    with pytest.raises(Violation, match="missing"):
        d.write_data(0, LATE + T.cwl, 0, 0)


@pytest.mark.parametrize("rule", ["ACT open bank", "RD closed bank", "WR closed bank",
                                  "REF open bank", "REFSB open bank", "RD after RDA",
                                  "two row commands in a cycle"])
def test_checker_state_rules(rule):
    d = _model()
    if rule == "ACT open bank":
        d.act(0, 0, B0, ROW)
        with pytest.raises(Violation, match="already open"):
            d.act(0, LATE, B0, ROW + 1)
    elif rule in ("REF open bank", "REFSB open bank"):
        d.act(0, 0, B0, ROW)
        with pytest.raises(Violation, match="open"):
            d.ref(0, LATE) if rule.startswith("REF ") else d.refsb(0, LATE, B0)
    elif rule == "RD after RDA":
        _open(d, B0)
        d.rd(0, LATE, B0, 0, auto=True)
        with pytest.raises(Violation, match="closed"):
            d.rd(0, LATE + 50, B0, 1)
    elif rule == "two row commands in a cycle":
        d.pre(0, LATE, B0)
        with pytest.raises(Violation, match="two row commands"):
            d.pre(1, LATE, B0)
    else:
        with pytest.raises(Violation, match="closed"):
            (d.rd if rule.startswith("RD") else d.wr)(0, LATE, B0, 0)


def test_model_stores_and_injects():
    d = _model()
    _open(d, B0)
    d.wr(0, LATE, B0, 5)
    d.write_data(0, LATE + T.cwl, 1, (2 << 72) | 1)
    d.write_data(0, LATE + T.cwl + 1, 1, (4 << 72) | 3)
    d.rd(0, LATE + 100, B0, 5)
    assert d.read_data(0, LATE + 100 + T.cl) == (2 << 72) | 1
    d.inject(0, B0, ROW, 5, 3, [0, 71])
    assert d.read_data(0, LATE + 101 + T.cl) == ((4 ^ 1 ^ (1 << 71)) << 72) | 3


# Configuration ----------------------------------------------------------------------------------

@pytest.mark.parametrize("params, message", [
    ({"speed": "3200"}, "speed must be one of '1600', '2000', '2400' (the speeds of standard "
     "HBM2), got '3200'"),
    ({"standard": "HBM3", "speed": "3200"}, "speed must be one of '6400' (the speeds of "
     "standard HBM3), got '3200'"),
    ({"standard": "HBM4"}, "standard must be one of 'HBM2', 'HBM2E', 'HBM3', got 'HBM4'"),
    ({"standard": "HBM3", "speed": "6400", "channel_mode": "legacy"},
     "channel_mode must be one of 'pseudo', got 'legacy'"),
    ({"pseudo_channels": 3}, "pseudo_channels must be one of 2, 4, 8, 16, 32, got 3"),
    ({"channel_mode": "legacy", "pseudo_channels": 16},
     "pseudo_channels must be one of 1, 2, 4, 8, got 16"),
    ({"queue_depth": 1}, "queue_depth must be an integer in 2..64, got 1"),
    ({"write_buffer": 20}, "write_buffer must be an integer in 1..16, got 20"),
    ({"write_low": 6}, "write_low must be an integer in 0..5, got 6"),
    ({"page_policy": "adaptive"}, "page_policy must be one of 'open', 'closed'"),
    ({"scheduler": "frfcfs-cap"}, "scheduler must be one of 'frfcfs', 'fcfs'"),
    ({"mapping": "RoBa"}, "mapping must be one of"),
    ({"addr_width": 20}, "addr_width must be an integer in 29..48, got 20"),
    ({"id_lanes": 32, "id_width": 4}, "id_lanes must be one of 1, 2, 4, 8, 16, got 32"),
    ({"id_lanes": 4, "id_width": 1}, "id_lanes must be at most 2**id_width = 2, got 4"),
    ({"refresh_postpone": 9}, "refresh_postpone must be an integer in 1..8, got 9"),
    ({"per_bank_refresh": 1}, "per_bank_refresh must be True or False, got 1"),
    ({"act_reference_cycle": "last"},
     "act_reference_cycle must be one of 'first', 'second', got 'last'"),
    ({"timing_overrides": {"faw": 0}}, "timing_overrides.faw must be an integer in 1..65535"),
    ({"timing_overrides": {"tfaw": 20}}, "timing_overrides: unknown HBM timing parameter(s)"),
    ({"timing_overrides": {"ccd_s": 1}},
     "timing_overrides.ccd_s must be at least the 2 cycles an access holds the data bus"),
    ({"banks": 16}, "unknown HBM parameter(s): banks"),
])
def test_config_refused(params, message):
    with pytest.raises(ValueError) as info:
        HBMConfig.from_dict(params)
    assert message in str(info.value)


def test_mapping_round_trip():
    """decode and encode are inverse for every mapping, with and without XOR hashing."""
    rng = np.random.default_rng(3)
    for mapping in MAPPINGS:
        for xor in (False, True):
            cfg = HBMConfig(mapping=mapping, xor_bank=xor, pseudo_channels=4)
            for a in rng.integers(0, cfg.capacity // cfg.access_bytes, size=50):
                a = int(a) * cfg.access_bytes
                assert cfg.encode(*cfg.decode(a)) == a


def test_timing_presets():
    """Preset values against their sources (spec/hbm.py); HBM2E is HBM2-2000 in ns at
    the faster clock, rounded up (tREFI down); overrides replace single values."""
    t = HBMConfig(speed="1600").timing
    assert (t.cl, t.rcd_rd, t.rcd_wr, t.rp, t.ras, t.rc, t.wr, t.rtp, t.cwl) == (
        10, 10, 8, 10, 24, 34, 12, 4, 4)
    t = HBMConfig(speed="2400", density_gb=8).timing
    assert (t.ccd_s, t.ccd_l, t.wtr_s, t.wtr_l, t.refi, t.rfc, t.rtw) == (
        2, 4, 8, 10, 4681, 421, 2)
    t = HBMConfig(standard="HBM3", speed="6400").timing
    assert (t.cl, t.cwl, t.rcd_rd, t.rp, t.ras, t.rc, t.wr, t.rtp, t.rrd_s, t.rrd_l, t.faw,
            t.refi, t.rfc, t.rfc_sb, t.rrefd, t.rtw) == (
        23, 7, 23, 23, 55, 77, 26, 10, 2, 4, 48, 6240, 416, 320, 13, 2)
    assert t.faw > 4 * t.rrd_s
    t = HBMConfig(standard="HBM2E", speed="3600").timing
    base = HBMConfig(speed="2000").timing
    tck = PRESETS["HBM2E", "3600"]["tck"]
    assert t.cl == -(-base.cl // tck) == 26 and t.ras == 62 and t.refi == 7020
    assert t.rrd_s == 8 and t.faw == 29 and t.rfc == 468 and t.rtw == 2
    t = HBMConfig(timing_overrides=TimingOverrides(faw=30, rtw=3)).timing
    assert (t.faw, t.rtw, t.rrd_s) == (30, 3, 4)


def test_geometry_by_standard():
    """Access size and channels: pseudo-channel mode 32 B (HBM2 64 bits x BL4, HBM3 32 bits x
    BL8), legacy 64 B (128 bits x BL4); two pseudo-channels per channel."""
    assert (HBMConfig().access_bytes, HBMConfig().channels) == (32, 1)
    hbm3 = HBMConfig(standard="HBM3", speed="6400", pseudo_channels=32, addr_width=34)
    assert (hbm3.access_bytes, hbm3.channels, hbm3.data_width) == (32, 16, 32)
    legacy = HBMConfig(channel_mode="legacy", pseudo_channels=8)
    assert (legacy.access_bytes, legacy.channels, legacy.pcs_per_channel) == (64, 8, 1)


def test_every_flow_runs():
    """The HBM tests together run every idle/backpressure flow: those that run one
    (``ONE_FLOW``, each naming a test of the module) and ``SHORT_FLOWS``."""
    from verification.tb.bench import FLOWS, SHORT_FLOWS
    from verification.tb.hbm import ONE_FLOW

    assert set(ONE_FLOW) <= set(cocotb_tests(TB)), set(ONE_FLOW) - set(cocotb_tests(TB))
    assert set(ONE_FLOW.values()) | set(SHORT_FLOWS) == set(FLOWS)
