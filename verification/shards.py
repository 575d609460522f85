"""The slow tests (``@pytest.mark.slow``) in shards, one of which CI runs after ``make test``.

    python -m verification.shards plan               (every shard: its tests, estimated minutes)
    python -m verification.shards run                (the shard of this commit, then pytest on it)
    python -m verification.shards run --shard 2/5    (shard 2 of 5)

The slow tests are collected by pytest and grouped by the build they share: the items of one
test function on one configuration (ids ``<config>-<test>``, verification/tests/suite.py) form
one group, any other item is a group of its own. Groups go to ``SHARDS`` shards, the largest
first to the least loaded, by an estimated cost (``COSTS``: seconds of one build and of each
test, measured on the 2-core machine; a configuration that ``make test`` builds costs no build,
since CI runs the shard after it). A group is never split, so a configuration is built once.

CI's shard is the number of first-parent commits of HEAD (one per landing on main) modulo
``SHARDS``: consecutive landings take consecutive shards, so every ``SHARDS`` landings run every
slow test (a shallow clone, which cannot count, takes the commit hash modulo ``SHARDS``).
``make test-shard SHARD=k/N`` runs another.

Exit status: pytest's; 2 for a bad ``--shard`` (nothing run).
"""

import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys
from pathlib import Path

__all__ = ["SHARDS", "BUDGET_MINUTES", "COSTS", "collect", "group_key", "plan", "shard_of_commit",
           "main"]

ROOT = Path(__file__).resolve().parent.parent
TESTS = "verification/tests"

SHARDS = 5
"""Number of shards: every slow test runs once in this many landings."""

BUDGET_MINUTES = 30
"""A shard's estimated wall time at two jobs: CI is ``make test`` (26 minutes on 2 cores, the
last CI run 1,540 s) and one shard, under 60 minutes."""

JOBS = 2
"""pytest-xdist workers a shard runs with (``make test-shard JOBS=...``)."""

DEFAULT_COST = (240.0, 120.0)
"""(build, each test) seconds for a group that ``COSTS`` does not name: deliberately high."""

COSTS = [
    # (pattern on the group key, build seconds, seconds of each test); the first match counts.
    # Seconds of one core on an idle machine. Builds: CPU seconds of Verilator and the C++
    # compiler (a build directory's build_cpu.json) where measured, rounded up: the 4x4 pod
    # 491 (94 + 397; 538 s of wall at load 3 to 8), the 2x2 pod of TensorCores with HBM 257,
    # of TensorCores 158 (the 1x4's four chips alike), the 4x4 ICI harness 122, the 5x7 MXU 15.
    # Tests: measured on the shared 2-core machine (wall seconds at load 8 to 14, about 4
    # times idle, so upper bounds): HBM legacy's 7 slow tests 4 to 81 s (188 s in all), ICI
    # 4x4t test_patterns 66 s and test_soak 20 s, MXU 5x7 7 s; at load 2 to 3 the 4x4 pod's
    # 5 tests 1 to 152 s of simulation (225 s in all); the 2x2 pod of TensorCores with HBM 8
    # to 39 s of simulation per test; the rest estimated from
    # docs/ici.md (8x8 torus: traffic, soak and link faults in 352 s, 3x5 112 s, 16x16 444 s,
    # wall with two at a time, build included) and docs/tensorcore.md (the widest VPU's lint
    # 1.5 to 3.5 minutes).
    ("*test_pod.py::test_pod[[]4x4]", 560, 60),
    ("*test_pod.py::test_pod_programs[[]1x4-tc]", 200, 60),
    ("*test_pod.py::test_pod_programs[[]2x2-tc-hbm]", 260, 45),
    ("*test_ici.py::test_ici_large[[]8x8t]", 60, 350),
    ("*test_ici.py::test_ici_large[[]3x5m-t]", 40, 110),
    ("*test_ici.py::test_ici_large[[]16x16t]", 150, 450),
    ("*test_ici.py::test_ici[[]*]", 125, 70),
    ("*test_ici.py::test_router_logic_depth", 0, 120),
    ("*test_hbm.py::*", 60, 30),
    ("*test_mxu.py::test_mxu_large[[]32x32]", 40, 150),
    ("*test_mxu.py::test_mxu_large[[]*]", 20, 30),
    ("*test_mxu.py::test_generate_lint_limits[[]*]", 0, 90),
    ("*test_vpu.py::test_generate_lint_widest*", 0, 210),
    ("*test_transformer.py::test_rtl_matches_golden", 210, 40),
    # The ViT's TensorCore built for cocotb (330) and natively (165 CPU seconds measured:
    # 33 + 132); each test 60 (the digits MLP's 168 steps on the native path: 111 CPU s of
    # simulation and the golden run, ~200 s; the others 10 to 40 s).
    ("vit-tensorcore", 500, 60),
    # The full-size ViT's chip (2 MiB of VMEM) built natively: 650 s of wall at load ~5, one
    # step 70 s; its golden steps about 50 s.
    ("*test_jax_frontend.py::test_vit_full_size_rtl_matches_golden", 650, 120),
    ("*test_jax_frontend.py::test_vit_full_size_on_golden", 0, 90),
    ("*test_vit.py::test_accuracy", 0, 90),                 # trains unless build/vit has it
    ("*test_vit.py::test_on_the_golden_simulator", 0, 110),
    ("*test_vmath.py::*", 40, 20),
    ("*test_chip.py::test_chip[[]*]", 210, 40),
    # The benchmark chip built for cocotb and natively: 283 CPU seconds each (measured).
    ("*test_native.py::test_native_on_the_benchmark_chip", 570, 20),
    ("*test_sparsecore.py::test_sparsecore[[]hbm]", 130, 150),
    ("*test_sparsecore.py::*", 130, 20),
    ("*test_sweep.py::*", 0, 120),
    # The slow proofs: 15 to 129 s each, 381 s for all five at load 2 (docs/formal.md).
    ("*test_formal.py::*", 0, 150),
]


