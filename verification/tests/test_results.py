"""Every results page (docs/results/<page>.md) is its benchmark's rendering of the JSON the
benchmark wrote beside it (each bench module's ``render``, sim/bench.py), byte for byte: pages
are written by their bench, never edited, and a page whose text no longer matches its
renderer or its data fails here (``python -m sim.bench <name> --render`` rewrites a page from
its JSON after a change of the page's text; new data needs the bench re-run)."""

import pytest

from sim.bench import BENCHES, page_name, render
from sim.measure import RESULTS

STALE = {}
"""Pages that cannot be rendered from their current JSON (by benchmark), with why: each needs
its benchmark re-run."""

PAGES = {page_name(name): name for name in BENCHES}

OTHER_PAGES = {"mutations": "make mutate (sim/mutate.py; verification/tests/test_mutations.py "
                            "re-renders it)"}
"""Results pages written by a command other than ``make bench``, and where they are checked."""


def test_every_page_has_its_json_and_bench():
    jsons = {p.stem for p in RESULTS.glob("*.json")}
    pages = {p.stem for p in RESULTS.glob("*.md")}
    assert pages == jsons, "a results page without its JSON, or the reverse"
    assert jsons <= set(PAGES) | set(OTHER_PAGES), \
        f"no benchmark renders {sorted(jsons - set(PAGES) - set(OTHER_PAGES))}"
    assert set(STALE) <= set(BENCHES)


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.xfail(strict=True, raises=(KeyError, AssertionError),
                                               reason=STALE[name]))
    if name in STALE else name
    for name in sorted(BENCHES)])
def test_page_is_its_json_rendered(name):
    page = page_name(name)
    assert (RESULTS / f"{page}.json").exists(), f"docs/results/{page}.json: never run"
    text, rendering = render(name)
    assert rendering == text, (f"docs/results/{page}.md is not the rendering of "
                               f"{page}.json (python -m sim.bench {name} --render)")


def test_write_results_renders_the_json_it_wrote(tmp_path, monkeypatch):
    """A bench's page is written from the JSON file's contents (what the test above
    re-renders), which records the commit and whether the tree was clean."""
    import json

    from sim import measure

    monkeypatch.setattr(measure, "results_directory", lambda quick=False: tmp_path)
    env = measure.environment()
    assert isinstance(env["clean"], bool)
    assert (" with uncommitted changes" in env["commit"]) != env["clean"]
    seen = []

    def render(data):
        seen.append(data)
        line = measure.environment_line(data["environment"])
        return f"{data['tables']['t'][0]['x']:.3f} {line}\n"

    measure.write_results("demo", {"t": [{"x": 1 / 3}]}, env, render, extra=[1, 2])
    data = json.loads((tmp_path / "demo.json").read_text())
    assert seen == [data] and data["extra"] == [1, 2] and data["environment"] == env
    assert (tmp_path / "demo.md").read_text() == render(data)
    assert f"commit {env['commit']};" in render(data)
