"""SparseCore measurements for ``make bench``: gather throughput of sum lookups for 64 B, 128 B
and 512 B rows, on the HBM controller's benchmark configuration behind the golden device model,
against the controller's random 512 B read rate measured by the HBM benchmark (hbm.json);
the dedup effect on a real id stream (MovieLens-100k, from the ``recbole`` wheel, downloaded
into build/ and never committed); writes docs/results/sparsecore.md and sparsecore.json.

Every lookup is checked bit for bit against the golden model. Cycles cover the whole operation
(the offsets and ids checking passes, the gather, the output writes), from start to done.
"""

import subprocess
import sys
import zipfile

import numpy as np

from sim.hbm_perf import measured_rate
from sim.measure import environment, environment_line, measure, table, write_results
from sim.runner import BUILD
from spec.hbm import BENCH_CONFIG
from spec.sparsecore import SparseCoreConfig, SparseCoreSystemConfig
from verification.models.sparsecore import Batch, Limits, minibatches

__all__ = ["bench", "render", "BENCH", "PEAK"]

BENCH = SparseCoreSystemConfig(sparsecore=SparseCoreConfig(inflight_beats=256, row_ids=2,
                                                           list_beats=16, max_burst=8),
                               hbm=BENCH_CONFIG)
"""The SparseCore with 256 row beats in flight on two row IDs (128 beats each: eight 512 B rows,
64 rows of 64 B per ID) on the HBM controller's benchmark configuration, whose port keeps 128
read beats per reorder lane (``rob_depth`` 256 over ``id_lanes`` 2): IDs 0 and 1 are in
different lanes, so the rows can have both lanes' beats in flight."""

TARGET = 0.80
"""The issue's gather target for 512 B rows: this fraction of the HBM benchmark's random 512 B
read rate."""

PEAK = BENCH_CONFIG.pseudo_channels * BENCH_CONFIG.access_bytes / BENCH_CONFIG.timing.burst_cycles
"""Bytes per cycle of the benchmark configuration's data buses, every cycle busy: a ceiling."""


HISTORY = 8
"""A sample's bag: the items its user rated before (up to this many), MovieLens-style
multi-hot history."""


def movielens_batches(batch_size, count):
    """``count`` CSR batches of ``batch_size`` consecutive ratings of MovieLens-100k in time
    order; a sample's bag is its user's previous ``HISTORY`` items. Returns (batches, items)."""
    directory = BUILD / "recbole"
    wheels = sorted(directory.glob("recbole-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "recbole", "-d",
                        str(directory)], check=True, capture_output=True)
        wheels = sorted(directory.glob("recbole-*.whl"))
    with zipfile.ZipFile(wheels[-1]) as z:
        lines = z.read("recbole/dataset_example/ml-100k/ml-100k.inter").decode().splitlines()
    ratings = sorted((float(t), int(u), int(i)) for u, i, _, t in
                     (line.split("\t") for line in lines[1:]))
    history, batches, current = {}, [], []
    for _, user, item in ratings:
        current.append(list(history.get(user, [])))
        history[user] = (history.get(user, []) + [item])[-HISTORY:]
        if len(current) == batch_size:
            sizes = [len(b) for b in current]
            batches.append(Batch(np.concatenate([[0], np.cumsum(sizes)]),
                                 [i for b in current for i in b]))
            current = []
            if len(batches) == count:
                break
    return batches, max(i for _, _, i in ratings) + 1


def dedup(quick):
    """Rows read-modify-written by scatters of MovieLens batches, with and without dedup, and
    one batch on the RTL (its unique-row counter and the whole table checked)."""
    batches, items = movielens_batches(128, 4 if quick else 40)
    rows = []
    for max_ids in (16, 64, 1 << 20):
        ids = sum(len(b.ids) for b in batches)
        unique = sum(len(set(b.ids[lo:hi].tolist())) for b in batches
                     for lo, hi in minibatches(b, Limits(max_ids, max_ids)))
        rows.append({"minibatch_ids": max_ids, "batches": len(batches), "ids": ids,
                     "rows_updated": unique, "saved": round(1 - unique / ids, 3)})
    first = batches[-1]
    rtl = measure("sparsecore", BENCH, "verification.tb.sparsecore", "measure_scatter",
                  {"offsets": first.offsets.tolist(), "ids": first.ids.tolist(),
                   "rows": items, "dim": 16})["report"]
    return rows, rtl, len(first.ids)


