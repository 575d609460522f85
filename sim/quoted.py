"""Figures that README.md and docs/*.md quote from the results pages, each with its source.

The convention (docs/conventions.md, "Quoting a measured figure"): a figure quoted from a
results page is a link whose text is the figure and whose target is the page,
``[93.8%](docs/results/collectives.md)`` (``results/collectives.md`` from docs/). The figure
must stand in that page as rendered (its markdown, which is the rendering of its JSON):
a number there that rounds to it at the quoted precision, with the same ``%`` or ``x``.

README's headline figures (a percentage with a decimal point, a simulated cycles/s figure)
must each be quoted so, or be listed in :data:`ELSEWHERE` with the source they come from
(a demo's report, a test, a docs page's own measurement) when no results page has them.

    python -m sim.quoted        (list every quoted figure with its source; exit 1 on one
                                 without, or on one its page lacks)
"""

import re
import sys
from pathlib import Path

__all__ = ["quoted", "headline", "problems", "found", "ELSEWHERE", "ROOT", "main"]

ROOT = Path(__file__).resolve().parents[1]
NUMBER = r"\d[\d,]*(?:\.\d+)?"
LINK = re.compile(r"\[(?P<text>[^\]\n]+)\]\((?P<target>[^)\s#]*results/(?P<page>[\w-]+)\.md)"
                  r"(?:#[^)\s]*)?\)")
FIGURE = re.compile(rf"(?P<num>{NUMBER})(?P<unit>%|x)?")
IN_PAGE = re.compile(rf"(?<![\w.]){FIGURE.pattern}")
HEADLINE = re.compile(rf"(?<![\w.])(?:\d[\d,]*\.\d+%|{NUMBER}k? (?:simulated )?cycles"
                      rf"(?:/s| per (?:CPU )?second))")

ELSEWHERE = {
    "97.3%": "the digits MLP's int8 test accuracy: the digits demo's report (`make demo`, "
             "sim/demo.py; verification/tests/test_digits.py holds it to numpy's); no results "
             "page",
    "97.1%": "the digits MLP's bfloat16 test accuracy: the digits demo's report "
             "(`make demo ARGS=\"--dtype bfloat16\"`); no results page",
    "98.89%": "the ViT's accuracy, float64 and on the RTL chip: the ViT demo's report "
              "(`make demo ARGS=\"--model vit\"`), docs/tensorcore.md's ViT section; no "
              "results page",
}
"""README's headline figures that no results page holds, each with where it comes from."""


def _value(text):
    """``(value, decimals)`` of a figure's number (thousands separators dropped)."""
    digits = text.replace(",", "")
    return float(digits), len(digits.split(".")[1]) if "." in digits else 0


def found(figure, page_text):
    """Whether ``figure`` (a quoted figure's text) stands in ``page_text``: a number that
    rounds to it at its precision, with the same unit (``%``, ``x`` or none)."""
    m = FIGURE.fullmatch(figure)
    if not m:
        return False
    want, decimals = _value(m["num"])
    unit = m["unit"] or ""
    for n in IN_PAGE.finditer(page_text):
        value, places = _value(n["num"])
        if (n["unit"] or "") == unit and places >= decimals and \
                abs(value - want) <= 0.5 * 10 ** -decimals + 1e-9:
            return True
    return False


def _files(root):
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def quoted(root=ROOT):
    """Every quoted figure: ``[(file, line, figure, page, found)]`` (``found`` None when the
    page does not exist)."""
    out = []
    for path in _files(root):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for link in LINK.finditer(line):
                if not FIGURE.fullmatch(link["text"]):
                    continue       # a link to a page, not a figure
                page = root / "docs" / "results" / f"{link['page']}.md"
                ok = found(link["text"], page.read_text()) if page.exists() else None
                out.append((path.relative_to(root), number, link["text"],
                            page.relative_to(root), ok))
    return out


def headline(root=ROOT):
    """README's headline figures: ``[(line, figure, source)]``, the source a results page
    (the figure quoted), an entry of :data:`ELSEWHERE`, or None."""
    out = []
    for number, line in enumerate((root / "README.md").read_text().splitlines(), 1):
        spans = [(m.start("text"), m.end("text"), m["page"]) for m in LINK.finditer(line)]
        for m in HEADLINE.finditer(line):
            figure = m.group().split(" ")[0]
            page = next((p for a, b, p in spans if a <= m.start() < b), None)
            source = (f"docs/results/{page}.md" if page else ELSEWHERE.get(figure))
            out.append((number, figure, source))
    return out


def problems(root=ROOT):
    """What is wrong, one line each: a quoted figure its page lacks or whose page does not
    exist, a headline figure without a source, an :data:`ELSEWHERE` entry README no longer
    has."""
    out = [f"{f}:{n}: {fig} is not in {page}" if ok is False else
           f"{f}:{n}: {fig} quotes {page}, which does not exist"
           for f, n, fig, page, ok in quoted(root) if not ok]
    heads = headline(root)
    out += [f"README.md:{n}: {fig} has no source (quote it from its results page, "
            f"[{fig}](docs/results/<page>.md), or list it in sim/quoted.py ELSEWHERE)"
            for n, fig, source in heads if source is None]
    seen = {fig for _, fig, _ in heads}
    out += [f"sim/quoted.py: ELSEWHERE lists {fig}, which README.md does not quote"
            for fig in ELSEWHERE if fig not in seen]
    return out


def main(argv=None):
    for f, n, fig, page, ok in quoted():
        state = "found" if ok else "NOT FOUND" if ok is False else "NO SUCH PAGE"
        print(f"{f}:{n}: {fig} <- {page} ({state})")
    for n, fig, source in headline():
        if source and not source.startswith("docs/results/"):
            print(f"README.md:{n}: {fig} <- {source}")
    bad = problems()
    for line in bad:
        print(f"error: {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
