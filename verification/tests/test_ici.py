"""ICI regression: configuration checks, golden-model checks (routes, channel dependency
graph, bounds), and cocotb testbenches in Verilator on 2x2, 4x4 and 2x2x2 tori and a 4x4 mesh,
plus directed tests of a single router."""

import json
import subprocess
import sys

import pytest

from hdl.generate import generate
from sim.runner import lint
from spec.ici import ICIConfig, ICIHarnessConfig
from spec.topology import node_coords
from verification.models.ici import (
    average_hops,
    channel_dependency_graph,
    find_cycle,
    ideal_throughput,
    min_hops,
    path,
)
from verification.tests.suite import cases

TB = "verification.tb.ici"
ROUTER_TB = "verification.tb.ici_router"

# Networks of the regression, each built once with its test harness and fault injectors. The
# 2x2 torus has the registered allocation (switch_stage), the 4x4 mesh 5-cycle links (delay
# lines in memories, which keep their contents through the resets between tests), the 4x4
# torus three allocator iterations and the 2x2x2 torus two.
def _harness(faults=True, **params):
    return ICIHarnessConfig(ici=ICIConfig(**params), faults=faults)


CONFIGS = {
    "2x2t": _harness(dims=(2, 2), classes=2, vcs=2, buffer_depth=4, max_packet=4,
                     local_ports=2, switch_stage=True),
    "4x4t": _harness(dims=(4, 4), vcs=4, buffer_depth=8, max_packet=8, alloc_iters=3),
    "4x4m": _harness(dims=(4, 4), wrap=(False, False), classes=2, vcs=2, buffer_depth=4,
                     max_packet=6, link_latency=5, retry_depth=16),
    "2x2x2t": _harness(dims=(2, 2, 2), vcs=2, buffer_depth=4, max_packet=4, retry_depth=4,
                       alloc_iters=2),
}
ROUTER = ICIConfig(dims=(4, 4), classes=2, vcs=2, buffer_depth=4, max_packet=4, local_ports=2)
LARGE_TESTS = ("test_generated_traffic", "test_soak", "test_link_faults")
LARGE = {
    "8x8t": (_harness(dims=(8, 8), vcs=4, max_packet=4, alloc_iters=3), LARGE_TESTS),
    "3x5m-t": (_harness(dims=(3, 5), wrap=(False, True), classes=3, vcs=2, max_packet=5),
               LARGE_TESTS),
    # Trillium's pod: built, and every traffic pattern run through it (no fault injectors).
    "16x16t": (_harness(faults=False, dims=(16, 16), vcs=4, max_packet=4),
               ("test_generated_traffic",)),
}


# The 200k-cycle soak and every directed traffic pattern run on the 2x2 torus in `make test`,
# on the other networks (a few minutes each) in `make test-all`; those networks' random traffic,
# faults, bad packets and latency run in `make test`, but for the 4x4 mesh's (its build and
# tests, about 3.5 minutes of a core, in `make test-all` and CI's slow shards: the 3x5
# mesh-torus of LARGE has mesh edges too) and the 4x4 torus's (about 4 minutes of a core,
# moved to keep `make test` under 25 minutes: the 2x2x2 torus keeps a multi-iteration
# allocator in `make test`, the 8x8 torus of LARGE three iterations with 4 VCs).
FAST = {"test_soak": {"2x2t"}, "test_patterns": {"2x2t"}}
SLOW_NETS = {"4x4m", "4x4t"}


def _slow(net, test):
    return [pytest.mark.slow] if net in SLOW_NETS or (test in FAST and net not in FAST[test]) \
        else []


@pytest.mark.parametrize("net, test", cases(TB, CONFIGS, _slow))
def test_ici(cocotb_run, net, test):
    cocotb_run("ici_harness", CONFIGS[net], TB, test)


@pytest.mark.slow
@pytest.mark.parametrize("net", LARGE)
def test_ici_large(cocotb_run, net):
    config, tests = LARGE[net]
    for test in tests:
        cocotb_run("ici_harness", config, TB, test)


def test_ici_build_options(cocotb_run):
    """The harness's build options: the router verilated once as a library in a network
    small enough to be flat by default, with a model of 2 threads (the benchmark builds the
    8x8 torus with 2 threads, flat)."""
    config = _harness(faults=False, dims=(2, 2), vcs=2, max_packet=4).replace(
        verilate="hierarchical", sim_threads=2)
    cocotb_run("ici_harness", config, TB, "test_generated_traffic")


@pytest.mark.parametrize("net, test", cases(ROUTER_TB, {"router": ROUTER}))
def test_ici_router(cocotb_run, net, test):
    cocotb_run("ici_router", ROUTER, ROUTER_TB, test)


@pytest.mark.parametrize("cfg", [*(c.ici for c in CONFIGS.values()), ROUTER,
                                 *(c.ici for c, _ in LARGE.values())],
                         ids=[*CONFIGS, "router", *LARGE])
def test_deadlock_free(cfg):
    """The channel dependency graph of every configuration the tests build is acyclic."""
    assert find_cycle(channel_dependency_graph(cfg)) is None


@pytest.mark.parametrize("dims", [(8, 8), (5,), (3, 3, 5)])
def test_dateline_needed(dims):
    """Without the dateline the same routes close a cycle in the dependency graph of any ring
    long enough for two-hop paths to chain around it; with it they do not."""
    cfg = ICIConfig(dims=dims, vcs=2)
    cycle = find_cycle(channel_dependency_graph(cfg, dateline=False))
    assert cycle is not None and len(cycle) > 2
    assert find_cycle(channel_dependency_graph(cfg)) is None


