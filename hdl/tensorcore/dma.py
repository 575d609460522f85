"""The TensorCore's DMA engine: an AXI4 manager that copies between HBM and VMEM.

    cmd ─► walker ─► bursts ─┬─► load path:  AR ─► HBM ─► R ─► VMEM write port
                             └─► store path: VMEM read port ─► W; AW ─► HBM ─► B
           completion: per transfer, bursts outstanding; the transfer's semaphore in order

A transfer (a checked ``dma.load`` / ``dma.store``, docs/tensorcore.md) walks its runs,
innermost dimension first, and cuts each run into INCR bursts of at most ``max_burst`` beats
that never cross a 4 KiB boundary; bursts go out one per cycle while fewer than
``dma_bursts`` are in flight, their IDs taken in turn from ``dma_ids``, so reads of several
IDs are outstanding at once and the memory may answer them out of order across IDs. Read
beats are written to VMEM as they arrive (each ID's bursts are answered in order, so the
beat's VMEM address follows from its ID); store data is read from VMEM in burst order into
the W channel. Transfers start in order; each is complete when every one of its bursts is
answered, and completions are reported (``signal``) in issue order. An error response is
reported with the transfer's PC; the transfer and the others still finish their bursts.
``flush`` drops the transfer being walked and those queued (bursts already issued finish).
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.isa import MAX_SEMAPHORES

from ..lib.axi import AxiBurst, AxiResp, axi4_signature
from ..lib.queue import Queue
from .vmem import place_vector, vector_slot
from .vmem_ports import vmem_read_signature, vmem_write_signature

__all__ = ["DMA", "dma_command_layout", "SLOTS"]

SLOTS = 4           # transfers in flight (walking or waiting for their bursts)
DIMS = 3            # outer dimensions of a transfer (the run is the fourth)
COUNT_BITS = 16


def _vmem_bits(cfg):
    return (cfg.vmem_bytes - 1).bit_length()


def dma_command_layout(cfg):
    """A checked transfer: bases, run, and per outer dimension a count and two strides."""
    h, v = cfg.axi_addr_width, _vmem_bits(cfg)
    return data.StructLayout({
        "store": 1, "hbm": h, "vmem": v, "run": v + 1,
        "count": data.ArrayLayout(COUNT_BITS, DIMS), "hstride": data.ArrayLayout(h, DIMS),
        "vstride": data.ArrayLayout(v, DIMS),
        "signal": 1, "sem": range(MAX_SEMAPHORES + 1), "pc": 16,
    })


def _burst_layout(cfg):
    return data.StructLayout({"store": 1, "hbm": cfg.axi_addr_width, "vmem": _vmem_bits(cfg),
                             "beats": range(cfg.max_burst + 1), "slot": range(SLOTS)})


def _beat_shift(cfg):
    return (cfg.beat_bytes - 1).bit_length()


class _Walker(wiring.Component):
    """Transfers in, bursts out, one per cycle; reports each transfer's start and end."""

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "cmd": In(stream.Signature(dma_command_layout(cfg))),
            "burst": Out(stream.Signature(_burst_layout(cfg))),
            "slot": In(range(SLOTS)), "slot_free": In(1),
            "start": Out(1), "done": Out(1), "flush": In(1), "active": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        cmd = Signal(dma_command_layout(cfg))
        slot = Signal(range(SLOTS))
        idx = [Signal(COUNT_BITS, name=f"i{d}") for d in range(DIMS)]
        hb = [Signal(cfg.axi_addr_width, name=f"hbase{d}") for d in range(DIMS)]
        vb = [Signal(_vmem_bits(cfg), name=f"vbase{d}") for d in range(DIMS)]
        h = Signal(cfg.axi_addr_width)
        v = Signal(_vmem_bits(cfg))
        left = Signal(_vmem_bits(cfg) + 1)       # bytes of the run still to cut
        active = self.active

        m.d.comb += [self.cmd.ready.eq(~active & self.slot_free & ~self.flush),
                     self.start.eq(self.cmd.valid & self.cmd.ready)]
        with m.If(self.start):
            c = self.cmd.payload
            m.d.sync += [active.eq(1), cmd.eq(c), slot.eq(self.slot), h.eq(c.hbm), v.eq(c.vmem),
                         left.eq(c.run), *[x.eq(0) for x in idx],
                         *[x.eq(c.hbm) for x in hb], *[x.eq(c.vmem) for x in vb]]

        shift = _beat_shift(cfg)
        to_4k = (4096 - h[:12]) >> shift
        beats = Signal(range(cfg.max_burst + 1))
        b = left >> shift
        m.d.comb += beats.eq(Mux((b <= cfg.max_burst) & (b <= to_4k), b,
                                 Mux(to_4k < cfg.max_burst, to_4k, cfg.max_burst)))
        p = self.burst.payload
        m.d.comb += [self.burst.valid.eq(active), p.store.eq(cmd.store), p.hbm.eq(h),
                     p.vmem.eq(v), p.beats.eq(beats), p.slot.eq(slot)]
        run_end = beats == b
        last = Cat(*[idx[d] == cmd.count[d] - 1 for d in range(DIMS)]).all()
        m.d.comb += self.done.eq((self.burst.valid & self.burst.ready & run_end & last)
                                 | (active & self.flush))
        with m.If(self.flush):
            m.d.sync += active.eq(0)
        with m.Elif(self.burst.valid & self.burst.ready):
            step = beats << shift
            with m.If(~run_end):
                m.d.sync += [h.eq(h + step), v.eq(v + step), left.eq(left - step)]
            with m.Elif(last):
                m.d.sync += active.eq(0)
            with m.Else():
                self._next_run(m, cmd, idx, hb, vb, h, v, left)
        return m

    @staticmethod
    def _next_run(m, cmd, idx, hb, vb, h, v, left):
        """The first burst of the next run: the innermost dimension that is not at its end
        steps, the ones inside it restart."""
        m.d.sync += left.eq(cmd.run)
        for d in range(DIMS):
            inner_done = Cat(*[idx[e] == cmd.count[e] - 1 for e in range(d)]).all() \
                if d else 1
            with m.If(inner_done & (idx[d] != cmd.count[d] - 1)):
                nh, nv = hb[d] + cmd.hstride[d], vb[d] + cmd.vstride[d]
                m.d.sync += [idx[d].eq(idx[d] + 1), h.eq(nh), v.eq(nv)]
                for e in range(d + 1):
                    m.d.sync += [hb[e].eq(nh), vb[e].eq(nv)]
                for e in range(d):
                    m.d.sync += idx[e].eq(0)


