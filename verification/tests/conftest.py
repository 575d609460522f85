"""pytest glue: seeds, and running a cocotb testbench against a generated configuration.

Seeds: each test's seed is PODIUM_SEED when set (an integer, or ``random`` for a fresh one),
otherwise a fixed value derived from the test's id, so a run is reproducible by default
(property tests are derandomized likewise). The seed is printed and is part of every failure
message; ``PODIUM_SEED=<n> pytest '<test id>'`` replays a failure. PODIUM_WAVES=1 builds with
tracing and leaves dump.fst in the test directory.
PODIUM_LOCKSTEP=<checkout> runs every cocotb test on the lockstep design of its configuration
against the generator of another checkout (sim/lockstep.py).
"""

import os
import random
import re
import zlib

import pytest
from hypothesis import settings

from sim.runner import BUILD, build, generated, run, simulator_available

# Property tests draw their examples from a fixed seed too, unless PODIUM_SEED=random.
settings.register_profile("fixed", derandomize=True, database=None)
settings.register_profile("random", database=None)
settings.load_profile("random" if os.environ.get("PODIUM_SEED") == "random" else "fixed")


def _seed_for(nodeid):
    value = os.environ.get("PODIUM_SEED")
    if value is None:
        return zlib.crc32(nodeid.encode())
    if value == "random":
        return random.SystemRandom().getrandbits(31)
    return int(value)


@pytest.fixture
def seed(request):
    value = _seed_for(request.node.nodeid)
    print(f"seed {value} (replay: PODIUM_SEED={value} pytest '{request.node.nodeid}')")
    return value


def _lockstep(design, block, config):
    import runpy

    from sim.lockstep import lockstep, old_design

    block, params = block, config.to_dict()
    if os.environ.get("PODIUM_LOCKSTEP_MAP"):
        block, params = runpy.run_path(os.environ["PODIUM_LOCKSTEP_MAP"])["translate"](
            block, params)
    return lockstep(design, old_design(os.environ["PODIUM_LOCKSTEP"], block, params))


@pytest.fixture
def cocotb_run(request, seed):
    """``cocotb_run(block, config, module, test=None, sim="verilator")``: build the block's
    configuration and run cocotb test ``test`` of testbench ``module`` (all of them when
    None) on it."""
    waves = os.environ.get("PODIUM_WAVES") == "1"

    def go(block, config, module, test=None, sim="verilator"):
        if not simulator_available(sim):
            pytest.skip(f"{sim} is not installed")
        design = generated(block, config)
        if os.environ.get("PODIUM_LOCKSTEP"):
            design = _lockstep(design, block, config)
        built = build(design, sim, waves=waves)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid.split("::", 1)[1])
        passed, skipped = run(built, module, test_dir=BUILD / "tests" / sim / name,
                              testcase=rf"\.{test}(/|$)" if test else None, seed=seed)
        if skipped and not passed:
            pytest.skip(f"cocotb skipped {', '.join(skipped)}")
        return passed

    return go
