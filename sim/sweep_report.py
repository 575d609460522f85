"""Tables and plots of a design-space sweep (sim/sweep.py): ``results.csv`` for tools,
``results.md`` for people, ``results.json`` with the environment, a log per failed point
under ``failures/``, and matplotlib PNGs (a metric against a swept parameter, one line per
value of the other swept parameters; the Pareto front of two metrics), all in the sweep's
output directory.
"""

import csv
import json
import re

from sim.measure import environment, environment_line, table
from sim.measurements import wall_time
from sim.synth import FIGURES, FPGA_FIGURES

__all__ = ["write_report", "columns", "pareto_front"]


def columns(outcome):
    """Metric columns: the measurement's headline metrics, its others, the synthesis and FPGA
    figures, then wall times."""
    seen = []
    for record in outcome.records.values():
        for key in record.get("metrics", {}):
            if key not in seen:
                seen.append(key)
    head = [m for m in outcome.sweep.measurement.metrics if m in seen]
    rest = [m for m in seen if m not in head + list(FIGURES + FPGA_FIGURES)
            and not wall_time(m)]
    figures = [m for m in FIGURES + FPGA_FIGURES if m in seen]
    return head + rest + figures + [m for m in seen if wall_time(m)]


def _cell(value):
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return "x".join(map(str, value))
    return str(value)


def _rows(outcome, metrics):
    rows = []
    for point in outcome.sweep.points:
        record = outcome.records.get(point.index)
        status = "not run" if record is None else (
            "stored" if record.get("cached") else record["status"])
        values = (record or {}).get("metrics", {})
        rows.append([point.index, *(point.values[p] for p in outcome.sweep.swept), status,
                     *(values.get(m, "") for m in metrics)])
    return rows


def pareto_front(points, better):
    """The points (tuples of two metrics) no other point beats in both; ``better`` gives
    "max" or "min" per coordinate. Sorted by the first coordinate."""
    sign = [1 if b == "max" else -1 for b in better]

    def beats(p, q):
        return all(s * a >= s * b for s, a, b in zip(sign, p, q, strict=True)) and p != q

    return sorted(p for p in set(points) if not any(beats(q, p) for q in points))


def _numeric(values):
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def _line_style(n):
    """The n-th line's style: lines of equal values (the formats' utilization) must not hide
    each other, so each has its own dash and marker, the first wide and pale under the rest."""
    if n == 0:
        return {"ls": "-", "marker": "o", "ms": 9, "lw": 4, "alpha": 0.4}
    return {"ls": ("--", ":", "-.")[(n - 1) % 3], "marker": "s^Dvp"[(n - 1) % 5], "ms": 6,
            "lw": 1.4, "mfc": "none", "mew": 1.4}


def _ticks(axis, values):
    """At most a handful of ticks on a numeric axis (long labels such as 0.9875 must not run
    into each other), whole numbers only when every value is an integer (rows, depths)."""
    from matplotlib.ticker import MaxNLocator

    values = list(values)
    integer = bool(values) and all(isinstance(v, int) and not isinstance(v, bool)
                                   for v in values)
    axis.set_major_locator(MaxNLocator(nbins=5, integer=integer))


def _save(fig, ax, path, xlabel, ylabel, title, legend=True):
    import matplotlib.pyplot as plt

    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if legend:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_metric(outcome, plot, ok, path):
    import matplotlib.pyplot as plt

    x, y = plot["x"], plot["y"]
    others = [p for p in outcome.sweep.swept if p != x]
    group = [plot["group"]] if plot.get("group") else others
    xs = []
    for i in ok:
        if outcome.sweep.points[i].values[x] not in xs:
            xs.append(outcome.sweep.points[i].values[x])
    numeric = _numeric(xs)
    xs.sort(key=None if numeric else str)
    lines = {}
    for i in ok:
        point = outcome.sweep.points[i]
        label = ", ".join(f"{g}={_cell(point.values[g])}" for g in group) or y
        lines.setdefault(label, []).append((xs.index(point.values[x]),
                                            point.values[x], outcome.records[i]["metrics"][y]))
    fig, ax = plt.subplots(figsize=(6, 4.2))
    for n, (label, pts) in enumerate(sorted(lines.items())):
        pts.sort()
        ax.plot([v if numeric else k for k, v, _ in pts], [m for _, _, m in pts],
                label=label, **_line_style(n))
    if numeric:
        _ticks(ax.xaxis, xs)
    else:
        ax.set_xticks(range(len(xs)), [_cell(v) for v in xs])
    _ticks(ax.yaxis, [m for pts in lines.values() for _, _, m in pts])
    _save(fig, ax, path, x, y, f"{outcome.sweep.name}: {y} vs {x}", legend=len(lines) > 1)