class _Completion(wiring.Component):
    """Transfers in flight, in issue order: bursts outstanding per transfer, and the
    transfer's semaphore signalled when its walk is done and its last burst answered."""

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "start": In(1), "info": In(dma_command_layout(cfg)), "done": In(1),
            "slot": Out(range(SLOTS)), "slot_free": Out(1),
            "issued": In(1), "issued_slot": In(range(SLOTS)),
            "answered": In(2), "answered_slot": In(range(SLOTS)).array(2),
            "failed": In(2),
            "signal": Out(1), "sem": Out(range(MAX_SEMAPHORES + 1)), "signal_pc": Out(16),
            "error": Out(1), "error_pc": Out(16), "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        used = Signal(SLOTS)
        walked = Signal(SLOTS)
        count = [Signal(range(cfg.dma_bursts + 2), name=f"outstanding{s}") for s in range(SLOTS)]
        info = Array(Signal(dma_command_layout(cfg), name=f"info{s}") for s in range(SLOTS))
        head = Signal(range(SLOTS))
        tail = Signal(range(SLOTS))
        walking = Signal(range(SLOTS))
        m.d.comb += [self.slot.eq(tail), self.slot_free.eq(~used.bit_select(tail, 1)),
                     self.busy.eq(used != 0)]
        with m.If(self.start):
            m.d.sync += [info[tail].eq(self.info), walking.eq(tail), tail.eq(tail + 1)]
        for s in range(SLOTS):
            dec = Cat(*[self.answered[k] & (self.answered_slot[k] == s) for k in range(2)])
            inc = self.issued & (self.issued_slot == s)
            m.d.sync += count[s].eq(count[s] + inc - dec[0] - dec[1])
            with m.If(self.start & (tail == s)):
                m.d.sync += [used[s].eq(1), walked[s].eq(0)]
            with m.If(self.done & (walking == s)):
                m.d.sync += walked[s].eq(1)
        head_info = info[head]
        finished = used.bit_select(head, 1) & walked.bit_select(head, 1) & (
            Array(count)[head] == 0)
        m.d.comb += [self.signal.eq(finished & head_info.signal), self.sem.eq(head_info.sem),
                     self.signal_pc.eq(head_info.pc)]
        with m.If(finished):
            m.d.sync += [used.bit_select(head, 1).eq(0), head.eq(head + 1)]
        # The first failing burst this cycle names the transfer.
        fail_slot = Mux(self.failed[0], self.answered_slot[0], self.answered_slot[1])
        m.d.comb += [self.error.eq(self.failed.any()), self.error_pc.eq(info[fail_slot].pc)]
        return m


