"""Configuration of the HBM controller generator, validated on construction.

One clock cycle of the controller is one HBM command clock (tCK). In pseudo-channel mode the
two pseudo-channels of a channel share the channel's row and column command buses: per channel
at most one row command (ACT, PRE, PREA, REF, REFSB; an ACT holds the bus for two cycles) and
one column command (RD, WR, RDA, WRA) per cycle. Every pseudo-channel has its own data bus,
which moves half an access per cycle (HBM2/HBM2E: two DDR beats of 64 bits; HBM3: four beats
of 32 bits), so one access occupies it for two cycles.

Timing presets and their sources (every number is in the tables below, in clock cycles):

* HBM2 1600/2000/2400: the core timings are Ramulator 2's HBM2 timing presets
  (CMU-SAFARI/ramulator2, ``python/ramulator/dram/hbm2.py``); tRRD_S/L 4/6 ns as DRAMsim3's
  HBM2 configuration has them (umd-memsys/DRAMsim3, ``configs/HBM2_8Gb_x128.ini``); tFAW 16 ns
  (vendor-specific: published values range 15-30 ns, Ramulator 2's ``hbm2.py`` uses 15 and
  DRAMsim3 30); tREFI 3.9 us; all-bank tRFC 160/260/350 ns for 2/4/8 Gb dies (Ramulator 2's
  density table, ``hbm2.py``); per-bank refresh tRFCsb 160 ns (Ramulator 2's ``hbm2.py``:
  160 ns up to 8 Gb, 200 above; its ``HBM2.cpp`` nRFCSB) and tRREFD 8 ns (Ramulator 2
  ``HBM2.cpp`` nRREFD); two idle bus cycles between read and write data
  (Ramulator 2 ``HBM2.cpp`` line 325, commit 1fb94b8: RD to WR nCL + nBL + 2 - nCWL, "assuming
  tWPRE = 1 tCK"; one before issue 34, which no source gave; docs/hbm.md, "Conventions").
* HBM2E 3200/3600: no HBM2E timing table is public (JESD235D is not, and vendors publish the
  pin speed only). The DRAM array does not get faster with the interface, so the preset keeps
  the HBM2-2000 timings in nanoseconds (the 2000 preset's cycles at tCK = 1 ns) at the faster
  clock, each rounded up to whole cycles (tREFI rounded down: it is a maximum): the method
  Ramulator 2 uses for its HBM3 presets. tCCD_S and tRTW stay HBM2's cycles (the burst; two
  idle cycles). Every HBM2E value is derived this way, none is from a datasheet.
* HBM3 6400: Ramulator 2 ``src/dram/impl/HBM3.cpp`` preset ``HBM3_6.4Gbps`` (CK = rate / 4,
  tCK = 0.625 ns; BL8 on four data beats per CK occupies two cycles): CL 23, CWL 7, tRCD
  23/23, tRP 23, tRAS 55, tRC 77, tWR 26, tRTP 10 (nRTPL), tCCD_S/L 2/4, tWTR_S/L 10/13,
  tRRD_S/L 2/4, tFAW 48, tREFI 6240, tRFCsb 320, tRREFD 13; tRFC from the same file's density
  table (160/260/350 ns); RD to WR data: two idle cycles (its CL + BL + 2 - CWL). Ramulator 2
  says of these that no HBM3 timings are published and that they scale DRAMsim3's HBM2
  nanosecond values (``configs/HBM2_8Gb_x128.ini``). In this preset tFAW (48) is longer than
  4 x tRRD_S (8): random traffic is tFAW-bound.

The two-cycle ACT (``act_reference_cycle``): an ACT holds the row bus two cycles and its row
address is complete in the second. JESD235 is not public and no public text of it or of a
vendor datasheet stating the reference cycle could be found (docs/hbm.md, "Conventions").
``"second"`` (the default) counts tRCD, tRAS and tRC before a refresh from the ACT's second
cycle, and tRP, tRFC and tRFCsb to it: DRAMSys ``CheckerHBM2.cpp`` (commit 8e021ea: RD after
ACT tRCDRD + tCK, PREPB after ACT tRAS + tCK, REFAB / REFPB after ACT tRC + tCK, ACT after
PREPB tRP - tCK, after REFAB tRFC - tCK, after REFPB tRFCSB - tCK) and Ramulator 2.1
(``python/ramulator/dram/spec.py``, commit 38c51d4, ``DRAMStandard.to_config``: "JEDEC timings
are measured between when the DRAM finishes receiving each command", applied to its HBM2
``command_cycles = {"ACT": 2}``). ``"first"`` counts them from the ACT's first cycle, as
Ramulator 2.0 does (``src/dram/impl/HBM2.cpp``, commit 1fb94b8), Podium's rule before issue 34.
Either way ACT to ACT (tRC, tRRD, tFAW) is the same, and ACT to REFSB of another bank counts
from the second cycle (tRRD + 1; REFSB to ACT tRREFD - 1: Ramulator 2.0 ``HBM2.cpp`` lines 308,
312, "ACT actually happens on the 2-nd cycle of ACT", as DRAMSys).

Every timing can be overridden (``timing_overrides``), e.g. to make a constraint bind alone.
"""

