"""ICI measurements for ``make bench ici``: saturation of uniform random traffic as BookSim
defines it, beside the peak accepted rate, on 4x4 and 8x8 tori with 2 and 4 VCs and 1- and
4-flit packets; saturation against link latency; the router with its allocation registered;
simulation speed and build time of the 4x4, 8x8 and 16x16 harnesses; the router's logic depth
(sim/ici_synth.py). Writes docs/results/ici.md, ici.json and the latency-vs-load plot.

Saturation (BookSim's definition): the highest offered load at which the network is stable.
Every load runs on a freshly reset network with source queues deep enough never to refuse a
packet at a stable load (``SOURCE_QUEUE`` entries; a refusal in the window counts as unstable);
after ``WARMUP`` cycles a window of ``WINDOW`` cycles is measured. Stable: accepted throughput
within 2% of offered, mean latency (creation to tail ejection, source queueing included) at
most ``LATENCY_BOUND`` times the zero-load latency of the model, and no refusal. Loads: a
coarse grid of 0.1, then a grid of 0.02 between the last stable and the first unstable coarse
load. The peak accepted rate (the highest accepted throughput at any offered load, offered 1.0
included) is reported beside it and labelled as such.
"""

import json
import statistics

from sim.measure import (
    environment,
    environment_line,
    measure,
    results_directory,
    table,
    write_results,
    wrote,
)
from sim.runner import BUILD
from spec.ici import ICIConfig, ICIHarnessConfig
from verification.models.ici import average_hops, ideal_throughput, zero_load_latency

__all__ = ["bench", "render", "saturation", "bench_config", "run_loads", "stable", "NETWORKS",
           "BOOKSIM_8X8_TORUS", "LATENCY_BOUND", "SOURCE_QUEUE"]

BOOKSIM_8X8_TORUS = {2: "~0.26", 4: "0.50-0.55", 8: "~0.68"}
"""BookSim 2 saturation, 8x8 torus, DOR + dateline, uniform, 1-flit packets, 8-flit VC
buffers (flits/node/cycle): figures of BookSim 2 (Jiang et al., ISPASS 2013), not re-run
here; its fastest pipeline with
1-cycle links measured 0.64 with 4 VCs (issue 16)."""

TARGETS = {((8, 8), 4, 1): 0.64, ((8, 8), 4, 4): 0.58, ((8, 8), 2, 4): 0.40}
"""Issue 16's targets for stable saturation, 8x8 torus, 8-flit VC buffers."""

GENERATOR_CYCLES = 2
"""Source-queue entry and preparation in the harness's generator: a packet created in cycle t
is offered on the injection port at t + 2 at zero load."""

SOURCE_QUEUE = 1024
WARMUP = 2000
WINDOW = 8000
LATENCY_BOUND = 3
TOLERANCE = 0.02
COARSE = [round(0.1 * i, 2) for i in range(1, 11)]
ZERO_LOAD = 0.02

NETWORKS = [((8, 8), 4, 1), ((8, 8), 4, 3), ((8, 8), 2, 1), ((8, 8), 2, 3), ((4, 4), 4, 1),
            ((4, 4), 2, 1)]
"""(dims, VCs, allocator iterations) of the saturation table; the BookSim comparison (8x8,
4 VCs, one iteration as BookSim's default allocator) first."""

LINK_LATENCIES = [1, 8, 32]


def bench_config(dims, vcs, *, link_latency=1, buffer_depth=8, retry_depth=None, **params):
    """The harness of a benchmark network: 8-flit VC buffers unless told, packets up to 4
    flits, deep source queues, no fault injectors."""
    rtt = 2 * link_latency + 2
    retry = retry_depth or max(8, 1 << (rtt - 1).bit_length())
    return ICIHarnessConfig(ici=ICIConfig(dims=dims, vcs=vcs, buffer_depth=buffer_depth,
                                          max_packet=4, link_latency=link_latency,
                                          retry_depth=retry, **params),
                            source_queue=SOURCE_QUEUE)


def zero_load_model(cfg, length):
    """Zero-load latency from creation: generator cycles, the network's zero-load latency at
    the average hop count of uniform traffic, and the serialization of the body."""
    return GENERATOR_CYCLES + zero_load_latency(average_hops(cfg.ici), length,
                                                cfg.ici.link_latency, cfg.ici.switch_stage)


