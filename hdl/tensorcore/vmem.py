"""VMEM: the TensorCore's banked on-chip scratchpad.

``vmem_banks`` banks of consecutive rows (bank ``b`` holds rows ``b * bank_rows`` onwards),
each an SRAM macro of ``row_bytes``-wide rows with one read and one write port and byte
enables on the write (``hdl.lib.sram.SRAM``, read-first: a read of a row being written in the
same cycle returns its old contents). Every engine has its own read and write ports
(``vmem_ports.py``); each bank's read port and write port are granted round robin among the
engine ports that address the bank in that cycle, so engines working in different banks never
stall each other, and one engine alone in a bank gets one row per cycle. A read's data is on
its port the cycle after the grant.
"""

from amaranth.hdl import Array, Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from ..lib.arbiter import round_robin
from ..lib.bits import first_set
from ..lib.sram import SRAM
from .vmem_ports import vmem_read_signature, vmem_write_signature

__all__ = ["VMEM", "vector_slot", "place_vector"]


class VMEM(wiring.Component):
    """The banked scratchpad (see the module docstring).

    Parameters
    ----------
    config : TensorCoreConfig
    reads, writes : int
        Engine read ports and write ports.
    name : str
        Verilog module name of the bank macro.

    Members
    -------
    rd : In(vmem_read_signature).array(reads)
    wr : In(vmem_write_signature).array(writes)
    """

    def __init__(self, config, *, reads, writes, name):
        self._config = config
        self._reads, self._writes = reads, writes
        self._bank = SRAM(name, width=8 * config.row_bytes, depth=config.bank_rows,
                          byte_enable=True)
        super().__init__({
            "rd": In(vmem_read_signature(config)).array(reads),
            "wr": In(vmem_write_signature(config)).array(writes),
        })

    @property
    def submodules(self):
        return [self._bank]

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        banks, low = cfg.vmem_banks, (cfg.bank_rows - 1).bit_length()

        def bank_of(addr):
            return addr[low:] if banks > 1 else 0

        rdata = []
        r_grants = [[] for _ in range(self._reads)]
        w_grants = [[] for _ in range(self._writes)]
        for b in range(banks):
            rg = round_robin(m, Cat(*[p.valid & (bank_of(p.addr) == b) for p in self.rd]), 1,
                             name=f"bank{b}_r")
            wg = round_robin(m, Cat(*[p.valid & (bank_of(p.addr) == b) for p in self.wr]), 1,
                             name=f"bank{b}_w")
            ri, _ = first_set(m, rg, name=f"bank{b}_rsel")
            wi, w_any = first_set(m, wg, name=f"bank{b}_wsel")
            data = Signal(8 * cfg.row_bytes, name=f"bank{b}_rdata")

            def pick(ports, name, index):
                return Array(getattr(p, name) for p in ports)[index]

            self._bank.instance(
                m, f"bank{b}", we=w_any, waddr=pick(self.wr, "addr", wi),
                wdata=pick(self.wr, "data", wi), wstrb=pick(self.wr, "strb", wi),
                raddr=[pick(self.rd, "addr", ri)], rdata=[data])
            rdata.append(data)
            for p in range(self._reads):
                r_grants[p].append(rg[p])
            for p in range(self._writes):
                w_grants[p].append(wg[p])

        for p, port in enumerate(self.rd):
            m.d.comb += port.ready.eq(Cat(*r_grants[p]).any())
            granted = Signal(range(max(2, banks)), name=f"rd{p}_bank")
            with m.If(port.valid & port.ready):
                m.d.sync += granted.eq(bank_of(port.addr))
            m.d.comb += port.data.eq(Array(rdata)[granted] if banks > 1 else rdata[0])
        for p, port in enumerate(self.wr):
            m.d.comb += port.ready.eq(Cat(*w_grants[p]).any())
        return m


def vector_slot(row, offset, vector_bytes, row_bytes):
    """The ``vector_bytes`` bytes of ``row`` at byte ``offset`` (a multiple of
    ``vector_bytes``; only its bits that select a slot are used)."""
    slots = row_bytes // vector_bytes
    if slots == 1:
        return row
    slot = offset[(vector_bytes - 1).bit_length():(row_bytes - 1).bit_length()]
    return Array(row.word_select(s, 8 * vector_bytes) for s in range(slots))[slot]


def place_vector(value, offset, vector_bytes, row_bytes, nbytes):
    """``(data, strb)`` of a row write that puts the first ``nbytes`` (1..``vector_bytes``)
    bytes of the ``vector_bytes``-byte ``value`` at byte ``offset`` of the row (a multiple of
    ``vector_bytes``; only its bits within the row are used)."""
    slots = row_bytes // vector_bytes
    mask = (Const(1, vector_bytes + 1) << nbytes)[:vector_bytes + 1] - 1
    if slots == 1:
        return value, mask[:row_bytes]
    shift = offset[:(row_bytes - 1).bit_length()]
    return Cat(*[value] * slots), (mask[:vector_bytes] << shift)[:row_bytes]
