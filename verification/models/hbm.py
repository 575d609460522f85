"""Golden HBM device model: stores data, returns it after CL, and checks every command.

It stands where the HBM stack would, at the controller's per-channel command/data interface
(one instance serves every channel), and is written from the JEDEC-style rules of HBM2
(JESD235 as the published simulators apply it), the timing table (spec/hbm.py names the
source of every number) and Ramulator 2's HBM2/HBM3 constraint lists, not from the RTL. A
command that breaks a timing constraint or a state rule raises :class:`Violation` at once (the
testbench lets it fail the test); nothing is only printed.

Pseudo-channels are numbered globally; pseudo-channels ``c * per_channel ... + per_channel - 1``
form channel ``c`` and share its row and column command buses. Timings count from a command's
first cycle, except an ACT's bank timings: they count from its reference cycle ``a`` (the
timing's ``act_reference_cycle``: its first cycle, or its second, a = t + 1, DRAMSys
``CheckerHBM2.cpp`` commit 8e021ea and Ramulator 2.1 ``spec.py`` commit 38c51d4; see
spec/hbm.py). Rules checked, with ``t`` the command's cycle:

  Buses (per channel): one row command per cycle, and none in the cycle after an ACT (ACT
       holds the row bus two cycles); one column command per cycle.
  ACT  bank closed; its ``a`` tRP after its PRE (or after its auto-precharge: the precharge of
       an RDA starts at max(RDA + tRTP, a + tRAS), of a WRA at max(WRA + CWL + BL/2 + tWR,
       a + tRAS), ``a`` of the ACT that opened the row); tRC after its ACT; tRRD_L after an ACT
       in its bank group, tRRD_S after any; at most 4 ACTs in any tFAW window; its ``a`` tRFC
       after REF, tRFCsb after a REFSB of the bank; t tRREFD - 1 after a REFSB of another
       bank.
  PRE  (of an open bank) tRAS after its ACT's ``a``; tRTP after its RD; CWL + BL/2 + tWR after
       its WR. PREA: the same for every open bank. PRE of a closed bank is a no-op.
  RD   bank open; tRCD_RD after its ACT's ``a``; tCCD_L after a RD/WR in its bank group,
       tCCD_S after any; write-to-read: CWL + BL/2 + tWTR_L (same group) / tWTR_S (other)
       after a WR.
  WR   bank open; tRCD_WR after its ACT's ``a``; tCCD_L/S; read-to-write: the write burst
       starts at least ``rtw`` idle cycles after the last read burst left the bus.
  RDA, WRA: as RD, WR; the bank is closed from then on for commands (see ACT for its
       precharge). The implicit precharge is a precharge: it starts no earlier than
       CWL + BL/2 + tWR after the bank's last WR (an RDA soon after a WR breaks it).
  REF  every bank closed; tRP after each precharge; tRC after each ACT's ``a``; tRFC after
       REF; tRFCsb after each REFSB.
  REFSB bank closed; tRP after its precharge, tRC after its ACT's ``a``, tRFCsb after its last
       REFSB; tRFC after REF; tRRD_S + 1 after an ACT (tRRD_L + 1 in its bank group); tRREFD
       after a REFSB.
  Refresh: each bank falls due for one refresh every tREFI from reset; a REF refreshes every
       bank, a REFSB its bank. A bank may owe at most 8 (refresh overdue), be at most 8 ahead
       (too many pulled in), and go at most 9 x tREFI between refreshes (from reset, then from
       one refresh to the next).
  Data: write data must be valid exactly in the BL/2 cycles from t + CWL of each WR and in no
       other cycle; read data is driven in the BL/2 cycles from t + CL of each RD; no data-bus
       cycle of a pseudo-channel may carry two bursts (data bus collision).

Storage holds raw codewords (72 bits per 64-bit word, as the controller sends them): the device
knows nothing of ECC. :meth:`inject` flips stored bits to test the controller's ECC. With a
``trace`` file every command is written as one line: ``cycle channel pc command bank address``
(address: the row of an ACT, the column of a column command, ``-`` otherwise).
"""

from collections import defaultdict, deque

import numpy as np

from . import ecc

__all__ = ["HBMDeviceModel", "Violation", "MAX_POSTPONED", "MAX_PULLED_IN", "MAX_INTERVAL",
           "backdoor_load", "backdoor_write", "backdoor_dump", "replay"]