def run_loads(cfg, length, loads, *, seed=1, warmup=WARMUP, window=WINDOW):
    """Measured points (dicts) at ``loads``, each on a fresh network, and the build's wall
    seconds and CPU seconds (Verilator, C++ compiler; None when not recorded). Points measured
    before on the same build with the same spec are read back (the simulation is
    deterministic)."""
    spec = {"length": length, "loads": loads, "warmup": warmup, "window": window}
    done = measure("ici_harness", cfg, "verification.tb.ici", "measure_load", spec, seed=seed,
                   reuse=True)
    cpu = BUILD / "sim" / "verilator" / done["build"] / "build_cpu.json"
    return (done["report"], done["build_seconds"],
            json.loads(cpu.read_text()) if cpu.exists() else None)


def stable(point, bound):
    """BookSim's stability: accepted within 2% of offered, latency under the bound, no packet
    refused by a full source queue."""
    return (point["accepted"] >= (1 - TOLERANCE) * point["offered"]
            and point["latency"] <= bound and point["refused"] == 0)


def saturation(cfg, length, *, coarse=COARSE, seed=1, warmup=WARMUP, window=WINDOW):
    """Saturation search on ``cfg`` with ``length``-flit packets: every point, the stable
    saturation (the highest offered load of the grid at which the network is stable, every
    lower one stable too) with the accepted rate there, the peak accepted rate, zero-load
    latency (measured at offered 0.02, and the model), and tool figures."""
    bound = LATENCY_BOUND * zero_load_model(cfg, length)
    run = dict(seed=seed, warmup=warmup, window=window)
    points, build_s, build_cpu = run_loads(cfg, length, [ZERO_LOAD, *coarse], **run)
    first_bad = next((p["load"] for p in points[1:] if not stable(p, bound)), None)
    if first_bad is not None:
        last_good = max([ZERO_LOAD] + [p["load"] for p in points[1:]
                                       if p["load"] < first_bad])
        fine = [round(last_good + 0.02 * i, 2) for i in range(1, 50)
                if last_good + 0.02 * i < first_bad - 1e-9]
        if fine:
            points += run_loads(cfg, length, fine, **run)[0]
    points.sort(key=lambda p: p["load"])
    sat = None
    for p in points:
        if not stable(p, bound):
            break
        sat = p
    return {
        "points": points, "bound": bound,
        "saturation": sat["load"] if sat else 0.0,
        "saturation_accepted": sat["accepted"] if sat else 0.0,
        "peak": max(p["accepted"] for p in points),
        "zero_load_latency": points[0]["latency"],
        "zero_load_model": zero_load_model(cfg, length),
        "ideal": ideal_throughput(cfg.ici),
        "build_seconds": build_s, "build_cpu": build_cpu,
        "cycles_per_second": _speed(points),
    }


def _speed(points):
    """(median, lowest, highest) simulated cycles per second over ``points``."""
    speeds = [p["cycles"] / p["seconds"] for p in points]
    return statistics.median(speeds), min(speeds), max(speeds)


