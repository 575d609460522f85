"""ICI measurements for ``make bench ici``: latency against offered load and saturation
throughput of uniform random traffic on 4x4 and 8x8 tori with 2 and 4 VCs, 1- and 4-flit
packets, beside the ideal bound and BookSim's figures (../shared/reference/ici.md); a PNG plot
of latency against load; generation and build cost."""

from hdl.generate import generate
from hdl.ici.config import ICIConfig, ICIHarnessConfig
from sim.measure import (
    environment,
    environment_line,
    measure,
    median_seconds,
    results_directory,
    table,
    write_results,
)
from verification.models.ici import average_hops, ideal_throughput, zero_load_latency

__all__ = ["sweep", "bench", "BOOKSIM_8X8_TORUS", "NETWORKS"]

BOOKSIM_8X8_TORUS = {2: "~0.26", 4: "0.50-0.55", 8: "~0.68"}
"""BookSim 2 saturation, 8x8 torus, DOR + dateline, uniform, 1-flit packets, 8-flit VC
buffers (flits/node/cycle), from ../shared/reference/ici.md."""

# Source-queue entry and preparation in the harness's generator: a packet created in cycle t
# is offered on the injection port at t + 2 at zero load.
GENERATOR_CYCLES = 2


def bench_config(dims, vcs):
    return ICIHarnessConfig(ici=ICIConfig(dims=dims, vcs=vcs, buffer_depth=8, max_packet=4))


WARMUP = 1000


def sweep(cfg, length, loads, *, warmup=WARMUP, window=5000, seed=1):
    """Measured points (dicts) of one latency-vs-load curve, the build's seconds and the
    simulated cycles per second. A curve already measured on the same build (same Verilog
    hash) with the same loads, windows and seed is read back (the simulation is
    deterministic, and an 8x8 sweep costs many minutes)."""
    spec = {"length": length, "loads": loads, "warmup": warmup, "window": window}
    done = measure("ici_harness", cfg, "verification.tb.ici", "measure_load", spec, seed=seed,
                   reuse=True)
    cycles = len(loads) * (warmup + window)
    return done["report"], done["build_seconds"], cycles / done["run_seconds"]


def _saturation(points):
    """Highest accepted throughput of the sweep (accepted load stops following offered)."""
    return max(p["accepted"] for p in points)