import dataclasses
import functools
import math
from dataclasses import asdict, dataclass

from .config import Config, ConfigError, check, check_bool, check_choice, check_int

__all__ = ["HBMConfig", "Timing", "TimingOverrides", "STANDARDS", "DEFAULT_SPEEDS", "PRESETS",
           "MAPPINGS", "ACT_REFERENCE_CYCLES", "WORD_BITS", "CHECK_BITS", "BENCH_CONFIG",
           "STREAM_CONFIG", "check_matching_bus"]

WORD_BITS = 64
"""ECC protects each 64-bit word with 8 check bits (SECDED), as HBM2's ECC mode stores them."""

CHECK_BITS = 8

BURST_CYCLES = 2
"""Clock cycles one access holds a data bus (HBM2/HBM2E BL4 at two beats per cycle, HBM3 BL8
at four)."""

ACT_REFERENCE_CYCLES = ("first", "second")
"""The cycles of a two-cycle ACT its bank timings may count from (``act_reference_cycle``)."""

STANDARDS = {
    # speeds, pseudo-channel data bits, legacy (whole channel) data bits or None
    "HBM2": (("1600", "2000", "2400"), 64, 128),
    "HBM2E": (("3200", "3600"), 64, 128),
    "HBM3": (("6400",), 32, None),
}
DEFAULT_SPEEDS = {"HBM2": "2000", "HBM2E": "3200", "HBM3": "6400"}
"""The speed of each standard when a configuration leaves ``speed`` None."""

# Cycle counts by (standard, speed); tck in ns. See the module docstring for the sources.
_HBM2_NS = dict(rrd_s=4.0, rrd_l=6.0, faw=16.0, refi=3900.0, rfc_sb=160.0, rrefd=8.0)
PRESETS = {
    ("HBM2", "1600"): dict(tck=1.25, cl=10, rcd_rd=10, rcd_wr=8, rp=10, ras=24, rc=34, wr=12,
                           rtp=4, cwl=4, ccd_s=2, ccd_l=4, wtr_s=5, wtr_l=6, rtw=2),
    ("HBM2", "2000"): dict(tck=1.0, cl=14, rcd_rd=14, rcd_wr=12, rp=14, ras=34, rc=48, wr=16,
                           rtp=5, cwl=5, ccd_s=2, ccd_l=4, wtr_s=6, wtr_l=8, rtw=2),
    ("HBM2", "2400"): dict(tck=0.833, cl=17, rcd_rd=17, rcd_wr=14, rp=17, ras=40, rc=57, wr=19,
                           rtp=6, cwl=6, ccd_s=2, ccd_l=4, wtr_s=8, wtr_l=10, rtw=2),
    ("HBM3", "6400"): dict(tck=0.625, cl=23, rcd_rd=23, rcd_wr=23, rp=23, ras=55, rc=77, wr=26,
                           rtp=10, cwl=7, ccd_s=2, ccd_l=4, wtr_s=10, wtr_l=13, rtw=2, rrd_s=2,
                           rrd_l=4, faw=48, refi=6240, rfc_sb=320, rrefd=13),
}
for _speed, _tck in (("3200", 0.625), ("3600", 2 / 3.6)):
    _base = {k: v for k, v in PRESETS["HBM2", "2000"].items() if k not in ("tck", "ccd_s", "rtw")}
    PRESETS["HBM2E", _speed] = dict(
        tck=_tck, ccd_s=BURST_CYCLES, rtw=2,
        **{k: math.ceil(v / _tck - 1e-9) for k, v in {**_base, **_HBM2_NS}.items()
           if k != "refi"}, refi=math.floor(_HBM2_NS["refi"] / _tck + 1e-9))
