"""HBM controller regression: configuration checks, the device model's checker on hand-built
command sequences, and cocotb testbenches in Verilator for a few configurations."""

import pytest

from hdl.generate import generate
from hdl.hbm.config import HBMConfig
from sim.runner import lint

TB = "verification.tb.hbm"
COCOTB_TESTS = ["test_random_mix", "test_read_after_write", "test_long_bursts", "test_ecc",
                "test_bad_requests", "test_refresh_soak"]

CONFIGS = {
    "default": HBMConfig(),
    "two-ports-closed-fcfs": HBMConfig(
        speed="1600", ports=2, page_policy="closed", scheduler="fcfs", xor_bank=True,
        mapping="RoCoBaBgPc", queue_depth=8, write_buffer=4, write_high=3, write_low=1,
        id_lanes=2, rob_depth=16, row_bits=10, refresh_postpone=2),
}


@pytest.mark.parametrize("test", COCOTB_TESTS)
@pytest.mark.parametrize("name", CONFIGS)
def test_hbm(cocotb_run, name, test):
    cocotb_run("hbm", CONFIGS[name], TB, rf"\.{test}(/|$)")


def test_generate_lint(tmp_path):
    design = generate("hbm", HBMConfig(pseudo_channels=1, data_width=128, bank_groups=2,
                                       banks_per_group=2, speed="2400", id_lanes=1))
    lint(design.write(tmp_path), design.name)
