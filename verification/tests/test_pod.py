"""Pod regression: simulation chips on the RTL ICI network (hdl/pod/pod.py), through the
cocotb testbench verification/tb/pod.py, on a 1x4 ring, a 2x2 torus (with link fault
injectors and HBM ports) and a 4x4 torus; program-running chips (TensorCores,
hdl/pod/tensor_node.py) through verification/tb/pod_programs.py on a 1x4 ring and a 2x2
torus; and the pod's configuration checks."""

import pytest

from spec.chip import ChipConfig
from spec.config import ConfigError
from spec.hbm import HBMConfig
from spec.ici import ICIConfig
from spec.mxu import MXUConfig
from spec.nic import NICConfig
from spec.pod import PodConfig
from spec.protocol import LOCAL_PORTS
from spec.tensorcore import TensorCoreConfig
from verification.tests.suite import cases, cocotb_tests

TB = "verification.tb.pod"
PROGRAMS_TB = "verification.tb.pod_programs"


def _pod(dims, *, faults=False, memory="none", tensorcore=None, hbm=None, **ici):
    params = dict(classes=2, vcs=2, buffer_depth=8, flit_bits=128, max_packet=8,
                  local_ports=LOCAL_PORTS)
    params.update(ici)
    nic = NICConfig(ici=ICIConfig(dims=dims, **params))
    return PodConfig(chip=ChipConfig(tensorcore=tensorcore, memory=memory, hbm=hbm or HBMConfig(),
                                     nic=nic),
                     faults=faults)


CONFIGS = {
    "1x4": _pod((4,)),
    "2x2": _pod((2, 2), faults=True, memory="axi", max_packet=4, buffer_depth=4),
    "4x4": _pod((4, 4), vcs=4),
}


# Every test runs on the 1x4 and 2x2 pods in `make test`; the 4x4 (a 5-minute build) in
# `make test-all`.
def _slow(pod, test):
    return [pytest.mark.slow] if pod == "4x4" else []


TENSORCORE = TensorCoreConfig(mxu=MXUConfig(rows=4, cols=4), vmem_bytes=32768, row_bytes=32,
                              deadlock_cycles=1 << 16, ici=True, vmath=False)
"""The program-running chips' TensorCore: a 4x4 int8 MXU, 32 KiB of VMEM in rows of a flit
(256 bits), a deadlock watch long enough for a neighbour's work, no transcendental unit
(eight per chip would make the pods' builds and runs slower for programs that never use
them; the TensorCore and chip tests run the unit)."""


def _tensor_pod(dims, memory="none"):
    hbm = HBMConfig(ports=2) if memory == "hbm" else HBMConfig()
    return _pod(dims, flit_bits=256, memory=memory, tensorcore=TENSORCORE, hbm=hbm)


PROGRAM_CONFIGS = {
    "1x4-tc": _tensor_pod((4,)),
    "2x2-tc": _tensor_pod((2, 2), memory="axi"),
    "2x2-tc-hbm": _tensor_pod((2, 2), memory="hbm"),
}
"""Pods of TensorCores: VMEM only on a ring of four; on a 2x2 torus each chip's DMA and network
interface on a memory model's AXI4 ports, or on the chip's own HBM controller with the golden
device model on its channels."""


@pytest.mark.parametrize("pod, test", cases(TB, CONFIGS, _slow))
def test_pod(cocotb_run, pod, test):
    cocotb_run("pod", CONFIGS[pod], TB, test)


def _program_marks(pod, test):
    return [pytest.mark.slow] if pod in ("1x4-tc", "2x2-tc-hbm") else []


# The 2x2 pod of TensorCores (rings of two along both dimensions, the 2-D all-reduce) in
# `make test`; the 1x4 (rings of four) and the 2x2 with HBM controllers in `make test-all`.
@pytest.mark.parametrize("pod, test", cases(PROGRAMS_TB, PROGRAM_CONFIGS, _program_marks))
def test_pod_programs(cocotb_run, pod, test):
    cocotb_run("pod", PROGRAM_CONFIGS[pod], PROGRAMS_TB, test)


@pytest.mark.parametrize("pod", PROGRAM_CONFIGS)
def test_pod_programs_run_every_flow(pod):
    """The program tests' chips together run every idle/backpressure flow on every stream:
    the flow table's test order is the module's, and its rotation covers ``FLOWS``."""
    from verification.tb.bench import FLOWS
    from verification.tb.pod_programs import TESTS, chip_flows

    assert list(TESTS) == cocotb_tests(PROGRAMS_TB), "pod_programs.TESTS is out of date"
    ran = {f for t in range(len(TESTS)) for f in chip_flows(t, PROGRAM_CONFIGS[pod].chips)}
    assert ran == set(FLOWS), sorted(set(FLOWS) - ran)


@pytest.mark.parametrize("change, path", [
    ({"nic": {"ici": {"local_ports": 2}}}, "chip.nic.ici.local_ports"),
    ({"nic": {"ici": {"classes": 1}}}, "chip.nic.ici.classes"),
    ({"local_words": 1000}, "chip.local_words"),
    ({"local_words": 8}, "chip.local_words"),
    ({"nic": None, "tensorcore": TensorCoreConfig().to_dict()}, "chip.nic"),
    ({"faults": 1}, "faults"),
])
def test_pod_config_refused(change, path):
    """A configuration the pod cannot build is refused, naming the parameter."""
    params = PodConfig().to_dict()
    for key, value in change.items():
        if key == "nic" and value is not None:
            params["chip"]["nic"]["ici"].update(value["ici"])
        elif key == "nic":
            params["chip"]["nic"] = None
        elif key == "faults":
            params[key] = value
        else:
            params["chip"][key] = value
    with pytest.raises(ConfigError) as e:
        PodConfig.from_dict(params)
    assert str(e.value).startswith(path), str(e.value)
