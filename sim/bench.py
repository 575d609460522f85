"""``make bench``: every benchmark, printed as tables and written to docs/results/ (markdown and
JSON, see sim/measure.py).

    python -m sim.bench [name ...] [--quick]
    python -m sim.bench [name ...] --render     (rewrite the pages from their JSON, run nothing)

The benchmarks are those the block registry names (hdl/generate.py ``BLOCKS``: a block's
``bench``, run by ``sim/<bench>_perf.py``), the performance model's reports, which measure
no block (sim/model_protocol.py: held-out validation and the Trillium claims, which also
re-runs sim/model_report.py: the scaling report), the transformer operations
(sim/transformer_perf.py) and the simulation speed of the two RTL run paths
(sim/simspeed.py). Each module's ``render(data)`` makes its results page from the JSON it
wrote (``PAGE``, default the benchmark's name, names the files): pages are never edited.
"""

import argparse
import importlib
import json
import sys

from hdl.generate import BLOCKS

__all__ = ["BENCHES", "page_name", "render", "main", "selected"]

BENCHES = {**{b.bench: f"sim.{b.bench}_perf" for b in BLOCKS.values() if b.bench},
           "model": "sim.model_protocol", "scaling": "sim.model_report",
           "transformer": "sim.transformer_perf",
           "simspeed": "sim.simspeed", "podspeed": "sim.podspeed"}
"""Each benchmark's module, whose ``bench(quick=...)`` runs it."""
BENCHES["training"] = "sim.training_perf"   # a training step compiled from JAX (docs/jax.md)


def page_name(name):
    """The results files' name (docs/results/<page>.json and .md) of benchmark ``name``."""
    return getattr(importlib.import_module(BENCHES[name]), "PAGE", name)


def render(name, directory=None):
    """``(page, rendering)``: the results page of benchmark ``name`` as it stands and as its
    module renders it from its JSON, in ``directory`` (default docs/results)."""
    from sim.measure import RESULTS

    directory = directory or RESULTS
    page = page_name(name)
    data = json.loads((directory / f"{page}.json").read_text())
    text = importlib.import_module(BENCHES[name]).render(data)
    return (directory / f"{page}.md").read_text(), text


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", choices=[[], *BENCHES], default=[], metavar="name",
                   help=f"benchmarks to run (default: all): {', '.join(BENCHES)}")
    p.add_argument("--quick", action="store_true",
                   help="small sizes only, results under build/results (a smoke run)")
    p.add_argument("--render", action="store_true",
                   help="rewrite the results pages from their JSON (after a change of the page's "
                   "text in a bench's render), running nothing")
    args = p.parse_args(argv)
    if args.render:
        from sim.measure import RESULTS

        for name in args.names or BENCHES:
            page = RESULTS / f"{page_name(name)}.md"
            try:
                old, new = render(name)
            except KeyError as e:
                print(f"{page.relative_to(RESULTS.parent.parent)}: not rendered, its JSON has "
                      f"no {e} (re-run the benchmark: python -m sim.bench {name})")
                continue
            page.write_text(new)
            print(f"{page.relative_to(RESULTS.parent.parent)}: "
                  f"{'unchanged' if old == new else 'rendered anew'}")
        return 0
    names = selected(args.names)
    for name in names:
        print(f"== {name} benchmark", flush=True)
        importlib.import_module(BENCHES[name]).bench(quick=args.quick)
    return 0


def selected(names):
    """The benchmarks to run for ``names`` (default all), in order, without those another
    selected benchmark runs itself (a module's ``ALSO_RUNS``: the model benchmark re-runs
    the scaling report, so ``make bench`` runs it once)."""
    names = list(names or BENCHES)
    also = {a for n in names
            for a in getattr(importlib.import_module(BENCHES[n]), "ALSO_RUNS", ())}
    return [n for n in names if n not in also]


if __name__ == "__main__":
    sys.exit(main())