class _IdQueues(wiring.Component):
    """Bursts in flight by AXI ID: a burst issued takes the next ID in turn and its record
    (``layout``) joins that ID's queue; an answer names its ID, whose oldest record is
    ``head`` and leaves on ``pop``. AXI answers each ID's bursts in order, so ``head`` is the
    answered burst's."""

    def __init__(self, layout, ids, depth):
        self._layout, self._ids, self._depth = layout, ids, depth
        super().__init__({
            "id": Out(range(max(2, ids))), "room": Out(1),
            "push": In(1), "record": In(layout),
            "answer_id": In(range(max(2, ids))), "head": Out(layout), "pop": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        ids = self._ids
        queues = [Queue(self._layout, self._depth) for _ in range(ids)]
        for i, q in enumerate(queues):
            m.submodules[f"id{i}"] = q
            m.d.comb += [q.i.valid.eq(self.push & (self.id == i)), q.i.payload.eq(self.record),
                         q.o.ready.eq(self.pop & (self.answer_id == i))]
        m.d.comb += [self.room.eq(Array(q.i.ready for q in queues)[self.id]),
                     self.head.eq(Array(q.o.payload for q in queues)[self.answer_id])]
        with m.If(self.push):
            m.d.sync += self.id.eq(Mux(self.id == ids - 1, 0, self.id + 1))
        return m


def _id_of(value, ids):
    """The ID field of an answer, as the ID queues index it."""
    return value[: max(1, (ids - 1).bit_length())] if ids > 1 else 0


class _LoadPath(wiring.Component):
    """Load bursts: AR out, R beats into VMEM at the address their ID's oldest burst gives."""

    def __init__(self, cfg):
        self._cfg = cfg
        self._id_bits = cfg.axi_id_width
        super().__init__({
            "burst": In(stream.Signature(_burst_layout(cfg))),
            "axi": Out(axi4_signature(cfg)),
            "wr": Out(vmem_write_signature(cfg)),
            "room": In(1), "issued": Out(1),
            "answered": Out(1), "failed": Out(1), "slot": Out(range(SLOTS)), "beat": Out(1),
        })

    def elaborate(self, platform):
        """Drives AR and R of ``axi`` (the DMA joins the channels of its two paths)."""
        m = Module()
        cfg, axi = self._cfg, self.axi
        ids = cfg.dma_ids
        entry = data.StructLayout({"vmem": _vmem_bits(cfg), "slot": range(SLOTS)})
        m.submodules.ids = ids_ = _IdQueues(entry, ids, cfg.dma_bursts)
        b = self.burst.payload
        m.d.comb += [
            axi.arvalid.eq(self.burst.valid & self.room & ids_.room),
            axi.arid.eq(ids_.id), axi.araddr.eq(b.hbm), axi.arlen.eq(b.beats - 1),
            axi.arsize.eq(_beat_shift(cfg)), axi.arburst.eq(AxiBurst.INCR),
            self.burst.ready.eq(axi.arready & self.room & ids_.room),
            self.issued.eq(axi.arvalid & axi.arready),
            ids_.push.eq(self.issued), ids_.record.vmem.eq(b.vmem),
            ids_.record.slot.eq(b.slot),
        ]

        # R beats: the ID's oldest burst, plus the beats of it already written.
        done = Array(Signal(8, name=f"beats{i}") for i in range(ids))
        rid = _id_of(axi.rid, ids)
        m.d.comb += ids_.answer_id.eq(rid)
        head = ids_.head
        vaddr = head.vmem + (done[rid] << _beat_shift(cfg))
        wdata, strb = place_vector(axi.rdata, vaddr, cfg.beat_bytes, cfg.row_bytes,
                                   cfg.beat_bytes)
        m.d.comb += [
            self.wr.valid.eq(axi.rvalid), self.wr.addr.eq(vaddr[(cfg.row_bytes - 1)
                                                                 .bit_length():]),
            self.wr.data.eq(wdata), self.wr.strb.eq(strb),
            axi.rready.eq(self.wr.ready), self.beat.eq(axi.rvalid & axi.rready),
            self.answered.eq(self.beat & axi.rlast), self.slot.eq(head.slot),
            self.failed.eq(self.beat & (axi.rresp != AxiResp.OKAY)),
        ]
        m.d.comb += ids_.pop.eq(self.answered)
        for i in range(ids):
            with m.If(self.beat & (rid == i)):
                m.d.sync += done[i].eq(Mux(axi.rlast, 0, done[i] + 1))
        return m


class _StorePath(wiring.Component):
    """Store bursts: AW out, the burst's beats read from VMEM into W, B answers."""

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "burst": In(stream.Signature(_burst_layout(cfg))),
            "axi": Out(axi4_signature(cfg)),
            "rd": Out(vmem_read_signature(cfg)),
            "room": In(1), "issued": Out(1),
            "answered": Out(1), "failed": Out(1), "slot": Out(range(SLOTS)), "beat": Out(1),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        """Drives AW, W and B of ``axi``."""
        m = Module()
        cfg, axi = self._cfg, self.axi
        ids = cfg.dma_ids
        shift = _beat_shift(cfg)
        # Bursts whose AW has gone and whose data is still to be read, in order.
        m.submodules.reads = reads = Queue(_burst_layout(cfg), cfg.dma_bursts)
        m.submodules.wdata = wq = Queue(data.StructLayout({"data": cfg.axi_data_width,
                                                           "last": 1}), 2 * cfg.max_burst)
        m.submodules.ids = ids_ = _IdQueues(range(SLOTS), ids, cfg.dma_bursts)
        b = self.burst.payload
        room = self.room & reads.i.ready & ids_.room
        m.d.comb += [
            axi.awvalid.eq(self.burst.valid & room), axi.awid.eq(ids_.id),
            axi.awaddr.eq(b.hbm), axi.awlen.eq(b.beats - 1), axi.awsize.eq(shift),
            axi.awburst.eq(AxiBurst.INCR),
            self.burst.ready.eq(axi.awready & room),
            self.issued.eq(axi.awvalid & axi.awready),
            reads.i.valid.eq(self.issued), reads.i.payload.eq(b),
            ids_.push.eq(self.issued), ids_.record.eq(b.slot),
        ]

        # Data: one VMEM read per beat of the oldest burst, while W has room for it.
        beat = Signal(8)
        inflight, inflight_last = Signal(), Signal()
        offset = Signal(_vmem_bits(cfg))
        cur = reads.o.payload
        vaddr = cur.vmem + (beat << shift)
        last_beat = beat == cur.beats - 1
        m.d.comb += [
            self.rd.valid.eq(reads.o.valid & (wq.level + inflight < wq.depth - 1)),
            self.rd.addr.eq(vaddr[(cfg.row_bytes - 1).bit_length():]),
        ]
        take = self.rd.valid & self.rd.ready
        m.d.comb += reads.o.ready.eq(take & last_beat)
        with m.If(take):
            m.d.sync += beat.eq(Mux(last_beat, 0, beat + 1))
        m.d.sync += [inflight.eq(take), inflight_last.eq(last_beat), offset.eq(vaddr)]
        m.d.comb += [
            wq.i.valid.eq(inflight), wq.i.payload.last.eq(inflight_last),
            wq.i.payload.data.eq(vector_slot(self.rd.data, offset, cfg.beat_bytes,
                                             cfg.row_bytes)),
            axi.wvalid.eq(wq.o.valid), axi.wdata.eq(wq.o.payload.data),
            axi.wstrb.eq(-1), axi.wlast.eq(wq.o.payload.last), wq.o.ready.eq(axi.wready),
            self.beat.eq(axi.wvalid & axi.wready),
        ]

        # Answers.
        m.d.comb += [
            ids_.answer_id.eq(_id_of(axi.bid, ids)), ids_.pop.eq(axi.bvalid),
            axi.bready.eq(1), self.answered.eq(axi.bvalid), self.slot.eq(ids_.head),
            self.failed.eq(axi.bvalid & (axi.bresp != AxiResp.OKAY)),
            self.idle.eq(~reads.o.valid & ~inflight & ~wq.o.valid),
        ]
        return m


_AR_R = ("arid", "araddr", "arlen", "arsize", "arburst", "arvalid", "arready", "rid", "rdata",
         "rresp", "rlast", "rvalid", "rready")
_AW_W_B = ("awid", "awaddr", "awlen", "awsize", "awburst", "awvalid", "awready", "wdata",
           "wstrb", "wlast", "wvalid", "wready", "bid", "bresp", "bvalid", "bready")


class DMA(wiring.Component):
    """The DMA engine (see the module docstring).

    Members
    -------
    cmd : In(stream of dma_command_layout)
        Checked transfers.
    axi : Out(AXI4Signature)
        The manager port into the HBM controller.
    wr, rd : Out(vmem_write_signature / vmem_read_signature)
        VMEM ports: loads write, stores read.
    flush : In(1)
        Stop walking (after an error), held until idle: bursts already issued finish, and a
        burst whose address is offered and waiting is issued first.
    signal : Out(1), sem : Out
        A transfer that asked for it completed: signal semaphore ``sem``.
    error : Out(1), error_pc : Out(16)
        A burst was answered SLVERR or DECERR; the PC of its transfer.
    idle : Out(1)
        Nothing queued, walking or outstanding.
    read_beat, write_beat : Out(1)
        A beat (``axi_data_width`` bits) arrived from HBM / left for HBM this cycle.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "cmd": In(stream.Signature(dma_command_layout(cfg))),
            "axi": Out(axi4_signature(cfg)),
            "wr": Out(vmem_write_signature(cfg)), "rd": Out(vmem_read_signature(cfg)),
            "flush": In(1), "signal": Out(1), "sem": Out(range(MAX_SEMAPHORES + 1)),
            "signal_pc": Out(16), "error": Out(1), "error_pc": Out(16), "idle": Out(1),
            "read_beat": Out(1), "write_beat": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        m.submodules.walker = walker = _Walker(cfg)
        m.submodules.completion = done = _Completion(cfg)
        m.submodules.load = load = _LoadPath(cfg)
        m.submodules.store = store = _StorePath(cfg)
        wiring.connect(m, wiring.flipped(self.cmd), walker.cmd)
        wiring.connect(m, load.wr, wiring.flipped(self.wr))
        wiring.connect(m, store.rd, wiring.flipped(self.rd))
        for path, names in ((load, _AR_R), (store, _AW_W_B)):
            for name in names:
                outer, inner = getattr(self.axi, name), getattr(path.axi, name)
                flow = self.axi.signature.members[name].flow
                m.d.comb += (outer.eq(inner) if flow == Out else inner.eq(outer))

        outstanding = Signal(range(cfg.dma_bursts + 1))
        issued = load.issued | store.issued
        answered = load.answered + store.answered
        m.d.sync += outstanding.eq(outstanding + issued - answered)
        room = outstanding < cfg.dma_bursts
        b = walker.burst
        m.d.comb += [
            load.room.eq(room), store.room.eq(room),
            load.burst.payload.eq(b.payload), store.burst.payload.eq(b.payload),
            load.burst.valid.eq(b.valid & ~b.payload.store),
            store.burst.valid.eq(b.valid & b.payload.store),
            b.ready.eq(Mux(b.payload.store, store.burst.ready, load.burst.ready)),
            # A flush stops the walk only while no address is offered and waiting: AXI keeps
            # an AR or AW valid, unchanged, until it is taken (AMBA AXI, ARM IHI 0022, A3.2.1
            # "Handshake process"; found by the dma-axi proof).
            walker.flush.eq(self.flush & ~((self.axi.arvalid & ~self.axi.arready)
                                           | (self.axi.awvalid & ~self.axi.awready))),
            walker.slot.eq(done.slot), walker.slot_free.eq(done.slot_free),
            done.start.eq(walker.start), done.info.eq(walker.cmd.payload),
            done.done.eq(walker.done),
            done.issued.eq(issued), done.issued_slot.eq(b.payload.slot),
            done.answered.eq(Cat(load.answered, store.answered)),
            done.answered_slot[0].eq(load.slot), done.answered_slot[1].eq(store.slot),
            done.failed.eq(Cat(load.failed, store.failed)),
            self.signal.eq(done.signal), self.sem.eq(done.sem), self.signal_pc.eq(done.signal_pc),
            self.error.eq(done.error), self.error_pc.eq(done.error_pc),
            self.idle.eq(~walker.active & ~done.busy & ~self.cmd.valid & store.idle),
        ]
        m.d.comb += [self.read_beat.eq(load.beat), self.write_beat.eq(store.beat)]
        return m
