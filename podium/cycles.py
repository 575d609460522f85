"""An analytic cycle model of a compiled GEMM on the chip, written from the design's timing
(docs/tensorcore.md, docs/mxu.md) before any GEMM was measured on the RTL; the TensorCore
benchmark (sim/tensorcore_perf.py) sets it beside the measured cycles.

The program (podium/compiler.py) runs a grid of steps; at step ``t`` the MXU computes while
the DMA fetches the blocks of step ``t + 1`` (double buffering) and stores finished C tiles.

* MXU: a ``matmul`` of ``m x k x n`` streams ``ceil(k/rows) * ceil(n/cols)`` folds of
  ``max(m, rows)`` activation vectors, one per cycle; consecutive commands stream without a
  gap (the MXU holds four and loads the next weights while it computes), so a step costs the
  sum of its folds' vectors. The first results leave ``rows + cols + 3`` cycles after the
  first vector (array latency and the accumulator's read-modify-write).
* DMA: a transfer of ``b`` bytes takes ``b / bw`` cycles at the memory's sustained rate
  ``bw`` (bytes per cycle; the HBM benchmark's sequential efficiency times its peak) after a
  first-beat latency ``latency`` (AR to the first R beat through the controller and the
  device, CL included).
* Step ``t``'s time is the larger of its MXU work and the DMA work that overlaps it (the loads
  of step ``t + 1`` and the store of a C tile finished at ``t - 1``); the first step's loads
  and the last tile's store are exposed, as are ``front`` cycles of the front end per step.
"""

import math
from dataclasses import dataclass

__all__ = ["GemmEstimate", "gemm_cycles"]


@dataclass(frozen=True)
class GemmEstimate:
    """The model's figures for one compiled GEMM."""

    cycles: int
    mxu_cycles: int         # cycles the MXU streams vectors (the sum over steps)
    dma_cycles: int         # cycles of DMA work, overlapped or not
    exposed_dma: int        # DMA cycles the MXU waits for
    vectors: int            # activation vectors into the MXU (the mxu_vectors counter)


def _steps(meta):
    """(i, j, kc) of every grid step, kc fastest, then j, then i (the compiler's order)."""
    mt, nt, kt = meta["grid"]
    return [(i, j, kc) for i in range(mt) for j in range(nt) for kc in range(kt)]


def gemm_cycles(program, *, bw, latency, front=40):
    """Estimate of a compiled GEMM ``program`` (podium.compiler.gemm) with the memory's
    sustained rate ``bw`` bytes/cycle and first-beat latency ``latency`` cycles."""
    cfg, meta = program.config, program.metadata
    R, C = cfg.mxu.rows, cfg.mxu.cols
    M, K, N = meta["M"], meta["K"], meta["N"]
    tm, tk, tn = meta["tiling"]
    mt, nt, kt = meta["grid"]
    chunk = cfg.row_bytes // cfg.osize
    beat = cfg.beat_bytes
    a, b = program.inputs["A"], program.inputs["B"]

    def extent(index, tile, total):
        return min(tile, total - index * tile)

    def transfer(nbytes):
        return latency + nbytes / bw

    steps = _steps(meta)
    mxu, loads, stores = [], [], []
    vectors = 0
    for i, j, kc in steps:
        rows = extent(i, tm, M)
        depth = extent(kc, tk, K)
        width = min(tn, math.ceil(N / chunk) * chunk - j * tn)
        folds = math.ceil(depth / R) * math.ceil(chunk / C) * (width // chunk)
        mxu.append(folds * max(rows, R))
        vectors += folds * rows
        fetch = 0.0
        if kt > 1 or j == 0:            # A (i, kc) changes at this step
            run = min(tk * cfg.esize, a.row_bytes - kc * tk * cfg.esize)
            fetch += transfer(rows * math.ceil(run / beat) * beat)
        if kt > 1 or nt > 1 or i == 0:  # B (kc, j) changes at this step
            run = min(tn * cfg.esize, b.row_bytes - j * tn * cfg.esize)
            fetch += transfer(depth * math.ceil(run / beat) * beat)
        loads.append(fetch)
        stores.append(transfer(rows * width * cfg.osize) if kc == kt - 1 else 0.0)
    total = loads[0] + R + C + 3
    exposed = loads[0]
    for t, work in enumerate(mxu):
        overlap = (loads[t + 1] if t + 1 < len(steps) else 0.0) + (stores[t - 1] if t else 0.0)
        step = max(work, overlap) + front
        exposed += max(0.0, overlap - work)
        total += step
    total += stores[-1]
    exposed += stores[-1]
    return GemmEstimate(cycles=round(total), mxu_cycles=sum(mxu),
                        dma_cycles=round(sum(loads) + sum(stores)),
                        exposed_dma=round(exposed), vectors=vectors)
