"""Pod regression: simulation chips on the RTL ICI network (hdl/pod/pod.py), through the
cocotb testbench verification/tb/pod.py, on a 1x4 ring, a 2x2 torus (with link fault
injectors) and a 4x4 torus; and the pod's configuration checks."""

import pytest

from hdl.config import ConfigError
from hdl.ici.config import ICIConfig
from hdl.pod.config import LOCAL_PORTS, EndpointConfig, PodConfig
from verification.tests.suite import cases

TB = "verification.tb.pod"


def _pod(dims, *, faults=False, **ici):
    params = dict(classes=2, vcs=2, buffer_depth=8, flit_bits=128, max_packet=8,
                  local_ports=LOCAL_PORTS)
    params.update(ici)
    return PodConfig(endpoint=EndpointConfig(ici=ICIConfig(dims=dims, **params)),
                     faults=faults)


CONFIGS = {
    "1x4": _pod((4,)),
    "2x2": _pod((2, 2), faults=True, max_packet=4, buffer_depth=4),
    "4x4": _pod((4, 4), vcs=4),
}


# Every collective at every length runs on the 1x4 and 2x2 pods in `make test`; on the 4x4 (a
# 4-minute build, 2 minutes of simulation) in `make test-all`, its other tests in `make test`.
def _slow(pod, test):
    return [pytest.mark.slow] if (pod, test) == ("4x4", "test_collectives") else []


@pytest.mark.parametrize("pod, test", cases(TB, CONFIGS, _slow))
def test_pod(cocotb_run, pod, test):
    cocotb_run("pod", CONFIGS[pod], TB, test)


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