RFC_NS = {2: 160.0, 4: 260.0, 8: 350.0}
"""All-bank refresh time by die density (Gb), every standard (Ramulator 2's ``hbm2.py``)."""

MAPPINGS = ("RoBaCoBgPc", "RoCoBaBgPc", "RoBaBgCoPc", "PcRoBaBgCo")
"""Address mappings, fields from the most to the least significant (above the byte offset in
one access): Ro row, Ba bank in group, Bg bank group, Co column, Pc pseudo-channel."""


@dataclass(frozen=True)
class Timing:
    """Every constraint the controller obeys and the device model checks, in clock cycles,
    counted from the first cycle of each command (an ACT holds the row bus one cycle more),
    except that the bank timings of an ACT count from (and tRP, tRFC, tRFCsb to) its
    ``act_reference_cycle`` (module docstring): ``act_origin`` cycles after its first.

    ``rtw``: idle data-bus cycles between the last read beat and the first write beat;
    ``rfc_sb``: per-bank refresh time; ``rrefd``: REFSB to REFSB, and REFSB to ACT of another
    bank (one cycle less, as the ACT's row address comes in its second cycle).
    """

    cl: int
    cwl: int
    rcd_rd: int
    rcd_wr: int
    rp: int
    ras: int
    rc: int
    wr: int
    rtp: int
    ccd_s: int
    ccd_l: int
    wtr_s: int
    wtr_l: int
    rrd_s: int
    rrd_l: int
    faw: int
    rfc: int
    refi: int
    rfc_sb: int
    rrefd: int
    rtw: int
    burst_cycles: int = BURST_CYCLES
    act_reference_cycle: str = "second"

    @property
    def act_origin(self):
        """Cycles from an ACT's first cycle to the one its bank timings count from: 0 or 1."""
        return ACT_REFERENCE_CYCLES.index(self.act_reference_cycle)

    @property
    def act_to_rd(self):
        """ACT to RD of the bank: tRCD_RD from the reference cycle."""
        return self.rcd_rd + self.act_origin

    @property
    def act_to_wr(self):
        return self.rcd_wr + self.act_origin

    @property
    def act_to_pre(self):
        """ACT to PRE of the bank: tRAS from the reference cycle; an auto-precharge starts no
        earlier either."""
        return self.ras + self.act_origin

    @property
    def act_to_ref(self):
        """ACT to REF, or REFSB of the bank: tRC from the reference cycle (and no earlier than
        the bank's next ACT could be)."""
        return self.act_to_act + self.act_origin

    @property
    def rd_to_wr(self):
        """RD to WR: the read burst leaves the bus, ``rtw`` idle cycles, then the write data."""
        return self.cl + self.burst_cycles + self.rtw - self.cwl

    @property
    def wr_to_rd_s(self):
        return self.cwl + self.burst_cycles + self.wtr_s

    @property
    def wr_to_rd_l(self):
        return self.cwl + self.burst_cycles + self.wtr_l

    @property
    def wr_to_pre(self):
        return self.cwl + self.burst_cycles + self.wr

    @property
    def act_to_act(self):
        """ACT to ACT in one bank: tRC, or tRAS + tRP when that is longer (an auto-precharge
        starts no earlier than tRAS after the ACT); both ACTs count from the same cycle, so
        the reference cycle cancels."""
        return max(self.rc, self.ras + self.rp)

    @property
    def wr_to_rda(self):
        """WR to an RDA of the same bank: the RDA's precharge (tRTP after it) is a precharge,
        so it must not start before the WR's recovery (WR to PRE) ends. DRAMSys
        ``CheckerHBM2.cpp`` (commit 8e021ea) lines 117-122: RDA after WR of the bank,
        tWL + tBURST + tWR - tRTP."""
        return max(1, self.wr_to_pre - self.rtp)

    @property
    def rda_to_ref(self):
        """RDA to a REF, or REFSB of the bank: its precharge starts tRTP after the RDA, then
        tRP (the bank's next ACT may come ``act_origin`` cycles sooner)."""
        return self.rtp + self.rp

    @property
    def wra_to_ref(self):
        """WRA to a REF, or REFSB of the bank: its precharge starts WR to PRE after the WRA."""
        return self.wr_to_pre + self.rp

    @property
    def act_to_refsb_s(self):
        """ACT to REFSB of a bank in another group (tRRD_S after the ACT's second cycle)."""
        return self.rrd_s + 1

    @property
    def act_to_refsb_l(self):
        """ACT to REFSB of a bank in the same group."""
        return self.rrd_l + 1

    @property
    def refsb_to_act(self):
        """REFSB to ACT of another bank (tRREFD to the ACT's second cycle)."""
        return max(1, self.rrefd - 1)

    def to_dict(self):
        return asdict(self)


