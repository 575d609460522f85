"""The SparseCore top: embedding lookups from HBM, controlled over AXI4-Lite (the register map
is in docs/sparsecore.md).

    csr ─► registers ─► control: descriptor check ─► offsets check ─► ids check ─► gather
    offsets / ids / weights ─► ListReaders (AXI IDs R, R+1, R+2) ─► BagWalker ─► tokens
    tokens ─► Gather (row reads, AXI IDs 0..R-1, credits) ─► pending ─► Combiner ◄─ rows
    (R = row_ids; a row buffer per row ID, the combiner takes each row from its token's)
    Combiner ◄─► ScaleUnit;  Combiner ─► AW / W (one output row per bag) ─► B counted
    every burst ─► Split4K (bursts across a 4 KiB boundary in two) ─► axi

An operation checks everything that could refuse it before it writes anything: the descriptors
(BAD_DESCRIPTOR), then the offsets (read once: BAD_OFFSETS if one decreases or passes the id
count), then the ids of the bags (read once: BAD_ID if one is outside the table and the policy
is stop; counted either way), and only then reads the lists again to gather and write.
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import enum, wiring

from ..lib.axi import AxiBurst, AxiResp, engine_members
from ..lib.axilite import AxiLiteRegisters
from ..lib.queue import Queue
from ..top import Top
from .combiner import Combiner
from .gather import Gather
from .reader import ListReader
from .scale import ScaleUnit
from .sorter import Sorter
from .split import Split4K
from .walker import BagWalker

__all__ = ["SparseCore", "Error", "REG", "TABLE_REGS", "COUNTERS", "CSR_ADDR_WIDTH", "ID_VALUE"]

CSR_ADDR_WIDTH = 12
ID_VALUE = 0x50445301
REG = {"ID": 0x000, "CONTROL": 0x004, "STATUS": 0x008, "ERROR": 0x00C, "ERROR_INFO": 0x010,
       "TABLE": 0x020, "MODE": 0x024, "PADDING": 0x028, "OFFSETS": 0x030, "BAGS": 0x034,
       "IDS": 0x038, "NIDS": 0x03C, "WEIGHTS": 0x040, "OUT": 0x044, "OUT_PITCH": 0x048,
       "GRAD": 0x04C, "GRAD_PITCH": 0x050, "LR": 0x054,
       "COUNTERS": 0x100, "TABLES": 0x200}
"""Byte addresses of the registers and windows."""
TABLE_REGS = ("BASE", "ROWS", "SHAPE", "PITCH")
"""The four words of a table descriptor (TABLES + 16 t + 4 k); SHAPE: dim in bits 15..0, format
in bit 16 (0 fp32, 1 bfloat16)."""
COUNTERS = ("cycles", "bags", "ids", "gathered", "padding", "bad_ids", "bytes_read",
            "bytes_written", "stalls", "unique_ids", "minibatches", "operations", "errors",
            "max_batch")
"""The counters, in register order (COUNTERS + 4 k). The first eleven restart at every start;
operations, errors and max_batch (the most ids one operation had) count from reset."""
PER_OP = 11


class Error(enum.Enum, shape=4):
    """The ERROR register (verification/models/sparsecore.py: Error)."""

    NONE = 0
    BAD_OFFSETS = 1
    BAD_ID = 2
    AXI_RESPONSE = 3
    BAD_DESCRIPTOR = 4


class SparseCore(Top):
    """The SparseCore (see the module docstring and docs/sparsecore.md).

    Members
    -------
    csr : In(AXI4LiteSignature)
    axi : Out(AXI4Signature)
        The manager port (to an HBM controller port).
    running, done, error : Out(1)
        STATUS bits.
    """

    def __init__(self, config):
        super().__init__(config, engine_members(config, CSR_ADDR_WIDTH))

    @property
    def extras(self):
        return {"csr": {"registers": REG, "table_registers": list(TABLE_REGS),
                        "counters": list(COUNTERS), "id": ID_VALUE,
                        "errors": {e.name: e.value for e in Error}}}

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.csr = csr = AxiLiteRegisters(addr_width=CSR_ADDR_WIDTH)
        wiring.connect(m, wiring.flipped(self.csr), csr.bus)
        init = {"MODE": 0x10 if cfg.bad_ids == "drop" else 0}
        regs = {name: Signal(32, name=f"reg_{name.lower()}", init=init.get(name, 0))
                for name in ("TABLE", "MODE", "PADDING", "OFFSETS", "BAGS", "IDS", "NIDS",
                             "WEIGHTS", "OUT", "OUT_PITCH", "GRAD", "GRAD_PITCH", "LR")}
        tables = [[Signal(32, name=f"t{t}_{k.lower()}") for k in TABLE_REGS]
                  for t in range(cfg.tables)]
        with m.If(csr.write & ~self.running):
            for name, reg in regs.items():
                with m.If(csr.waddr == REG[name]):
                    m.d.sync += reg.eq(csr.wdata)
            for t, words in enumerate(tables):
                for k, reg in enumerate(words):
                    with m.If(csr.waddr == REG["TABLES"] + 16 * t + 4 * k):
                        m.d.sync += reg.eq(csr.wdata)
        control = csr.write & (csr.waddr == REG["CONTROL"])
        start = Signal()
        m.d.comb += start.eq(control & csr.wdata[0] & ~self.running)
        with m.If(control & csr.wdata[1] & ~self.running):
            m.d.sync += [self.done.eq(0), self.error.eq(0)]

        counters = [Signal(32, name=f"counter_{name}") for name in COUNTERS]
        code = Signal(4)
        info = Signal(32)
        self._datapath(m, cfg, regs, tables, start, code, info, counters)
        self._readback(m, csr, regs, tables, code, info, counters)
        return m

    def _readback(self, m, csr, regs, tables, code, info, counters):
        a = csr.raddr
        value = Signal(32)
        fixed = {REG["ID"]: ID_VALUE, REG["STATUS"]: Cat(self.running, self.done, self.error),
                 REG["ERROR"]: code, REG["ERROR_INFO"]: info}
        fixed.update({REG[name]: reg for name, reg in regs.items()})
        with m.Switch(a):
            for addr, v in fixed.items():
                with m.Case(addr):
                    m.d.comb += value.eq(v)
            with m.Default():
                flat = [reg for words in tables for reg in words]
                for base, window in ((REG["COUNTERS"], counters), (REG["TABLES"], flat)):
                    with m.If((a >= base) & (a < base + 4 * len(window))):
                        m.d.comb += value.eq(Array(window)[(a - base) >> 2])
        m.d.comb += csr.rdata.eq(value)

    def _datapath(self, m, cfg, regs, tables, start, code, info, counters):
        """The units between the registers and the bus: the selected table's descriptor and
        the MODE bits decoded, the list readers, walker, gather, sorter, combiner, scale unit
        and row buffers, joined to each other and to the AXI channels; then the control."""
        # The core's bus; every burst reaches ``axi`` through the 4 KiB splitter.
        m.submodules.split = split = Split4K(cfg)
        wiring.connect(m, split.bus, wiring.flipped(self.axi))
        axi = split.mgr
        shift = (cfg.beat_bytes - 1).bit_length()
        sel = regs["TABLE"]
        table = Array(Array(words) for words in tables)[sel[:4] if cfg.tables > 1 else 0]
        base, rows, shape, pitch = table[0], table[1], table[2], table[3]
        dim, bf16 = shape[:16], shape[16]
        mode = regs["MODE"]
        weighted, kind, pad_en, drop, scatter = mode[0], mode[1:3], mode[3], mode[4], mode[5]
        row_bytes = Mux(bf16, dim << 1, dim << 2)
        row_beats = (row_bytes >> shift)[:8]
        out_beats = ((dim << 2) >> shift)[:8]

        readers = [ListReader(cfg) for _ in range(3)]
        for name, r in zip(("offsets", "ids", "weights"), readers, strict=True):
            m.submodules[f"{name}_reader"] = r
        m.submodules.walker = walker = BagWalker()
        m.submodules.gather = gather = Gather(cfg)
        m.submodules.combiner = comb = Combiner(cfg)
        m.submodules.scale = scale = ScaleUnit()
        m.submodules.sorter = sorter = Sorter(cfg)
        rowqs = [Queue(cfg.axi_data_width, cfg.id_beats) for _ in range(cfg.row_ids)]
        for k, q in enumerate(rowqs):
            m.submodules[f"rows{k}"] = q

        ctx = dict(axi=axi, scatter=scatter, sorter=sorter, regs=regs, rows=rows, dim=dim,
                   bf16=bf16, base=base, pitch=pitch,
                   row_bytes=row_bytes, drop=drop, weighted=weighted, readers=readers,
                   walker=walker, comb=comb, scale=scale, gather=gather, sel=sel,
                   pad_en=pad_en, kind=kind, shift=shift, row_beats=row_beats,
                   out_beats=out_beats, rowqs=rowqs)
        self._connect_units(m, ctx)
        self._read_address(m, cfg, ctx)
        self._read_data(m, cfg, ctx)
        self._write_channels(m, ctx)
        self._control(m, cfg, ctx, start, code, info, counters)

    @staticmethod
    def _connect_units(m, c):
        """The units joined: tokens from the walker to the gather (through the sorter for a
        scatter), pending rows to the combiner with each row from its ID's buffer, and every
        unit's operands from the registers and the decoded descriptor."""
        walker, sorter, gather, comb, scale = (c["walker"], c["sorter"], c["gather"],
                                               c["comb"], c["scale"])
        regs, scatter, rowqs = c["regs"], c["scatter"], c["rowqs"]
        row_beats, out_beats, bf16 = c["row_beats"], c["out_beats"], c["bf16"]
        base, pitch = c["base"], c["pitch"]
        with m.If(scatter):
            wiring.connect(m, walker.token, sorter.i)
            wiring.connect(m, sorter.o, gather.token)
        with m.Else():
            wiring.connect(m, walker.token, gather.token)
        wiring.connect(m, gather.pending, comb.pending)
        # The combiner takes its token's row from the buffer of the ID the row was read on.
        rid = comb.pending.payload.rid
        m.d.comb += [comb.rows.valid.eq(Array(q.o.valid for q in rowqs)[rid]),
                     comb.rows.payload.eq(Array(q.o.payload for q in rowqs)[rid])]
        for k, q in enumerate(rowqs):
            m.d.comb += [q.o.ready.eq(comb.rows.ready & (rid == k)),
                         gather.freed[k].eq(comb.freed & (rid == k))]
        m.d.comb += [
            walker.rows.eq(c["rows"]), walker.weighted.eq(c["weighted"]),
            walker.pad_en.eq(c["pad_en"]),
            walker.pad.eq(regs["PADDING"]), walker.bags.eq(regs["BAGS"]),
            gather.base.eq(Mux(scatter, regs["GRAD"], base)),
            gather.pitch.eq(Mux(scatter, regs["GRAD_PITCH"], pitch)),
            gather.ubase.eq(base), gather.upitch.eq(pitch),
            gather.row_beats.eq(Mux(scatter, out_beats, row_beats)), comb.lr.eq(regs["LR"]),
            gather.urow_beats.eq(row_beats), comb.ubf16.eq(bf16),
            sorter.walker_busy.eq(walker.busy),
            comb.out.eq(regs["OUT"]), comb.out_pitch.eq(regs["OUT_PITCH"]),
            comb.bf16.eq(bf16 & ~scatter),
            comb.row_beats.eq(row_beats), comb.out_beats.eq(out_beats),
            comb.scale.eq(scale.scale), comb.scale_valid.eq(scale.valid),
            scale.kind.eq(c["kind"]), scale.took.eq(comb.took), scale.weight.eq(comb.weight),
            scale.bag_end.eq(comb.bag_end),
        ]

    @staticmethod
    def _read_address(m, cfg, c):
        """AR: the readers (IDs row_ids..row_ids + 2) before the gather (IDs
        0..row_ids - 1); a grant holds until taken."""
        axi, gather = c["axi"], c["gather"]
        offs_r, ids_r, w_r = c["readers"]
        n = cfg.row_ids
        requests = [(offs_r.ar, n), (ids_r.ar, n + 1), (w_r.ar, n + 2), (gather.ar, gather.ar_id)]
        held = Signal()
        grant = Signal(range(4))
        pick = Signal(range(4))
        for k in reversed(range(4)):
            with m.If(requests[k][0].valid):
                m.d.comb += pick.eq(k)
        who = Mux(held, grant, pick)
        for k, (req, ident) in enumerate(requests):
            with m.If(who == k):
                m.d.comb += [axi.arvalid.eq(req.valid), axi.araddr.eq(req.payload.addr),
                             axi.arlen.eq(req.payload.len), axi.arid.eq(ident),
                             req.ready.eq(axi.arready)]
        m.d.comb += [axi.arsize.eq(c["shift"]), axi.arburst.eq(AxiBurst.INCR)]
        m.d.sync += [held.eq(axi.arvalid & ~axi.arready), grant.eq(who)]

    @staticmethod
    def _read_data(m, cfg, c):
        """R: by ID, always accepted (every destination reserved room for its beats)."""
        axi, n = c["axi"], cfg.row_ids
        offs_r, ids_r, w_r = c["readers"]
        ok = axi.rresp == AxiResp.OKAY
        m.d.comb += axi.rready.eq(1)
        for k, q in enumerate(c["rowqs"]):
            m.d.comb += [q.i.payload.eq(axi.rdata), q.i.valid.eq(axi.rvalid & (axi.rid == k))]
        for r, ident in ((offs_r, n), (ids_r, n + 1), (w_r, n + 2)):
            m.d.comb += [r.r_data.eq(axi.rdata), r.r_valid.eq(axi.rvalid & (axi.rid == ident)),
                         r.r_ok.eq(ok)]

    @staticmethod
    def _write_channels(m, c):
        """AW / W / B: the combiner's output rows (or a scatter's updated rows), every
        response accepted."""
        axi, comb = c["axi"], c["comb"]
        m.d.comb += [axi.awvalid.eq(comb.aw.valid), axi.awaddr.eq(comb.aw.payload),
                     comb.aw.ready.eq(axi.awready), axi.awid.eq(0),
                     axi.awlen.eq(Mux(c["scatter"], c["row_beats"], c["out_beats"]) - 1),
                     axi.awsize.eq(c["shift"]),
                     axi.awburst.eq(AxiBurst.INCR),
                     axi.wvalid.eq(comb.w.valid), axi.wdata.eq(comb.w.payload[:-1]),
                     axi.wlast.eq(comb.w.payload[-1]), axi.wstrb.eq(-1),
                     comb.w.ready.eq(axi.wready), axi.bready.eq(1)]

    def _control(self, m, cfg, c, start, code, info, counters):
        """The operation's sequence (module docstring): from IDLE on a start, the descriptor
        check, the offsets check, the ids check, then the gather until every row is
        written; with the counters and the bus progress it waits on."""
        regs = c["regs"]
        offs_r = c["readers"][0]
        first, last, prev = Signal(32), Signal(32), Signal(32)
        index = Signal(33)
        bad = Signal()
        bad_seen = Signal(32)
        walk = {"first": first, "last": last, "prev": prev, "index": index, "bad": bad,
                "bad_seen": bad_seen}
        written, issued, resp_error = self._bus_progress(m, c)
        desc_bad = self._descriptor_bad(cfg, c)
        self._count_events(m, cfg, c, start, counters)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(start):
                    m.d.sync += [self.running.eq(1), self.done.eq(0), self.error.eq(0),
                                 code.eq(0), info.eq(0), resp_error.eq(0),
                                 written.eq(0), issued.eq(0)]
                    m.next = "DESCRIPTOR"
            with m.State("DESCRIPTOR"):
                with m.If(desc_bad):
                    self._finish(m, Error.BAD_DESCRIPTOR, code, counters)
                with m.Else():
                    m.d.comb += [offs_r.start.eq(1), offs_r.base.eq(regs["OFFSETS"]),
                                 offs_r.count.eq(regs["BAGS"] + 1)]
                    m.d.sync += [index.eq(0), bad.eq(0)]
                    m.next = "OFFSETS"
            with m.State("OFFSETS"):
                self._check_offsets(m, c, walk, code, info, counters)
            with m.State("IDS"):
                self._check_ids(m, c, walk, code, info, counters, written, issued)
            with m.State("GATHER"):
                self._gather(m, c, code, counters, written, issued, resp_error)

    @staticmethod
    def _bus_progress(m, c):
        """(written, issued, resp_error): the write responses and the write bursts of the
        operation, and whether any response was not OKAY; the sorter is drained when every
        burst is answered and nothing is pending."""
        axi = c["axi"]
        written = Signal(32)
        resp_error = Signal()
        issued = Signal(32)
        with m.If(axi.bvalid):
            m.d.sync += written.eq(written + 1)
        with m.If(axi.awvalid & axi.awready):
            m.d.sync += issued.eq(issued + 1)
        m.d.comb += c["sorter"].drained.eq(~c["gather"].pending.valid & ~c["comb"].busy
                                          & (written == issued) & ~axi.awvalid)
        with m.If((axi.bvalid & (axi.bresp != AxiResp.OKAY))
                  | (axi.rvalid & (axi.rresp != AxiResp.OKAY))):
            m.d.sync += resp_error.eq(1)
        return written, issued, resp_error

    @staticmethod
    def _descriptor_bad(cfg, c):
        """Whether the operation's registers are refused (BAD_DESCRIPTOR): no such table, a
        dimension out of range, an address, pitch or row not aligned to the beat, a pitch
        shorter than its row, a list address not word-aligned, a scatter's mode or gradient
        registers wrong."""
        regs, dim, beat = c["regs"], c["dim"], cfg.beat_bytes
        return ((c["sel"] >= cfg.tables) | (dim == 0) | (dim > cfg.max_dim)
                | (c["row_bytes"][:(beat - 1).bit_length()] != 0)
                | (c["base"] % beat != 0) | (c["pitch"] % beat != 0)
                | (c["pitch"] < c["row_bytes"]) | (regs["OUT"] % beat != 0)
                | (regs["OUT_PITCH"] % beat != 0) | (regs["OUT_PITCH"] < (dim << 2))
                | (regs["OFFSETS"][:2] != 0) | (regs["IDS"][:2] != 0)
                | (regs["WEIGHTS"][:2] != 0)
                | (c["scatter"] & ((c["kind"] != 0)
                                   | (regs["GRAD"] % beat != 0)
                                   | (regs["GRAD_PITCH"] % beat != 0)
                                   | (regs["GRAD_PITCH"] < (dim << 2)))))

    def _count_events(self, m, cfg, c, start, counters):
        """The per-operation counters: each cleared on a start, else adding its event of
        the cycle."""
        axi, beat = c["axi"], cfg.beat_bytes
        events = {name: Signal(32, name=f"event_{name}") for name in COUNTERS[:PER_OP]}
        t = c["walker"].token
        took_token = t.valid & t.ready
        m.d.comb += [events["cycles"].eq(self.running),
                     events["bags"].eq(took_token & t.payload.last),
                     events["ids"].eq(took_token & ~(t.payload.skip & ~t.payload.padding
                                                     & ~t.payload.bad)),
                     events["gathered"].eq(took_token & ~t.payload.skip),
                     events["padding"].eq(took_token & t.payload.padding),
                     events["bytes_read"].eq(Mux(axi.rvalid, beat, 0)),
                     events["bytes_written"].eq(Mux(axi.wvalid & axi.wready, beat, 0)),
                     events["unique_ids"].eq(c["comb"].pending.valid
                                             & c["comb"].pending.ready
                                             & c["comb"].pending.payload.token.update),
                     events["minibatches"].eq(c["sorter"].minibatch),
                     events["stalls"].eq(c["gather"].stall | (axi.arvalid & ~axi.arready)
                                         | (axi.wvalid & ~axi.wready))]
        for k, name in enumerate(COUNTERS[:PER_OP]):
            with m.If(start):
                m.d.sync += counters[k].eq(0)
            with m.Else():
                m.d.sync += counters[k].eq(counters[k] + events[name])

    def _finish(self, m, err, code, counters):
        """End the operation with ``err`` (an Error, or an expression of its value): the
        STATUS bits and ERROR, the operations and errors counters, back to IDLE."""
        operations, errors, _ = counters[PER_OP:]
        err = err.value if isinstance(err, Error) else err
        m.d.sync += [self.running.eq(0), self.done.eq(err == 0), self.error.eq(err != 0),
                     code.eq(err), operations.eq(operations + 1)]
        with m.If(err != 0):
            m.d.sync += errors.eq(errors + 1)
        m.next = "IDLE"

    def _check_offsets(self, m, c, walk, code, info, counters):
        """OFFSETS: the offsets read once, the first and the last kept, the first one that
        decreases or passes the id count recorded (BAD_OFFSETS once all are read); then the
        ids of the bags read."""
        regs = c["regs"]
        offs_r, ids_r, _ = c["readers"]
        first, last, prev, index, bad = (walk[k] for k in ("first", "last", "prev", "index",
                                                           "bad"))
        max_batch = counters[COUNTERS.index("max_batch")]
        o = offs_r.o
        m.d.comb += o.ready.eq(1)
        with m.If(o.valid):
            m.d.sync += [index.eq(index + 1), prev.eq(o.payload), last.eq(o.payload)]
            with m.If(index == 0):
                m.d.sync += first.eq(o.payload)
            wrong = (o.payload > regs["NIDS"]) | ((index != 0) & (o.payload < prev))
            with m.If(wrong & ~bad):
                m.d.sync += [bad.eq(1), info.eq(index)]
        with m.If(~offs_r.busy & (index != 0)):
            with m.If(bad):
                self._finish(m, Error.BAD_OFFSETS, code, counters)
            with m.Else():
                m.d.comb += [ids_r.start.eq(1), ids_r.base.eq(regs["IDS"] + (first << 2)),
                             ids_r.count.eq(last - first)]
                m.d.sync += [index.eq(first), walk["bad_seen"].eq(0)]
                with m.If(last - first > max_batch):
                    m.d.sync += max_batch.eq(last - first)
                m.next = "IDS"

    def _check_ids(self, m, c, walk, code, info, counters, written, issued):
        """IDS: the ids read once, those outside the table counted (the first one's index
        recorded); BAD_ID if any and the policy is stop, else every list read again and the
        gather started."""
        regs = c["regs"]
        offs_r, ids_r, w_r = c["readers"]
        first, last, index, bad_seen = (walk[k] for k in ("first", "last", "index",
                                                          "bad_seen"))
        bad_ids = counters[COUNTERS.index("bad_ids")]
        o = ids_r.o
        m.d.comb += o.ready.eq(1)
        is_bad = o.payload >= c["rows"]
        with m.If(o.valid):
            m.d.sync += index.eq(index + 1)
            with m.If(is_bad):
                m.d.sync += [bad_seen.eq(bad_seen + 1), bad_ids.eq(bad_ids + 1)]
                with m.If(bad_seen == 0):
                    m.d.sync += info.eq(index)
        with m.If(~ids_r.busy):
            with m.If((bad_seen != 0) & ~c["drop"]):
                self._finish(m, Error.BAD_ID, code, counters)
            with m.Else():
                m.d.comb += [offs_r.start.eq(1), offs_r.base.eq(regs["OFFSETS"]),
                             offs_r.count.eq(regs["BAGS"] + 1),
                             ids_r.start.eq(1),
                             ids_r.base.eq(regs["IDS"] + (first << 2)),
                             ids_r.count.eq(last - first),
                             w_r.start.eq(c["weighted"]),
                             w_r.base.eq(regs["WEIGHTS"] + (first << 2)),
                             w_r.count.eq(last - first),
                             c["walker"].start.eq(1), c["comb"].start.eq(1),
                             c["scale"].start.eq(1)]
                m.d.sync += [written.eq(0), issued.eq(0)]
                m.next = "GATHER"

    def _gather(self, m, c, code, counters, written, issued, resp_error):
        """GATHER: the lists feed the walker until every unit is idle and every output row
        (every burst, for a scatter) is answered; AXI_RESPONSE if a response was not OKAY."""
        axi, readers = c["axi"], c["readers"]
        offs_r, ids_r, w_r = readers
        for r, port in zip(readers, ("offsets", "ids", "weights"), strict=True):
            wiring.connect(m, r.o, getattr(c["walker"], port))
        quiet = ~(offs_r.busy | ids_r.busy | w_r.busy | c["walker"].busy
                  | c["comb"].busy | c["gather"].pending.valid | c["sorter"].busy)
        target = Mux(c["scatter"], issued, c["regs"]["BAGS"])
        with m.If(quiet & (written == target) & ~axi.awvalid):
            self._finish(m, Mux(resp_error, Error.AXI_RESPONSE.value, Error.NONE.value), code,
                         counters)