ONE_BUILD = ["*test_transformer.py::test_rtl_matches_golden"]
"""Test functions whose items, whatever their parameters, run on one build."""
SHARED_BUILDS = {"*test_attention.py::test_rtl_matches_golden": "vit-tensorcore",
                 "*test_encoder.py::test_on_the_rtl": "vit-tensorcore",
                 "*test_jax_frontend.py::test_digits_training_rtl_matches_golden":
                     "vit-tensorcore",
                 "*test_jax_frontend.py::test_primitives_rtl_matches_golden":
                     "vit-tensorcore",
                 "*test_jax_frontend.py::test_digits_trained_on_the_rtl": "vit-tensorcore",
                 "*test_jax_frontend.py::test_vit_training_rtl_matches_golden":
                     "vit-tensorcore",
                 "*test_jax_frontend.py::test_segments_under_cocotb": "vit-tensorcore"}
"""Test functions of several files on one build (podium.workloads.vit.TENSORCORE's chip):
pattern -> the group they share."""


def group_key(nodeid):
    """The build an item shares with others: ``<file>::<function>[<config>]`` for an item
    whose parameter id is ``<config>-<test>``, ``<file>::<function>`` for one whose id is a
    cocotb test's name (one configuration) or of a function of ``ONE_BUILD``, the group of
    ``SHARED_BUILDS`` a function is in, otherwise its own node id."""
    base, _, param = nodeid.partition("[")
    param = param[:-1]
    for pattern, group in SHARED_BUILDS.items():
        if fnmatch.fnmatchcase(base, pattern):
            return group
    if param.startswith("test_") or any(fnmatch.fnmatchcase(base, p) for p in ONE_BUILD):
        return base
    if "-test_" in param:
        return f"{base}[{param.split('-test_', 1)[0]}]"
    return nodeid


def _cost(key):
    for pattern, build, each in COSTS:
        if fnmatch.fnmatchcase(key, pattern):
            return float(build), float(each)
    return DEFAULT_COST


class _Collector:
    def __init__(self):
        self.items = []

    def pytest_collection_modifyitems(self, items):
        self.items = [(i.nodeid, i.get_closest_marker("slow") is not None) for i in items]


def _collect_here():
    """Every item of the suite, with whether it is slow (in this process)."""
    import pytest

    collector = _Collector()
    with open(os.devnull, "w") as null:
        stdout, sys.stdout = sys.stdout, null
        try:
            code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", TESTS],
                               plugins=[collector])
        finally:
            sys.stdout = stdout
    if code != 0:
        raise RuntimeError(f"pytest could not collect {TESTS} (exit {code})")
    return collector.items


def collect():
    """``(slow node ids, keys of the groups that make test builds)``, collected by pytest in a
    child process (collection imports every test module)."""
    out = subprocess.run([sys.executable, "-m", "verification.shards", "collect"], cwd=ROOT,
                         check=True, capture_output=True, text=True).stdout
    items = json.loads(out.splitlines()[-1])
    slow = [nodeid for nodeid, is_slow in items if is_slow]
    built = {group_key(nodeid) for nodeid, is_slow in items if not is_slow}
    return slow, built