_TIMING_FIELDS = [f.name for f in dataclasses.fields(Timing)
                  if f.name not in ("burst_cycles", "act_reference_cycle")]


@dataclass(frozen=True)
class TimingOverrides(Config):
    """Timings (in cycles) that replace the preset's; ``None`` keeps the preset value. Every
    field of :class:`Timing` except ``burst_cycles`` and ``act_reference_cycle``.

    Parameters
    ----------
    cl, cwl, rcd_rd, rcd_wr, rp, ras, rc, wr, rtp, ccd_s, ccd_l, wtr_s, wtr_l : int or None
        The timing of that name in cycles, 1..65535 (``Timing``); None: the preset's.
    rrd_s, rrd_l, faw, rfc, refi, rfc_sb, rrefd : int or None
        The timing of that name in cycles, 1..65535 (``Timing``); None: the preset's.
    rtw : int or None
        Idle data-bus cycles between a read and a write, 0..65535; None: the preset's.
    """

    KIND = "HBM timing"

    cl: int | None = None
    cwl: int | None = None
    rcd_rd: int | None = None
    rcd_wr: int | None = None
    rp: int | None = None
    ras: int | None = None
    rc: int | None = None
    wr: int | None = None
    rtp: int | None = None
    ccd_s: int | None = None
    ccd_l: int | None = None
    wtr_s: int | None = None
    wtr_l: int | None = None
    rrd_s: int | None = None
    rrd_l: int | None = None
    faw: int | None = None
    rfc: int | None = None
    refi: int | None = None
    rfc_sb: int | None = None
    rrefd: int | None = None
    rtw: int | None = None

    def validate(self):
        for name in _TIMING_FIELDS:
            value = getattr(self, name)
            if value is not None:
                check_int(name, value, 0 if name == "rtw" else 1, 65535)

    def apply(self, timing):
        """``timing`` with the overridden fields replaced."""
        return dataclasses.replace(timing, **{name: getattr(self, name) for name in
                                              _TIMING_FIELDS if getattr(self, name) is not None})


