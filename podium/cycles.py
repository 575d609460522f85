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

:func:`timeline` models any program instead (the transformer operations of
podium/transformer.py, attention of podium/attention.py, the encoder of podium/encoder.py):
the golden ISA simulator's front end resolves the program's registers and branches into the
stream of instructions it dispatches, and a timeline plays that stream with the documented
cost of each instruction: the front end one instruction per cycle, stalling on a full queue;
each engine its queue in order; semaphores (a ``wait`` takes a count, a ``signal`` leaves
when its engine's earlier work is done, a DMA transfer's completion signals) the only
dependencies between engines. VPU: the passes of docs/tensorcore.md "VPU hardware", the
read-after-write wait, the function unit's latency, a ``vop``'s two sources in one VMEM bank
(the bank's read port serves the two readers in turn; :func:`two_source_stall` plays the
issue stage's lookahead and the readers' queues row by row). MXU: folds of ``max(m, rows)`` vectors
back to back. DMA: bursts walked one per cycle, data after the first-beat latency at the
sustained rate, completions in order. VMEM bank contention between the VPU's and the MXU's
reads: a second play, each command longer by the reads its bank's port could not serve in
the first. Not modelled: the DMA's VMEM traffic against the other engines, HBM refresh and
page misses beyond the sustained rate, the ICI queue. Measured agreement:
docs/tensorcore.md, "Cycle model".
"""

import functools
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


# ---------------------------------------------------------------------------------------
# Engine timeline: any program (transformer operations, attention, the encoder)

__all__ += ["Timeline", "timeline", "vpu_op_cycles", "attention_cycles", "model_columns", "HBM_BW",
            "FIRST_BEAT", "VPU_QUEUES", "two_source_stall"]

HBM_BW = 29.5
"""Sustained HBM bytes per cycle the chips' DMA gets (docs/results/hbm.json, ``seq_read``:
92.3% of 32 B/cycle; ``seq_write`` 29.4)."""
FIRST_BEAT = 60
"""DMA first-beat latency in cycles (AR to the first R beat; the GEMM model's)."""
VPU_QUEUES = {"uops": 4, "rows": 3, "addrs": 2}
"""The VPU's queues the two-source reads pass through (hdl/tensorcore/vpu.py ``UOP_DEPTH``,
``READ_DEPTH``; hdl/tensorcore/row_reader.py ``addr_depth``): passes between the issue
stage and the lanes, rows a reader holds (from its read to the cycle after the last pass
that uses the row), row indices waiting for a read port."""


@functools.lru_cache(maxsize=4096)
def two_source_stall(src1, src2, count, halves, bank_rows):
    """Cycles a ``vop`` of ``count`` rows reading rows ``src1 + i`` and ``src2 + i`` (row
    indices) takes beyond ``count * halves`` passes because its two reads meet on a VMEM
    bank's read port, which serves one read a cycle (round robin between the readers).

    The issue stage, the readers and the lanes in the RTL's timing: the issue stage starts
    a row's two reads with its first pass, at most ``uops`` passes ahead of the lanes, and
    only while both readers' index queues (``addrs``) have room; a reader sends a read to
    the port from the next cycle, only while its row queue has room for the answer (a row
    held from its read to the cycle after its last pass, ``rows`` of them); the row is at
    the queue's head two cycles after the read, when the lanes can execute its first pass.
    Played row by row on cycles relative to the unstalled schedule (row ``j``'s first pass
    at ``halves * j``, earlier rows on that schedule): fp32 rows whose reads share a bank
    cost two cycles (the port's bandwidth); bfloat16 rows' two passes would give the time,
    but a row's second read lands a cycle after its first and the issue stage is only two
    rows (four passes) ahead: five cycles every two rows, half a cycle a row more."""
    if halves not in (1, 2) or count <= 0:
        return 0
    banks1 = range((src1) // bank_rows, (src1 + count - 1) // bank_rows + 1)
    banks2 = range((src2) // bank_rows, (src2 + count - 1) // bank_rows + 1)
    if not set(banks1) & set(banks2):
        return 0
    uops, depth, addrs = VPU_QUEUES["uops"], VPU_QUEUES["rows"], VPU_QUEUES["addrs"]
    first = {}                      # row -> cycle of its first pass (earlier rows unstalled)
    reads = {}                      # row -> (cycle of its src1 read, of its src2 read)
    taken = set()                   # (bank, cycle) of the reads the ports served

    def execute(j):
        return first[j] if j >= 0 else halves * j

    def read_at(j):
        return reads[j] if j >= 0 else (halves * j - 2, halves * j - 2)

    def pass_at(k):
        return execute(k // halves) + k % halves

    issue = None
    for j in range(count):
        # the issue stage: room in the passes' queue (the pass `uops` back executed the
        # cycle before) and in both index queues (the read `addrs` back sent)
        issue = max(pass_at(j * halves - uops) + 1, max(read_at(j - addrs)) + 1,
                    -math.inf if issue is None else issue + halves)
        got = []
        for k, row in enumerate((src1 + j, src2 + j)):
            t = max(issue + 1, execute(j - depth) + halves, read_at(j - 1)[k] + 1)
            b = row // bank_rows
            while (b, t) in taken:
                t += 1
            taken.add((b, t))
            got.append(t)
        reads[j] = tuple(got)
        first[j] = max(max(got) + 2, execute(j - 1) + halves)
    return max(0, first[count - 1] - halves * (count - 1))


@dataclass(frozen=True)
class Timeline:
    """The engine timeline's figures for one program."""

    cycles: int             # the last engine done (STATUS.done)
    mxu_cycles: int         # cycles the MXU streams vectors
    vpu_passes: int         # VPU passes (the alu_pass event)
    vpu_busy: int           # cycles from a VPU command taken to its last row written
    dma_cycles: int         # cycles of DMA data transfer (bytes / bw)
    vectors: int            # activation vectors into the MXU
    dispatched: int         # queued instructions
    ici_cycles: int = 0     # cycles the ICI queue's collectives take (``ici`` given)


class _Trace:
    """The front end's instruction stream of ``program``, from the golden ISA simulator with
    the engines' data movement left out (the compilers' control flow reads registers only):
    a list of ``(queue, op, args)`` for each queued instruction, ``queue`` None for a scalar
    one."""

    def __init__(self, program):
        from podium.isasim import TensorCoreSim, schedule

        trace = self.items = []

        class Sim(TensorCoreSim):
            def _front_end_step(self):
                before = {q: len(v) for q, v in self.queues.items()}
                pc = self.pc
                super()._front_end_step()
                for q, entries in self.queues.items():
                    if len(entries) > before[q]:
                        e = entries[-1]
                        trace.append((q, e.op, e.args))
                        entries.pop()          # the engines never run: nothing to wait for
                        break
                else:
                    if self.pc != pc or self.halted:
                        trace.append((None, None, None))

            def _engine_ready(self, q):
                return False

        sim = Sim(program.config, hbm_capacity=1 << 12)
        sim.load(program.words)
        # a pod chip's front end alone: its engines (the ICI's too) never run, so the
        # program needs no PodSim here
        sim.begin()
        schedule([sim], sim.rng, 100_000_000)
        if sim.error.name != "NONE":
            raise ValueError(f"the program fails in the golden simulator: {sim.error.name}")


def timeline(program, *, bw=HBM_BW, latency=FIRST_BEAT, contention=True, ici=None):
    """The engine timeline of ``program``: the front end's instruction stream (one instruction
    per cycle, a queued one dispatched when its queue has room) and each engine executing
    its queue in order with the documented cost of each instruction, semaphores as the only
    dependencies between engines (docs/tensorcore.md, "Cycle model"). With ``contention``
    the timeline is played twice: the second time each VPU command and each ``matmul`` is
    longer by the cycles the two engines' reads of one VMEM bank overlapped in the first
    (a bank's read port is granted round robin: reads beyond one a cycle wait).

    ``ici``: on a pod chip (``config.ici``), the cycles of one ``ici.coll``, a function of
    its arguments (``coll``, ``dim``, ``fmt``, ``length``: the golden simulator's); the ICI
    queue then runs its entries in order like the other engines, every chip of the pod
    starting each collective together (an SPMD program: the same timeline on every chip).
    The pod's cost model is the caller's (sim/training_perf.py builds it from the
    collectives' alpha-beta model); without it a program with ICI instructions is refused."""
    items = _Trace(program).items
    if not contention:
        return _play(program, items, bw, latency, ici=ici)
    log = []
    _play(program, items, bw, latency, log=log, ici=ici)
    return _play(program, items, bw, latency, extra=_contention(log), ici=ici)


def _contention(log):
    """Extra cycles of each VPU command and each matmul (by their order) from the overlaps
    of their reads in one bank: over an overlap of ``L`` cycles where the VPU reads bank
    ``b`` at ``v`` rows a cycle and the MXU at ``m``, ``L (v + m - 1)`` reads more than the
    port serves, which both wait for."""
    vpu = [e for e in log if e[0] == "vpu"]
    mxu = sorted((e for e in log if e[0] == "mxu"), key=lambda e: e[2])
    extra = {"vpu": [0.0] * len(vpu), "mxu": [0.0] * len(mxu)}
    index = {id(e): i for i, e in enumerate(e for e in log if e[0] == "mxu")}
    starts = [e[1] for e in mxu]
    longest = max((e[2] - e[1] for e in mxu), default=0)
    import bisect
    for i, (_, a0, a1, va) in enumerate(vpu):
        lo = bisect.bisect_left(starts, a0 - longest)
        for e in mxu[lo:bisect.bisect_left(starts, a1)]:
            _, b0, b1, ma = e
            overlap = min(a1, b1) - max(a0, b0)
            if overlap <= 0:
                continue
            over = sum(max(0.0, va[b] + ma[b] - 1) for b in va.keys() & ma.keys())
            extra["vpu"][i] += overlap * over
            extra["mxu"][index[id(e)]] += overlap * over
    return extra


def _play(program, items, bw, latency, extra=None, log=None, ici=None):
    from spec.isa import VOPS, DType, Op, Queue, Src2, VOp

    cfg = program.config
    R, C = cfg.mxu.rows, cfg.mxu.cols
    levels = int(math.log2(cfg.lanes))
    depth = cfg.queue_depth
    counters = {"vpu": 0, "mxu": 0}
    func_latency = 9 - 1            # vmath.LATENCY: the row 8 cycles after a plain pass's
    bf16 = DType.BF16.value

    # per queue: the entries in order, each (dispatch time, op, args)
    engines = (Queue.DMA, Queue.MXU, Queue.VPU)
    if any(q == Queue.ICI for q, _, _ in items):
        if ici is None:
            raise ValueError("the program has ICI instructions: timeline(..., ici=cost) "
                             "needs the cycles of a collective")
        engines += (Queue.ICI,)
    queues = {q: [] for q in engines}
    started = {q: [] for q in queues}           # start time of each entry
    sems = [[] for _ in range(cfg.semaphores)]  # pending signal times (sorted)

    def signal(s, t):
        import bisect
        bisect.insort(sems[s], t)

    state = {
        Queue.DMA: {"take": 0, "walk": 0, "data": 0.0, "done": 0.0, "dma": 0.0},
        Queue.MXU: {"take": 0, "stream": 0, "done": 0, "vectors": 0, "busy": 0},
        Queue.VPU: {"take": 0, "pass": 0, "writes": [], "func": False, "done": 0,
                    "passes": 0, "busy": 0},
        Queue.ICI: {"done": 0, "busy": 0},
    }

    stall = [0]

    def bank(row):
        return row // cfg.bank_rows

    def vpu_cost(op, a):
        f, count = a["f"], a["count"]
        if op == Op.VOP:
            halves = 2 if f["dtype"] == bf16 else 1
            vop = VOPS[VOp(f["vop"])]
            passes = count * halves + (not vop.unary and f["src2"] == Src2.BROADCAST.value)
            srcs = [(a["src1"], a["src1"] + count)]
            if f["src2"] == Src2.ROWS.value and "src2" in a:
                # both readers in one bank: the bank's read port serves them in turn
                stall[0] += two_source_stall(a["src1"], a["src2"], count, halves,
                                             cfg.bank_rows)
            if "src2" in a:
                n = {Src2.BROADCAST.value: 1,
                     Src2.STAT.value: count // a.get("group", 1)}.get(f["src2"], count)
                srcs.append((a["src2"], a["src2"] + n))
            return passes, srcs, (a["dst"], a["dst"] + count), vop.latency == "vmath"
        if op == Op.VCAST:
            return count, [(a["src1"], a["src1"] + count)], (a["dst"], a["dst"] + count), False
        if op == Op.VTRANS:
            n = a["span"]
            return (n * (count + 1) if count else 0, [(a["src1"], a["src1"] + count * n)],
                    (a["dst"], a["dst"] + count * n), False)
        span = a["span"]
        halves = 2 if f["dtype"] == bf16 else 1
        passes = count * (halves * span + levels + (halves - 1))
        return passes, [(a["src1"], a["src1"] + count * span)], (a["dst"], a["dst"] + count), \
            False

    def run_vpu(st, op, a, t):
        """A VPU command taken at ``t``; returns when the next can be taken."""
        stall[0] = 0
        passes, srcs, dst, func = vpu_cost(op, a)
        if passes == 0:
            return t + 1
        st["passes"] += passes
        base = passes
        passes += stall[0]
        if extra is not None:
            passes += round(extra["vpu"][counters["vpu"]])
        counters["vpu"] += 1
        first = max(t + 1, st["pass"])
        pending = [w for w in st["writes"] if w[2] > first]
        if pending:
            lo, hi = min(w[0] for w in pending), max(w[1] for w in pending)
            if any(s < hi and lo < e for s, e in srcs):
                first = max(first, max(w[2] for w in pending) + 1)
        if st["func"] and not func:
            first += func_latency
        last = first + passes - 1
        if log is not None:
            rate = {}
            for lo, hi in srcs:
                for r in range(lo, hi):
                    rate[bank(r)] = rate.get(bank(r), 0) + 1 / base
            log.append(("vpu", first, last + 1, rate))
        land = last + 5 + (func_latency if func else 0)
        st["writes"] = [w for w in st["writes"] if w[2] > first] + [(dst[0], dst[1], land)]
        st["func"] = func
        st["busy"] += land - max(t, st["done"]) if land > st["done"] else 0
        st["done"] = max(st["done"], land)
        st["pass"] = last + 1
        return last

    def run_mxu(st, a, t):
        cmd = a["cmd"]
        folds = math.ceil(cmd.k / R) * math.ceil(cmd.n / C)
        start = max(t, st["stream"])
        stream = folds * max(cmd.m, R)
        if log is not None:
            # per fold: m activation rows (A, each k-tile of a row of A) and up to R rows
            # of weights (B), both over the command's stream
            rb, rate = cfg.row_bytes, {}
            n_tiles = math.ceil(cmd.n / C)
            for i in range(cmd.m):
                b = bank((a["a"] + i * a["strides"][0]) // rb)
                rate[b] = rate.get(b, 0) + folds / stream
            for i in range(cmd.k):
                b = bank((a["b"] + i * a["strides"][1]) // rb)
                rate[b] = rate.get(b, 0) + n_tiles / stream
            log.append(("mxu", start, start + stream, rate))
        if extra is not None:
            stream += round(extra["mxu"][counters["mxu"]])
        counters["mxu"] += 1
        st["stream"] = start + stream
        st["vectors"] += folds * cmd.m
        st["busy"] += stream
        st["done"] = max(st["done"], st["stream"] + R + C + 3)
        return t + 1

    def run_dma(st, a, t):
        nbytes = a["run"] * a["count"][0] * a["count"][1] * a["count"][2]
        bursts = math.ceil(a["run"] / (cfg.max_burst * cfg.beat_bytes)) * \
            a["count"][0] * a["count"][1] * a["count"][2]
        start = max(t, st["walk"])
        st["walk"] = start + bursts
        data = max(start + latency, st["data"])
        st["data"] = data + nbytes / bw
        st["dma"] += nbytes / bw
        st["done"] = max(st["done"], st["data"])  # completions in issue order
        return st["done"], t + 1

    fe, fe_index, dispatched = 0, 0, 0
    heads = {q: 0 for q in queues}
    free = {q: 0 for q in queues}   # when each engine can take its next entry
    INF = float("inf")

    def engine_time(q):
        """Start time of queue ``q``'s head entry, or INF."""
        i = heads[q]
        if i >= len(queues[q]):
            return INF
        d, op, a = queues[q][i]
        t = max(d + 1, free[q])
        if op == Op.WAIT:
            if not sems[a["sem"]]:
                return INF
            t = max(t, sems[a["sem"]][0])
        elif op == Op.SIGNAL:
            t = max(t, math.ceil(state[q]["done"]))
        return t

    def fe_time():
        if fe_index >= len(items):
            return INF
        q = items[fe_index][0]
        if q is None or q not in queues:
            return fe
        i = len(queues[q]) - depth      # the entry that must have started
        if i < 0:
            return fe
        if i >= heads[q]:
            return INF
        return max(fe, started[q][i] + 1)

    while True:
        times = {q: engine_time(q) for q in queues}
        tf = fe_time()
        q = min(times, key=times.get)
        if tf <= times[q] and tf < INF:
            qq, op, a = items[fe_index]
            if qq is not None:
                queues[qq].append((tf, op, a))
                dispatched += 1
            fe, fe_index = tf + 1, fe_index + 1
            continue
        t = times[q]
        if t == INF:
            break
        d, op, a = queues[q][heads[q]]
        started[q].append(t)
        heads[q] += 1
        st = state[q]
        if op == Op.WAIT:
            sems[a["sem"]].pop(0)
            free[q] = t + 1
        elif op == Op.SIGNAL:
            signal(a["sem"], t + 1)
            free[q] = t + 1
        elif q == Queue.VPU and op in (Op.VOP, Op.VCAST, Op.VRED, Op.VTRANS):
            free[q] = run_vpu(st, op, a, t)
        elif op == Op.MATMUL:
            free[q] = run_mxu(st, a, t)
        elif op == Op.ICI_COLL:
            cost = math.ceil(ici(a))
            st["busy"] += cost
            st["done"] = free[q] = t + cost
        elif op in (Op.ICI_SEND, Op.ICI_READ):
            raise ValueError(f"the timeline plays no {op.name.lower()} (collectives only)")
        elif op in (Op.DMA_LOAD, Op.DMA_STORE):
            done, free[q] = run_dma(st, a, t)
            from spec.isa import SEM_NONE
            if a["sem"] != SEM_NONE:
                signal(a["sem"], math.ceil(done))
        else:                               # shape and cfg instructions
            free[q] = t + 1
    if fe_index < len(items) or any(heads[q] < len(queues[q]) for q in queues):
        raise ValueError("the timeline deadlocked: " + _stuck(queues, heads, sems))
    end = max(fe, *(math.ceil(state[q]["done"]) for q in queues), *free.values())
    return Timeline(cycles=end, mxu_cycles=state[Queue.MXU]["busy"],
                    vpu_passes=state[Queue.VPU]["passes"], vpu_busy=state[Queue.VPU]["busy"],
                    dma_cycles=round(state[Queue.DMA]["dma"]),
                    vectors=state[Queue.MXU]["vectors"], dispatched=dispatched,
                    ici_cycles=state[Queue.ICI]["busy"])


def _stuck(queues, heads, sems):
    """What each blocked queue's front waits for (the deadlock's message): a ``wait`` on a
    semaphore with no count left (a program in which another queue's ``wait`` took the count
    meant for it deadlocks by the ISA's semantics: docs/tensorcore.md, "Synchronisation")."""
    from spec.isa import Op
    fronts = []
    for q, entries in queues.items():
        if heads[q] < len(entries):
            _, op, a = entries[heads[q]]
            what = f"wait on s{a['sem']} (count 0)" if op == Op.WAIT and not sems[a["sem"]] \
                else op.name.lower()
            fronts.append(f"{q.name.lower()} queue's front {what}")
    return "; ".join(fronts) or "the front end stalled on a full queue"


def vpu_op_cycles(program, **kw):
    """The timeline's cycles of a transformer-operation program (podium/transformer.py)."""
    return timeline(program, **kw).cycles


def attention_cycles(program, **kw):
    """The timeline's cycles of an attention program (podium/attention.py)."""
    return timeline(program, **kw).cycles


def model_columns(program, cycles):
    """The timeline's columns of a benchmark row measured at ``cycles`` on the RTL:
    ``model_cycles`` and ``model_ratio`` (model / RTL)."""
    model = timeline(program).cycles
    return {"model_cycles": model, "model_ratio": model / cycles}