def _plot(curves, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nets = sorted({c["net"] for c in curves}, key=lambda n: len(n))
    fig, axes = plt.subplots(1, len(nets), figsize=(6 * len(nets), 4.5), squeeze=False)
    for ax, net in zip(axes[0], nets, strict=True):
        for c in (c for c in curves if c["net"] == net):
            pts = c["points"]
            ax.plot([p["accepted"] for p in pts], [p["latency"] for p in pts], marker="o",
                    ms=3, label=f"{c['vcs']} VCs, {c['length']}-flit packets")
            bound = c["ideal"]
        ax.axvline(bound, color="grey", ls="--", lw=1, label=f"ideal bound {bound:.2f}")
        ax.set_ylim(0, 150)
        if net == "8x8":
            for vcs, x in ((2, 0.26), (4, 0.525)):
                ax.axvline(x, color="red", ls=":", lw=1)
                ax.text(x, 135, f" BookSim {vcs} VCs", color="red",
                        fontsize=8)
        ax.set_xlabel("accepted throughput (flits/node/cycle)")
        ax.set_ylabel("mean packet latency (cycles)")
        ax.set_title(f"{net} torus, uniform random, 8-flit VC buffers")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


NETWORKS = [((8, 8), 4), ((4, 4), 2), ((4, 4), 4), ((8, 8), 2)]
"""(dims, VCs) of the full sweep; the BookSim comparison (8x8, 4 VCs) first, so a sweep cut
short still has its key point."""


def bench(quick=False, networks=None):
    """Latency vs load, saturation, zero-load latency and tool cost; docs/results/ici.md and
    ici.json. ``networks``: a subset of NETWORKS to measure (default: all of them)."""
    env = environment()
    networks = networks or ([((4, 4), 2)] if quick else NETWORKS)
    lengths = [1] if quick else [1, 4]
    loads = [0.05, 0.3, 0.6, 1.0] if quick else [0.02, 0.1, 0.3, 0.5, 0.6, 0.7, 0.8, 1.0]
    window = 2000 if quick else 4000
    curves, sat_rows, sat_data, cost_rows = [], [], [], []
    skipped = [f"{'x'.join(map(str, d))} torus with {v} VCs" for d, v in NETWORKS
               if (d, v) not in networks and not quick]
    for dims, vcs in networks:
        net = "x".join(map(str, dims))
        cfg = bench_config(dims, vcs)
        speed = None
        for length in lengths:
            points, build_s, speed = sweep(cfg, length, loads, window=window)
            ideal = ideal_throughput(cfg.ici)
            hops = average_hops(cfg.ici)
            zl_model = GENERATOR_CYCLES + zero_load_latency(hops, length)
            curves.append({"net": net, "vcs": vcs, "length": length, "points": points,
                           "ideal": ideal})
            sat = _saturation(points)
            booksim = BOOKSIM_8X8_TORUS[vcs] if dims == (8, 8) and length == 1 else "-"
            sat_rows.append([f"{net} torus", vcs, length, f"{points[0]['latency']:.1f}",
                             f"{zl_model:.1f}", f"{sat:.3f}",
                             f"{points[-1]['accepted']:.3f}", f"{ideal:.2f}", booksim])
            sat_data.append({"dims": list(dims), "vcs": vcs, "packet_flits": length,
                             "saturation": sat, "ideal": ideal,
                             "zero_load_latency": points[0]["latency"],
                             "zero_load_model": zl_model, "points": points})
            print(sat_rows[-1], flush=True)
        if speed is not None:
            cost_rows.append([cfg.name, f"{build_s:.0f}", f"{speed:,.0f}"])
    curves.sort(key=lambda c: (len(c["net"]), c["net"], c["vcs"], c["length"]))
    sat_rows.sort(key=lambda r: (r[0], r[1], r[2]))
    cost_rows.sort()
    gen_rows = []
    for dims in ([(4, 4)] if quick else [(4, 4), (8, 8), (16, 16)]):
        cfg = ICIConfig(dims=dims, vcs=4)
        designs = []
        seconds = median_seconds(
            lambda cfg=cfg, designs=designs: designs.append(generate("ici", cfg)))
        size = len(designs[-1].verilog)
        gen_rows.append([cfg.name, f"{seconds:.1f}", f"{size / 1e6:.1f}"])
        print(gen_rows[-1], flush=True)

    out_dir = results_directory(quick)
    _plot(curves, out_dir / "ici_latency.png")
    curve_rows = []
    for c in curves:
        for p in c["points"]:
            curve_rows.append([f"{c['net']}", c["vcs"], c["length"], f"{p['load']:.2f}",
                               f"{p['offered']:.3f}", f"{p['accepted']:.3f}",
                               f"{p['latency']:.1f}"])
    sat = table(["network", "VCs", "packet flits", "zero-load latency (lowest load)",
                 "zero-load model", "saturation throughput", "accepted at offered 1.0",
                 "ideal bound", "BookSim 2 (8x8, 1 flit)"], sat_rows)
    points = table(["network", "VCs", "flits", "load set", "offered", "accepted",
                    "latency"], curve_rows)
    cost = table(["harness top", "Verilator build, s (one build)", "simulated cycles/s"],
                 cost_rows)
    gens = table(["network top", "generate, s (median of 3)", "Verilog, MB"], gen_rows)
    missing = f"\nNot measured in this run: {'; '.join(skipped)}.\n" if skipped else ""
    text = f"""# ICI benchmark results

Measured by `sim/ici_perf.py` (`make bench`) on {environment_line(env)}.

Uniform random traffic (every destination equally likely, the source included), from the
test harness's synthesizable generators (Bernoulli packet creation, 16-entry source queue) and
checkers (every packet checked); 8-flit buffers per VC, 64-bit flits, one local port per node.
Each load: {WARMUP} cycles of warm-up, then a {window}-cycle window. Offered and accepted
throughput in flits/node/cycle; latency = tail ejection - packet creation in cycles (source
queueing included, as BookSim counts it). Saturation throughput = the highest accepted
throughput of the sweep. The zero-load model is {GENERATOR_CYCLES} generator cycles +
2 + 2 x (average hops) + (flits - 1). Ideal bound: the busiest channel of uniform traffic (or
the injection port) at one flit per cycle, computed from the routes (8/k for a k x k torus,
capped at 1).
{missing}
![latency vs load](ici_latency.png)

## Saturation and zero-load latency

{sat}

## Every point

{points}

## Tool cost

{cost}

{gens}
"""
    write_results("ici", text, {"saturation": sat_data}, env, quick)