@dataclass(frozen=True)
class HBMConfig(Config):
    """Parameters of one HBM controller: AXI ports, channels and their scheduling.

    Parameters
    ----------
    standard : str
        ``"HBM2"``, ``"HBM2E"`` or ``"HBM3"``.
    speed : str or None
        Timing preset, the pin speed in Mb/s: HBM2 ``"1600"``, ``"2000"``, ``"2400"``; HBM2E
        ``"3200"``, ``"3600"``; HBM3 ``"6400"``. None (the default): the standard's default
        speed (``DEFAULT_SPEEDS``: HBM2 2000, HBM2E 3200, HBM3 6400).
    channel_mode : str
        ``"pseudo"``: pseudo-channel mode, two pseudo-channels of 64 bits (HBM3: 32) per
        channel share its command buses; ``"legacy"`` (HBM2 and HBM2E only): one controller per
        128-bit channel, which owns its buses.
    pseudo_channels : int
        Controllers: pseudo-channels served (pseudo mode: 2, 4, ..., 32, two per channel) or
        channels (legacy mode: 1, 2, 4, 8).
    bank_groups, banks_per_group : int
        1, 2 or 4 each (HBM2: 4 x 4).
    row_bits : int
        Row address bits, 4..17.
    col_bits : int
        Bits of the access index within a row, 1..7 (HBM2 1 KB page of 32 B accesses: 5).
    density_gb : int
        Die density, 2, 4 or 8 Gb: sets the all-bank refresh time tRFC (160/260/350 ns).
    queue_depth : int
        Requests per pseudo-channel command queue, 2..64.
    write_buffer : int
        Write data slots per pseudo-channel, 1..queue_depth.
    write_high, write_low : int
        Write drain watermarks (writes in the queue): draining starts at ``write_high`` and
        stops at ``write_low`` when reads wait; 0 <= low < high <= write_buffer.
    page_policy : str
        ``"open"`` (rows stay open until a conflict) or ``"closed"`` (the last queued access to
        a row carries auto-precharge, RDA / WRA, and a row no queued request hits is
        precharged).
    scheduler : str
        ``"frfcfs"`` (row hits first, then oldest; starvation cap) or ``"fcfs"`` (oldest only).
    starvation_cap : int
        Cycles a request may wait before it is served ahead of row hits, 8..1023.
    mapping : str
        Address mapping, one of MAPPINGS.
    xor_bank : bool
        XOR the bank and bank-group bits with the lowest row bits (spreads row conflicts).
    ports : int
        AXI4 slave ports, 1..4.
    id_width : int
        AXI ID bits, 1..8.
    id_lanes : int
        Reorder lanes per port, 1..16, a power of two: IDs map to lanes by their low bits;
        responses are in order within a lane and in any order across lanes.
    rob_depth : int
        Read beats in flight per port (reorder buffer slots), 4..256, a power of two and a
        multiple of ``id_lanes``.
    write_bursts : int
        Write bursts in flight per lane, 1..16.
    addr_width : int
        AXI address bits, at least the capacity's, up to 48; addresses past the capacity get
        DECERR.
    refresh : bool
        Refresh on. Off only for measurements (the device model then does not check refresh).
    per_bank_refresh : bool
        Refresh one bank at a time (REFSB, each bank once per tREFI) instead of all banks at
        once (REF).
    refresh_postpone : int
        Refreshes owed (REF, or REFSB with ``per_bank_refresh``) before refresh is forced
        ahead of traffic, 1..8 (JEDEC allows 8 postponed).
    act_reference_cycle : str
        The cycle of a two-cycle ACT from which tRCD, tRAS and tRC before a refresh count and
        to which tRP, tRFC and tRFCsb count: ``"second"`` (DRAMSys, Ramulator 2.1; the
        default) or ``"first"`` (Ramulator 2.0). Controller and device model follow it.
    timing_overrides : TimingOverrides
        Timings that replace the preset's.
    """

    KIND = "HBM"

    standard: str = "HBM2"
    speed: str | None = None
    channel_mode: str = "pseudo"
    pseudo_channels: int = 2
    bank_groups: int = 4
    banks_per_group: int = 4
    row_bits: int = 14
    col_bits: int = 5
    density_gb: int = 4
    queue_depth: int = 16
    write_buffer: int = 8
    write_high: int = 6
    write_low: int = 2
    page_policy: str = "open"
    scheduler: str = "frfcfs"
    starvation_cap: int = 128
    mapping: str = "RoBaCoBgPc"
    xor_bank: bool = False
    ports: int = 1
    id_width: int = 4
    id_lanes: int = 4
    rob_depth: int = 64
    write_bursts: int = 4
    addr_width: int = 32
    refresh: bool = True
    per_bank_refresh: bool = False
    refresh_postpone: int = 8
    act_reference_cycle: str = "second"
    timing_overrides: TimingOverrides = TimingOverrides()

    def validate(self):
        check_choice("standard", self.standard, tuple(STANDARDS))
        if self.speed is None:
            self.derive("speed", DEFAULT_SPEEDS[self.standard])
        speeds = STANDARDS[self.standard][0]
        if self.speed not in speeds:
            raise ConfigError("speed", f"must be one of {', '.join(map(repr, speeds))} (the "
                                       f"speeds of standard {self.standard}), got "
                                       f"{self.speed!r}")
        legacy_ok = STANDARDS[self.standard][2] is not None
        check_choice("channel_mode", self.channel_mode,
                     ("pseudo", "legacy") if legacy_ok else ("pseudo",))
        check_choice("pseudo_channels", self.pseudo_channels,
                     (1, 2, 4, 8) if self.legacy else (2, 4, 8, 16, 32))
        check_choice("bank_groups", self.bank_groups, (1, 2, 4))
        check_choice("banks_per_group", self.banks_per_group, (1, 2, 4))
        check_int("row_bits", self.row_bits, 4, 17)
        check_int("col_bits", self.col_bits, 1, 7)
        check_choice("density_gb", self.density_gb, tuple(RFC_NS))
        check_int("queue_depth", self.queue_depth, 2, 64)
        check_int("write_buffer", self.write_buffer, 1, self.queue_depth)
        check_int("write_high", self.write_high, 1, self.write_buffer)
        check_int("write_low", self.write_low, 0, self.write_high - 1)
        check_choice("page_policy", self.page_policy, ("open", "closed"))
        check_choice("scheduler", self.scheduler, ("frfcfs", "fcfs"))
        check_int("starvation_cap", self.starvation_cap, 8, 1023)
        check_choice("mapping", self.mapping, MAPPINGS)
        check_bool("xor_bank", self.xor_bank)
        check_int("ports", self.ports, 1, 4)
        check_int("id_width", self.id_width, 1, 8)
        check_choice("id_lanes", self.id_lanes, tuple(2**i for i in range(5)))
        if self.id_lanes > 2**self.id_width:
            raise ConfigError("id_lanes", f"must be at most 2**id_width = {2**self.id_width}, "
                                          f"got {self.id_lanes}")
        check_choice("rob_depth", self.rob_depth, tuple(2**i for i in range(2, 9)))
        if self.rob_depth < self.id_lanes:
            raise ConfigError("rob_depth", f"must be a multiple of id_lanes ({self.id_lanes}), "
                                           f"got {self.rob_depth}")
        check_int("write_bursts", self.write_bursts, 1, 16)
        check_int("addr_width", self.addr_width, self.capacity_bits, 48)
        check_bool("refresh", self.refresh)
        check_bool("per_bank_refresh", self.per_bank_refresh)
        check_int("refresh_postpone", self.refresh_postpone, 1, 8)
        check_choice("act_reference_cycle", self.act_reference_cycle, ACT_REFERENCE_CYCLES)
        self._validate_timing()

    def _validate_timing(self):
        """The combined timing must be one the controller can keep: a column command every
        tCCD_S may not overlap the previous access's data."""
        t = self.timing
        path = "timing_overrides"
        check(f"{path}.ccd_s", t.ccd_s >= t.burst_cycles,
              f"at least the {t.burst_cycles} cycles an access holds the data bus", t.ccd_s)
        check(f"{path}.ccd_l", t.ccd_l >= t.ccd_s, f"at least ccd_s ({t.ccd_s})", t.ccd_l)
        check(f"{path}.rrd_l", t.rrd_l >= t.rrd_s, f"at least rrd_s ({t.rrd_s})", t.rrd_l)
        check(f"{path}.cl", t.rd_to_wr >= 1, "such that RD to WR (CL + 2 + rtw - CWL) is at "
              "least 1 cycle", t.cl)
        if self.per_bank_refresh:
            check(f"{path}.refi", t.refi >= 2 * self.banks,
                  f"at least 2 x banks ({2 * self.banks}) with per_bank_refresh", t.refi)

    # Geometry ----------------------------------------------------------------------------

    @property
    def legacy(self):
        """Legacy mode: one controller per channel."""
        return self.channel_mode == "legacy"

    @property
    def data_width(self):
        """Data bits of one controller's data bus (a pseudo-channel, or a legacy channel)."""
        _, pseudo, legacy = STANDARDS[self.standard]
        return legacy if self.legacy else pseudo

    @property
    def channels(self):
        """Channels: sets of controllers that share row and column command buses."""
        return self.pseudo_channels if self.legacy else self.pseudo_channels // 2

    @property
    def pcs_per_channel(self):
        return 1 if self.legacy else 2

    @property
    def access_bytes(self):
        """Bytes moved by one column command, and the AXI data bus width in bytes: the data
        bus width times the beats of two cycles (HBM2 BL4, HBM3 BL8 at four beats per cycle)."""
        beats = 8 if self.standard == "HBM3" else 4
        return self.data_width * beats // 8

    @property
    def axi_data_width(self):
        """The AXI4 bus of every port (named as an engine's manager port is): data bits."""
        return self.access_bytes * 8

    @property
    def axi_addr_width(self):
        return self.addr_width

    @property
    def axi_id_width(self):
        return self.id_width
    @property
    def offset_bits(self):
        return (self.access_bytes - 1).bit_length()

    @property
    def words(self):
        """64-bit ECC words per access."""
        return self.access_bytes * 8 // WORD_BITS

    @property
    def beat_bits(self):
        """Device data bus bits per clock cycle (two DDR beats, with check bits)."""
        return self.words // 2 * (WORD_BITS + CHECK_BITS)

    @property
    def pc_bits(self):
        return (self.pseudo_channels - 1).bit_length()

    @property
    def bg_bits(self):
        return (self.bank_groups - 1).bit_length()

    @property
    def ba_bits(self):
        return (self.banks_per_group - 1).bit_length()

    @property
    def banks(self):
        return self.bank_groups * self.banks_per_group

    @property
    def bank_bits(self):
        return max(1, self.bg_bits + self.ba_bits)

    @property
    def capacity_bits(self):
        return (self.offset_bits + self.pc_bits + self.bg_bits + self.ba_bits + self.col_bits
                + self.row_bits)

    @property
    def capacity(self):
        """Bytes addressable; higher addresses get DECERR."""
        return 1 << self.capacity_bits

    def field_widths(self):
        """Width of each mapping field by its two-letter name."""
        return {"Ro": self.row_bits, "Ba": self.ba_bits, "Bg": self.bg_bits,
                "Co": self.col_bits, "Pc": self.pc_bits}

    def field_offsets(self):
        """Bit offset of each mapping field in the byte address."""
        names = [self.mapping[i:i + 2] for i in range(0, len(self.mapping), 2)]
        offsets, at = {}, self.offset_bits
        for name in reversed(names):
            offsets[name] = at
            at += self.field_widths()[name]
        return offsets

    @functools.cached_property
    def _fields(self):
        """(name, offset, mask) of each mapping field: :meth:`decode`'s table, made once."""
        offsets = self.field_offsets()
        return tuple((n, offsets[n], (1 << w) - 1) for n, w in self.field_widths().items())

    def decode(self, address):
        """(pc, bank, row, col) of a byte address below the capacity; bank = bg * banks_per
        group + ba. The Python twin of the front end's mapping, for models and benchmarks."""
        f = {n: (address >> offset) & mask for n, offset, mask in self._fields}
        bg, ba = f["Bg"], f["Ba"]
        if self.xor_bank:
            bg ^= f["Ro"] & ((1 << self.bg_bits) - 1)
            ba ^= (f["Ro"] >> self.bg_bits) & ((1 << self.ba_bits) - 1)
        return f["Pc"], bg * self.banks_per_group + ba, f["Ro"], f["Co"]

    def encode(self, pc, bank, row, col):
        """Byte address of access (pc, bank, row, col): the inverse of :meth:`decode`."""
        bg, ba = divmod(bank, self.banks_per_group)
        if self.xor_bank:
            bg ^= row & ((1 << self.bg_bits) - 1)
            ba ^= (row >> self.bg_bits) & ((1 << self.ba_bits) - 1)
        offsets = self.field_offsets()
        values = {"Ro": row, "Ba": ba, "Bg": bg, "Co": col, "Pc": pc}
        return sum(v << offsets[n] for n, v in values.items())

    # Timing -------------------------------------------------------------------------------

    @property
    def tck_ns(self):
        return PRESETS[self.standard, self.speed]["tck"]

    @property
    def timing(self):
        """The preset's timing at this density, with ``timing_overrides`` applied."""
        p = PRESETS[self.standard, self.speed]
        tck = p["tck"]
        cycles = {k: v for k, v in p.items() if k != "tck"}
        ns = {"rrd_s": _HBM2_NS["rrd_s"], "rrd_l": _HBM2_NS["rrd_l"], "faw": _HBM2_NS["faw"],
              "rfc_sb": _HBM2_NS["rfc_sb"], "rrefd": _HBM2_NS["rrefd"]}
        for name, value in ns.items():
            cycles.setdefault(name, max(1, math.ceil(value / tck - 1e-9)))
        # Minimum times round up; tREFI is a maximum interval, so it rounds down.
        cycles.setdefault("refi", math.floor(_HBM2_NS["refi"] / tck + 1e-9))
        cycles["rfc"] = max(1, math.ceil(RFC_NS[self.density_gb] / tck - 1e-9))
        return self.timing_overrides.apply(
            Timing(**cycles, act_reference_cycle=self.act_reference_cycle))

    @property
    def refi_sb(self):
        """Cycles between per-bank refreshes: each bank once per tREFI."""
        return self.timing.refi // self.banks

    # Identity -----------------------------------------------------------------------------

    @property
    def name(self):
        """Verilog module name of the controller top: readable fields and a hash of the rest."""
        return (f"podium_{self.standard.lower()}_{self.speed}_pc{self.pseudo_channels}_"
                f"p{self.ports}_{self.digest()}")