MAX_POSTPONED = 8
MAX_PULLED_IN = 8
MAX_INTERVAL = 9        # tREFI from one refresh of a bank to the next, at most
NEVER = -(10**9)


class Violation(AssertionError):
    """A command broke a timing constraint or a state rule of the device."""


class _PseudoChannel:
    def __init__(self, banks):
        self.open = [None] * banks          # open row per bank, or None
        self.last_act = [NEVER] * banks
        self.last_pre = [NEVER] * banks     # also the start of an auto-precharge
        self.last_rd = [NEVER] * banks
        self.last_wr = [NEVER] * banks
        self.last_refsb = [NEVER] * banks
        self.refreshed = [0] * banks        # refreshes per bank
        self.refreshed_at = [0] * banks     # cycle of each bank's last refresh (reset: 0)
        self.deadline = 0                   # first cycle a bank would be overdue
        self.acts = deque(maxlen=4)         # cycles of the last four ACTs
        self.act_bg = defaultdict(lambda: NEVER)
        self.col_bg = defaultdict(lambda: NEVER)
        self.wr_bg = defaultdict(lambda: NEVER)
        self.last_act_any = NEVER
        self.last_col_any = NEVER
        self.last_wr_any = NEVER
        self.last_rd_any = NEVER
        self.last_ref = NEVER
        self.last_refsb_any = NEVER
        self.write_beats = {}               # cycle -> (bank, row, col, beat index)
        self.read_beats = {}                # cycle -> (bank, row, col, beat index)
        self.mem = {}                       # (bank, row, col) -> list of codewords


