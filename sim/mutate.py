"""``make mutate``: mutation tests. Each mutation of :data:`MUTATIONS` breaks one rule of the
Amaranth source of a block or of a golden model on purpose, in a scratch copy of the repository
(never in the tree), and names the tests that must then fail; the run records which of them
caught it and how long that took, and writes the table to docs/results/mutations.md (and
mutations.json). A mutation no test catches is a failing result: the command exits 1.

    python -m sim.mutate [name ...] [--fast] [--no-baseline] [--timeout SECONDS]
    python -m sim.mutate --render      # docs/results/mutations.md again from its JSON

A mutation is an exact snippet of one file (``old``, which must occur exactly once, so the list
fails loudly when the code it mutates changes) and its replacement (``new``). Its ``tests`` are
pytest node ids (or files), run with ``-x`` in the scratch copy, in order (the likeliest catcher
first): the mutation is

* ``caught`` when pytest ends with a failed test (not an error: a mutation that breaks the
  import or the collection of the tests proves nothing and is ``invalid``),
* ``survived`` when every test passes,
* ``timeout`` when the tests do not end within ``--timeout`` seconds (a hang is no catch),
* ``invalid`` when the tests fail without the mutation too (the baseline, run first in the
  same scratch copy unless ``--no-baseline``), or when pytest ends otherwise.

The scratch copy shares the tree's Verilator builds and generated-Verilog cache
(``build/sim``, ``build/verilog-cache``): their keys cover the Verilog text and the generator's
sources, so a mutated design gets its own build and an unchanged one is reused. ``fast``
mutations (caught in seconds by tests in Amaranth's simulator or of the golden models) are also
run by the regression (verification/tests/test_mutations.py); the others by ``make mutate``
only. Only a run of the whole list writes docs/results/; a partial one writes build/results/.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["Mutation", "MUTATIONS", "BLOCKS", "scratch_copy", "apply", "mutated_text", "by_name",
           "run_mutation", "main",
           "render"]

BLOCKS = ("MXU", "HBM", "ICI", "TensorCore", "VPU", "SparseCore", "pod", "AXI", "golden model")
"""Every block the list must cover with at least two mutations."""


@dataclass(frozen=True)
class Mutation:
    name: str           # unique, a short phrase
    block: str          # one of BLOCKS
    rule: str           # the rule it breaks, one sentence
    path: str           # the file, relative to the repository
    old: str            # exact text, occurring once in the file
    new: str            # its replacement
    tests: tuple        # pytest arguments that must fail
    fast: bool = False  # caught within seconds: also run by the regression


HP = "verification/tests/test_hbm_parts.py"
HT = "verification/tests/test_hbm.py"
IU = "verification/tests/test_ici_units.py"
PU = "verification/tests/test_pod_units.py"
MX = "verification/tests/test_mxu.py"
TC = "verification/tests/test_tensorcore.py"
VP = "verification/tests/test_vpu.py"
FP = "verification/tests/test_fp_units.py"
SC = "verification/tests/test_sparsecore.py"
SM = "verification/tests/test_sparsecore_model.py"

MUTATIONS = [
    # HBM ---------------------------------------------------------------------------------------
    Mutation(
        "HBM tFAW one cycle short", "HBM",
        "at most four ACTs in any tFAW window: the window counted one cycle short",
        "hdl/hbm/timing.py",
        'slots = [Countdown({"act": self._faw}) for _ in range(4)]',
        'slots = [Countdown({"act": self._faw - 1}) for _ in range(4)]',
        (f"{HP}::test_activate_window",), fast=True),
    Mutation(
        "HBM tWR one cycle short", "HBM",
        "a PRE waits the write recovery (WR to PRE) after a WR to its bank: one cycle short",
        "hdl/hbm/bank.py",
        '"pre": {"act": t.act_to_pre, "rd": t.rtp, "wr": t.wr_to_pre},',
        '"pre": {"act": t.act_to_pre, "rd": t.rtp, "wr": t.wr_to_pre - 1},',
        (f"{HP}::test_bank_machines_timing",), fast=True),
    Mutation(
        "HBM ECC syndrome bit", "HBM",
        "syndrome bit 3 of the SECDED decoder is checked against check bit 2 instead of 3",
        "hdl/hbm/ecc.py",
        "m.d.comb += syn.eq(Cat(*[_xor([*(data[i] for i in idx), checks[c]])",
        "m.d.comb += syn.eq(Cat(*[_xor([*(data[i] for i in idx), checks[c ^ (c == 3)]])",
        (f"{HP}::test_read_return",), fast=True),
    Mutation(
        "HBM same-address hazard misses read-after-write", "HBM",
        "a request waits for an older one to the same access when either is a write: "
        "only when both are",
        "hdl/hbm/command_queue.py",
        "& (o.write | e.write) for o in q[:i]]",
        "& (o.write & e.write) for o in q[:i]]",
        (f"{HP}::test_command_queue_order_and_hazards",), fast=True),
    # ICI ---------------------------------------------------------------------------------------
    Mutation(
        "ICI credit returned twice", "ICI",
        "a reverse message's cumulative credit count is taken once: the sender forgets what "
        "it has seen, so every message returns its credits again",
        "hdl/ici/link.py",
        "m.d.sync += seen.eq(rev.credits[v])",
        "m.d.sync += seen.eq(seen)",
        (f"{IU}::test_link",), fast=True),
    Mutation(
        "ICI retry window off by one", "ICI",
        "the link takes a new flit while fewer than retry_depth are unacknowledged: one more "
        "is taken, overwriting the oldest in the retry buffer",
        "hdl/ici/link.py",
        "self.i.ready.eq(outstanding < R),",
        "self.i.ready.eq(outstanding <= R),",
        (f"{IU}::test_link",), fast=True),
    Mutation(
        "ICI dateline class not switched", "ICI",
        "a packet continuing in a ring moves to dateline class 1 on the wraparound hop: "
        "it keeps its class",
        "hdl/ici/input.py",
        "cls = Mux(in_port == 2 * d + ~plus, in_class | wrap_hop,",
        "cls = Mux(in_port == 2 * d + ~plus, in_class,",
        (f"{IU}::test_input_unit",), fast=True),
    Mutation(
        "ICI checker stuck at no error", "ICI",
        "the traffic harness's Checker counts every flit with a wrong, lost, duplicated, "
        "reordered or corrupted packet: it counts none (what the traffic, soak and benchmark "
        "runs trust)",
        "hdl/ici/harness.py",
        "error = beat & (code != CheckError.NONE)",
        "error = beat & 0",
        (f"{IU}::test_checker_flags_every_fault",), fast=True),
    # pod ---------------------------------------------------------------------------------------
    Mutation(
        "pod collective chunk offset", "pod",
        "the second half of a ring piece starts where the first ends: one grain early",
        "hdl/nic/collective.py",
        "m.d.comb += [start.eq(first + (lower if half else 0)),",
        "m.d.comb += [start.eq(first + (lower - 1 if half else 0)),",
        (f"{PU}::test_collective[1x4-ALL_GATHER-int32]",
         f"{PU}::test_collective[1x4-REDUCE_SCATTER-fp32]",
         f"{PU}::test_collective[3x2-ALL_REDUCE_2D-int32]"), fast=True),
    Mutation(
        "pod bfloat16 chunk address", "pod",
        "a piece of a bfloat16 buffer starts at twice its element offset in bytes: at four "
        "times, as for 32-bit elements",
        "hdl/nic/collective.py",
        "Mux(ctx.bf16, offset << 1, offset << 2)",
        "Mux(ctx.bf16, offset << 2, offset << 2)",
        (f"{PU}::test_collective[1x4-ALL_REDUCE-bfloat16]",
         f"{PU}::test_collective[2x2-x-ALL_GATHER-bfloat16]"), fast=True),
    # AXI ---------------------------------------------------------------------------------------
    Mutation(
        "AXI wlast one beat early at a 4 KiB split", "AXI",
        "the SparseCore's 4 KiB splitter raises wlast on the last beat before the boundary: "
        "one beat early",
        "hdl/sparsecore/split.py",
        "(head.crosses & (beat == head.first - 1))",
        "(head.crosses & (beat == head.first - 2))",
        ("verification/tests/test_sparsecore.py::test_split_4k",), fast=True),
    Mutation(
        "AXI wlast one beat early in the TensorCore DMA", "AXI",
        "the DMA's write data carries wlast on a burst's last beat: one beat early",
        "hdl/tensorcore/dma.py",
        "inflight_last.eq(last_beat)",
        "inflight_last.eq(beat == cur.beats - 2)",
        (f"{TC}::test_tensorcore[8x8-int8-test_dma_round_trip]",
         f"{TC}::test_tensorcore[8x8-int8-test_matmul_from_hbm]")),
    # TensorCore --------------------------------------------------------------------------------
    Mutation(
        "TensorCore semaphore released early", "TensorCore",
        "a transfer's semaphore is signalled when its walk is done and its last burst "
        "answered: one burst before",
        "hdl/tensorcore/dma.py",
        "Array(count)[head] == 0)",
        "Array(count)[head] <= 1)",
        (f"{TC}::test_tensorcore[8x8-int8-test_semaphore_after_last_burst]",
         f"{TC}::test_tensorcore[8x8-int8-test_dma_round_trip]")),
    Mutation(
        "TensorCore DMA stride", "TensorCore",
        "a DMA's outer dimension steps its VMEM address by the vertical stride: by the "
        "horizontal one",
        "hdl/tensorcore/dma.py",
        "nh, nv = hb[d] + cmd.hstride[d], vb[d] + cmd.vstride[d]",
        "nh, nv = hb[d] + cmd.hstride[d], vb[d] + cmd.hstride[d]",
        (f"{TC}::test_tensorcore[8x8-int8-test_dma_round_trip]",
         f"{TC}::test_tensorcore[8x8-int8-test_matmul_from_hbm]")),
    # MXU ---------------------------------------------------------------------------------------
    Mutation(
        "MXU accumulate ignores overwrite", "MXU",
        "a GEMM's first k-tile overwrites its accumulator rows unless it accumulates: "
        "it always adds to them",
        "hdl/mxu/accumulator.py",
        "total[c].eq(Mux(s1.overwrite, s1.data[c],",
        "total[c].eq(Mux(0, s1.data[c],",
        (f"{MX}::test_mxu[4x4-test_gemm_random]", f"{MX}::test_mxu[4x4-test_accumulate]")),
    Mutation(
        "MXU bfloat16 output rounding", "MXU",
        "a bfloat16 output is the fp32 sum rounded to nearest even: ties always rounded up",
        "hdl/lib/fp.py",
        "rounded = (x + 0x7FFF + x[16])[16:32]",
        "rounded = (x + 0x8000)[16:32]",
        (f"{MX}::test_mxu[4x4-bf16-to-bf16-test_float_edges]",
         f"{MX}::test_mxu[4x4-bf16-to-bf16-test_gemm_random]")),
    # VPU ---------------------------------------------------------------------------------------
    Mutation(
        "VPU fp32 rounding ties not to even", "VPU",
        "fp32 results round to nearest, ties to even: a tie is always rounded down",
        "hdl/lib/fp.py",
        "up = guard & (round_ | sticky | lsb)",
        "up = guard & (round_ | sticky)",
        (f"{VP}::test_vpu[4l-test_vop_matrix]", f"{VP}::test_vpu[4l-test_special_values]",
         f"{FP}::test_fp_units[bfloat16]")),
    Mutation(
        "VPU requantize rounding", "VPU",
        "a cast of int32 to int8 rounds (x * scale) >> shift half up: it truncates",
        "hdl/tensorcore/vpu_lane.py",
        "total.eq(product + half),",
        "total.eq(product),",
        (f"{VP}::test_vpu[4l-test_casts]",)),
    # SparseCore --------------------------------------------------------------------------------
    Mutation(
        "SparseCore dedup merges distinct ids", "SparseCore",
        "the sorter combines the updates of equal ids: it also merges ids that differ in "
        "bit 0",
        "hdl/sparsecore/sorter.py",
        "m.d.comb += same.eq(Cat(*[pend[k] & (ids[k] == lowest) for k in range(n)]))",
        "m.d.comb += same.eq(Cat(*[pend[k] & (ids[k][1:] == lowest[1:]) for k in range(n)]))",
        (f"{SC}::test_sparsecore[axi-test_scatter_duplicates]",
         f"{SC}::test_sparsecore[axi-test_edges_duplicates_tables]")),
    Mutation(
        "SparseCore sqrtn denominator", "SparseCore",
        "the sqrtn combiner's denominator adds the squares of a bag's weights: the weights",
        "hdl/sparsecore/scale.py",
        'Mux(kind == Combine.SQRTN, mul_fp32(m, self.weight, self.weight, "w2"),',
        "Mux(kind == Combine.SQRTN, self.weight,",
        (f"{SC}::test_scale_unit_matches_model",), fast=True),
    # Golden models -----------------------------------------------------------------------------
    Mutation(
        "HBM device model without its tFAW rule", "golden model",
        "the HBM device model refuses a fifth ACT within tFAW: the rule dropped",
        "verification/models/hbm.py",
        "        if len(c.acts) == 4:\n",
        "        if len(c.acts) == 5:\n",
        (f"{HT}::test_checker_one_cycle",), fast=True),
    Mutation(
        "fp model rounding toward zero", "golden model",
        "the fp golden model adds in fp32 with round to nearest even: the sum is truncated "
        "toward zero",
        "verification/models/fp.py",
        "        return from_float32(x + y)\n",
        "        return from_float32(np.where(np.abs((x.astype(np.float64) + y)) < np.abs(x + y),"
        " np.nextafter(x + y, np.float32(0)), x + y).astype(np.float32))\n",
        (f"{FP}::test_model_add",), fast=True),
    Mutation(
        "MXU model accumulation order", "golden model",
        "the MXU model sums a column tile's rows in the array's order (row 0 first): in "
        "reverse, so the bf16 RTL-against-model tests must see the rounding differ",
        "verification/models/mxu.py",
        "                for r in range(R):\n",
        "                for r in reversed(range(R)):\n",
        (f"{MX}::test_mxu[8x8-bf16-test_gemm_random]",
         f"{MX}::test_mxu[4x4-bf16-to-bf16-test_gemm_random]")),
    Mutation(
        "SparseCore model dedup merges distinct ids", "golden model",
        "the SparseCore model's scatter combines duplicates of one id: ids that differ in "
        "bit 0 too",
        "verification/models/sparsecore.py",
        "pairs = [(int(batch.ids[k]), k) for k in range(lo, hi)",
        "pairs = [(int(batch.ids[k]) & ~1, k) for k in range(lo, hi)",
        (f"{SM}::test_scatter_sgd_duplicates_combined",), fast=True),
]


def _check_list():
    names = [m.name for m in MUTATIONS]
    assert len(names) == len(set(names)), "mutation names must be unique"
    for m in MUTATIONS:
        assert m.block in BLOCKS, f"{m.name}: block {m.block!r} is not one of {BLOCKS}"


_check_list()


def by_name(name):
    for m in MUTATIONS:
        if m.name == name:
            return m
    raise KeyError(name)


def mutated_text(root, mutation):
    """The text of the mutation's file in ``root`` with the mutation applied; ValueError when
    ``old`` does not occur exactly once (the list has drifted from the code)."""
    text = (Path(root) / mutation.path).read_text()
    n = text.count(mutation.old)
    if n != 1:
        raise ValueError(f"{mutation.path}: the snippet of mutation {mutation.name!r} occurs "
                         f"{n} times, it must occur once: {mutation.old!r}")
    return text.replace(mutation.old, mutation.new)


def _source_files(root):
    out = subprocess.run(["git", "-C", str(root), "ls-files", "--cached", "--others",
                          "--exclude-standard", "-z"], capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p]


def scratch_copy(dest, root=ROOT):
    """Copy the repository's source files (tracked and untracked, not ignored: the working
    tree as it is) to ``dest``, whose ``build/sim`` and ``build/verilog-cache`` are the
    tree's (created if needed). Returns ``dest``."""
    dest = Path(dest)
    for rel in _source_files(root):
        src = Path(root) / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    (dest / "build").mkdir(exist_ok=True)
    for shared in ("sim", "verilog-cache"):
        (Path(root) / "build" / shared).mkdir(parents=True, exist_ok=True)
        link = dest / "build" / shared
        if not link.exists():
            link.symlink_to(Path(root).resolve() / "build" / shared)
    return dest


