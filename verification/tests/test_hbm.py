"""HBM controller regression: configuration checks, the device model's checker on hand-built
command sequences, and cocotb testbenches in Verilator for a few configurations."""

from dataclasses import replace

import numpy as np
import pytest

from hdl.generate import generate
from hdl.hbm.config import BENCH_CONFIG, MAPPINGS, HBMConfig
from sim.runner import lint
from verification.models.hbm import MAX_POSTPONED, HBMDeviceModel, Violation
from verification.tests.suite import cases

TB = "verification.tb.hbm"

CONFIGS = {
    "default": HBMConfig(),
    "two-ports-closed-fcfs": HBMConfig(
        speed="1600", ports=2, page_policy="closed", scheduler="fcfs", xor_bank=True,
        mapping="RoCoBaBgPc", queue_depth=8, write_buffer=4, write_high=3, write_low=1,
        id_lanes=2, rob_depth=16, row_bits=10, refresh_postpone=2),
}


# The benchmark's configuration (64-entry queue, 32 write slots, closed page): the scheduler's
# widest build, on the tests that stress the queue.
DEEP_TESTS = ["test_random_mix", "test_read_after_write", "test_write_not_starved"]


@pytest.mark.parametrize("name, test", cases(TB, CONFIGS))
def test_hbm(cocotb_run, name, test):
    cocotb_run("hbm", CONFIGS[name], TB, test)


@pytest.mark.parametrize("test", DEEP_TESTS)
def test_hbm_deep(cocotb_run, test):
    cocotb_run("hbm", BENCH_CONFIG, TB, test)


def test_generate_lint(tmp_path):
    design = generate("hbm", HBMConfig(pseudo_channels=1, data_width=128, bank_groups=2,
                                       banks_per_group=2, speed="2400", id_lanes=1))
    lint(design.write(tmp_path), design.name)


# The device model's checker on its own --------------------------------------------------------

# A timing where every constraint binds on its own: tRC longer than tRAS + tRP and tFAW longer
# than four tRRD_S, which the presets do not give.
T = replace(HBMConfig().timing, rc=HBMConfig().timing.ras + HBMConfig().timing.rp + 5,
            faw=4 * HBMConfig().timing.rrd_s + 5)
B0, B1, B4 = 0, 1, 4        # banks 0 and 1 share bank group 0; bank 4 is in group 1
ROW = 3
LATE = 500                  # a start long after every constraint of the setup


def _model():
    return HBMDeviceModel(T, channels=1, bank_groups=4, banks_per_group=4)


def _open(d, *banks):
    """ACT ``banks`` from cycle 0, tRRD_L apart (so no ACT constraint binds later)."""
    for k, b in enumerate(banks):
        d.act(0, k * max(T.rrd_l, T.faw), b, ROW)


def _seq_rp(d, x):
    _open(d, B0)
    d.pre(0, LATE, B0)
    d.act(0, LATE + T.rp + x, B0, ROW)


def _seq_rc(d, x):
    d.act(0, 0, B0, ROW)
    d.pre(0, T.ras, B0)
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
    d.act(0, LATE + T.rfc + x, B0, ROW)


def _seq_rfc_ref(d, x):
    d.ref(0, LATE)
    d.ref(0, LATE + T.rfc + x)


def _seq_rp_ref(d, x):
    _open(d, B0)
    d.pre(0, LATE, B0)
    d.ref(0, LATE + T.rp + x)


def _seq_ras(d, x):
    d.act(0, LATE, B0, ROW)
    d.pre(0, LATE + T.ras + x, B0)


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
    d.rd(0, LATE + T.rcd_rd + x, B0, 0)


def _seq_rcd_wr(d, x):
    d.act(0, LATE, B0, ROW)
    d.wr(0, LATE + T.rcd_wr + x, B0, 0)


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
    d.wr(0, LATE + T.cl + T.burst_cycles + 1 - T.cwl + x, B4, 0)


def _seq_refresh_overdue(d, x):
    # Here late is illegal: the next REF at (8 + 2) * tREFI still leaves 8 owed; one cycle
    # later, 9 were owed at the end of the cycle before.
    d.ref(0, 5)
    last = (MAX_POSTPONED + 2) * T.refi - x
    d.tick(last - 1)
    d.ref(0, last)
    d.tick(last)


def _seq_write_data(d, x):
    _open(d, B0)
    d.wr(0, LATE, B0, 0)
    for k in range(T.burst_cycles):
        d.write_data(0, LATE + T.cwl + k + x + 1, 1, 0)


CONSTRAINTS = {
    "tRP": _seq_rp, "tRC": _seq_rc, "tRRD_L": _seq_rrd_l, "tRRD_S": _seq_rrd_s,
    "tFAW": _seq_faw, "tRFC (REF to ACT)": _seq_rfc_act, "tRFC (REF to REF)": _seq_rfc_ref,
    "tRP (PRE to REF)": _seq_rp_ref, "tRAS": _seq_ras, "tRTP": _seq_rtp, "tWR": _seq_wr,
    "tRCD_RD": _seq_rcd_rd, "tRCD_WR": _seq_rcd_wr, "tCCD_L": _seq_ccd_l, "tCCD_S": _seq_ccd_s,
    "tWTR_L": _seq_wtr_l, "tWTR_S": _seq_wtr_s, "RD to WR turnaround": _seq_rtw,
    "refresh overdue": _seq_refresh_overdue,
}


@pytest.mark.parametrize("name", CONSTRAINTS)
def test_checker_one_cycle(name):
    """Illegal by one cycle fails; the same sequence one cycle later passes."""
    seq = CONSTRAINTS[name]
    with pytest.raises(Violation):
        seq(_model(), -1)
    seq(_model(), 0)


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
                                  "REF open bank"])
def test_checker_state_rules(rule):
    d = _model()
    if rule == "ACT open bank":
        d.act(0, 0, B0, ROW)
        with pytest.raises(Violation, match="already open"):
            d.act(0, LATE, B0, ROW + 1)
    elif rule == "REF open bank":
        d.act(0, 0, B0, ROW)
        with pytest.raises(Violation, match="open"):
            d.ref(0, LATE)
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
    ({"speed": "3200"}, "speed must be one of '1600', '2000', '2400', got '3200'"),
    ({"pseudo_channels": 3}, "pseudo_channels must be one of 1, 2, 4, 8, 16, 32, got 3"),
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
    t = HBMConfig(speed="1600").timing
    assert (t.cl, t.rcd_rd, t.rcd_wr, t.rp, t.ras, t.rc, t.wr, t.rtp, t.cwl) == (
        10, 10, 8, 10, 24, 34, 12, 4, 4)
    t = HBMConfig(speed="2400", density_gb=8).timing
    assert (t.ccd_s, t.ccd_l, t.wtr_s, t.wtr_l, t.refi, t.rfc) == (2, 4, 8, 10, 4681, 421)
