"""Golden HBM device model: stores data, returns it after CL, and checks every command.

It stands where the HBM stack would, at the controller's command/data interface (one instance
serves every pseudo-channel), and is written from the JEDEC-style rules in
../shared/reference/hbm.md and the timing table, not from the RTL. A command that breaks a
timing constraint or a state rule raises :class:`Violation` at once (the testbench lets it fail
the test); nothing is only printed.

Rules checked, per pseudo-channel, with ``t`` the command's cycle:
  ACT  bank closed; tRP after its PRE; tRC after its ACT; tRRD_L after an ACT in its bank group,
       tRRD_S after any ACT; at most 4 ACTs in any tFAW window; tRFC after REF.
  PRE  (of an open bank) tRAS after its ACT; tRTP after its RD; CWL + BL/2 + tWR after its WR.
       PREA: the same for every open bank. PRE of a closed bank is a no-op.
  RD   bank open; tRCD_RD after its ACT; tCCD_L after a RD/WR in its bank group, tCCD_S after
       any; write-to-read: CWL + BL/2 + tWTR_L (same group) / tWTR_S (other) after a WR.
  WR   bank open; tRCD_WR after its ACT; tCCD_L/S; read-to-write: the write burst starts at
       least one cycle after the last read burst left the bus (t + CWL >= t_RD + CL + BL/2 + 1).
  REF  every bank closed; tRP after each PRE; tRFC after REF. Refresh overdue: more than 8
       refreshes owed (one falls due every tREFI from reset) is a violation.
  Data write data must be valid exactly in cycles t + CWL and t + CWL + 1 of each WR and in no
       other cycle; read data is driven in cycles t + CL and t + CL + 1 of each RD.

Storage holds raw codewords (72 bits per 64-bit word, as the controller sends them): the device
knows nothing of ECC. :meth:`inject` flips stored bits to test the controller's ECC.
"""

from collections import defaultdict, deque

__all__ = ["HBMDeviceModel", "Violation", "MAX_POSTPONED"]

MAX_POSTPONED = 8
NEVER = -(10**9)


class Violation(AssertionError):
    """A command broke a timing constraint or a state rule of the device."""


class _Channel:
    def __init__(self, banks):
        self.open = [None] * banks          # open row per bank, or None
        self.last_act = [NEVER] * banks
        self.last_pre = [NEVER] * banks
        self.last_rd = [NEVER] * banks
        self.last_wr = [NEVER] * banks
        self.acts = deque(maxlen=4)         # cycles of the last four ACTs
        self.act_bg = defaultdict(lambda: NEVER)
        self.col_bg = defaultdict(lambda: NEVER)
        self.wr_bg = defaultdict(lambda: NEVER)
        self.last_act_any = NEVER
        self.last_col_any = NEVER
        self.last_wr_any = NEVER
        self.last_rd_any = NEVER
        self.last_ref = NEVER
        self.refs = 0
        self.write_beats = {}               # cycle -> (bank, row, col, beat index)
        self.read_beats = {}                # cycle -> (bank, row, col, beat index)
        self.mem = {}                       # (bank, row, col) -> list of codewords


