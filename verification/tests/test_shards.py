"""The slow tests' shards (verification/shards.py), which CI runs one of after `make test`:
together they run every slow test exactly once, each within its time budget."""

import subprocess
import sys
from collections import Counter

import pytest

from verification import shards


@pytest.fixture(scope="module")
def collected():
    return shards.collect()


def test_shards_cover_every_slow_test_once(collected):
    slow, built = collected
    # Collected independently of verification/shards.py, as `pytest -m slow` selects them.
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "slow",
                          "-p", "no:cacheprovider", shards.TESTS], cwd=shards.ROOT,
                         check=True, capture_output=True, text=True).stdout
    expected = {line for line in out.splitlines() if "::" in line}
    assert len(expected) > 50 and set(slow) == expected
    counts = Counter(nodeid for shard in shards.plan(slow, built)
                     for _, _, group in shard["groups"] for nodeid in group)
    assert set(counts) == expected and set(counts.values()) == {1}


def test_each_shard_within_budget(collected):
    plan = shards.plan(*collected)
    assert len(plan) == shards.SHARDS
    for k, shard in enumerate(plan, 1):
        assert shard["groups"], f"shard {k} is empty"
        assert shards.minutes(shard) <= shards.BUDGET_MINUTES, (k, shards.minutes(shard))


def test_groups_are_builds():
    key = shards.group_key
    assert key("t/test_hbm.py::test_hbm[act-first-test_ecc]") == \
        "t/test_hbm.py::test_hbm[act-first]"
    assert key("t/test_hbm.py::test_hbm_deep[test_random_mix]") == "t/test_hbm.py::test_hbm_deep"
    assert key("t/test_ici.py::test_ici_large[8x8t]") == "t/test_ici.py::test_ici_large[8x8t]"
    assert key("t/test_ici.py::test_router_logic_depth") == "t/test_ici.py::test_router_logic_depth"
    assert key("t/test_attention.py::test_rtl_matches_golden[3]") == "vit-tensorcore"
    assert key("t/test_encoder.py::test_on_the_rtl") == "vit-tensorcore"
    ids = [f"t/test_x.py::test_x[{c}-test_{t}]" for c in "abcde" for t in "pqr"]
    plan = shards.plan(ids, built={"t/test_x.py::test_x[a]"}, shards=3)
    where = {nodeid: k for k, s in enumerate(plan) for _, _, g in s["groups"] for nodeid in g}
    for c in "abcde":
        assert len({where[f"t/test_x.py::test_x[{c}-test_{t}]"] for t in "pqr"}) == 1
    # An unlisted configuration is costed at DEFAULT_COST; one that make test builds, no build.
    build, each = shards.DEFAULT_COST
    costs = {key: seconds for s in plan for key, seconds, _ in s["groups"]}
    assert costs["t/test_x.py::test_x[a]"] == 3 * each
    assert costs["t/test_x.py::test_x[b]"] == build + 3 * each
    assert [len(s["groups"]) for s in plan] == [2, 2, 1]


def test_commit_chooses_a_shard():
    k, how = shards.shard_of_commit()
    assert 1 <= k <= shards.SHARDS, how


@pytest.mark.parametrize("bad", ["0/3", "4/3", "2", "a/b"])
def test_bad_shard_refused(bad):
    r = subprocess.run([sys.executable, "-m", "verification.shards", "run", "--shard", bad],
                       cwd=shards.ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert r.stderr.startswith(f"SHARD: '{bad}' is not k/N")
