"""Calibration of the model on Podium's own measurements.

``make bench`` writes, beside each markdown result, ``docs/results/<block>.json``:
``{"benchmark": ..., "environment": {...}, "tables": {"<name>": [{row}, ...]}}``. This module
reads those files (afresh on every call: re-running a benchmark changes the model) and turns
them into the efficiency terms of :class:`~podium.model.hardware.Efficiency` and the ICI hop
latency, each with its provenance: "measured (file, row)" or "assumed: value (why)". A file or
table that is missing, or has no usable row, leaves its term assumed and says so; a file that
is not valid JSON is an error.

Terms and where they come from:

- ``mxu``: ``tensorcore.json`` table ``gemm`` (``roofline_fraction`` of the largest GEMM) when
  present, else ``mxu.json`` table ``utilization``: the streaming bound
  ceil(K/R) ceil(N/C) max(M, R) over the measured cycles, on the largest array measured
  (tile quantization is modelled per GEMM, so only the pipeline loss is taken).
- ``hbm``: ``hbm.json`` table ``patterns``, row ``stream`` (else ``seq_read``): every modelled
  HBM access is a long sequential stream (weights, activations, KV cache).
- ``ici_collective``: ``collectives.json`` table ``busbw``: the efficiency of the largest
  all-reduce measured.
- ``ici_all_to_all``: ``collectives.json`` all-to-all rows when present, else ``ici.json``
  table ``saturation``: saturation / ideal of uniform random traffic (an all-to-all's pattern)
  on the largest network, most VCs, longest packets.
- ``ici_hop_latency``: ``collectives.json`` table ``alpha_beta`` (the row of the largest
  topology): per-hop cycles times the RTL's bytes per cycle, i.e. the latency expressed as
  bytes of transfer, moved to the preset's link bandwidth.
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
    """One calibrated quantity and where it came from."""

    value: float
    source: str

    @property
    def measured(self):
        return self.source.startswith("measured")


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
    rows, why_tc = _rows(directory, "tensorcore", "gemm", ("m", "k", "n", "roofline_fraction"))
    if rows:
        i, r = max(rows, key=lambda ir: ir[1]["m"] * ir[1]["k"] * ir[1]["n"])
        return Term(_fraction(r["roofline_fraction"]),
                    f"measured (tensorcore.json, gemm row {i}: {r['m']}x{r['k']}x{r['n']} "
                    f"{r.get('format', '')}, roofline fraction)")
    rows, why = _rows(directory, "mxu", "utilization",
                      ("format", "rows", "cols", "m", "k", "n", "cycles"))
    if not rows:
        return Term(1.0, f"assumed: 1.0 ({why_tc}; {why})")

    def rank(ir):
        r = ir[1]
        return (r["rows"] * r["cols"], r["m"] * r["k"] * r["n"], r["format"] == "bfloat16")

    i, r = max(rows, key=rank)
    streaming = (math.ceil(r["k"] / r["rows"]) * math.ceil(r["n"] / r["cols"])
                 * max(r["m"], r["rows"]))
    return Term(_fraction(streaming / r["cycles"]),
                f"measured (mxu.json, utilization row {i}: {r['format']} "
                f"{r['rows']}x{r['cols']}, {r['m']}x{r['k']}x{r['n']}, {r['cycles']} cycles "
                f"against a streaming bound of {streaming})")


def _hbm(directory):
    rows, why = _rows(directory, "hbm", "patterns", ("pattern", "efficiency"))
    by_pattern = {r["pattern"]: (i, r) for i, r in rows}
    for pattern in ("stream", "seq_read"):
        if pattern in by_pattern:
            i, r = by_pattern[pattern]
            return Term(_fraction(r["efficiency"]),
                        f"measured (hbm.json, patterns row {i}: {pattern})")
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
        ring_term = Term(_fraction(r["efficiency"]),
                         f"measured (collectives.json, busbw row {i}: all_reduce "
                         f"{r['topology']}, {r['bytes_per_chip']} B per chip)")
    else:
        ring_term = Term(1.0, f"assumed: 1.0 ({why or 'collectives.json has no all_reduce'}"
                              f"; no ring collective measured on the RTL pod yet)")
    a2a = _largest(rows, "all_to_all")
    if a2a:
        i, r = a2a
        return ring_term, Term(_fraction(r["efficiency"]),
                               f"measured (collectives.json, busbw row {i}: all_to_all "
                               f"{r['topology']}, {r['bytes_per_chip']} B per chip)")
    rows, why_ici = _rows(directory, "ici", "saturation",
                          ("dims", "vcs", "packet_flits", "saturation", "ideal"))
    if not rows:
        return ring_term, Term(1.0, f"assumed: 1.0 ({why_ici})")

    def rank(ir):
        r = ir[1]
        return (math.prod(r["dims"]), r["vcs"], r["packet_flits"])

    i, r = max(rows, key=rank)
    dims = "x".join(str(d) for d in r["dims"])
    return ring_term, Term(_fraction(r["saturation"] / r["ideal"]),
                           f"measured (ici.json, saturation row {i}: {dims}, {r['vcs']} VCs, "
                           f"{r['packet_flits']}-flit packets, uniform random saturation / "
                           f"ideal)")


def _topology_chips(topology):
    try:
        return math.prod(int(k) for k in str(topology).split("x"))
    except ValueError:
        return 0


def _hop_latency(directory, chip):
    rows, why = _rows(directory, "collectives", "alpha_beta",
                      ("topology", "per_hop_cycles", "bytes_per_cycle"))
    if not rows:
        return Term(chip.ici_hop_latency,
                    f"assumed: {chip.ici_hop_latency * 1e6:g} us, the published figure "
                    f"({why}; the RTL has no SerDes, so its router hop is not a chip-to-chip "
                    f"latency either way)")
    i, r = max(rows, key=lambda ir: _topology_chips(ir[1]["topology"]))
    seconds = r["per_hop_cycles"] * r["bytes_per_cycle"] / chip.ici_link_bandwidth
    return Term(seconds, f"measured (collectives.json, alpha_beta row {i}: "
                         f"{r['per_hop_cycles']} cycles per hop at {r['bytes_per_cycle']} B per "
                         f"cycle, scaled to the link bandwidth)")


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