class HBMDeviceModel:
    """The stack's pseudo-channels at command level.

    Parameters
    ----------
    timing : hdl.hbm.config.Timing (or any object with the same fields)
    channels, bank_groups, banks_per_group : int
    words : int
        64-bit words (72-bit codewords) per access; half of them move in each data cycle.
    check_refresh : bool
        Check that refresh is never overdue.
    """

    CODEWORD = 72

    def __init__(self, timing, channels, bank_groups, banks_per_group, words=4,
                 check_refresh=True):
        self.t = timing
        self.bank_groups, self.banks_per_group = bank_groups, banks_per_group
        self.banks = bank_groups * banks_per_group
        self.words = words
        self.check_refresh = check_refresh
        self.ch = [_Channel(self.banks) for _ in range(channels)]
        self.commands = defaultdict(int)

    # Helpers -------------------------------------------------------------------------------

    def _bg(self, bank):
        return bank // self.banks_per_group

    def _fail(self, pc, cycle, what):
        raise Violation(f"HBM pc{pc} cycle {cycle}: {what}")

    def _need(self, pc, cycle, since, gap, what):
        if cycle - since < gap:
            self._fail(pc, cycle, f"{what}: {cycle - since} cycles, needs {gap}")

    # Row commands --------------------------------------------------------------------------

    def act(self, pc, cycle, bank, row):
        c, t = self.ch[pc], self.t
        if c.open[bank] is not None:
            self._fail(pc, cycle, f"ACT to bank {bank}, already open (row {c.open[bank]})")
        self._need(pc, cycle, c.last_pre[bank], t.rp, f"tRP (PRE to ACT, bank {bank})")
        self._need(pc, cycle, c.last_act[bank], t.rc, f"tRC (ACT to ACT, bank {bank})")
        self._need(pc, cycle, c.act_bg[self._bg(bank)], t.rrd_l, "tRRD_L (ACT to ACT, group)")
        self._need(pc, cycle, c.last_act_any, t.rrd_s, "tRRD_S (ACT to ACT)")
        if len(c.acts) == 4:
            self._need(pc, cycle, c.acts[0], t.faw, "tFAW (fifth ACT in the window)")
        self._need(pc, cycle, c.last_ref, t.rfc, "tRFC (REF to ACT)")
        c.open[bank] = row
        c.last_act[bank] = c.act_bg[self._bg(bank)] = c.last_act_any = cycle
        c.acts.append(cycle)
        self.commands["ACT"] += 1

    def pre(self, pc, cycle, bank):
        c, t = self.ch[pc], self.t
        if c.open[bank] is not None:
            self._need(pc, cycle, c.last_act[bank], t.ras, f"tRAS (ACT to PRE, bank {bank})")
            self._need(pc, cycle, c.last_rd[bank], t.rtp, f"tRTP (RD to PRE, bank {bank})")
            self._need(pc, cycle, c.last_wr[bank], t.cwl + t.burst_cycles + t.wr,
                       f"tWR (WR to PRE, bank {bank})")
            c.last_pre[bank] = cycle
        c.open[bank] = None
        self.commands["PRE"] += 1

    def prea(self, pc, cycle):
        for bank in range(self.banks):
            if self.ch[pc].open[bank] is not None:
                self.pre(pc, cycle, bank)
        self.commands["PREA"] += 1

    def ref(self, pc, cycle):
        c, t = self.ch[pc], self.t
        open_banks = [b for b, r in enumerate(c.open) if r is not None]
        if open_banks:
            self._fail(pc, cycle, f"REF with banks {open_banks} open")
        for bank in range(self.banks):
            self._need(pc, cycle, c.last_pre[bank], t.rp, f"tRP (PRE to REF, bank {bank})")
        self._need(pc, cycle, c.last_ref, t.rfc, "tRFC (REF to REF)")
        c.last_ref = cycle
        c.refs += 1
        self.commands["REF"] += 1

    # Column commands -----------------------------------------------------------------------

    def _col(self, pc, cycle, bank, what):
        c, t = self.ch[pc], self.t
        if c.open[bank] is None:
            self._fail(pc, cycle, f"{what} to bank {bank}, which is closed")
        self._need(pc, cycle, c.col_bg[self._bg(bank)], t.ccd_l, f"tCCD_L ({what}, group)")
        self._need(pc, cycle, c.last_col_any, t.ccd_s, f"tCCD_S ({what})")

    def rd(self, pc, cycle, bank, col):
        c, t = self.ch[pc], self.t
        self._col(pc, cycle, bank, "RD")
        self._need(pc, cycle, c.last_act[bank], t.rcd_rd, f"tRCD_RD (ACT to RD, bank {bank})")
        end = t.cwl + t.burst_cycles
        self._need(pc, cycle, c.wr_bg[self._bg(bank)], end + t.wtr_l, "tWTR_L (WR to RD)")
        self._need(pc, cycle, c.last_wr_any, end + t.wtr_s, "tWTR_S (WR to RD)")
        key = (bank, c.open[bank], col)
        for k in range(t.burst_cycles):
            c.read_beats[cycle + t.cl + k] = (key, k)
        c.last_rd[bank] = c.last_rd_any = c.last_col_any = cycle
        c.col_bg[self._bg(bank)] = cycle
        self.commands["RD"] += 1

    def wr(self, pc, cycle, bank, col):
        c, t = self.ch[pc], self.t
        self._col(pc, cycle, bank, "WR")
        self._need(pc, cycle, c.last_act[bank], t.rcd_wr, f"tRCD_WR (ACT to WR, bank {bank})")
        # The write burst may start only after the last read burst and one idle cycle.
        self._need(pc, cycle + t.cwl, c.last_rd_any + t.cl + t.burst_cycles, 1,
                   "read-to-write turnaround (write data would meet read data)")
        key = (bank, c.open[bank], col)
        for k in range(t.burst_cycles):
            c.write_beats[cycle + t.cwl + k] = (key, k)
        c.last_wr[bank] = c.last_wr_any = c.last_col_any = cycle
        c.col_bg[self._bg(bank)] = c.wr_bg[self._bg(bank)] = cycle
        self.commands["WR"] += 1

    # Data and time -------------------------------------------------------------------------

    def write_data(self, pc, cycle, valid, beat):
        """The controller's write data in ``cycle``; ``beat`` is the packed codewords."""
        c = self.ch[pc]
        expected = c.write_beats.pop(cycle, None)
        if expected is None:
            if valid:
                self._fail(pc, cycle, "write data with no WR CWL cycles earlier")
            return
        if not valid:
            self._fail(pc, cycle, "write data missing CWL cycles after WR")
        key, k = expected
        half = self.words // 2
        words = c.mem.setdefault(key, [0] * self.words)
        mask = (1 << self.CODEWORD) - 1
        for i in range(half):
            words[k * half + i] = (beat >> (i * self.CODEWORD)) & mask

    def read_data(self, pc, cycle):
        """Packed codewords the device drives in ``cycle``, or None."""
        c = self.ch[pc]
        pending = c.read_beats.pop(cycle, None)
        if pending is None:
            return None
        key, k = pending
        half = self.words // 2
        words = c.mem.get(key, [0] * self.words)
        return sum(w << (i * self.CODEWORD)
                   for i, w in enumerate(words[k * half:(k + 1) * half]))

    def tick(self, cycle):
        """End of ``cycle`` (counted from reset): refresh must not be overdue."""
        if not self.check_refresh:
            return
        due = cycle // self.t.refi
        for pc, c in enumerate(self.ch):
            if due - c.refs > MAX_POSTPONED:
                self._fail(pc, cycle, f"refresh overdue: {due - c.refs} refreshes owed, "
                                      f"JEDEC allows {MAX_POSTPONED}")

    def inject(self, pc, bank, row, col, word, bits):
        """Flip ``bits`` (indices 0..71) of codeword ``word`` of a stored access."""
        words = self.ch[pc].mem.setdefault((bank, row, col), [0] * self.words)
        for b in bits:
            words[word] ^= 1 << b

    def stored(self, pc, bank, row, col):
        return list(self.ch[pc].mem.get((bank, row, col), [0] * self.words))