def apply(scratch, mutation):
    """Apply ``mutation`` to the scratch copy; returns the original text (for :func:`undo`)."""
    path = Path(scratch) / mutation.path
    original = path.read_text()
    path.write_text(mutated_text(scratch, mutation))
    return original


def _pytest(scratch, tests, junit, timeout, first_failure=True):
    """Run pytest on ``tests`` in ``scratch``; returns (exit code or None on timeout, seconds,
    failed test ids, errored test ids, the first failure's message, the output's tail)."""
    env = dict(os.environ, PYTHONPATH=str(scratch), PYTHONDONTWRITEBYTECODE="1")
    env.pop("PODIUM_SEED", None)            # the tests' fixed seeds: a catch is replayable
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
           "--junitxml", str(junit), *(["-x"] if first_failure else []), *tests]
    Path(junit).unlink(missing_ok=True)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=scratch, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)     # pytest and the simulators it started
        proc.communicate()
        return None, time.perf_counter() - start, [], [], "", ""
    except BaseException:                       # interrupted: leave no simulator behind
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    seconds = time.perf_counter() - start
    failed, errors, messages = [], [], []
    if Path(junit).exists():
        for case in ElementTree.parse(junit).iter("testcase"):
            ident = f"{case.get('classname', '')}::{case.get('name', '')}"
            failure = case.find("failure")
            if failure is not None:
                failed.append(ident)
                text = " ".join((failure.get("message") or "").split())
                # The scratch copy is gone after the run: its paths mean nothing on the page.
                text = text.replace(str(scratch), "<scratch copy>").split("; see ")[0]
                messages.append(text[:300])
            if case.find("error") is not None:
                errors.append(ident)
    return (proc.returncode, seconds, failed, errors, messages[0] if messages else "",
            out[-4000:])


