"""Calibration of the model on Podium's own measurements.

``make bench`` writes, beside each markdown result, ``docs/results/<block>.json``:
``{"benchmark": ..., "environment": {...}, "tables": {"<name>": [{row}, ...]}}``. This module
reads those files (afresh on every call: re-running a benchmark changes the model) and turns
them into the efficiency terms of :class:`~podium.model.hardware.Efficiency` and the ICI hop
latency, each with its provenance: "measured (file, row)" or "assumed: value (why)". A file or
table that is missing, or has no usable row, leaves its term assumed and says so; a file that
is not valid JSON is an error.

Terms and where they come from:

- ``mxu``: ``tensorcore.json`` table ``gemm`` (``roofline_fraction``: measured cycles of a GEMM
  from HBM against its roofline; bfloat16 rows first, the largest GEMM) when present, else
  ``mxu.json`` table ``utilization``: the streaming bound ceil(K/R) ceil(N/C) max(M, R) over
  the measured cycles, on the largest array measured (tile quantization is modelled per GEMM,
  so only the pipeline loss is taken).
- ``hbm``: ``hbm.json`` table ``patterns``, row ``stream`` (else ``seq_read``): every modelled
  HBM access is a long sequential stream (weights, activations, KV cache).
- ``ici_collective``: ``collectives.json`` (``sim/pod_perf.py``) table ``busbw``: the
  ``efficiency`` (NCCL bus bandwidth over the link bound) of the largest all-reduce measured.
- ``ici_all_to_all``: ``collectives.json`` table ``all_to_all``: the fraction of the
  bisection bound (``of_bisection_bound``) of the largest all-to-all on the largest pod, the
  bound the model's all-to-all time divides by; else ``ici.json`` table ``saturation``:
  saturation / ideal of uniform random traffic (an all-to-all's pattern) on the largest
  network, most VCs, longest packets, one allocator iteration (the pod's router).
- ``ici_hop_latency``: ``collectives.json`` table ``alpha_beta`` (the largest topology, its
  all-reduce): the RTL's cycles per ring step (``alpha_cycles`` + ``per_hop_cycles``) moved to
  the preset's link (a cycle lasts ``link_bytes_per_cycle`` / link bandwidth, so the latency
  keeps its measured size in bytes of transfer), added to the published hop latency of the
  physical link (SerDes and wire), which the RTL does not model.
- ``dcn``: Podium has no data-center network: always assumed.
"""

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

from .hardware import Efficiency

__all__ = ["RESULTS", "Term", "load_tables", "measured_terms", "measured_efficiency",
           "measured_chip"]

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
"""The repository's results directory, the default input."""


@dataclass(frozen=True)
class Term:
    """One calibrated quantity and where it came from: ``origin`` names the file, table and
    row of a measured term ("" when assumed), ``source`` says what was taken and why."""

    value: float
    source: str
    origin: str = ""

    @property
    def measured(self):
        return bool(self.origin)


def _measured(value, origin, what):
    return Term(value, f"measured ({origin}: {what})", origin)


def load_tables(directory, benchmark):
    """The tables of ``<directory>/<benchmark>.json`` as {name: [row, ...]}, or None if the
    file does not exist. Raises ValueError if it is not a results file."""
    path = Path(directory) / f"{benchmark}.json"
    where = _where(path)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not valid JSON ({e})") from e
    tables = data.get("tables") if isinstance(data, dict) else None
    if not isinstance(tables, dict):
        raise ValueError(f"{where}: expected an object with a 'tables' object")
    return {name: [r for r in rows if isinstance(r, dict)]
            for name, rows in tables.items() if isinstance(rows, list)}


def _where(path):
    """``path`` relative to the repository when inside it (stable across checkouts)."""
    path = Path(path).resolve()
    root = RESULTS.parents[1]
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _number(row, key):
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
            value):
        raise KeyError(key)
    return value