def dlrm(quick):
    """The DLRM DCNv2-shaped batch: 26 tables of dim 128 (row counts scaled down to 128),
    multi-hot 1..100, on the RTL; cycles per sample."""
    spec = {"tables": 4 if quick else 26, "rows": 128, "dim": 128, "samples": 8,
            "max_hot": 100}
    report = measure("sparsecore", BENCH, "verification.tb.sparsecore", "measure_dlrm",
                     spec)["report"]["lookups"]
    cycles = sum(r["cycles"] for r in report)
    ids = sum(r["ids"] for r in report)
    return spec, {"cycles": cycles, "ids": ids, "cycles_per_sample": cycles / spec["samples"],
                  "row_bytes_per_cycle": ids * spec["dim"] * 4 / cycles}


def gather(quick):
    """Sum lookups of 64 B, 128 B and 512 B rows for bags of 8 and 32 ids (16 bags of 4 with
    ``quick``), against the HBM benchmark's random 512 B reads: JSON rows, the anchor and the
    runs' wall times."""
    anchor, anchor_from = measured_rate("rand_read_512", quick, "sparsecore")
    tables, runs = [], []
    for ids_per_bag in [4] if quick else [8, 32]:
        spec = {"row_bytes": [64, 128, 512], "rows": 512 if quick else 2048,
                "bags": 16 if quick else 64, "ids_per_bag": ids_per_bag}
        result = measure("sparsecore", BENCH, "verification.tb.sparsecore", "measure_gather",
                         spec)
        runs.append(result)
        for r in result["report"]["gather"]:
            rate = r["row_bytes_read"] / r["cycles"]
            bus = (r["bytes_read"] + r["bytes_written"]) / r["cycles"]
            tables.append({**r, "ids_per_bag": ids_per_bag, "bags": spec["bags"],
                           "table_rows": spec["rows"],
                           "bytes_per_cycle": round(rate, 2), "of_peak": round(rate / PEAK, 3),
                           "of_random_512": round(rate / anchor, 3),
                           "bus_bytes_per_cycle": round(bus, 2)})
    seconds = {"build_seconds": runs[0]["build_seconds"],
               "run_seconds": [r["run_seconds"] for r in runs]}
    return tables, {"bytes_per_cycle": anchor, "from": anchor_from}, seconds


def _gather_text(tables, anchor, seconds):
    rows = []
    for r in tables:
        rate = r["row_bytes_read"] / r["cycles"]
        bus = (r["bytes_read"] + r["bytes_written"]) / r["cycles"]
        verdict = (f">= {100 * TARGET:.0f}%: "
                   f"{'met' if rate >= TARGET * anchor['bytes_per_cycle'] else 'NOT met'}"
                   if r["row_bytes"] == 512 else "")
        rows.append([r["ids_per_bag"], r["row_bytes"], r["rows_read"], r["cycles"],
                     f"{rate:.2f}", f"{100 * rate / anchor['bytes_per_cycle']:.0f}%", verdict,
                     f"{100 * rate / PEAK:.0f}%", f"{bus:.2f}", r["stalls"]])
    bag_sizes = list(dict.fromkeys(r["ids_per_bag"] for r in tables))
    return "\n".join([
        f"A sum lookup of {tables[-1]['bags']} bags of {' or '.join(map(str, bag_sizes))} "
        "uniformly random ids over "
        f"{tables[-1]['table_rows']} fp32 rows per row size, bit-exact with the golden model. "
        "Rate = row bytes read / cycles of the whole operation (both checking passes and the "
        "output writes included). Anchor: the HBM benchmark's random 512 B reads "
        f"({anchor['bytes_per_cycle']:.1f} B/cycle, {anchor['from']}), the issue's target "
        f"being {100 * TARGET:.0f}% of it for 512 B rows; peak: "
        f"the data buses busy every cycle, {PEAK:g} B/cycle. Data bus = all bytes read and "
        "written (lists and output rows too) / cycles: the output rows share the data bus "
        "with the gather (one row per bag: 1 / (ids per bag) of the row traffic).",
        "",
        table(["ids per bag", "row bytes", "rows read", "cycles", "B/cycle",
               "of random 512 B reads", "target", "of peak", "data bus B/cycle", "stalls"],
              rows), "",
        f"Build {seconds['build_seconds']:.0f} s, runs "
        + " / ".join(f"{s:.0f}" for s in seconds["run_seconds"]) + " s."])


