"""HBM controller measurements for ``make bench``: efficiency per traffic pattern against the
bound derived from the timing, refresh overhead, and tool cost; writes docs/results/hbm.md.

Efficiency = data-bus busy cycles / (elapsed cycles x pseudo-channels), elapsed from the first
request offered to the last response, traffic at saturation (the lean AXI driver in
verification/tb/hbm.py keeps requests valid and responses ready), the device model checking
every command and the read data checked against the golden memory.
"""

import statistics

from hdl.generate import generate
from hdl.hbm.config import BENCH_CONFIG, STREAM_CONFIG, HBMConfig
from sim.measure import (
    REPEATS,
    environment,
    environment_line,
    measure,
    median_seconds,
    table,
    write_results,
)
from sim.runner import build

__all__ = ["measure_pattern", "bound", "bench"]

LITEDRAM = {"seq_read": "96.5%", "row_walk": "47.6%"}


def bound(cfg, pattern, refresh_share=0.0):
    """Best efficiency the timing allows for ``pattern``, with the reason.

    ``refresh_share``: fraction of the run the pseudo-channels spent in tRFC (forced REFs per
    pseudo-channel x tRFC / cycles), during which no data moves. Refreshes done early in idle
    time (a pseudo-channel that finished its share of the pattern first) cost nothing and are
    not counted.

    Sequential and streaming: the data bus can be busy every cycle (tCCD_S = BL/2, bank groups
    alternate, ACTs hide behind data). Random single accesses (every one a row miss): one ACT
    per access, at most one per max(tRRD_S, tFAW/4, tRC/banks) cycles, each worth BL/2 busy
    cycles; the 2:1 mix also pays the read/write turnarounds of its write batches
    (write_high - write_low writes per batch), which fit in the ACT-bound idle time when the
    batch is long enough. Row walk: a row of 2**col_bits reads in one bank group (tCCD_L
    apart), then PRE and ACT of the next row in the same bank.
    """
    t = cfg.timing
    keep = 1 - refresh_share
    if pattern in ("seq_read", "seq_write", "stream"):
        return keep, "data bus every cycle, less tRFC per REF"
    if pattern in ("rand_read", "rand_mix"):
        gap = max(t.rrd_s, t.faw / 4, t.rc / cfg.banks)
        why = (f"one ACT per {gap:g} cycles (tRRD_S {t.rrd_s}, tFAW/4 {t.faw / 4:g}, "
               f"tRC/banks {t.rc / cfg.banks:g})")
        if pattern == "rand_read":
            return keep * t.burst_cycles / gap, why
        # Batches of b = write_high - write_low writes and 2b reads. Data-bus idle per batch:
        # read data to write data 1 cycle (RD to WR CL + 3 - CWL), write data to read data
        # tWTR_L + CL (WR to RD CWL + 2 + tWTR_L, then CL to the data), worst case same group.
        b = cfg.write_high - cfg.write_low
        turn = (t.rd_to_wr + t.cwl - t.cl - t.burst_cycles) + (t.wr_to_rd_l + t.cl - t.cwl
                                                               - t.burst_cycles)
        acts, data = 3 * b * gap, 3 * b * t.burst_cycles + turn
        return keep * 3 * b * t.burst_cycles / max(acts, data), (
            f"batch of {b} writes + {2 * b} reads: max({acts:g} ACT cycles, "
            f"{3 * b * t.burst_cycles} data + {turn} turnaround cycles); {why}")
    if pattern == "row_walk":
        n = 1 << cfg.col_bits
        cycle = max(t.rc, t.rcd_rd + (n - 1) * t.ccd_l + t.rtp + t.rp)
        return keep * n * t.burst_cycles / cycle, f"{n} reads per {cycle}-cycle row cycle"
    raise ValueError(pattern)


