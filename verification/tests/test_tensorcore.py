"""TensorCore regression: the cocotb benches of the TensorCore top (with an AXI RAM as its
memory) on a few configurations."""

import pytest

from spec.tensorcore import TensorCoreConfig
from verification.tests.suite import cases

TB = "verification.tb.tensorcore"

CONFIGS = {
    "8x8-int8": TensorCoreConfig(),
}


@pytest.mark.parametrize("name, test", cases(TB, CONFIGS))
def test_tensorcore(cocotb_run, name, test):
    cocotb_run("tensorcore", CONFIGS[name], TB, test)