def _short(ident):
    """``verification.tests.test_x::test_y[p]`` to ``test_x.py::test_y[p]``."""
    module, _, name = ident.partition("::")
    return f"{module.rsplit('.', 1)[-1]}.py::{name}"


def run_mutation(scratch, mutation, *, timeout=3600, baseline=True, log=None, baselines=None):
    """Run one mutation in the scratch copy (restored afterwards); returns its result row.
    ``baselines``: a dict of baseline results by test list, shared by the mutations of a run
    so that the same tests run once without a mutation."""
    junit = Path(scratch) / "build" / "mutation-junit.xml"
    row = {"name": mutation.name, "block": mutation.block, "rule": mutation.rule,
           "path": mutation.path, "tests": list(mutation.tests), "fast": mutation.fast,
           "status": None, "caught_by": [], "seconds": None, "baseline_seconds": None,
           "detail": ""}
    if baseline:
        baselines = {} if baselines is None else baselines
        if mutation.tests not in baselines:
            baselines[mutation.tests] = _pytest(scratch, mutation.tests, junit, timeout,
                                                first_failure=False)
        code, seconds, failed, errors, _, out = baselines[mutation.tests]
        row["baseline_seconds"] = round(seconds, 1)
        if code != 0:
            row.update(status="invalid", detail=f"the tests do not pass without the mutation "
                       f"(exit {code}; failed {[_short(f) for f in failed + errors]})")
            if log:
                log(out)
            return row
    original = apply(scratch, mutation)
    try:
        code, seconds, failed, errors, message, out = _pytest(scratch, mutation.tests, junit,
                                                              timeout)
    finally:
        (Path(scratch) / mutation.path).write_text(original)
    row["seconds"] = round(seconds, 1)
    if code is None:
        row.update(status="timeout", detail=f"no result in {timeout} s")
    elif code == 0:
        row.update(status="survived", detail="every test passed")
    elif code == 1 and failed and not errors:
        row.update(status="caught", caught_by=[_short(f) for f in failed], detail=message)
    else:
        row.update(status="invalid", detail=f"pytest exit {code}, failed "
                   f"{[_short(f) for f in failed]}, errors {[_short(e) for e in errors]} "
                   f"(an import, collection or setup error is no catch)")
    if log and row["status"] != "caught":
        log(out)
    return row