# Sized for saturation (docs/hbm.md, "Sizing for throughput"): a reorder buffer deep enough
# that one port keeps both queues full over the read latency (Little's law), the deepest queue
# (more banks in view for random traffic), a write buffer and watermarks that give long write
# batches, a starvation cap above the normal wait in a full queue (else every request starves
# and the order degenerates to FCFS), closed pages (a row no queued request hits is precharged
# at once, so a random access finds its bank ready).
BENCH_CONFIG = HBMConfig(rob_depth=256, id_lanes=2, queue_depth=64, write_buffer=32,
                         write_high=28, write_low=12, starvation_cap=512, page_policy="closed")
# XOR bank hashing: the two ports' regions are 10 rows apart, so at the same offset in their
# regions the streams use different banks (see docs/hbm.md, "Measured results").
STREAM_CONFIG = HBMConfig(pseudo_channels=4, ports=2, rob_depth=128, id_lanes=2, xor_bank=True)


def check_matching_bus(path, manager, hbm):
    """Refuse an AXI4 manager's configuration (``path``: a TensorCore's or SparseCore's, with
    ``axi_data_width``, ``axi_addr_width`` and ``axi_id_width``) whose bus differs from the
    HBM controller's ports."""
    for name in ("axi_data_width", "axi_addr_width", "axi_id_width"):
        want = getattr(hbm, name)
        if getattr(manager, name) != want:
            raise ConfigError(f"{path}.{name}", f"must equal the HBM controller's ({want}), "
                                                f"got {getattr(manager, name)}")