def bench(quick=False):
    """Gather, dedup and the DLRM-shaped batch; writes docs/results/sparsecore.json and its
    page sparsecore.md. The environment is measured before the runs (the page's load average
    is the one at start, its commit the one the runs simulate)."""
    env = environment()
    tables, anchor, seconds = gather(quick)
    dedup_rows, rtl, rtl_ids = dedup(quick)
    dspec, d = dlrm(quick)
    write_results("sparsecore", {"gather": tables, "dedup": dedup_rows,
                                 "dedup_rtl": {**rtl["counters"], "ids": rtl_ids,
                                               "golden_row_writes": rtl["golden"]["row_writes"]},
                                 "dlrm": {**dspec, **d}, "anchor": anchor}, env, render, quick,
                  gather_seconds=seconds, config=BENCH.sparsecore.to_dict())
    return tables


def render(data):
    """The results page (markdown) of the benchmark's JSON ``data``."""
    t = data["tables"]
    dedup_table = table(
        ["minibatch (ids)", "batches", "ids", "rows updated", "HBM row traffic saved"],
        [[r["minibatch_ids"] if r["minibatch_ids"] < 1 << 20 else "whole batch", r["batches"],
          r["ids"], r["rows_updated"], f"{100 * r['saved']:.0f}%"] for r in t["dedup"]])
    c, d = t["dedup_rtl"], t["dlrm"]
    return "\n".join([
        "# SparseCore benchmark results", "",
        f"Measured by `make bench` on {environment_line(data['environment'])}.", "",
        f"Configuration (`sim/sparsecore_perf.py`): {data['config']}, HBM: the "
        "controller's benchmark configuration.", "",
        "## Gather", "", _gather_text(t["gather"], t["anchor"], data["gather_seconds"]), "",
        "## Dedup on MovieLens-100k", "",
        "Batches of 128 consecutive ratings in time order (the recbole wheel's ml-100k); a "
        f"sample's bag is its user's previous {HISTORY} items. A scatter without dedup reads "
        "and writes a table row per id; with dedup one per distinct id per minibatch (the "
        "hardware's minibatch is `max_ids` = 16 ids; larger ones for comparison, counted with "
        "the golden model's minibatch rule).", "",
        dedup_table, "",
        f"On the RTL, the last batch ({c['ids']} ids, 64 B rows): {c['unique_ids']} rows "
        f"updated in {c['minibatches']} minibatches (golden model: "
        f"{c['golden_row_writes']}), {c['cycles']} cycles, the whole table equal to the "
        "golden model's afterwards.", "",
        "## DLRM DCNv2-shaped batch", "",
        f"{d['tables']} tables of dim {d['dim']} (fp32, 512 B rows; row counts scaled "
        f"down to {d['rows']}), {d['samples']} samples, each with a multi-hot bag of "
        f"1..{d['max_hot']} uniformly random ids per table; one sum lookup per table in "
        "turn, each bit-exact with the golden model.", "",
        table(["ids", "cycles", "cycles per sample", "row B/cycle"],
              [[d["ids"], d["cycles"], f"{d['cycles_per_sample']:.0f}",
                f"{d['row_bytes_per_cycle']:.1f}"]]), ""])
