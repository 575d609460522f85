"""Mutation tests (sim/mutate.py): the list is valid against the current code, the runner tells a
catch from a survivor and from a broken mutation, and the fast mutations (rules of the HBM,
ICI and SparseCore parts and of the golden models, caught in Amaranth's simulator or by the
models' own tests within seconds) are caught, each in a scratch copy of the repository. The
others run in ``make mutate``, which writes docs/results/mutations.md."""

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from sim.mutate import (
    BLOCKS,
    MUTATIONS,
    ROOT,
    Mutation,
    mutated_text,
    render,
    run_mutation,
    scratch_copy,
)

FAST = [m for m in MUTATIONS if m.fast]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return scratch_copy(tmp_path_factory.mktemp("mutate") / "podium")


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.name)
def test_mutation_applies(mutation):
    """Its snippet occurs exactly once in its file and the mutation changes it; its tests name
    files that exist."""
    text = (ROOT / mutation.path).read_text()
    assert text.count(mutation.old) == 1, f"{mutation.path}: snippet not found exactly once"
    assert mutated_text(ROOT, mutation) != text
    for arg in mutation.tests:
        assert (ROOT / arg.split("::")[0]).is_file(), f"{arg}: no such test file"


def test_mutation_tests_collect():
    """Every test a mutation names is collected (a renamed test or parameter would otherwise
    make its mutation invalid only in ``make mutate``)."""
    args = sorted({t for m in MUTATIONS for t in m.tests})
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider", *args], cwd=ROOT, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    collected = out.stdout
    for arg in args:
        assert arg in collected or f"{arg}[" in collected, f"{arg}: not collected"


def test_every_block_has_two_mutations():
    counts = Counter(m.block for m in MUTATIONS)
    assert {b: counts[b] for b in BLOCKS if counts[b] < 2} == {}


def test_drifted_snippet_refused():
    m = Mutation("drifted", "HBM", "", "hdl/hbm/timing.py", "no such text", "x", ())
    with pytest.raises(ValueError, match="occurs 0 times"):
        mutated_text(ROOT, m)


TIMING = "hdl/hbm/timing.py"
WINDOW = ("verification/tests/test_hbm_parts.py::test_activate_window",)
SNIPPET = 'slots = [Countdown({"act": self._faw}) for _ in range(4)]'


@pytest.mark.parametrize("new, status", [
    (SNIPPET + "  # a comment", "survived"),
    (SNIPPET + "\n        )", "invalid"),
], ids=["survived", "syntax-error"])
def test_runner_tells_survivor_and_invalid(scratch, new, status):
    """A mutation that changes nothing survives; one that breaks the code before any test
    runs (an error, not a failure) is invalid, never caught; the scratch file is restored."""
    before = (scratch / TIMING).read_text()
    row = run_mutation(scratch, Mutation(status, "HBM", "", TIMING, SNIPPET, new, WINDOW),
                       baseline=False, timeout=600)
    assert row["status"] == status, row
    assert not row["caught_by"]
    assert (scratch / TIMING).read_text() == before


@pytest.mark.parametrize("mutation", FAST, ids=lambda m: m.name)
def test_fast_mutation_caught(scratch, mutation):
    row = run_mutation(scratch, mutation, baseline=False, timeout=600)
    assert row["status"] == "caught", f"{mutation.name}: {row['status']}: {row['detail']}"
    assert (scratch / mutation.path).read_text() == (ROOT / mutation.path).read_text()


def test_results_page_renders_from_its_json():
    """docs/results/mutations.md is the rendering of mutations.json, and the JSON lists every
    mutation of the list, each caught."""
    results = Path(ROOT / "docs" / "results")
    data = json.loads((results / "mutations.json").read_text())
    assert render(data) == (results / "mutations.md").read_text()
    rows = {r["name"]: r for r in data["tables"]["mutations"]}
    assert sorted(rows) == sorted(m.name for m in MUTATIONS), "results of an older list"
    assert [n for n, r in rows.items() if r["status"] != "caught"] == []
