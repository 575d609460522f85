"""The interfaces between the HBM controller's parts: the command codes and the per-channel
command/data interface a PHY implements, the request and response payloads that cross the
crossbar, and the records the parts of one pseudo-channel controller pass each other (queue
entries, commands, bank status).

    AxiPort ─ request_layout ─► crossbar ─► PseudoChannel ─┬─ commands ─► CommandArbiter ─┐
            ◄─ rresp/bresp_layout ◄───────◄ (two per channel) └─ DataSignature ───────────┴─►
                                                                  ChannelSignature: PHY / device

Inside a :class:`~hdl.hbm.channel.PseudoChannel` the scheduler offers a row command and a column
command (``row_command_layout``, ``col_command_layout``) every cycle; the channel's arbiter
grants each bus to one pseudo-channel; the bank machines watch the granted commands and report
the state of every bank and timing constraint (:class:`BankStatusSignature`).
"""

from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["RowOp", "ColOp", "ChannelSignature", "CommandBusSignature", "DataSignature",
           "BankStatusSignature",
           "tag_bits",
           "request_layout", "rresp_layout", "bresp_layout", "entry_layout", "wslot_bits",
           "row_command_layout", "refresh_command_layout", "col_command_layout"]


class RowOp(enum.Enum, shape=3):
    """Row command bus codes: ACT (two bus cycles), PRE (one bank), PREA (every bank of the
    pseudo-channel), REF (all-bank refresh), REFSB (one bank's refresh)."""

    ACT = 0
    PRE = 1
    PREA = 2
    REF = 3
    REFSB = 4


class ColOp(enum.Enum, shape=2):
    """Column command bus codes: RD, WR, and with auto-precharge RDA, WRA (the bank precharges
    itself after the access). Bit 0: write; bit 1: auto-precharge."""

    RD = 0
    WR = 1
    RDA = 2
    WRA = 3


