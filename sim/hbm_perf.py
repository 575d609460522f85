"""HBM controller measurements for ``make bench``: efficiency per traffic pattern in the steady
state with refresh, against the bound derived from the timing (row command bus included), for
the HBM2, HBM2E and HBM3 presets, and tool cost; writes docs/results/hbm.md and hbm.json, and a
command trace of every run to build/bench/hbm/.

Efficiency = data-bus busy cycles / (cycles x pseudo-channels), traffic at saturation (the lean
AXI driver keeps requests valid and responses ready), the device model checking every command
and the read data checked against the golden memory. Every run is long enough for the steady
state with refresh: a warm-up of ``refresh_postpone + 1`` tREFI (a run starts with no refresh
owed, so for its first 8 tREFI the controller can postpone every refresh and would look
refresh-free), then a measured window of exactly ``WINDOW_REFI`` tREFI (so it holds as many
refresh intervals as the long run does, and no start-up or drain), with traffic still running
after it. The whole run's figure is reported beside it, never as the headline.
"""

import json
import math
import statistics
from pathlib import Path

from hdl.generate import generate
from sim.measure import (
    REPEATS,
    RESULTS,
    environment,
    environment_line,
    measure,
    median_seconds,
    results_directory,
    table,
    write_results,
)
from sim.runner import BUILD, ROOT, build
from spec.hbm import BENCH_CONFIG, STREAM_CONFIG, HBMConfig
from verification.traffic.hbm import BLOCK, PATTERNS

__all__ = ["measure_pattern", "measured_rate", "bound", "bench", "render", "TRACES"]

LITEDRAM = {"seq_read": "96.5%", "row_walk": "47.6%"}
"""LiteDRAM's published efficiencies, set beside the HBM2 rows only (not the other presets')."""
WINDOW_REFI = 10
TRACES = BUILD / "bench" / "hbm"
SINGLE_PORT = tuple(p for p in PATTERNS if p != "stream")
"""The patterns measured on one port of the benchmark configuration (``stream`` runs on two
ports of its own configuration)."""
TARGETS = {"seq_read": ("efficiency", 0.92), "seq_read_refsb": ("efficiency", 0.95),
           "rand_read": ("of_bound", 0.90), "rand_mix": ("of_bound", 0.85)}


def _act_gap(cfg):
    """Cycles per ACT of one pseudo-channel when every access is a row miss: tRRD_S, tFAW / 4,
    tRC / banks, or its share of the channel's row bus (two cycles per ACT, one more per PRE
    unless auto-precharge closes the row; both pseudo-channels ask)."""
    t = cfg.timing
    row_bus = cfg.pcs_per_channel * (2 + (0 if cfg.page_policy == "closed" else 1))
    terms = {"tRRD_S": t.rrd_s, "tFAW/4": t.faw / 4, "tRC/banks": t.act_to_act / cfg.banks,
             "row bus": row_bus}
    gap = max(terms.values())
    return gap, ", ".join(f"{k} {v:g}" for k, v in terms.items())


def bound(cfg, pattern, refresh_share=0.0):
    """Best efficiency the timing allows for ``pattern``, with the reason.

    ``refresh_share``: fraction of the window each pseudo-channel spends in tRFC (REFs x tRFC /
    cycles), during which no data moves (per-bank refresh is assumed hidden: 0).

    Sequential and streaming: the data bus can be busy every cycle (tCCD_S = BL/2, bank groups
    alternate, ACTs hide behind data; the two pseudo-channels of a channel alternate on the
    column bus). Random single accesses (every one a row miss): one ACT per access, at most one
    per :func:`_act_gap` cycles, each worth BL/2 busy cycles; the 2:1 mix also pays the
    read/write turnarounds of its write batches (write_high - write_low writes per batch),
    which fit in the ACT-bound idle time when the batch is long enough. Random 512 B reads: the
    accesses of a block over its distinct (pseudo-channel, bank, row) triples, one ACT each,
    at the same ACT rate (the data bus at most every cycle). Row walk: a row of
    2**col_bits reads in one bank group (tCCD_L apart), then the next row of the same bank
    (auto-precharge on the last read: tRTP + tRP, or tRC / tRAS + tRP).
    """
    t = cfg.timing
    keep = 1 - refresh_share
    if pattern in ("seq_read", "seq_write", "stream"):
        return keep, "data bus every cycle, less tRFC per REF"
    if pattern in ("rand_read", "rand_mix"):
        gap, why = _act_gap(cfg)
        why = f"one ACT per {gap:g} cycles ({why})"
        if pattern == "rand_read":
            return keep * t.burst_cycles / gap, why
        # Batches of b = write_high - write_low writes and 2b reads. Data-bus idle per batch:
        # read data to write data rtw cycles, write data to read data tWTR_L + CL (WR to RD
        # CWL + BL/2 + tWTR_L, then CL to the data), worst case same group.
        b = cfg.write_high - cfg.write_low
        turn = t.rtw + (t.wr_to_rd_l + t.cl - t.cwl - t.burst_cycles)
        acts, data = 3 * b * gap, 3 * b * t.burst_cycles + turn
        return keep * 3 * b * t.burst_cycles / max(acts, data), (
            f"batch of {b} writes + {2 * b} reads: max({acts:g} ACT cycles, "
            f"{3 * b * t.burst_cycles} data + {turn} turnaround cycles); {why}")
    if pattern == "rand_read_512":
        gap, why = _act_gap(cfg)
        n = BLOCK // cfg.access_bytes
        acts = len({cfg.decode(a)[:3] for a in range(0, BLOCK, cfg.access_bytes)})
        return keep * min(1, n * t.burst_cycles / (acts * gap)), (
            f"{n} accesses per {acts} ACTs, one ACT per {gap:g} cycles ({why})")
    if pattern == "row_walk":
        n = 1 << cfg.col_bits
        # tRCD counts from the ACT's reference cycle and tRP to the next one's: it cancels.
        cycle = max(t.act_to_act, t.rcd_rd + (n - 1) * t.ccd_l + t.rtp + t.rp)
        return keep * n * t.burst_cycles / cycle, f"{n} reads per {cycle}-cycle row cycle"
    raise ValueError(pattern)


