"""Chip regression: TensorCore programs against the HBM controller and its golden device
model."""

import pytest

from hdl.chip import ChipConfig
from verification.tests.suite import cases

TB = "verification.tb.chip"

CONFIGS = {"default": ChipConfig()}


@pytest.mark.parametrize("name, test", cases(TB, CONFIGS))
def test_chip(cocotb_run, name, test):
    cocotb_run("chip", CONFIGS[name], TB, test)