def tag_bits(cfg):
    """Bits of the opaque tag a request carries back in its response (port, lane, slot)."""
    lanes = (cfg.id_lanes - 1).bit_length()
    slots = max((cfg.rob_depth // cfg.id_lanes - 1).bit_length(),
                (cfg.write_bursts - 1).bit_length())
    return max(1, (cfg.ports - 1).bit_length() + lanes + slots)


def wslot_bits(cfg):
    """Bits of a write buffer slot index."""
    return max(1, (cfg.write_buffer - 1).bit_length())


def request_layout(cfg):
    """A request decoded to (bank, row, column); a write carries its data and strobes."""
    return data.StructLayout({
        "write": 1,
        "bank": cfg.bank_bits,
        "row": cfg.row_bits,
        "col": cfg.col_bits,
        "tag": tag_bits(cfg),
        "data": cfg.access_bytes * 8,
        "strb": cfg.access_bytes,
    })


def rresp_layout(cfg):
    """Read data with its request's tag; ``err``: an uncorrectable word."""
    return data.StructLayout({"tag": tag_bits(cfg), "data": cfg.access_bytes * 8, "err": 1})


def bresp_layout(cfg):
    """A write's completion with its request's tag; ``err``: its merge read met an
    uncorrectable word and it was dropped."""
    return data.StructLayout({"tag": tag_bits(cfg), "err": 1})


def entry_layout(cfg):
    """A command queue entry: the request without its data (which waits in the write buffer,
    slot ``wslot``), and its state.

    ``rmw``: a partial write still needing its merge read; ``rmw_busy``: that read has issued;
    ``cancel``: the merge read met an uncorrectable word, so the write is dropped; ``posted``:
    a full write, already answered; ``wait``: cycles queued, saturating at the starvation cap.
    """
    return data.StructLayout({
        "write": 1, "rmw": 1, "rmw_busy": 1, "cancel": 1, "posted": 1,
        "bank": cfg.bank_bits, "row": cfg.row_bits, "col": cfg.col_bits,
        "tag": tag_bits(cfg), "wslot": wslot_bits(cfg),
        "wait": cfg.starvation_cap.bit_length(),
    })


def row_command_layout(cfg):
    """A row command offered or issued (``valid`` low: none this cycle)."""
    return data.StructLayout({"valid": 1, "op": RowOp, "bank": cfg.bank_bits,
                              "row": cfg.row_bits})


def refresh_command_layout(cfg):
    """A refresh command the refresher wants (PREA, REF, PRE or REFSB; no row address)."""
    return data.StructLayout({"valid": 1, "op": RowOp, "bank": cfg.bank_bits})


def col_command_layout(cfg):
    """A column command offered or issued (``valid`` low: none this cycle)."""
    return data.StructLayout({"valid": 1, "op": ColOp, "bank": cfg.bank_bits,
                              "col": cfg.col_bits})


class DataSignature(wiring.Signature):
    """The data bus of one pseudo-channel (or legacy channel), as the controller drives it.

    ``wrdata`` (half an access's codewords per cycle) with ``wrdata_valid``, CWL and CWL + 1
    cycles after WR; ``rddata`` with ``rddata_valid`` from the device, CL and CL + 1 cycles
    after RD. Codeword layout: 64 data bits then 8 check bits; word ``k`` of an access is in
    the cycle ``k // (words / 2)``.
    """

    def __init__(self, cfg):
        super().__init__({
            "wrdata": Out(cfg.beat_bits),
            "wrdata_valid": Out(1),
            "rddata": In(cfg.beat_bits),
            "rddata_valid": In(1),
        })


def _command_bus(cfg):
    return {
        "row_valid": Out(1),
        "row_op": Out(RowOp),
        "row_pc": Out(1),
        "row_bank": Out(cfg.bank_bits),
        "row_addr": Out(cfg.row_bits),
        "col_valid": Out(1),
        "col_op": Out(ColOp),
        "col_pc": Out(1),
        "col_bank": Out(cfg.bank_bits),
        "col_addr": Out(cfg.col_bits),
    }


class CommandBusSignature(wiring.Signature):
    """The row and column command buses of one channel, as the controller drives them.

    Row command bus: ``row_valid``, ``row_op`` (RowOp), ``row_pc`` (the pseudo-channel it is
    for), ``row_bank``, ``row_addr``; an ACT holds the bus for two cycles (``row_valid`` is low
    in its second cycle). Column command bus: ``col_valid``, ``col_op`` (ColOp), ``col_pc``,
    ``col_bank``, ``col_addr``. In legacy mode ``row_pc`` and ``col_pc`` are 0.
    """

    def __init__(self, cfg):
        super().__init__(_command_bus(cfg))


class ChannelSignature(wiring.Signature):
    """Command/data interface of one channel, as the controller drives it: what a PHY
    implements. The members of :class:`CommandBusSignature`, and ``data<k>``, the
    :class:`DataSignature` of the channel's pseudo-channel ``k`` (only ``data0`` in legacy
    mode).
    """

    def __init__(self, cfg):
        super().__init__({**_command_bus(cfg),
                          **{f"data{k}": Out(DataSignature(cfg))
                             for k in range(cfg.pcs_per_channel)}})


class BankStatusSignature(wiring.Signature):
    """What the bank machines report to the scheduler and the refresher each cycle, as the bank
    machines drive it: the open row of every bank and whether each timing constraint is met
    now.

    Per bank (one bit each, bank ``b`` at bit ``b``): ``open``, ``open_row`` (row per bank),
    ``ref_ok`` (REF or REFSB of the bank: tRP, tRC, auto-precharge, tRFCsb), ``act_ok`` (the
    same for an ACT, which counts them to its reference cycle), ``rd_ok`` (tRCD_RD), ``wr_ok``
    (tRCD_WR), ``pre_ok`` (tRAS, tRTP, WR to PRE), ``pre_left`` (cycles until ``pre_ok``),
    ``rda_ok`` (WR to RDA: an auto-precharge now would not cut a write's recovery short). Per
    bank group: ``rrd_l_ok``, ``ccd_l_ok``, ``wtr_l_ok``, ``refsb_l_ok`` (ACT to REFSB). Per
    pseudo-channel: ``rrd_s_ok`` (tRRD_S, REFSB to ACT), ``faw_ok``, ``ccd_s_ok``, ``wtr_s_ok``,
    ``rtw_ok`` (read to write turnaround), ``rfc_ok`` (tRFC before REF or REFSB),
    ``rfc_act_ok`` (tRFC before ACT), ``refsb_ok`` (ACT to REFSB, tRREFD).
    """

    def __init__(self, cfg):
        B, G, t = cfg.banks, cfg.bank_groups, cfg.timing
        super().__init__({
            "open": Out(B),
            "open_row": Out(data.ArrayLayout(cfg.row_bits, B)),
            "ref_ok": Out(B), "act_ok": Out(B), "rd_ok": Out(B), "wr_ok": Out(B),
            "pre_ok": Out(B), "rda_ok": Out(B),
            "pre_left": Out(data.ArrayLayout(range(max(t.act_to_pre, t.rtp, t.wr_to_pre) + 1),
                                             B)),
            "rrd_l_ok": Out(G), "ccd_l_ok": Out(G), "wtr_l_ok": Out(G), "refsb_l_ok": Out(G),
            "rrd_s_ok": Out(1), "faw_ok": Out(1), "ccd_s_ok": Out(1), "wtr_s_ok": Out(1),
            "rtw_ok": Out(1), "rfc_ok": Out(1), "rfc_act_ok": Out(1), "refsb_ok": Out(1),
        })
