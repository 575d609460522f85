"""The pod chip's local memory (docs/pod.md, "Pod top"), one flit per word, shared by the
endpoint, the collective engine, the message unit and the host: the VMEM of a simulation chip
(an SRAM macro of its own), or the ports of a TensorCore's VMEM that its ICI endpoint uses.

    writers[i] ─► round robin per group ─► write port p (SRAM or VMEM)
    readers[i] ─► round robin per group ─► read port p ─► read_data[i] (a queue per reader)

Every cycle the memory takes one write per write port and one read per read port (a VMEM port
only when its bank grants it, see hdl/tensorcore/vmem.py). A reader is
granted only while its response queue has room for every read it has in flight, so its reads are
answered in order and never lost whatever its ``read_data`` backpressure; the others go on
meanwhile. A write taken in one cycle is seen by every read granted in a later cycle (the SRAM
is read-first within a cycle, and a client that needs its own write back, the Receiver's add,
reads only after its write is taken). An access outside the memory (``space`` HBM, an address
that is not a multiple of the flit bytes, or past ``words`` flits) is counted in ``errors``: a
write is dropped, a read answered with zeros.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec import protocol

from ..lib.arbiter import RoundRobin
from ..lib.codes import hw
from ..lib.counter import COUNTER_WIDTH, count_events
from ..lib.queue import Queue
from ..lib.tree import tree_sum
from ..tensorcore.vmem_ports import vmem_read_signature, vmem_write_signature
from .endpoint import read_beat_layout, write_beat_layout

__all__ = ["LocalMemory", "RESPONSE_DEPTH"]

IciSpace = hw(protocol.IciSpace)

RESPONSE_DEPTH = 4
"""Entries of each reader's response queue: a reader taking one flit per cycle is granted a
read every cycle."""


class LocalMemory(wiring.Component):
    """``words`` flits of memory with ``writers`` write clients and ``readers`` read clients.

    ``sram`` is the :class:`~hdl.lib.sram.SRAM` macro to instantiate (``byte_enable``, a read
    port per group of ``read_groups`` and a write port per group of ``write_groups``,
    ``words`` deep, a flit wide), emitted once by the top; or, with ``vmem`` (a
    TensorCoreConfig whose rows are flits), none: the ports are ``rd`` and ``wr``, to the
    TensorCore's VMEM. ``read_groups`` / ``write_groups``: the readers / writers (indices)
    each port serves, every client in one group; by default one port serves all.

    Members
    -------
    write : In(stream of write_beat_layout).array(writers)
    read : In(stream of read_beat_layout).array(readers)
    read_data : Out(stream of flit_bits).array(readers)
    rd : Out(vmem_read_signature).array(read ports), wr : Out(vmem_write_signature)...
        With ``vmem``: the VMEM ports.
    errors : Out(32)
        Accesses outside the memory.
    """

    def __init__(self, cfg, sram=None, *, words, writers, readers, read_groups=None,
                 write_groups=None, vmem=None):
        self._cfg, self._sram, self._words, self._vmem = cfg, sram, words, vmem
        self._writers, self._readers = writers, readers
        self._groups = read_groups or [list(range(readers))]
        self._write_groups = write_groups or [list(range(writers))]
        members = {
            "write": In(stream.Signature(write_beat_layout(cfg))).array(writers),
            "read": In(stream.Signature(read_beat_layout(cfg))).array(readers),
            "read_data": Out(stream.Signature(cfg.ici.flit_bits)).array(readers),
            "errors": Out(COUNTER_WIDTH),
        }
        if vmem is not None:
            members["rd"] = Out(vmem_read_signature(vmem)).array(len(self._groups))
            members["wr"] = Out(vmem_write_signature(vmem)).array(len(self._write_groups))
        super().__init__(members)

    def _word(self, m, beat, name):
        """(word index, whether the access is inside the memory) of ``beat``."""
        shift = (self._cfg.flit_bytes - 1).bit_length()
        word = Signal(range(self._words), name=f"{name}_word")
        ok = Signal(name=f"{name}_ok")
        m.d.comb += [
            word.eq(beat.address >> shift),
            ok.eq((beat.space == IciSpace.VMEM) & (beat.address[:shift] == 0)
                  & ((beat.address >> shift) < self._words)),
        ]
        return word, ok

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        width = cfg.ici.flit_bits

        vmem = self._vmem is not None

        # Writes: per write port, one per cycle among its writers, round robin; a write
        # outside the memory is taken (and dropped) at once.
        wes, waddrs, wdatas, wstrbs, bad_writes = [], [], [], [], []
        for port, group in enumerate(self._write_groups):
            m.submodules[f"warb{port}"] = warb = RoundRobin(len(group))
            wbeat = Signal(write_beat_layout(cfg), name=f"wbeat{port}")
            waddr, wok = self._word(m, wbeat, f"w{port}")
            taken = ~wok | (self.wr[port].ready if vmem else 1)
            m.d.comb += [warb.requests.eq(Cat(*(self.write[i].valid for i in group))),
                         warb.advance.eq(taken)]
            for j, i in enumerate(group):
                with m.If(warb.grant == j):
                    m.d.comb += [wbeat.eq(self.write[i].payload),
                                 self.write[i].ready.eq(taken)]
            wes.append(warb.valid & wok)
            waddrs.append(waddr)
            wdatas.append(wbeat.data)
            wstrbs.append(wbeat.strobe)
            bad_writes.append(warb.valid & ~wok)

        # Reads: per read port, one per cycle among its readers whose queues have room.
        queues = [Queue(width, RESPONSE_DEPTH) for _ in range(self._readers)]
        inflight = [Signal(name=f"inflight{i}") for i in range(self._readers)]
        for i, q in enumerate(queues):
            m.submodules[f"rq{i}"] = q
            wiring.connect(m, q.o, wiring.flipped(self.read_data[i]))
        raddrs, rdatas, bad_reads = [], [], []
        for port, group in enumerate(self._groups):
            can = Signal(len(group), name=f"can{port}")
            for j, i in enumerate(group):
                m.d.comb += can[j].eq(self.read[i].valid
                                      & (queues[i].level + inflight[i] < RESPONSE_DEPTH))
            m.submodules[f"rarb{port}"] = rarb = RoundRobin(len(group))
            rbeat = Signal(read_beat_layout(cfg), name=f"rbeat{port}")
            raddr, rok = self._word(m, rbeat, f"r{port}")
            taken = ~rok | (self.rd[port].ready if vmem else 1)
            m.d.comb += [rarb.requests.eq(can), rarb.advance.eq(taken)]
            for j, i in enumerate(group):
                granted = rarb.valid & (rarb.grant == j) & taken
                with m.If(rarb.grant == j):
                    m.d.comb += [rbeat.eq(self.read[i].payload), self.read[i].ready.eq(granted)]
                m.d.sync += inflight[i].eq(granted)
            rdata = Signal(width, name=f"rdata{port}")
            valid_data = Signal(name=f"valid_data{port}")
            m.d.sync += valid_data.eq(rarb.valid & rok)
            for i in group:
                m.d.comb += [queues[i].i.valid.eq(inflight[i]),
                             queues[i].i.payload.eq(Mux(valid_data, rdata, 0))]
            raddrs.append(raddr)
            rdatas.append(rdata)
            bad_reads.append(rarb.valid & ~rok)
            if vmem:
                m.d.comb += [self.rd[port].addr.eq(raddr),
                             self.rd[port].valid.eq(rarb.valid & rok),
                             rdata.eq(self.rd[port].data)]
        if vmem:
            for port, wr in enumerate(self.wr):
                m.d.comb += [wr.addr.eq(waddrs[port]), wr.data.eq(wdatas[port]),
                             wr.strb.eq(wstrbs[port]), wr.valid.eq(wes[port])]
        else:
            if len(wes) == 1:
                wes, waddrs, wdatas, wstrbs = wes[0], waddrs[0], wdatas[0], wstrbs[0]
            self._sram.instance(m, "mem", we=wes, waddr=waddrs, wdata=wdatas, wstrb=wstrbs,
                                raddr=raddrs, rdata=rdatas)

        count_events(m, self, {"errors": tree_sum([*bad_writes, *bad_reads])})
        return m