def _plot(curves, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nets = sorted({c["net"] for c in curves}, key=len)
    fig, axes = plt.subplots(1, len(nets), figsize=(6 * len(nets), 4.5), squeeze=False)
    for ax, net in zip(axes[0], nets, strict=True):
        for c in (c for c in curves if c["net"] == net):
            pts = c["points"]
            line, = ax.plot([p["offered"] for p in pts], [p["latency"] for p in pts],
                            marker="o", ms=3,
                            label=f"{c['vcs']} VCs, {c['length']}-flit, "
                                  f"{c['iters']} alloc. iter.: saturation "
                                  f"{c['saturation']:.2f}")
            ax.axvline(c["saturation"], color=line.get_color(), ls=":", lw=1)
            bound = c["ideal"]
        ax.axvline(bound, color="grey", ls="--", lw=1, label=f"ideal bound {bound:.2f}")
        ax.set_ylim(0, 150)
        ax.set_xlim(0, 1.02)
        ax.set_xlabel("offered load (flits/node/cycle)")
        ax.set_ylabel("mean packet latency (cycles)")
        ax.set_title(f"{net} torus, uniform random, 8-flit VC buffers")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    wrote(path)
    plt.close(fig)


def _net(dims):
    return "x".join(map(str, dims))


def _saturation_rows(curves):
    return [{"dims": list(c["dims"]), "vcs": c["vcs"], "alloc_iters": c["iters"],
             "packet_flits": c["length"],
             "saturation": c["saturation"],
             "saturation_accepted": c["saturation_accepted"], "peak": c["peak"],
             "ideal": c["ideal"],
             "zero_load_latency": c["zero_load_latency"],
             "zero_load_model": c["zero_load_model"], "latency_bound": c["bound"],
             "link_latency": 1, "target": TARGETS.get((c["dims"], c["vcs"], c["length"])),
             "points": c["points"]} for c in curves]


def _saturation_md(data):
    rows = []
    for c in data:
        # BookSim's figures are of its default allocator: beside one iteration only.
        booksim = BOOKSIM_8X8_TORUS[c["vcs"]] \
            if c["dims"] == [8, 8] and c["packet_flits"] == 1 and c["alloc_iters"] == 1 else "-"
        rows.append([f"{_net(c['dims'])} torus", c["vcs"], c["alloc_iters"], c["packet_flits"],
                     f"{c['zero_load_latency']:.1f}", f"{c['zero_load_model']:.1f}",
                     f"**{c['saturation']:.2f}** ({c['saturation_accepted']:.3f})",
                     f"{c['peak']:.3f}", f"{c['ideal']:.2f}",
                     f">= {c['target']}" if c["target"] else "-", booksim])
    return rows


def _link_latency(quick):
    """Saturation of the 8x8 torus (4 VCs, 1-flit packets) against link latency, with 8-flit
    VC buffers and with buffers sized to the credit round trip."""
    data = []
    latencies = [1, 4] if quick else LINK_LATENCIES
    dims = (4, 4) if quick else (8, 8)
    for latency in latencies:
        rtt = 2 * latency + 2
        for depth in sorted({8, max(8, 1 << (rtt - 1).bit_length())}):
            cfg = bench_config(dims, 4, link_latency=latency, buffer_depth=depth)
            c = saturation(cfg, 1)
            data.append({"dims": list(dims), "vcs": 4, "packet_flits": 1,
                         "link_latency": latency, "credit_round_trip": rtt,
                         "buffer_depth": depth, "saturation": c["saturation"],
                         "saturation_accepted": c["saturation_accepted"],
                         "peak": c["peak"], "zero_load_latency": c["zero_load_latency"],
                         "points": c["points"]})
            print(data[-1]["saturation"], flush=True)
    return data


def _link_md(data):
    return [[_net(r["dims"]), r["link_latency"], r["credit_round_trip"], r["buffer_depth"],
             f"{r['zero_load_latency']:.1f}",
             f"**{r['saturation']:.2f}** ({r['saturation_accepted']:.3f})", f"{r['peak']:.3f}"]
            for r in data]


def _stage_rows(quick):
    """The router with and without switch_stage: zero-load latency and saturation."""
    dims = (4, 4) if quick else (8, 8)
    data = []
    for stage in (False, True):
        cfg = bench_config(dims, 4, switch_stage=stage)
        for length in ([1] if quick else [1, 4]):
            c = saturation(cfg, length)
            data.append({"dims": list(dims), "vcs": 4, "packet_flits": length,
                         "switch_stage": stage, "saturation": c["saturation"],
                         "saturation_accepted": c["saturation_accepted"],
                         "peak": c["peak"], "zero_load_latency": c["zero_load_latency"],
                         "zero_load_model": c["zero_load_model"]})
            print(data[-1], flush=True)
    return data


def _stage_md(data):
    return [[_net(r["dims"]), "yes" if r["switch_stage"] else "no", r["packet_flits"],
             f"{r['zero_load_latency']:.1f}", f"{r['zero_load_model']:.1f}",
             f"**{r['saturation']:.2f}** ({r['saturation_accepted']:.3f})", f"{r['peak']:.3f}"]
            for r in data]


def _tool_rows(cost):
    data = []
    for name, (build_s, (speed, lo, hi), cpu) in sorted(cost.items(),
                                                        key=lambda kv: len(kv[0])):
        verilate, compile_ = cpu if cpu else (None, None)
        data.append({"top": name, "cycles_per_second": speed,
                     "cycles_per_second_range": [lo, hi], "build_seconds": build_s,
                     "build_cpu_verilator": verilate, "build_cpu_compiler": compile_})
    return data


def _tool_md(data):
    rows = []
    for r in data:
        verilate, compile_ = r["build_cpu_verilator"], r["build_cpu_compiler"]
        lo, hi = r["cycles_per_second_range"]
        rows.append([r["top"], f"{r['cycles_per_second']:,.0f}", f"{lo:,.0f} - {hi:,.0f}",
                     f"{r['build_seconds']:.0f}",
                     "-" if verilate is None else f"{verilate:.0f} + {compile_:.0f}",
                     "-" if verilate is None else f"{verilate + compile_ / 2:.0f}"])
    return rows


def _speed_runs(quick):
    """Simulated cycles/s of the 16x16 torus (Trillium's pod) harness at two loads, and of the
    8x8 torus harness at offered 0.1-0.5 built three ways: as the regression builds it (the
    router verilated once, as a library), flat (the router's code per instance), and flat
    with a model of 2 threads."""
    if quick:
        return {}
    out = {}
    eight = bench_config((8, 8), 4)
    light = [0.1, 0.2, 0.3, 0.4, 0.5]
    for cfg, loads in ((bench_config((16, 16), 4), [0.1, 0.4]),
                       (eight, light), (eight.replace(verilate="flat"), light),
                       (eight.replace(verilate="flat", sim_threads=2), light)):
        points, build_s, build_cpu = run_loads(cfg, 1, loads)
        name = f"{cfg.name} (offered {loads[0]}-{loads[-1]})"
        out[name] = (build_s, _speed(points), build_cpu)
        print(name, out[name], flush=True)
    return out


def bench(quick=False, networks=None):
    """Saturation (BookSim's definition) and peak, zero-load latency, saturation against link
    latency, the registered allocation, simulation speed and build time, logic depth;
    docs/results/ici.md, ici.json and ici_latency.png."""
    env = environment()
    curves, cost = _saturation_curves(networks or ([((4, 4), 4, 1)] if quick else NETWORKS),
                                      quick)
    sat_data = _saturation_rows(curves)
    link_data = _link_latency(quick)
    stage_data = _stage_rows(quick)
    cost.update(_speed_runs(quick))
    depth = _logic_depths()
    _plot(curves, results_directory(quick) / "ici_latency.png")
    tables = {"saturation": sat_data, "link_latency": link_data, "switch_stage": stage_data,
              "tool_cost": _tool_rows(cost),
              "logic_depth": [{"switch_stage": stage, "alloc_iters": iters, **v}
                              for (stage, iters), v in depth.items()]}
    write_results("ici", tables, env, render, quick)


def _saturation_curves(networks, quick):
    """The saturation search on each of ``networks`` ((dims, VCs, allocator iterations)) for
    each packet length, sorted by network and length, and each harness's tool figures (build
    seconds, simulation speed, build CPU) by name."""
    lengths = [1] if quick else [1, 4]
    coarse = [0.2, 0.5, 0.8, 1.0] if quick else COARSE
    curves, cost = [], {}
    for dims, vcs, iters in networks:
        cfg = bench_config(dims, vcs, alloc_iters=iters)
        for length in lengths:
            c = saturation(cfg, length, coarse=coarse)
            curves.append({"net": _net(dims), "dims": dims, "vcs": vcs, "iters": iters,
                           "length": length, **c})
            cost[cfg.name] = (c["build_seconds"], c["cycles_per_second"], c["build_cpu"])
            print(_net(dims), vcs, iters, length, c["saturation"], c["peak"], flush=True)
    curves.sort(key=lambda c: (c["dims"], c["vcs"], c["iters"], c["length"]))
    return curves, cost


def _logic_depths():
    """Logic depth (sim/ici_synth.py) of the 8x8 torus router, 4 VCs, with and without
    ``switch_stage``, with one and three allocator iterations: {(stage, iters): figures}."""
    from sim.ici_synth import logic_depth

    return {(stage, iters): logic_depth(ICIConfig(dims=(8, 8), vcs=4, max_packet=4,
                                                  switch_stage=stage, alloc_iters=iters))
            for stage, iters in ((False, 1), (True, 1), (False, 3), (True, 3))}


def _depth_rows(depth):
    """Table rows of the logic depths: the path shown by its two ends."""
    return [["yes" if d["switch_stage"] else "no", d["alloc_iters"], d["depth"],
             f"{d['cells']:,}", f"{d['flip_flops']:,}",
             " -> ".join(d["path"][:1] + d["path"][-1:])] for d in depth]


def _point_rows(curves):
    """Table rows of every measured point of the saturation curves, with its stability."""
    return [[_net(c["dims"]), c["vcs"], c["alloc_iters"], c["packet_flits"], f"{p['load']:.2f}",
             f"{p['offered']:.3f}", f"{p['accepted']:.3f}", f"{p['latency']:.1f}", p["refused"],
             "yes" if stable(p, c["latency_bound"]) else "no"]
            for c in curves for p in c["points"]]


def render(data):
    """The results page (markdown) of the benchmark's JSON ``data``."""
    t, env = data["tables"], data["environment"]
    sat_rows, link_rows, stage_rows = (_saturation_md(t["saturation"]),
                                       _link_md(t["link_latency"]), _stage_md(t["switch_stage"]))
    depth_rows, tool_rows = _depth_rows(t["logic_depth"]), _tool_md(t["tool_cost"])
    points = _point_rows(t["saturation"])
    return f"""# ICI benchmark results

Measured by `sim/ici_perf.py` (`make bench`) on {environment_line(env)}.

{__doc__.split(chr(10) + chr(10), 1)[1].strip()}

Uniform random traffic (every destination equally likely, the source included) from the test
harness's synthesizable generators and checkers (every packet checked), 64-bit flits, one local
port per node, packets of 1 or 4 flits. Offered and accepted throughput in flits/node/cycle.
Ideal bound: the busiest channel of uniform traffic (or the injection port) at one flit per
cycle, computed from the routes (8/k for a k x k torus, capped at 1).

![latency vs offered load](ici_latency.png)

## Saturation and zero-load latency

{table(["network", "VCs", "allocator iterations", "packet flits",
        "zero-load latency (offered 0.02)",
        "zero-load model", "saturation: highest stable offered load (accepted there)",
        "peak accepted rate", "ideal bound", "target (issue 16)",
        "BookSim 2 (8x8, 1 flit)"], sat_rows)}

## Saturation against link latency

4 VCs, 1-flit packets; buffers of 8 flits per VC, and buffers sized to the credit round trip
(`2 x link_latency + 2`, rounded up to a power of two); retry buffers sized likewise.

{table(["network", "link latency", "credit round trip", "buffer depth",
        "zero-load latency", "saturation (accepted)", "peak accepted"], link_rows)}

## Registered allocation (`switch_stage`)

{table(["network", "switch_stage", "packet flits", "zero-load latency", "zero-load model",
        "saturation (accepted)", "peak accepted"], stage_rows)}

Logic depth of the 8x8 torus router (4 VCs) from Yosys (`sim/ici_synth.py`: flattened, memories
as flip-flops, generic gates after ABC, `ltp -noff`; event counters left out):

{table(["switch_stage", "allocator iterations", "longest path, gates", "cells", "flip-flops",
        "path (from -> to)"],
       depth_rows)}

## Simulation speed and build cost

Simulated cycles per second: the median over the measured loads of the harness (uniform
traffic, generators and checkers running, no Python per cycle), wall time inside the
simulation; a harness named without loads is the saturation sweep's (offered 0.02-1.0,
saturated loads included), one with loads was run at those loads only, so the rows at
offered 0.1-0.5 compare the builds like for like. Build: wall seconds of the Verilator
build as it ran, and its CPU seconds (Verilator's conversion, single-threaded, + the C++
compiler over all jobs), whose sum with the compiler's share halved estimates the wall time
on 2 otherwise idle cores. Harness names ending `_flat` are built with the router's code once
per instance (`ICIHarnessConfig(verilate="flat")`), `_flat_t2` also as a Verilator model of 2
threads (`sim_threads=2`); the others as the regression builds them (one thread; above 16
routers the router verilated once, as a library).

{table(["harness top", "simulated cycles/s (median)", "lowest - highest", "build wall, s",
        "build CPU, s (Verilator + C++)",
        "build estimate on 2 idle cores, s"], tool_rows)}

## Every point

{table(["network", "VCs", "iterations", "flits", "load set", "offered", "accepted", "latency",
        "refused", "stable"], points)}
"""