def _rows(directory, benchmark, table, keys):
    """Usable rows (every key a finite number, or present for non-numeric keys) of one
    table, and the reason when there are none."""
    tables = load_tables(directory, benchmark)
    if tables is None:
        return [], f"{benchmark}.json not found in {_where(directory)}"
    if table not in tables:
        return [], f"{benchmark}.json has no table '{table}'"
    usable = []
    for index, row in enumerate(tables[table]):
        try:
            for key in keys:
                if key in ("format", "pattern", "collective", "topology", "dims"):
                    if key not in row:
                        raise KeyError(key)
                else:
                    _number(row, key)
        except KeyError:
            continue
        usable.append((index, row))
    if not usable:
        return [], f"{benchmark}.json table '{table}' has no row with {', '.join(keys)}"
    return usable, ""


def _fraction(value):
    return min(1.0, max(value, 1e-6))


def _mxu(directory):
    rows, why_tc = _rows(directory, "tensorcore", "gemm",
                         ("format", "m", "k", "n", "roofline_fraction"))
    if rows:
        # The model moves bfloat16: its rows first, then the largest GEMM (least fill/drain).
        i, r = max(rows, key=lambda ir: (ir[1]["format"] == "bfloat16",
                                         ir[1]["m"] * ir[1]["k"] * ir[1]["n"]))
        return _measured(_fraction(r["roofline_fraction"]), f"tensorcore.json, gemm row {i}",
                         f"{r['m']}x{r['k']}x{r['n']} {r['format']} GEMM from HBM, measured "
                         f"cycles against the roofline")
    rows, why = _rows(directory, "mxu", "utilization",
                      ("format", "rows", "cols", "m", "k", "n", "cycles"))
    if not rows:
        return Term(1.0, f"assumed: 1.0 ({why_tc}; {why})")

    def rank(ir):
        r = ir[1]
        return (r["rows"] * r["cols"], r["format"] == "bfloat16", r["m"] * r["k"] * r["n"])

    i, r = max(rows, key=rank)
    streaming = (math.ceil(r["k"] / r["rows"]) * math.ceil(r["n"] / r["cols"])
                 * max(r["m"], r["rows"]))
    return _measured(_fraction(streaming / r["cycles"]), f"mxu.json, utilization row {i}",
                     f"{r['format']} {r['rows']}x{r['cols']}, {r['m']}x{r['k']}x{r['n']}, "
                     f"{r['cycles']} cycles against a streaming bound of {streaming}")


def _hbm(directory):
    rows, why = _rows(directory, "hbm", "patterns", ("pattern", "efficiency"))
    by_pattern = {r["pattern"]: (i, r) for i, r in rows}
    for pattern in ("stream", "seq_read"):
        if pattern in by_pattern:
            i, r = by_pattern[pattern]
            return _measured(_fraction(r["efficiency"]), f"hbm.json, patterns row {i}",
                             f"{pattern}{', ' + r['preset'] if 'preset' in r else ''}, "
                             f"achieved / peak data-bus bandwidth")
    return Term(1.0, f"assumed: 1.0 ({why or 'hbm.json has no stream or seq_read row'})")


def _largest(rows, kind):
    chosen = [(i, r) for i, r in rows if r["collective"] == kind]
    return max(chosen, key=lambda ir: (ir[1]["bytes_per_chip"], ir[1]["chips"]),
               default=None)