def _plot_pareto(outcome, plot, ok, path):
    import matplotlib.pyplot as plt

    a, b = plot["pareto"]
    directions = {**outcome.sweep.better, **plot.get("better", {})}
    coords = {i: (outcome.records[i]["metrics"][a], outcome.records[i]["metrics"][b])
              for i in ok}
    front = pareto_front(list(coords.values()), (directions[a], directions[b]))
    fig, ax = plt.subplots(figsize=(6, 4.2))
    ax.scatter(*zip(*coords.values(), strict=True), color="grey", label="points")
    ax.plot(*zip(*front, strict=True), color="C3", marker="o", label="Pareto front")
    for i, (u, v) in coords.items():
        if (u, v) in front:
            ax.annotate(outcome.sweep.points[i].label, (u, v), fontsize=7,
                        textcoords="offset points", xytext=(4, 4))
    _ticks(ax.xaxis, [u for u, _ in coords.values()])
    _ticks(ax.yaxis, [v for _, v in coords.values()])
    _save(fig, ax, path, f"{a} ({directions[a]} is better)", f"{b} ({directions[b]} is better)",
          f"{outcome.sweep.name}: Pareto front")


def _plots(outcome):
    """Draw every plot the sweep asks for; return markdown lines (images or why not)."""
    import matplotlib

    matplotlib.use("Agg")
    ok = [i for i, r in sorted(outcome.records.items()) if r["status"] == "ok"]
    lines = []
    for plot in outcome.sweep.plots:
        metrics = plot["pareto"] if "pareto" in plot else [plot["y"]]
        missing = [m for m in metrics if not ok or any(
            m not in outcome.records[i]["metrics"] for i in ok)]
        name = ("pareto_" + "_".join(metrics) if "pareto" in plot
                else f"{plot['y']}_vs_{plot['x']}")
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", name) + ".png"
        if missing:
            lines.append(f"- plot {name} not drawn: no {', '.join(missing)} in every "
                         f"finished point")
            continue
        if not _numeric([outcome.records[i]["metrics"][m] for i in ok for m in metrics]):
            lines.append(f"- plot {name} not drawn: {', '.join(metrics)} not numeric")
            continue
        if "pareto" in plot:
            _plot_pareto(outcome, plot, ok, outcome.out_dir / name)
        else:
            _plot_metric(outcome, plot, ok, outcome.out_dir / name)
        lines.append(f"![{name}]({name})")
    return lines


def write_report(outcome):
    """Write the CSV, markdown and JSON tables, failure logs and plots of ``outcome``."""
    sweep, out = outcome.sweep, outcome.out_dir
    out.mkdir(parents=True, exist_ok=True)
    metrics = columns(outcome)
    header = ["point", *sweep.swept, "status", *metrics]
    rows = _rows(outcome, metrics)
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows([[json.dumps(c) if isinstance(c, list) else c for c in row]
                          for row in rows])
    env = environment()
    (out / "results.json").write_text(json.dumps({
        "sweep": sweep.name, "block": sweep.block, "measurement": sweep.measurement.name,
        "options": sweep.options, "seed": sweep.seed, "synthesis": sweep.synthesis,
        "fpga": sweep.fpga,
        "interrupted": outcome.interrupted, "environment": env,
        "points": [{"index": p.index, "config": p.config.to_dict(),
                    **outcome.records.get(p.index, {"status": "not run", "values": p.values})}
                   for p in sweep.points]}, indent=1) + "\n")
    failures = []
    for i in outcome.failed:
        (out / "failures").mkdir(exist_ok=True)
        record = outcome.records[i]
        log = out / "failures" / f"point{i}.log"
        log.write_text(f"{sweep.points[i].label}\n{record['error']}\n\n{record.get('log', '')}")
        failures.append(f"- point {i} ({sweep.points[i].label}): {record['error']} "
                        f"(log: failures/{log.name})")
    done = len(outcome.records)
    stored = sum(bool(r.get("cached")) for r in outcome.records.values())
    text = "\n".join([
        f"# Sweep {sweep.name}", "",
        f"Block `{sweep.block}`, measurement `{sweep.measurement.name}` "
        f"({sweep.measurement.summary}), options {json.dumps(sweep.options)}, seed "
        f"{sweep.seed}, synthesis {'on' if sweep.synthesis else 'off'}, FPGA place and route "
        f"{'on' if sweep.fpga else 'off'}.", "",
        f"Measured on {environment_line(env)}.", "",
        f"{done} of {len(sweep.points)} points finished ({stored} from the result store, "
        f"{len(outcome.failed)} failed)" + ("; interrupted." if outcome.interrupted else "."),
        "", table(header, [[_cell(c) for c in row] for row in rows]), "",
        *(["## Failures", "", *failures, ""] if failures else []),
        "## Plots", "", *_plots(outcome), ""])
    (out / "results.md").write_text(text)
    return text