def _brief(detail, limit=140):
    """A failure message short enough for a table cell: pytest's ``+ where`` explanations,
    the pointer to the test directory and object addresses left out."""
    text = re.sub(r" at 0x[0-9a-f]+", "", detail.split(" + where")[0].split("; see ")[0])
    text = text.replace("|", "\\|")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def render(data):
    """The results page (markdown) of a run's JSON ``data`` (a pure function of it: the page
    is re-rendered from the JSON, ``python -m sim.mutate --render``)."""
    from sim.measure import environment_line

    rows = data["tables"]["mutations"]
    caught = sum(r["status"] == "caught" for r in rows)
    lines = [
        "# Mutation test results", "",
        f"Measured by `make mutate` on {environment_line(data['environment'])}.", "",
        "Each mutation (sim/mutate.py) breaks one rule of a block's Amaranth source or of a "
        "golden model in a scratch copy of the repository and runs the tests paired with it "
        "(stopping at the first failure); it is caught when one of them fails (result: how). "
        "Time to catch: "
        "wall time of that pytest run, with the Verilator build of a mutated design when it "
        "was not cached yet (builds are kept in build/sim, keyed by the Verilog text, so a "
        "later run reuses them and a first run takes minutes longer per cocotb mutation). "
        "Baseline: the same tests without the mutation, which must pass (seconds: the "
        "pytest run; tests shared by mutations run once). Fast mutations also run in "
        "`make test` (verification/tests/test_mutations.py).", "",
        f"**{caught} of {len(rows)} mutations caught.**"
        + ("" if caught == len(rows) else " Every other one is a failing result."), "",
        "| block | mutation | rule broken | file | result | caught by | time to catch (s) | "
        "baseline (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        result = r["status"] + (f": {_brief(r['detail'])}" if r["detail"] else "")
        lines.append(
            f"| {r['block']} | {r['name']}{' (fast)' if r['fast'] else ''} | {r['rule']} | "
            f"`{r['path']}` | {result} | "
            f"{'<br>'.join('`' + t + '`' for t in r['caught_by'])} | "
            f"{'' if r['seconds'] is None else r['seconds']} | "
            f"{'' if r['baseline_seconds'] is None else r['baseline_seconds']} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", metavar="name",
                   help="mutations to run (default: all); see --list")
    p.add_argument("--fast", action="store_true", help="only the fast mutations")
    p.add_argument("--list", action="store_true", help="list the mutations and exit")
    p.add_argument("--no-baseline", action="store_true",
                   help="do not first check that the paired tests pass without the mutation")
    p.add_argument("--timeout", type=float, default=3600,
                   help="seconds a mutation's tests may take (default 3600)")
    p.add_argument("--render", action="store_true",
                   help="write docs/results/mutations.md again from mutations.json and exit")
    args = p.parse_args(argv)
    if args.render:
        from sim.measure import RESULTS

        data = json.loads((RESULTS / "mutations.json").read_text())
        (RESULTS / "mutations.md").write_text(render(data))
        return 0
    if args.list:
        for m in MUTATIONS:
            print(f"{m.block:12} {'fast' if m.fast else '    '}  {m.name}")
        return 0
    known = {m.name for m in MUTATIONS}
    for name in args.names:
        if name not in known:
            print(f"sim.mutate: no mutation named {name!r} (python -m sim.mutate --list)",
                  file=sys.stderr)
            return 2
    chosen = [m for m in MUTATIONS if (not args.names or m.name in args.names)
              and (m.fast or not args.fast)]
    for m in chosen:                        # every snippet first: a drifted list fails now
        try:
            mutated_text(ROOT, m)
        except ValueError as e:
            print(f"sim.mutate: {e}", file=sys.stderr)
            return 2

    from sim.measure import environment, write_results

    # A terminated run still removes its scratch copy and the tests it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    env = environment()
    rows, baselines = [], {}
    with tempfile.TemporaryDirectory(prefix="podium-mutate-") as tmp:
        scratch = scratch_copy(Path(tmp) / "podium")
        for m in chosen:
            print(f"== {m.block}: {m.name}", flush=True)
            row = run_mutation(scratch, m, timeout=args.timeout, baseline=not args.no_baseline,
                               log=lambda text: print(text, flush=True), baselines=baselines)
            print(f"   {row['status']} in {row['seconds']} s"
                  + (f" by {', '.join(row['caught_by'])}" if row["caught_by"] else "")
                  + (f": {row['detail']}" if row["detail"] else ""), flush=True)
            rows.append(row)
    whole = len(chosen) == len(MUTATIONS)
    write_results("mutations", {"mutations": rows}, env, render, quick=not whole)
    survivors = [r["name"] for r in rows if r["status"] != "caught"]
    if survivors:
        print(f"not caught: {', '.join(survivors)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