def test_routes_minimal():
    """Every route of every pair is dimension ordered and has the minimal length."""
    for cfg in [ICIConfig(dims=(4, 4)), ICIConfig(dims=(5, 3), wrap=(True, False)),
                ICIConfig(dims=(2, 3, 4))]:
        for a in range(cfg.nodes):
            for b in range(cfg.nodes):
                src, dst = node_coords(cfg.dims, a), node_coords(cfg.dims, b)
                hops = path(cfg, src, dst)
                assert len(hops) == min_hops(cfg, src, dst)
                dims = [port // 2 for _, port, _ in hops]
                assert dims == sorted(dims)


def test_bounds():
    """Analytic figures against the textbook formulas: average distance k/4 per wrapped
    dimension and ideal uniform throughput 8/k (torus), 4/k (mesh), capped at 1 by the port."""
    assert average_hops(ICIConfig(dims=(8, 8))) == 4.0
    assert ideal_throughput(ICIConfig(dims=(8, 8))) == pytest.approx(1.0)
    assert ideal_throughput(ICIConfig(dims=(16, 16))) == pytest.approx(0.5)
    assert ideal_throughput(ICIConfig(dims=(8, 8), wrap=(False, False))) == pytest.approx(0.5)


@pytest.mark.parametrize("params, message", [
    ({"dims": [1, 4]}, "dims[0] must be an integer in 2..64, got 1"),
    ({"dims": [4, 4, 4, 4]}, "dims must have 1 to 3 dimensions, got 4"),
    ({"dims": [4, 4], "wrap": [True]}, "wrap must have one entry per dimension (2), got 1"),
    ({"vcs": 1}, "vcs must be one of 2, 4, 8, got 1"),
    ({"vcs": 3, "wrap": [False, False]}, "vcs must be one of 1, 2, 4, 8, got 3"),
    ({"buffer_depth": 3}, "buffer_depth must be one of 1, 2, 4, 8, 16, 32, 64, 128, got 3"),
    ({"link_latency": 0}, "link_latency must be an integer in 1..64, got 0"),
    ({"link_latency": 65}, "link_latency must be an integer in 1..64, got 65"),
    ({"link_latency": 8}, "retry_depth must be one of 32, 64, 128, 256 (a power of two at least "
                          "the acknowledgement round trip 2 * link_latency + 2 = 18), got 8"),
    ({"retry_depth": 12}, "retry_depth must be one of 4, 8, 16, 32, 64, 128, 256"),
    ({"classes": 5}, "classes must be an integer in 1..4, got 5"),
    ({"flit_bits": 16}, "flit_bits must be an integer in 30..1024, got 16"),
    ({"radix": 3}, "unknown ICI parameter(s): radix"),
    ({"dims": 4}, "dims must be a list, got 4"),
    ({"alloc_iters": 4}, "alloc_iters must be one of 1, 2, 3, got 4"),
])
def test_config_refused(params, message):
    with pytest.raises(ValueError) as info:
        ICIConfig.from_dict(params)
    assert message in str(info.value)


@pytest.mark.parametrize("params, message", [
    ({"ici": {"flit_bits": 40}}, "ici.flit_bits must be at least 46 in a harness"),
    ({"verilate": "inline"},
     "verilate must be one of 'auto', 'hierarchical', 'flat', got 'inline'"),
    ({"sim_threads": 3}, "sim_threads must be one of 1, 2, 4, got 3"),
])
def test_harness_config_refused(params, message):
    with pytest.raises(ValueError) as info:
        ICIHarnessConfig.from_dict(params)
    assert message in str(info.value)


def test_generate_lint(tmp_path):
    """A network, a mixed mesh/torus 3D network and a router generate lint-clean Verilog."""
    for cfg in [ICIConfig(dims=(3, 2)), ICIConfig(dims=(2, 3, 2), wrap=(True, False, True),
                                                  classes=2, local_ports=2),
                ]:
        design = generate("ici", cfg)
        lint(design.write(tmp_path), design.name)
    design = generate("ici_router", ICIConfig(dims=(16,), vcs=8))
    lint(design.write(tmp_path), design.name)


def test_cli_generate(tmp_path):
    spec = tmp_path / "ici.json"
    spec.write_text(json.dumps({"block": "ici", "parameters": {"dims": [3, 3], "vcs": 2}}))
    subprocess.run([sys.executable, "-m", "sim.cli", "generate", "--config", str(spec),
                    "-o", str(tmp_path)], check=True, capture_output=True)
    name = ICIConfig(dims=(3, 3)).name
    sidecar = json.loads((tmp_path / f"{name}.json").read_text())
    assert sidecar["parameters"]["dims"] == [3, 3]
    ports = {p["name"] for p in sidecar["ports"]}
    assert {"inject__8__payload", "eject__8__valid", "crc_errors", "retries"} <= ports


@pytest.mark.slow
def test_router_logic_depth():
    """sim/ici_synth.py (the benchmark's timing evidence) synthesizes a router with Yosys and
    reads its longest path, size and the path's ends from the log."""
    from sim.ici_synth import logic_depth

    r = logic_depth(ICIConfig(dims=(2, 2), vcs=2, max_packet=4))
    assert r["depth"] > 10 and r["cells"] > r["flip_flops"] > 1000
    assert len(r["path"]) >= 2
