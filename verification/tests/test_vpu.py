"""VPU regression: the cocotb bench (verification/tb/vpu.py) in Verilator on VPUs of 2 to 16
lanes, and the golden model (verification/models/vpu.py) against hand-worked cases of the
specification (docs/tensorcore.md, "VPU")."""

import pytest

from hdl.mxu.config import MXUConfig
from hdl.tensorcore.config import TensorCoreConfig
from hdl.tensorcore.vpu_top import VPUTopConfig
from verification.tests.suite import cases

TB = "verification.tb.vpu"

CONFIGS = {
    "2l": VPUTopConfig(TensorCoreConfig(mxu=MXUConfig(rows=2, cols=2), row_bytes=8,
                                        axi_data_width=64, vmem_bytes=1024)),
    "4l": VPUTopConfig(TensorCoreConfig(mxu=MXUConfig(rows=4, cols=4), row_bytes=16,
                                        axi_data_width=128, vmem_bytes=1024)),
    "8l": VPUTopConfig(TensorCoreConfig(vmem_bytes=4096)),
    "16l": VPUTopConfig(TensorCoreConfig(row_bytes=64, vmem_bytes=8192)),
}


@pytest.mark.parametrize("shape, test", cases(TB, CONFIGS))
def test_vpu(cocotb_run, shape, test):
    cocotb_run("vpu", CONFIGS[shape], TB, test)
