"""Figures quoted from the results pages (sim/quoted.py; the convention: docs/conventions.md,
"Quoting a measured figure"): every quoted figure stands in its page, every README headline
figure has a source, and the checker flags a figure that breaks either rule."""

from sim import quoted


def test_every_quoted_figure_stands_in_its_page():
    assert quoted.problems() == []
    assert quoted.quoted(), "no quoted figure found: the convention's links are not read"


def test_readme_headline_figures_quoted():
    """README's collective headlines are quoted from the collectives page."""
    figures = {(fig, source) for _, fig, source in quoted.headline()}
    for fig in ("93.8%", "85.1%", "83.2%"):
        assert (fig, "docs/results/collectives.md") in figures, fig


def _tree(tmp_path, readme, page="| all-reduce | 1 MiB | 93.8% | 30.03 |\n", docs=""):
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "README.md").write_text(readme)
    (tmp_path / "docs" / "pod.md").write_text(docs)
    (tmp_path / "docs" / "results" / "collectives.md").write_text(page)
    return tmp_path


def test_checker_flags_what_breaks_the_rules(tmp_path, monkeypatch):
    monkeypatch.setattr(quoted, "ELSEWHERE", {"97.3%": "the demo"})
    good = ("ring all-reduce [93.8%](docs/results/collectives.md), digits 97.3%, "
            "[30.0](docs/results/collectives.md) GB/s, [results](docs/results/collectives.md)\n")
    assert quoted.problems(_tree(tmp_path / "a", good)) == []
    cases = {
        "wrong figure": ("[93.9%](docs/results/collectives.md) 97.3%\n", "is not in"),
        "more precision than the page": ("[93.80%](docs/results/collectives.md) 97.3%\n",
                                         "is not in"),
        "other unit": ("[93.8](docs/results/collectives.md) 97.3%\n", "is not in"),
        "no page": ("[93.8%](docs/results/nothing.md) 97.3%\n", "does not exist"),
        "unquoted headline": ("ring all-reduce 93.8% of the bound, 97.3%\n", "has no source"),
        "unquoted speed": ("97.3%, 3,020 simulated cycles/s\n", "has no source"),
        "stale ELSEWHERE": ("[93.8%](docs/results/collectives.md)\n", "does not quote"),
    }
    for name, (readme, message) in cases.items():
        bad = quoted.problems(_tree(tmp_path / name.replace(" ", "_"), readme))
        assert len(bad) == 1 and message in bad[0], (name, bad)
    docs = "from docs/: [85.1%](results/collectives.md)\n"
    bad = quoted.problems(_tree(tmp_path / "docs", good, docs=docs))
    assert bad == ["docs/pod.md:1: 85.1% is not in docs/results/collectives.md"]


def test_found_rounds_at_the_quoted_precision():
    assert quoted.found("93.8%", "x 93.75% y")
    assert not quoted.found("93.8%", "x 93.7% y")
    assert quoted.found("3,020", "| 3,020 |") and quoted.found("3,020", "3020.4")
    assert not quoted.found("3,020", "13,020")
    assert quoted.found("6.6x", "4.7x, 6.6x") and not quoted.found("6.6x", "6.6%")