def measure_pattern(cfg, pattern, accesses, *, seed=1):
    """One pattern at saturation on ``cfg``: the testbench's counters, with ``efficiency``
    (data-bus busy / elapsed x pseudo-channels) and ``refresh_share`` (forced tRFC time)."""
    done = measure("hbm", cfg, "verification.tb.hbm", "measure",
                   {"pattern": pattern, "accesses": accesses}, seed=seed)
    r = done["report"]
    if pattern == "row_walk":       # one pseudo-channel only
        pcs, busy, refs = 1, r["data_busy_per_pc"][0], r["forced_refs_per_pc"][0]
    else:
        pcs, busy, refs = cfg.pseudo_channels, r["data_busy"], r["forced_refs"]
    r["efficiency"] = busy / (r["cycles"] * pcs)
    r["refresh_share"] = refs / pcs * cfg.timing.rfc / r["cycles"]
    r["build_seconds"] = done["build_seconds"]
    return r


def _changes(cfg):
    default = HBMConfig().to_dict()
    return ", ".join(f"{k}={v!r}" for k, v in cfg.to_dict().items() if default[k] != v)


def bench(quick=False):
    """Efficiency per pattern, refresh overhead and tool cost; writes docs/results/hbm.md and
    hbm.json."""
    env = environment()
    scale = 1 if quick else 5
    seq = 4096 * scale
    patterns = [
        (BENCH_CONFIG, "seq_read", seq), (BENCH_CONFIG, "seq_write", seq),
        (BENCH_CONFIG, "rand_read", 1000 * scale), (BENCH_CONFIG, "rand_mix", 1000 * scale),
        (STREAM_CONFIG, "stream", 2 * seq), (BENCH_CONFIG, "row_walk", 256 * scale),
    ]
    rows, data = [], []
    for cfg, pattern, n in patterns:
        r = measure_pattern(cfg, pattern, n)
        b, why = bound(cfg, pattern, r["refresh_share"])
        rows.append([
            pattern, f"{cfg.pseudo_channels} PC, {cfg.ports} port", n, r["cycles"],
            f"{100 * r['efficiency']:.1f}%", f"{100 * b:.1f}%",
            f"{100 * r['efficiency'] / b:.1f}%", LITEDRAM.get(pattern, ""), why,
        ])
        pcs = 1 if pattern == "row_walk" else cfg.pseudo_channels
        peak = pcs * cfg.access_bytes / cfg.timing.burst_cycles
        data.append({"pattern": pattern, "pseudo_channels": pcs, "ports": cfg.ports,
                     "accesses": n, "cycles": r["cycles"], "efficiency": r["efficiency"],
                     "bound": b, "bound_from": why, "peak_bytes_per_cycle": peak,
                     "bytes_per_cycle": r["efficiency"] * peak,
                     "refresh_share": r["refresh_share"]})
        print(rows[-1], flush=True)

    # Refresh overhead: sequential reads over many tREFI, refresh on and off. A run owes up to
    # refresh_postpone refreshes at its end, so the steady state is the difference of two runs.
    n = 4 * BENCH_CONFIG.timing.refi * (1 if quick else 5)
    off_cfg = HBMConfig(**{**BENCH_CONFIG.to_dict(), "refresh": False})
    t = BENCH_CONFIG.timing
    ref_rows, ref_data, runs = [], [], []
    for k in (n, 2 * n):
        on = measure_pattern(BENCH_CONFIG, "seq_read", k)
        off = measure_pattern(off_cfg, "seq_read", k)
        runs.append((on, off))
        ref_rows.append([k, on["cycles"], f"{100 * on['efficiency']:.2f}%", off["cycles"],
                         f"{100 * off['efficiency']:.2f}%",
                         f"{100 * (off['efficiency'] - on['efficiency']):.2f} points",
                         f"{100 * t.rfc / t.refi:.2f}%", on["refs"]])
        ref_data.append({"accesses": k, "cycles_refresh": on["cycles"],
                         "efficiency_refresh": on["efficiency"], "cycles_no_refresh":
                         off["cycles"], "efficiency_no_refresh": off["efficiency"],
                         "refs": on["refs"]})
        print(ref_rows[-1], flush=True)
    (on1, off1), (on2, off2) = runs
    extra_on, extra_off = on2["cycles"] - on1["cycles"], off2["cycles"] - off1["cycles"]
    steady = 1 - extra_off / extra_on
    refs = (on2["refs"] - on1["refs"]) / BENCH_CONFIG.pseudo_channels
    steady_rows = [[f"{n} -> {2 * n}", extra_on, extra_off, f"{100 * steady:.2f} points",
                    f"{refs:g}", f"{refs * t.refi / extra_on:.2f}",
                    f"{100 * t.rfc / t.refi:.2f}%"]]
    steady_data = [{"accesses": [n, 2 * n], "extra_cycles_refresh": extra_on,
                    "extra_cycles_no_refresh": extra_off, "overhead": steady,
                    "refs_per_pc": refs, "rfc_over_refi": t.rfc / t.refi}]

    cost_rows, cost_data = [], []
    for cfg in ([BENCH_CONFIG] if quick else [HBMConfig(), STREAM_CONFIG, BENCH_CONFIG]):
        gen = median_seconds(lambda cfg=cfg: generate("hbm", cfg))
        design = generate("hbm", cfg)
        builds = [build(design, force=True).seconds for _ in range(1 if quick else REPEATS)]
        cost_rows.append([f"{cfg.pseudo_channels} PC, {cfg.ports} port, queue "
                          f"{cfg.queue_depth}", f"{gen:.1f}",
                          f"{statistics.median(builds):.1f}",
                          " / ".join(f"{b:.1f}" for b in builds)])
        cost_data.append({"config": cfg.to_dict(), "generate_seconds": gen,
                          "build_seconds": statistics.median(builds), "builds_seconds": builds})
        print(cost_rows[-1], flush=True)

    eff = table(["pattern", "configuration", "accesses", "cycles", "efficiency", "bound",
                 "of bound", "LiteDRAM", "bound from"], rows)
    ref = table(["accesses", "cycles (refresh)", "efficiency", "cycles (no refresh)",
                 "efficiency", "overhead", "tRFC/tREFI", "REFs"], ref_rows)
    ref_steady = table(["window, accesses", "cycles (refresh)", "cycles (no refresh)",
                        "overhead", "REFs per PC", "REFs per tREFI", "tRFC/tREFI"],
                       steady_rows)
    cost = table(["configuration", "generate, s (median)", "Verilator build, s (median)",
                  "builds, s"], cost_rows)
    tim = BENCH_CONFIG.timing
    text = f"""# HBM controller benchmark results

Measured by `make bench` on {environment_line(env)}.

Configuration (`BENCH_CONFIG` in `hdl/hbm/config.py`, differences from the defaults):
{_changes(BENCH_CONFIG)}; stream: {_changes(STREAM_CONFIG)}.

HBM2-{BENCH_CONFIG.speed} timing ({BENCH_CONFIG.density_gb} Gb: tRFC {tim.rfc}, tREFI
{tim.refi} cycles), 32 B per access, 2 data cycles per access. Efficiency = data-bus busy
cycles / (elapsed cycles x pseudo-channels), elapsed from the first request offered to the last
response, at saturation; every command checked by the device model, every read checked against
the golden memory. Row walk counts the one pseudo-channel it uses. Patterns:
seq_read / seq_write: 32-beat bursts over a contiguous region; rand_read: 32 B reads at random
addresses over the whole capacity (row misses); rand_mix: 64 B at random distinct addresses,
2 reads : 1 write; stream: two ports each reading its own region, 4 pseudo-channels, XOR bank
hashing; row_walk:
reads in column order, one row after another in one bank (LiteDRAM's "walking rows" anchor).
The bound comes from the timing (see `sim/hbm_perf.py:bound`), less the tRFC of the refreshes
that fell in the run.

{eff}

## Refresh overhead

Sequential reads, all-bank refresh on and off (`refresh=False`, measurement only).

{ref}

A run ends with up to `refresh_postpone` refreshes still owed, so a single run understates the
cost. The steady state is the difference between the two runs: the extra cycles the second
run's extra accesses took, with refresh and without.

{ref_steady}

## Tool cost

Generation (Python + Yosys) and Verilator build (verilate + C++ compile) wall times,
medians of {1 if quick else REPEATS} runs; builds forced.

{cost}
"""
    tables = {"patterns": data, "refresh": ref_data, "refresh_steady": steady_data,
              "tool_cost": cost_data}
    write_results("hbm", text, tables, env, quick)
