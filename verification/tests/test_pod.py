"""Pod regression: simulation chips on the RTL ICI network (hdl/pod/pod.py), through the
cocotb testbench verification/tb/pod.py, on a 1x4 ring, a 2x2 torus (with link fault
injectors and HBM ports) and a 4x4 torus; program-running chips (TensorCores,
hdl/pod/tensor_node.py) through verification/tb/pod_programs.py on a 1x4 ring and a 2x2
torus; and the pod's configuration checks."""

import pytest

from hdl.config import ConfigError
from hdl.ici.config import ICIConfig
from hdl.mxu.config import MXUConfig
from hdl.pod.config import LOCAL_PORTS, EndpointConfig, PodConfig
from hdl.tensorcore.config import TensorCoreConfig
from verification.tests.suite import cases

TB = "verification.tb.pod"
PROGRAMS_TB = "verification.tb.pod_programs"


def _pod(dims, *, faults=False, hbm=False, **ici):
    params = dict(classes=2, vcs=2, buffer_depth=8, flit_bits=128, max_packet=8,
                  local_ports=LOCAL_PORTS)
    params.update(ici)
    return PodConfig(endpoint=EndpointConfig(ici=ICIConfig(dims=dims, **params)),
                     faults=faults, hbm=hbm)


CONFIGS = {
    "1x4": _pod((4,)),
    "2x2": _pod((2, 2), faults=True, hbm=True, max_packet=4, buffer_depth=4),
    "4x4": _pod((4, 4), vcs=4),
}


# Every test runs on the 1x4 and 2x2 pods in `make test`; the 4x4 (a 5-minute build) in
# `make test-all`.
def _slow(pod, test):
    return [pytest.mark.slow] if pod == "4x4" else []


TENSORCORE = TensorCoreConfig(mxu=MXUConfig(rows=4, cols=4), vmem_bytes=32768, row_bytes=32,
                              deadlock_cycles=1 << 16, ici=True)
"""The program-running chips' TensorCore: a 4x4 int8 MXU, 32 KiB of VMEM in rows of a flit
(256 bits), a deadlock watch long enough for a neighbour's work."""


def _tensor_pod(dims, hbm=False):
    pod = _pod(dims, flit_bits=256, hbm=hbm)
    return pod.replace(memory_words=TENSORCORE.vmem_rows, tensorcore=TENSORCORE)


PROGRAM_CONFIGS = {"1x4-tc": _tensor_pod((4,)), "2x2-tc": _tensor_pod((2, 2), hbm=True)}


@pytest.mark.parametrize("pod, test", cases(TB, CONFIGS, _slow))
def test_pod(cocotb_run, pod, test):
    cocotb_run("pod", CONFIGS[pod], TB, test)


# The 2x2 pod of TensorCores (rings of two along both dimensions, the 2-D all-reduce) in
# `make test`; the 1x4 (rings of four) in `make test-all`.
@pytest.mark.parametrize("pod, test", cases(
    PROGRAMS_TB, PROGRAM_CONFIGS, lambda pod, test: [pytest.mark.slow] if pod == "1x4-tc" else []))
def test_pod_programs(cocotb_run, pod, test):
    cocotb_run("pod", PROGRAM_CONFIGS[pod], PROGRAMS_TB, test)


@pytest.mark.parametrize("change, path", [
    ({"endpoint": {"ici": {"local_ports": 2}}}, "endpoint.ici.local_ports"),
    ({"endpoint": {"ici": {"classes": 1}}}, "endpoint.ici.classes"),
    ({"memory_words": 1000}, "memory_words"),
    ({"memory_words": 8}, "memory_words"),
    ({"faults": 1}, "faults"),
])
def test_pod_config_refused(change, path):
    """A configuration the pod cannot build is refused, naming the parameter."""
    params = PodConfig().to_dict()
    for key, value in change.items():
        if key == "endpoint":
            params["endpoint"]["ici"].update(value["ici"])
        else:
            params[key] = value
    with pytest.raises(ConfigError) as e:
        PodConfig.from_dict(params)
    assert str(e.value).startswith(path), str(e.value)