class HBMDeviceModel:
    """The stack's pseudo-channels at command level.

    Parameters
    ----------
    timing : spec.hbm.Timing (or any object with the same fields)
    pseudo_channels, bank_groups, banks_per_group : int
    per_channel : int
        Pseudo-channels sharing one channel's command buses (2; legacy mode 1).
    words : int
        64-bit words (72-bit codewords) per access; ``words / burst_cycles`` move in each data
        cycle.
    check_refresh : bool
        Check the refresh rules (off for runs without refresh).
    trace : file or None
        Where to write every command.
    """

    CODEWORD = 72

    def __init__(self, timing, pseudo_channels, bank_groups, banks_per_group, *, per_channel=2,
                 words=4, check_refresh=True, trace=None):
        self.t = timing
        # Cycles from an ACT's first cycle to its reference cycle ``a`` (module docstring).
        self.act_origin = ("first", "second").index(timing.act_reference_cycle)
        self.act_at = f"ACT ({timing.act_reference_cycle} cycle)"
        self.bank_groups, self.banks_per_group = bank_groups, banks_per_group
        self.banks = bank_groups * banks_per_group
        self.per_channel = per_channel
        self.words = words
        self.check_refresh = check_refresh
        self.trace = trace
        self.pc = [_PseudoChannel(self.banks) for _ in range(pseudo_channels)]
        for c in self.pc:
            self._update_deadline(c)
        channels = (pseudo_channels + per_channel - 1) // per_channel
        self.row_bus = [(NEVER, None)] * channels      # (cycle, op) of the last row command
        self.col_bus = [NEVER] * channels
        self.commands = defaultdict(int)

    # Helpers -------------------------------------------------------------------------------

    def _bg(self, bank):
        return bank // self.banks_per_group

    def _opened(self, c, bank):
        """The reference cycle ``a`` of the ACT that last opened ``bank``."""
        return c.last_act[bank] + self.act_origin

    def _fail(self, pc, cycle, what):
        raise Violation(f"HBM pc{pc} cycle {cycle}: {what}")

    def _need(self, pc, cycle, since, gap, what):
        if cycle - since < gap:
            self._fail(pc, cycle, f"{what}: {cycle - since} cycles, needs {gap}")

    def _command(self, pc, cycle, op, bank="-", address="-"):
        self.commands[op] += 1
        if self.trace:
            self.trace.write(f"{cycle} {pc // self.per_channel} {pc % self.per_channel} {op} "
                             f"{bank} {address}\n")

    def _row_bus(self, pc, cycle, op):
        ch = pc // self.per_channel
        last, last_op = self.row_bus[ch]
        if cycle == last:
            self._fail(pc, cycle, f"two row commands in one cycle on channel {ch}")
        if last_op == "ACT" and cycle == last + 1:
            self._fail(pc, cycle, f"{op} in the second cycle of an ACT on channel {ch}'s row bus")
        self.row_bus[ch] = (cycle, op)

    def _col_bus(self, pc, cycle):
        ch = pc // self.per_channel
        if self.col_bus[ch] == cycle:
            self._fail(pc, cycle, f"two column commands in one cycle on channel {ch}")
        self.col_bus[ch] = cycle

    # Row commands --------------------------------------------------------------------------

    def act(self, pc, cycle, bank, row):
        c, t = self.pc[pc], self.t
        self._row_bus(pc, cycle, "ACT")
        if c.open[bank] is not None:
            self._fail(pc, cycle, f"ACT to bank {bank}, already open (row {c.open[bank]})")
        # tRP, tRFC and tRFCsb end at the ACT's reference cycle (DRAMSys: ACT after PREPB
        # tRP - tCK, after REFAB tRFC - tCK, after REFPB tRFCSB - tCK, from its second).
        a, what = self.act_origin, self.act_at
        self._need(pc, cycle, c.last_pre[bank] - a, t.rp, f"tRP (PRE to {what}, bank {bank})")
        self._need(pc, cycle, c.last_act[bank], t.rc, f"tRC (ACT to ACT, bank {bank})")
        self._need(pc, cycle, c.act_bg[self._bg(bank)], t.rrd_l, "tRRD_L (ACT to ACT, group)")
        self._need(pc, cycle, c.last_act_any, t.rrd_s, "tRRD_S (ACT to ACT)")
        if len(c.acts) == 4:
            self._need(pc, cycle, c.acts[0], t.faw, "tFAW (fifth ACT in the window)")
        self._need(pc, cycle, c.last_ref - a, t.rfc, f"tRFC (REF to {what})")
        self._need(pc, cycle, c.last_refsb[bank] - a, t.rfc_sb,
                   f"tRFCsb (REFSB to {what}, bank {bank})")
        others = max((at for b, at in enumerate(c.last_refsb) if b != bank), default=NEVER)
        self._need(pc, cycle, others, t.refsb_to_act, "tRREFD (REFSB to ACT, other bank)")
        c.open[bank] = row
        c.last_act[bank] = c.act_bg[self._bg(bank)] = c.last_act_any = cycle
        c.acts.append(cycle)
        self._command(pc, cycle, "ACT", bank, row)

    def _close(self, pc, cycle, bank):
        c, t = self.pc[pc], self.t
        if c.open[bank] is None:
            return
        self._need(pc, cycle, self._opened(c, bank), t.ras,
                   f"tRAS ({self.act_at} to PRE, bank {bank})")
        self._need(pc, cycle, c.last_rd[bank], t.rtp, f"tRTP (RD to PRE, bank {bank})")
        self._need(pc, cycle, c.last_wr[bank], t.wr_to_pre, f"tWR (WR to PRE, bank {bank})")
        c.last_pre[bank] = cycle
        c.open[bank] = None

    def pre(self, pc, cycle, bank):
        self._row_bus(pc, cycle, "PRE")
        self._close(pc, cycle, bank)
        self._command(pc, cycle, "PRE", bank)

    def prea(self, pc, cycle):
        self._row_bus(pc, cycle, "PREA")
        for bank in range(self.banks):
            self._close(pc, cycle, bank)
        self._command(pc, cycle, "PREA")

    def _update_deadline(self, c):
        """The first cycle at whose end some bank would owe more than MAX_POSTPONED
        refreshes or have gone more than MAX_INTERVAL x tREFI without one."""
        t = self.t
        c.deadline = min((min(c.refreshed) + MAX_POSTPONED + 1) * t.refi,
                         min(c.refreshed_at) + MAX_INTERVAL * t.refi + 1)

    def _refreshed(self, pc, cycle, banks):
        c, t = self.pc[pc], self.t
        for bank in banks:
            if self.check_refresh:
                gap = cycle - c.refreshed_at[bank]
                if gap > MAX_INTERVAL * t.refi:
                    self._fail(pc, cycle, f"refresh interval: {gap} cycles since bank {bank}'s "
                                          f"last refresh, at most {MAX_INTERVAL} x tREFI = "
                                          f"{MAX_INTERVAL * t.refi}")
            c.refreshed[bank] += 1
            c.refreshed_at[bank] = cycle
            ahead = c.refreshed[bank] - cycle // t.refi
            if self.check_refresh and ahead > MAX_PULLED_IN:
                self._fail(pc, cycle, f"refresh pulled in too far: bank {bank} {ahead} ahead "
                                      f"of due, JEDEC allows {MAX_PULLED_IN}")
        self._update_deadline(c)

    def ref(self, pc, cycle):
        c, t = self.pc[pc], self.t
        self._row_bus(pc, cycle, "REF")
        open_banks = [b for b, r in enumerate(c.open) if r is not None]
        if open_banks:
            self._fail(pc, cycle, f"REF with banks {open_banks} open")
        for bank in range(self.banks):
            self._need(pc, cycle, c.last_pre[bank], t.rp, f"tRP (PRE to REF, bank {bank})")
            self._need(pc, cycle, self._opened(c, bank), t.rc,
                       f"tRC ({self.act_at} to REF, bank {bank})")
            self._need(pc, cycle, c.last_refsb[bank], t.rfc_sb, f"tRFCsb (REFSB to REF, bank "
                                                                 f"{bank})")
        self._need(pc, cycle, c.last_ref, t.rfc, "tRFC (REF to REF)")
        c.last_ref = cycle
        self._refreshed(pc, cycle, range(self.banks))
        self._command(pc, cycle, "REF")

    def refsb(self, pc, cycle, bank):
        c, t = self.pc[pc], self.t
        self._row_bus(pc, cycle, "REFSB")
        if c.open[bank] is not None:
            self._fail(pc, cycle, f"REFSB to bank {bank}, which is open")
        self._need(pc, cycle, c.last_pre[bank], t.rp, f"tRP (PRE to REFSB, bank {bank})")
        self._need(pc, cycle, self._opened(c, bank), t.rc,
                   f"tRC ({self.act_at} to REFSB, bank {bank})")
        self._need(pc, cycle, c.last_refsb[bank], t.rfc_sb, f"tRFCsb (REFSB to REFSB, bank "
                                                             f"{bank})")
        self._need(pc, cycle, c.last_ref, t.rfc, "tRFC (REF to REFSB)")
        self._need(pc, cycle, c.act_bg[self._bg(bank)], t.act_to_refsb_l,
                   "tRRD_L + 1 (ACT to REFSB, group)")
        self._need(pc, cycle, c.last_act_any, t.act_to_refsb_s, "tRRD_S + 1 (ACT to REFSB)")
        self._need(pc, cycle, c.last_refsb_any, t.rrefd, "tRREFD (REFSB to REFSB)")
        c.last_refsb[bank] = c.last_refsb_any = cycle
        self._refreshed(pc, cycle, [bank])
        self._command(pc, cycle, "REFSB", bank)

    # Column commands -----------------------------------------------------------------------

    def _col(self, pc, cycle, bank, what):
        c, t = self.pc[pc], self.t
        self._col_bus(pc, cycle)
        if c.open[bank] is None:
            self._fail(pc, cycle, f"{what} to bank {bank}, which is closed")
        self._need(pc, cycle, c.col_bg[self._bg(bank)], t.ccd_l, f"tCCD_L ({what}, group)")
        self._need(pc, cycle, c.last_col_any, t.ccd_s, f"tCCD_S ({what})")

    def _beats(self, pc, cycle, start, beats, key):
        c = self.pc[pc]
        for k in range(self.t.burst_cycles):
            at = start + k
            if at in c.read_beats or at in c.write_beats:
                self._fail(pc, cycle, f"data bus collision in cycle {at}")
            beats[at] = (key, k)

    def _auto_precharge(self, pc, cycle, bank, delay, what):
        """The bank's implicit precharge starts ``delay`` after the command, held back to tRAS
        after the ACT (the device starts it "as if an explicit PRECHARGE command was issued at
        the earliest possible time without violating tRAS (MIN)", the DDR wording LiteDRAM
        PR #45 quotes). It is a precharge, so it must also meet the write recovery of an
        earlier WR to the bank (WR + CWL + BL/2 + tWR): DRAMSys ``CheckerHBM2.cpp`` (commit
        8e021ea) lines 117-122 make an RDA wait tWRPRE - tRTP after a WR to its bank. A WRA's
        own recovery ends after any earlier WR's, so only an RDA can break it."""
        c, t = self.pc[pc], self.t
        start = max(cycle + delay, self._opened(c, bank) + t.ras)
        if start - c.last_wr[bank] < t.wr_to_pre:
            self._fail(pc, cycle, f"tWR (WR to the auto-precharge of {what}, bank {bank}): "
                                  f"precharge {start - c.last_wr[bank]} cycles after the WR, "
                                  f"needs {t.wr_to_pre}")
        c.last_pre[bank] = start
        c.open[bank] = None

    def rd(self, pc, cycle, bank, col, auto=False):
        c, t = self.pc[pc], self.t
        what = "RDA" if auto else "RD"
        self._col(pc, cycle, bank, what)
        self._need(pc, cycle, self._opened(c, bank), t.rcd_rd,
                   f"tRCD_RD ({self.act_at} to RD, bank {bank})")
        end = t.cwl + t.burst_cycles
        self._need(pc, cycle, c.wr_bg[self._bg(bank)], end + t.wtr_l, "tWTR_L (WR to RD)")
        self._need(pc, cycle, c.last_wr_any, end + t.wtr_s, "tWTR_S (WR to RD)")
        self._beats(pc, cycle, cycle + t.cl, c.read_beats, (bank, c.open[bank], col))
        c.last_rd[bank] = c.last_rd_any = c.last_col_any = cycle
        c.col_bg[self._bg(bank)] = cycle
        if auto:
            self._auto_precharge(pc, cycle, bank, t.rtp, what)
        self._command(pc, cycle, what, bank, col)

    def wr(self, pc, cycle, bank, col, auto=False):
        c, t = self.pc[pc], self.t
        what = "WRA" if auto else "WR"
        self._col(pc, cycle, bank, what)
        self._need(pc, cycle, self._opened(c, bank), t.rcd_wr,
                   f"tRCD_WR ({self.act_at} to WR, bank {bank})")
        # The write burst may start only ``rtw`` idle cycles after the last read burst.
        self._need(pc, cycle + t.cwl, c.last_rd_any + t.cl + t.burst_cycles, t.rtw,
                   "read-to-write turnaround (idle cycles between read and write data)")
        self._beats(pc, cycle, cycle + t.cwl, c.write_beats, (bank, c.open[bank], col))
        c.last_wr[bank] = c.last_wr_any = c.last_col_any = cycle
        c.col_bg[self._bg(bank)] = c.wr_bg[self._bg(bank)] = cycle
        if auto:
            self._auto_precharge(pc, cycle, bank, t.wr_to_pre, what)
        self._command(pc, cycle, what, bank, col)

    # Data and time -------------------------------------------------------------------------

    def write_data(self, pc, cycle, valid, beat):
        """The controller's write data in ``cycle``; ``beat`` is the packed codewords."""
        c = self.pc[pc]
        expected = c.write_beats.pop(cycle, None)
        if expected is None:
            if valid:
                self._fail(pc, cycle, "write data with no WR CWL cycles earlier")
            return
        if not valid:
            self._fail(pc, cycle, "write data missing CWL cycles after WR")
        key, k = expected
        per = self.words // self.t.burst_cycles
        words = c.mem.setdefault(key, [0] * self.words)
        mask = (1 << self.CODEWORD) - 1
        for i in range(per):
            words[k * per + i] = (beat >> (i * self.CODEWORD)) & mask

    def read_data(self, pc, cycle):
        """Packed codewords the device drives in ``cycle``, or None."""
        c = self.pc[pc]
        pending = c.read_beats.pop(cycle, None)
        if pending is None:
            return None
        key, k = pending
        per = self.words // self.t.burst_cycles
        words = c.mem.get(key, [0] * self.words)
        return sum(w << (i * self.CODEWORD)
                   for i, w in enumerate(words[k * per:(k + 1) * per]))

    def tick(self, cycle):
        """End of ``cycle`` (counted from reset): no bank may be overdue for refresh."""
        if not self.check_refresh:
            return
        t = self.t
        for pc, c in enumerate(self.pc):
            if cycle >= c.deadline:
                owed = cycle // t.refi - min(c.refreshed)
                if owed > MAX_POSTPONED:
                    self._fail(pc, cycle, f"refresh overdue: {owed} refreshes owed, JEDEC "
                                          f"allows {MAX_POSTPONED}")
                self._fail(pc, cycle, f"refresh interval: {cycle - min(c.refreshed_at)} cycles "
                                      f"since a bank's last refresh, at most {MAX_INTERVAL} x "
                                      f"tREFI = {MAX_INTERVAL * t.refi}")

    def inject(self, pc, bank, row, col, word, bits):
        """Flip ``bits`` (indices 0..71) of codeword ``word`` of a stored access."""
        words = self.pc[pc].mem.setdefault((bank, row, col), [0] * self.words)
        for b in bits:
            words[word] ^= 1 << b

    def stored(self, pc, bank, row, col):
        return list(self.pc[pc].mem.get((bank, row, col), [0] * self.words))