def _collectives(directory):
    rows, why = _rows(directory, "collectives", "busbw",
                      ("collective", "topology", "chips", "bytes_per_chip", "efficiency"))
    ring = _largest(rows, "all_reduce")
    if ring:
        i, r = ring
        ring_term = _measured(_fraction(r["efficiency"]), f"collectives.json, busbw row {i}",
                              f"all_reduce on the {r['topology']} pod, "
                              f"{r['bytes_per_chip']} B per chip, NCCL busbw / link bound")
    else:
        why = why or "collectives.json table 'busbw' has no all_reduce row"
        ring_term = Term(1.0, f"assumed: 1.0 ({why}; the pod benchmark, python -m sim.bench "
                              f"pod, writes it)")
    a2a_rows, _ = _rows(directory, "collectives", "all_to_all",
                        ("collective", "topology", "chips", "bytes_per_chip",
                         "of_bisection_bound"))
    a2a = _largest(a2a_rows, "all_to_all")
    if a2a:
        i, r = a2a
        return ring_term, _measured(_fraction(r["of_bisection_bound"]),
                                    f"collectives.json, all_to_all row {i}",
                                    f"uniform all-to-all on the {r['topology']} pod, "
                                    f"{r['bytes_per_chip']} B per chip, bisection bound / "
                                    f"time")
    rows, why_ici = _rows(directory, "ici", "saturation",
                          ("dims", "vcs", "packet_flits", "saturation", "ideal"))
    if not rows:
        return ring_term, Term(1.0, f"assumed: 1.0 ({why_ici})")

    def rank(ir):
        # The largest network, most VCs, longest packets, and the pod's router (one
        # allocator iteration, the default) before the others.
        r = ir[1]
        return (math.prod(r["dims"]), r["vcs"], r["packet_flits"], -r.get("alloc_iters", 1))

    i, r = max(rows, key=rank)
    dims = "x".join(str(d) for d in r["dims"])
    return ring_term, _measured(_fraction(r["saturation"] / r["ideal"]),
                                f"ici.json, saturation row {i}",
                                f"{dims} torus, {r['vcs']} VCs, {r['packet_flits']}-flit "
                                f"packets, uniform random saturation / ideal")


def _topology_chips(topology):
    try:
        return math.prod(int(k) for k in str(topology).split("x"))
    except ValueError:
        return 0


def _hop_latency(directory, chip):
    rows, why = _rows(directory, "collectives", "alpha_beta",
                      ("collective", "topology", "alpha_cycles", "per_hop_cycles",
                       "link_bytes_per_cycle"))
    published = chip.ici_hop_latency
    if not rows:
        return Term(published,
                    f"assumed: {published * 1e6:g} us, the published figure ({why}; the RTL "
                    f"has no SerDes, so its latency is not a chip-to-chip latency)")
    i, r = max(rows, key=lambda ir: (_topology_chips(ir[1]["topology"]),
                                     ir[1]["collective"] == "all_reduce"))
    cycles = r["alpha_cycles"] + r["per_hop_cycles"]
    rtl = cycles * r["link_bytes_per_cycle"] / chip.ici_link_bandwidth
    return _measured(published + rtl, f"collectives.json, alpha_beta row {i}",
                     f"{r['collective']} on the {r['topology']} pod: {r['alpha_cycles']:g} "
                     f"cycles per ring step + {r['per_hop_cycles']:g} per hop, at "
                     f"{r['link_bytes_per_cycle']:g} B per cycle of link moved to the preset's "
                     f"{chip.ici_link_bandwidth / 1e9:g} GB/s link = {rtl * 1e9:.3g} ns, plus "
                     f"the published {published * 1e6:g} us of the physical link, which the "
                     f"RTL does not model")


def measured_terms(chip, directory=None):
    """Every calibrated term for ``chip`` from the results in ``directory`` (default: the
    repository's docs/results), as {name: Term}, read afresh."""
    directory = Path(directory) if directory is not None else RESULTS
    ring, a2a = _collectives(directory)
    return {"mxu": _mxu(directory), "hbm": _hbm(directory), "ici_collective": ring,
            "ici_all_to_all": a2a,
            "dcn": Term(1.0, "assumed: 1.0 (Podium has no data-center network)"),
            "ici_hop_latency": _hop_latency(directory, chip)}


def measured_efficiency(terms):
    """The :class:`Efficiency` of ``measured_terms`` output, sources attached."""
    names = Efficiency.TERMS
    return Efficiency(**{n: terms[n].value for n in names},
                      sources={n: terms[n].source for n in names})


def measured_chip(chip, terms):
    """``chip`` with the calibrated hop latency, named as Podium-calibrated."""
    sources = dict(chip.sources, ici_hop_latency=terms["ici_hop_latency"].source)
    return replace(chip, name=f"{chip.name}, Podium-measured efficiencies",
                   ici_hop_latency=terms["ici_hop_latency"].value, sources=sources)