def plan(slow, built=(), shards=SHARDS):
    """The slow items ``slow`` in ``shards`` shards: a list of ``{"groups": [(key, seconds,
    node ids)], "seconds": total}``, groups of a configuration in ``built`` costing no build."""
    groups = {}
    for nodeid in slow:
        groups.setdefault(group_key(nodeid), []).append(nodeid)
    costed = []
    for key, ids in groups.items():
        build, each = _cost(key)
        costed.append((key, (0.0 if key in built else build) + each * len(ids), ids))
    costed.sort(key=lambda g: (-g[1], g[0]))
    out = [{"groups": [], "seconds": 0.0} for _ in range(shards)]
    for group in costed:
        target = min(out, key=lambda s: s["seconds"])
        target["groups"].append(group)
        target["seconds"] += group[1]
    return out


def minutes(shard, jobs=JOBS):
    """A shard's estimated wall minutes at ``jobs`` workers."""
    return shard["seconds"] / jobs / 60


def _git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout.strip()


def shard_of_commit(shards=SHARDS):
    """``(k, how)``: CI's shard (1-based) for HEAD: its first-parent commit count modulo
    ``shards``, plus one; in a shallow clone (no count to take) its hash modulo ``shards``."""
    try:
        if _git("rev-parse", "--is-shallow-repository") == "true":
            head = _git("rev-parse", "HEAD")
            return (int(head[:8], 16) % shards + 1,
                    f"shallow clone: HEAD {head[:8]} (hex) mod {shards} + 1")
        count = int(_git("rev-list", "--count", "--first-parent", "HEAD"))
    except (OSError, subprocess.CalledProcessError, ValueError):
        return 1, "shard 1 (no git history here to choose from)"
    return count % shards + 1, f"HEAD is first-parent commit {count}: {count} mod {shards} + 1"


def _print_shard(k, shards, shard, jobs):
    ids = sum(len(g[2]) for g in shard["groups"])
    print(f"shard {k}/{shards}: {ids} tests in {len(shard['groups'])} builds, "
          f"estimated {minutes(shard, jobs):.1f} minutes at {jobs} jobs")
    for key, seconds, group in shard["groups"]:
        print(f"  {seconds / 60:5.1f} min  {key}  ({len(group)} tests)")


def _parse_shard(text):
    m = re.fullmatch(r"(\d+)/(\d+)", text or "")
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        print(f"SHARD: {text!r} is not k/N with 1 <= k <= N (e.g. 2/{SHARDS}), "
              f"or empty for this commit's shard", file=sys.stderr)
        sys.exit(2)
    return int(m[1]), int(m[2])


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m verification.shards",
                                     description="the slow tests in shards (CI runs one)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("collect", help="print the suite's items as JSON (used by plan and run)")
    p = sub.add_parser("plan", help="print every shard")
    p.add_argument("--shards", type=int, default=SHARDS)
    r = sub.add_parser("run", help="print one shard's plan and run its tests")
    r.add_argument("--shard", default="", help=f"k/N (default: this commit's of {SHARDS})")
    for s in (p, r):
        s.add_argument("--jobs", type=int, default=JOBS)
    args, rest = parser.parse_known_args(argv)

    if args.command == "collect":
        print(json.dumps(_collect_here()))
        return 0
    if args.command == "plan":
        if args.shards < 1:
            print(f"--shards: {args.shards} is not a positive number of shards", file=sys.stderr)
            return 2
        slow, built = collect()
        for k, shard in enumerate(plan(slow, built, args.shards), 1):
            _print_shard(k, args.shards, shard, args.jobs)
        return 0
    if args.shard:
        k, shards = _parse_shard(args.shard)
        how = f"shard {k}/{shards} as asked"
    else:
        k, how = shard_of_commit()
        shards = SHARDS
    slow, built = collect()
    shard = plan(slow, built, shards)[k - 1]
    print(f"slow tests: {len(slow)} in {shards} shards; running shard {k}/{shards} ({how})")
    _print_shard(k, shards, shard, args.jobs)
    ids = [nodeid for _, _, group in shard["groups"] for nodeid in group]
    if not ids:
        print("no tests in this shard")
        return 0
    sys.stdout.flush()
    return subprocess.run([sys.executable, "-m", "pytest", "-n", str(args.jobs), "--durations=25",
                           *rest, *ids], cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
