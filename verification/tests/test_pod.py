"""Pod regression: simulation chips on the RTL ICI network (hdl/pod/pod.py), through the
cocotb testbench verification/tb/pod.py, on a 1x4 ring, a 2x2 torus (with link fault
injectors and HBM ports) and a 4x4 torus; program-running chips (TensorCores,
hdl/pod/tensor_node.py) through verification/tb/pod_programs.py on a 1x4 ring and a 2x2
torus; and the pod's configuration checks."""

import pytest

from spec.config import ConfigError
from spec.pod import PodConfig
from spec.tensorcore import TensorCoreConfig
from verification.tb.pod_programs import pod_config, tensor_pod_config
from verification.tests.suite import cases, cocotb_tests

TB = "verification.tb.pod"
PROGRAMS_TB = "verification.tb.pod_programs"


CONFIGS = {
    "1x4": pod_config((4,)),
    "2x2": pod_config((2, 2), faults=True, memory="axi", max_packet=4, buffer_depth=4),
    "4x4": pod_config((4, 4), vcs=4),
}


# Every test runs on the 1x4 and 2x2 pods in `make test`; the 4x4 (a 5-minute build) in
# `make test-all`.
def _slow(pod, test):
    return [pytest.mark.slow] if pod == "4x4" else []


PROGRAM_CONFIGS = {
    "1x4-tc": tensor_pod_config((4,)),
    "2x2-tc": tensor_pod_config((2, 2), memory="axi"),
    "2x2-tc-hbm": tensor_pod_config((2, 2), memory="hbm"),
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