def _pcs(cfg, pattern):
    return 1 if pattern == "row_walk" else cfg.pseudo_channels


def _accesses(cfg, pattern, warmup):
    """Accesses that keep the pattern going past the warm-up and the window at its bound (a
    slower run only lasts longer)."""
    t = cfg.timing
    rate = bound(cfg, pattern)[0] * _pcs(cfg, pattern) / t.burst_cycles
    accesses = math.ceil(rate * (warmup + (WINDOW_REFI + 1) * t.refi))
    return -(-accesses // 64) * 64


def measure_pattern(cfg, pattern, label, *, seed=1):
    """One pattern at saturation on ``cfg``: the testbench's report with ``efficiency`` (the
    window), ``run_efficiency`` (the whole run), ``refresh_share`` and the trace's path."""
    t = cfg.timing
    warmup = (cfg.refresh_postpone + 1) * t.refi if cfg.refresh else 0
    accesses = _accesses(cfg, "seq_read" if pattern == "stream" else pattern, warmup)
    TRACES.mkdir(parents=True, exist_ok=True)
    trace = TRACES / f"{label}.trace"
    done = measure("hbm", cfg, "verification.tb.hbm", "measure",
                   {"pattern": pattern, "accesses": accesses, "warmup": warmup,
                    "window": WINDOW_REFI * t.refi, "trace": str(trace)}, seed=seed)
    r = done["report"]
    if r["window"] is None:
        raise RuntimeError(f"{label}: the traffic ended before the measurement window did")
    pcs = _pcs(cfg, pattern)
    window = r["window"]
    busy = window["data_busy_per_pc"][0] if pcs == 1 else window["data_busy"]
    run_busy = r["run"]["data_busy_per_pc"][0] if pcs == 1 else r["run"]["data_busy"]
    refs = window["refs"] / cfg.pseudo_channels
    return {**r, "label": label, "pcs": pcs, "warmup": warmup,
            "efficiency": busy / (window["cycles"] * pcs),
            "run_efficiency": run_busy / (r["cycles"] * pcs),
            "window_refi": window["cycles"] / t.refi,
            "refresh_share": refs * t.rfc / window["cycles"],
            "trace": str(trace.relative_to(ROOT)),
            "build_seconds": done["build_seconds"]}


def measured_rate(pattern, quick=False, who="bench"):
    """Steady-state bytes per cycle of ``pattern`` on ``BENCH_CONFIG``, and where it comes from:
    hbm.json's row (from a ``quick`` run when that is what is asked and it has the row), or,
    before the HBM benchmark has run, the same measurement made now (its trace named after
    ``who``)."""
    for found in (results_directory(quick) / "hbm.json", RESULTS / "hbm.json"):
        rows = json.loads(found.read_text())["tables"]["patterns"] if found.exists() else []
        row = next((r for r in rows if r["pattern"] == pattern), None)
        if row:
            return row["bytes_per_cycle"], (f"hbm.json {pattern}: {100 * row['efficiency']:.1f}%"
                                            f" of {row['peak_bytes_per_cycle']:g} B/cycle")
    r = measure_pattern(BENCH_CONFIG, pattern, f"{who}-{pattern}")
    peak = r["pcs"] * BENCH_CONFIG.access_bytes / BENCH_CONFIG.timing.burst_cycles
    return r["efficiency"] * peak, (f"sim/hbm_perf.py {pattern} measured for this run: "
                                    f"{100 * r['efficiency']:.1f}% of {peak:g} B/cycle")


def _preset(cfg):
    return f"{cfg.standard}-{cfg.speed}"


def _row(cfg, pattern, r):
    """The JSON row of one measurement."""
    b, why = bound(cfg, "seq_read" if pattern == "seq_read_refsb" else pattern,
                   r["refresh_share"])
    peak = r["pcs"] * cfg.access_bytes / cfg.timing.burst_cycles
    trace = Path(r["trace"])
    return {"pattern": pattern, "preset": _preset(cfg),
            "refresh": "per-bank" if cfg.per_bank_refresh else "all-bank",
            "pseudo_channels": r["pcs"], "ports": cfg.ports, "accesses": r["accesses"],
            "cycles": r["window"]["cycles"],
            "window_refi": r["window_refi"], "efficiency": r["efficiency"], "bound": b,
            "of_bound": r["efficiency"] / b, "bound_from": why, "run_cycles": r["cycles"],
            "run_efficiency": r["run_efficiency"], "peak_bytes_per_cycle": peak,
            "bytes_per_cycle": r["efficiency"] * peak, "refresh_share": r["refresh_share"],
            "refs": r["window"]["refs"], "refsbs": r["window"]["refsbs"],
            "acts": r["run"]["acts"], "auto_pres": r["run"]["auto_pres"],
            "pres": r["run"]["pres"],
            "trace": str(trace.relative_to(ROOT)) if trace.is_relative_to(ROOT) else trace.name}


def _md_row(js):
    """A table row (markdown) of a JSON row."""
    target = TARGETS.get(js["pattern"])
    verdict = ""
    if target:
        value = js["efficiency"] if target[0] == "efficiency" else js["of_bound"]
        verdict = (f">= {100 * target[1]:.0f}%{' of bound' if target[0] == 'of_bound' else ''}"
                   f": {'met' if value >= target[1] else 'NOT met'}")
    return [js["pattern"], f"{js['accesses']}", f"{js['cycles']}", f"{js['window_refi']:.0f}",
            f"{100 * js['efficiency']:.1f}%", f"{100 * js['bound']:.1f}%",
            f"{100 * js['of_bound']:.1f}%", f"{100 * js['run_efficiency']:.1f}%", verdict,
            LITEDRAM.get(js["pattern"], "") if js["preset"].startswith("HBM2-") else "",
            js["bound_from"]]


HEADER = ["pattern", "accesses", "window, cycles", "window, tREFI", "efficiency (steady)",
          "bound", "of bound", "whole run", "target", "LiteDRAM", "bound from"]


def _changes(cfg):
    default = HBMConfig().to_dict()
    return ", ".join(f"{k}={v!r}" for k, v in cfg.to_dict().items() if default[k] != v)


def _runs(quick):
    """(table, configuration, pattern, label) of every run."""
    presets = [BENCH_CONFIG.replace(standard="HBM2E", speed="3600"),
               BENCH_CONFIG.replace(standard="HBM3", speed="6400")]
    runs = [("patterns", BENCH_CONFIG, p, f"hbm2-2000-{p}") for p in SINGLE_PORT]
    runs.append(("patterns", STREAM_CONFIG, "stream", "hbm2-2000-stream"))
    runs.append(("patterns", BENCH_CONFIG.replace(per_bank_refresh=True), "seq_read_refsb",
                 "hbm2-2000-seq_read-refsb"))
    for cfg in presets:
        name = _preset(cfg).lower()
        runs += [("presets", cfg, p, f"{name}-{p}") for p in SINGLE_PORT]
        runs.append(("presets", cfg.replace(per_bank_refresh=True), "seq_read_refsb",
                     f"{name}-seq_read-refsb"))
    if quick:
        runs = [r for r in runs if r[2] in ("seq_read", "rand_read") and r[0] != "presets"]
    return runs


def _tool_cost(quick, repeats):
    """``repeats`` forced builds of each configuration (the benchmark one alone with
    ``quick``)."""
    data = []
    for cfg in ([BENCH_CONFIG] if quick else [HBMConfig(), STREAM_CONFIG, BENCH_CONFIG]):
        gen = median_seconds(lambda cfg=cfg: generate("hbm", cfg))
        design = generate("hbm", cfg)
        builds = [build(design, force=True).seconds for _ in range(repeats)]
        data.append({"config": cfg.to_dict(), "generate_seconds": gen,
                     "build_seconds": statistics.median(builds), "builds_seconds": builds})
        print(data[-1], flush=True)
    return data


def bench(quick=False, repeats=REPEATS):
    """Every run of :func:`_runs`, and tool cost (``repeats`` forced builds); writes
    docs/results/hbm.json and its page hbm.md."""
    env = environment()
    js = {}
    for tab, cfg, pattern, label in _runs(quick):
        if quick:
            cfg = cfg.replace(refresh_postpone=1)
        r = measure_pattern(cfg, "seq_read" if pattern == "seq_read_refsb" else pattern, label)
        js.setdefault(tab, []).append(_row(cfg, pattern, r))
        print(js[tab][-1], flush=True)
    repeats = 1 if quick else repeats
    write_results("hbm", {**js, "tool_cost": _tool_cost(quick, repeats)}, env, render, quick)


def render(data):
    """The results page (markdown) of the benchmark's JSON ``data``."""
    t = BENCH_CONFIG.timing
    tables, quick = data["tables"], data.get("quick", False)
    repeats = len(tables["tool_cost"][0]["builds_seconds"])
    presets = table(["preset", *HEADER], [
        [r["preset"] + (" (derived timing)" if r["preset"].startswith("HBM2E") else ""),
         *_md_row(r)] for r in tables.get("presets", [])])
    cost_rows = [[f"{c['pseudo_channels']} PC, {c['ports']} port, queue {c['queue_depth']}",
                  f"{r['generate_seconds']:.1f}", f"{r['build_seconds']:.1f}",
                  " / ".join(f"{b:.1f}" for b in r["builds_seconds"])]
                 for r in tables["tool_cost"] for c in [r["config"]]]
    env = data["environment"]
    return f"""# HBM controller benchmark results

Measured by `make bench` on {environment_line(env)}.{" Quick (smoke) run." if quick else ""}

Configuration (`BENCH_CONFIG` in `spec/hbm.py`, differences from the defaults):
{_changes(BENCH_CONFIG)}; stream: {_changes(STREAM_CONFIG)}. One channel of two
pseudo-channels sharing its row and column command buses (four pseudo-channels, two channels,
for the stream).

HBM2-{BENCH_CONFIG.speed} timing ({BENCH_CONFIG.density_gb} Gb: tRFC {t.rfc}, tREFI {t.refi}
cycles; an ACT's bank timings count from its {t.act_reference_cycle} cycle), 32 B per access,
2 data cycles per access. Efficiency = data-bus busy cycles / (cycles
x pseudo-channels) at saturation; every command checked by the device model, every read checked
against the golden memory. **Steady state**: each run starts with a warm-up of
refresh_postpone + 1 = 9 tREFI (the controller may postpone up to 8 refreshes, so a shorter run
looks refresh-free), then the measured window of exactly {WINDOW_REFI} tREFI, with traffic
going on after it ("whole run" is the figure from the first request to the last response, for
comparison). Row walk counts
the one pseudo-channel it uses. Patterns: seq_read / seq_write: 32-beat bursts over a
contiguous region; seq_read_refsb: the same with per-bank refresh (REFSB); rand_read: 32 B
reads at random addresses over the whole capacity (row misses); rand_read_512: 512 B bursts at
random 512 B-aligned addresses (the SparseCore's 512 B embedding rows); rand_mix: 64 B at random
distinct addresses, 2 reads : 1 write; stream: two ports each reading its own region, 4
pseudo-channels, XOR bank hashing; row_walk: reads in column order, one row after another in one
bank (LiteDRAM's "walking rows" anchor). The bound comes from the timing, the row command bus
included (see `sim/hbm_perf.py:bound` and docs/hbm.md), less the tRFC of the all-bank
refreshes in the window. Command traces of every run: `build/bench/hbm/<run>.trace` (format in
docs/hbm.md).

{table(HEADER, [_md_row(r) for r in tables.get("patterns", [])])}

## HBM2E and HBM3

`BENCH_CONFIG` with the HBM2E-3600 and HBM3-6400 presets (timings and their sources in
`spec/hbm.py`); the same patterns, the same steady-state window. HBM2E timings are not
published: every HBM2E-3600 figure here rests on HBM2-2000's timings in nanoseconds at the
faster clock (docs/hbm.md, "Timing").

{presets}

## Tool cost

Generation (Python + Yosys) and Verilator build (verilate + C++ compile) wall times,
medians of {repeats} runs; builds forced.

{table(["configuration", "generate, s (median)", "Verilator build, s (median)", "builds, s"],
       cost_rows)}
"""

