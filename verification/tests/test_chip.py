"""Chip regression: TensorCore programs against the HBM controller and its golden device
model."""

import pytest

from spec.chip import ChipConfig
from spec.config import ConfigError
from spec.hbm import HBMConfig
from spec.sparsecore import SparseCoreConfig
from verification.tests.suite import cases

TB = "verification.tb.chip"

CONFIGS = {"default": ChipConfig(),
           "sparsecore": ChipConfig(hbm=HBMConfig(ports=2), sparsecore=SparseCoreConfig())}


def _marks(name, test):
    """The chip with a SparseCore runs in make test-all (and a CI shard): its build and its
    SparseCore test were the regression's longest item (the SparseCore itself is in make test
    on its own harnesses, test_sparsecore.py)."""
    return [pytest.mark.slow] if name == "sparsecore" else []


@pytest.mark.parametrize("name, test", cases(TB, CONFIGS, _marks))
def test_chip(cocotb_run, name, test):
    cocotb_run("chip", CONFIGS[name], TB, test)


def test_sparsecore_needs_a_port():
    with pytest.raises(ConfigError, match=r"^hbm.ports must be at least 2 \(one per engine that "
                                         r"reaches HBM: tensorcore, sparsecore\)"):
        ChipConfig(sparsecore=SparseCoreConfig())
    with pytest.raises(ConfigError, match=r"^sparsecore.axi_id_width must equal"):
        ChipConfig(hbm=HBMConfig(ports=2), sparsecore=SparseCoreConfig(axi_id_width=3))