# Backdoor: the device's storage as the controller fills it (its address map and ECC) --------

def backdoor_load(model, config, address, data):
    """Put ``data`` at byte ``address`` (access-aligned, whole accesses) straight into
    ``model``'s storage, as the controller ``config`` (an HBMConfig) would have written it."""
    ab = config.access_bytes
    assert address % ab == 0 and len(data) % ab == 0, "backdoor loads whole accesses"
    lo = np.frombuffer(bytes(data), dtype="<u8")
    codewords = [int(d) | int(c) << 64 for d, c in zip(lo.tolist(),
                                                        ecc.check_bits(lo).tolist(), strict=True)]
    n = ab // 8
    for k, at in enumerate(range(0, len(data), ab)):
        pc, bank, row, col = config.decode(address + at)
        model.pc[pc].mem[(bank, row, col)] = codewords[k * n: (k + 1) * n]


def backdoor_write(model, config, address, data):
    """Put any bytes at any ``address``: the whole accesses around them are read
    (:func:`backdoor_dump`), patched and loaded back (:func:`backdoor_load`)."""
    ab = config.access_bytes
    start = address - address % ab
    end = -(-(address + len(data)) // ab) * ab
    if start == address and end == address + len(data):
        backdoor_load(model, config, address, bytes(data))
        return
    image = bytearray(backdoor_dump(model, config, start, end - start))
    image[address - start: address - start + len(data)] = data
    backdoor_load(model, config, start, bytes(image))


def backdoor_dump(model, config, address, length):
    """The bytes at ``address`` as ``model`` holds them (no bit may be flipped: a codeword
    is clean when its check bits are those of its data, which is what a zero syndrome and an
    even overall parity in :func:`ecc.decode` say, checked for all the words at once)."""
    ab = config.access_bytes
    first = address - address % ab
    words = [w for at in range(first, address + length, ab)
             for w in model.stored(*config.decode(at))]
    data = np.array([w & (2**64 - 1) for w in words], dtype=np.uint64)
    flipped = ecc.check_bits(data) != np.array([w >> 64 for w in words], dtype=np.uint64)
    if flipped.any():
        at = first + int(np.argmax(flipped)) // config.words * ab
        raise AssertionError(f"ECC error in the device at {at:#x}")
    start = address % ab
    return data.astype("<u8").tobytes()[start: start + length]


def replay(model, lines, last_cycle):
    """Check a command trace (lines in the trace format, in order) with ``model``, as if its
    commands came from the controller's pins: every timing, state and refresh rule of the
    model (the write-data rules are the trace writer's: a trace holds no data), and the
    refresh deadline at the end of every cycle up to ``last_cycle``. Raises
    :class:`Violation` at the first broken rule; returns the number of commands.

    The refresh check of :meth:`HBMDeviceModel.tick` is made at the end of the cycle before
    each cycle with commands and at ``last_cycle``: the deadline changes only at a refresh
    command, and the check of a cycle is the stricter the later the cycle, so these are
    every cycle's checks."""
    n = model.per_channel
    count, current, prune = 0, -1, 0
    for line in lines:
        cycle, ch, pc, op, bank, address = line.split()
        cycle, i = int(cycle), int(ch) * n + int(pc)
        if cycle != current:
            if cycle > 0:
                model.tick(cycle - 1)
            current = cycle
        if op == "ACT":
            model.act(i, cycle, int(bank), int(address))
        elif op == "PRE":
            model.pre(i, cycle, int(bank))
        elif op == "PREA":
            model.prea(i, cycle)
        elif op == "REF":
            model.ref(i, cycle)
        elif op == "REFSB":
            model.refsb(i, cycle, int(bank))
        elif op in ("RD", "RDA", "WR", "WRA"):
            access = model.wr if op.startswith("WR") else model.rd
            access(i, cycle, int(bank), int(address), auto=op.endswith("A"))
        else:
            raise Violation(f"unknown command {op!r} in the trace at cycle {cycle}")
        count += 1
        prune += 1
        if prune == 4096:
            # Data beats of past cycles (the model drops them as the data moves).
            prune = 0
            for c in model.pc:
                c.read_beats = {k: v for k, v in c.read_beats.items() if k > cycle}
                c.write_beats = {k: v for k, v in c.write_beats.items() if k > cycle}
    if last_cycle >= 0:
        model.tick(last_cycle)
    return count
