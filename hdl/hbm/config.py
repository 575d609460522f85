"""Configuration of the HBM controller generator, validated on construction.

One clock cycle of the controller is one HBM clock (tCK): commands issue at most one row
command (ACT, PRE, PREA, REF) and one column command (RD, WR) per cycle per pseudo-channel, as
on HBM's separate row and column command buses, and data moves two beats (DDR) per cycle.
"""

import hashlib
import json
import math
from dataclasses import asdict, dataclass

from ..config import Config, ConfigError, check_bool, check_choice, check_int

__all__ = ["HBMConfig", "Timing", "PRESETS", "MAPPINGS", "BURST_LENGTH", "WORD_BITS",
           "CHECK_BITS", "BENCH_CONFIG", "STREAM_CONFIG"]

BURST_LENGTH = 4
"""HBM2 pseudo-channel mode: four beats (two clock cycles) per column command."""

WORD_BITS = 64
"""ECC protects each 64-bit word with 8 check bits (SECDED), as HBM2's ECC mode stores them."""

CHECK_BITS = 8

# Ramulator 2 hbm2.py presets in clock cycles (../shared/reference/hbm.md), with tCK in ns.
PRESETS = {
    "1600": dict(tck=1.25, cl=10, rcd_rd=10, rcd_wr=8, rp=10, ras=24, rc=34, wr=12, rtp=4,
                 cwl=4, ccd_s=2, ccd_l=4, wtr_s=5, wtr_l=6),
    "2000": dict(tck=1.0, cl=14, rcd_rd=14, rcd_wr=12, rp=14, ras=34, rc=48, wr=16, rtp=5,
                 cwl=5, ccd_s=2, ccd_l=4, wtr_s=6, wtr_l=8),
    "2400": dict(tck=0.833, cl=17, rcd_rd=17, rcd_wr=14, rp=17, ras=40, rc=57, wr=19, rtp=6,
                 cwl=6, ccd_s=2, ccd_l=4, wtr_s=8, wtr_l=10),
}
# Nanosecond timings the table leaves to the vendor: tRRD_S/L 4/6 ns and tFAW 16 ns (Ramulator's
# HBM2 values), tREFI 3.9 us, all-bank tRFC by die density.
RRD_S_NS, RRD_L_NS, FAW_NS, REFI_NS = 4.0, 6.0, 16.0, 3900.0
RFC_NS = {2: 160.0, 4: 260.0, 8: 350.0}

MAPPINGS = ("RoBaCoBgPc", "RoCoBaBgPc", "RoBaBgCoPc", "PcRoBaBgCo")
"""Address mappings, fields from the most to the least significant (above the byte offset in
one access): Ro row, Ba bank in group, Bg bank group, Co column, Pc pseudo-channel."""


@dataclass(frozen=True)
class Timing:
    """Every constraint the controller obeys and the device model checks, in clock cycles."""

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

    @property
    def burst_cycles(self):
        """Cycles one column command occupies the data bus."""
        return BURST_LENGTH // 2

    @property
    def rd_to_wr(self):
        """RD to WR: the read burst leaves the bus, one turnaround cycle, then the write data."""
        return self.cl + self.burst_cycles + 1 - self.cwl

    @property
    def wr_to_rd_s(self):
        return self.cwl + self.burst_cycles + self.wtr_s

    @property
    def wr_to_rd_l(self):
        return self.cwl + self.burst_cycles + self.wtr_l

    @property
    def wr_to_pre(self):
        return self.cwl + self.burst_cycles + self.wr

    def to_dict(self):
        return asdict(self)


@dataclass(frozen=True)
class HBMConfig(Config):
    """Parameters of one HBM controller: AXI ports, pseudo-channels and their scheduling.

    Parameters
    ----------
    speed : str
        Timing preset, ``"1600"``, ``"2000"`` or ``"2400"`` (Mb/s per pin, HBM2).
    pseudo_channels : int
        Pseudo-channels served, 1..32, a power of two.
    bank_groups, banks_per_group : int
        1, 2 or 4 each (HBM2: 4 x 4).
    row_bits : int
        Row address bits, 4..17.
    col_bits : int
        Bits of the access index within a row, 1..7 (HBM2 1 KB page of 32 B accesses: 5).
    data_width : int
        Pseudo-channel data bits, 64 or 128; one access moves ``data_width * 4 / 8`` bytes, the
        width of the AXI data bus.
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
        ``"open"`` (rows stay open until a conflict) or ``"closed"`` (a row is precharged as
        soon as no queued request hits it).
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
        All-bank refresh every tREFI. Off only for measurements (the device model then does
        not check refresh).
    refresh_postpone : int
        Refreshes owed before refresh is forced ahead of traffic, 1..8 (JEDEC allows 8).
    """

    KIND = "HBM"

    speed: str = "2000"
    pseudo_channels: int = 2
    bank_groups: int = 4
    banks_per_group: int = 4
    row_bits: int = 14
    col_bits: int = 5
    data_width: int = 64
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
    refresh_postpone: int = 8

    def validate(self):
        check_choice("speed", self.speed, tuple(PRESETS))
        check_choice("pseudo_channels", self.pseudo_channels, tuple(2**i for i in range(6)))
        check_choice("bank_groups", self.bank_groups, (1, 2, 4))
        check_choice("banks_per_group", self.banks_per_group, (1, 2, 4))
        check_int("row_bits", self.row_bits, 4, 17)
        check_int("col_bits", self.col_bits, 1, 7)
        check_choice("data_width", self.data_width, (64, 128))
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
        check_int("refresh_postpone", self.refresh_postpone, 1, 8)

    # Geometry ----------------------------------------------------------------------------

    @property
    def access_bytes(self):
        """Bytes moved by one column command, and the AXI data bus width in bytes."""
        return self.data_width * BURST_LENGTH // 8

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

    def decode(self, address):
        """(pc, bank, row, col) of a byte address below the capacity; bank = bg * banks_per
        group + ba. The Python twin of the front end's mapping, for models and benchmarks."""
        widths, offsets = self.field_widths(), self.field_offsets()
        f = {n: (address >> offsets[n]) & ((1 << widths[n]) - 1) for n in widths}
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
    def timing(self):
        p = PRESETS[self.speed]
        tck = p["tck"]

        def ns(t):
            return max(1, math.ceil(t / tck - 1e-9))

        cycles = {k: v for k, v in p.items() if k != "tck"}
        # Minimum times round up; tREFI is a maximum interval, so it rounds down.
        return Timing(**cycles, rrd_s=ns(RRD_S_NS), rrd_l=ns(RRD_L_NS), faw=ns(FAW_NS),
                      rfc=ns(RFC_NS[self.density_gb]), refi=math.floor(REFI_NS / tck + 1e-9))

    # Identity -----------------------------------------------------------------------------

    @property
    def name(self):
        """Verilog module name of the controller top: readable fields and a hash of the rest."""
        digest = hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode())
        return (f"podium_hbm{self.speed}_pc{self.pseudo_channels}_p{self.ports}_"
                f"{digest.hexdigest()[:8]}")


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
