"""The collective engine (docs/pod.md, "Collective engine"): one per chip, beside the ICI
endpoint; runs this chip's part of a ring reduce-scatter, all-gather or all-reduce along one
torus dimension by walking the golden model's schedule (verification/models/collectives.py)
and sending each of its transfers as one message to a ring neighbour.

    start ─► CollectiveEngine ─► cmd[h], data[h] ─► Sender (one per direction) ···► neighbours
                 ▲   └─► read (memory)
                 └── arrived ◄─ Receiver ◄··· neighbours' Senders

The buffer is split with a grain of one flit (``flit_bytes / 4`` elements), so every piece
starts on a flit boundary. Step ``k`` of either ring direction is sent once the neighbour's
message of step ``k - 1`` in that direction has landed here (what is sent at step ``k`` is
what arrived at step ``k - 1``): that data dependency is the only synchronisation.
"""


from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from spec import protocol
from spec.collectives import a2a_displacements
from spec.protocol import ADDR_BITS, COLLECTIVE_SEM, LENGTH_BITS, LOCAL_PORTS

from ..ici.packet import coord_layout, node_coordinates, node_number
from ..lib.codes import hw
from ..lib.counter import COUNTER_WIDTH, count_events
from .endpoint import (
    command_layout,
    completion_layout,
    flit_reads,
    read_beat_layout,
    staging_address,
)

__all__ = ["A2A_TAG", "A2A_PART", "TOKEN_TAG", "entry_layout", "descriptor_layout",
           "CollectiveEngine"]

Collective = hw(protocol.Collective)
IciFmt = hw(protocol.IciFmt)
IciOp = hw(protocol.IciOp)
IciSpace = hw(protocol.IciSpace)
PacketKind = hw(protocol.PacketKind)

A2A_TAG = 20
"""Tag of the last chunk of an all-to-all message."""
A2A_PART = 21
"""Tag of the other chunks of an all-to-all message (not counted)."""
A2A_READY = 22
"""Tag of an all-to-all's ready token (see ``CollectiveEngine``)."""
TOKEN_TAG = 16
"""Tags 16 + 2 k + h: the ready token of phase ``k`` (0, or a 2-D all-reduce's 1) in ring
direction ``h`` (see ``CollectiveEngine``). A ring message of phase ``k`` in direction ``h``
is tagged ``4 k + 2 q + h``, ``q`` the parity of a bfloat16 reduce-scatter step (its staging
slot at the receiver; 0 otherwise)."""
PARITY_BIT = 2
"""The tag bit of a ring message's staging slot parity: its arrivals are counted without
it."""


def entry_layout():
    """An all-to-all table entry, the low 128 bits of a flit (every endpoint flit is at least
    that wide): this chip's message to one chip, ``bytes`` bytes read at ``src_address`` here
    and written at ``dst_address`` there (both multiples of the flit bytes)."""
    return data.StructLayout({"src_address": 32, "dst_address": 32, "bytes": 32,
                              "reserved": 32})


def descriptor_layout(cfg):
    """A collective for the engine: a ring ``op`` along torus dimension ``dim`` on this chip's
    buffer of ``length`` elements of ``fmt`` (int32, fp32 or bfloat16) at ``address`` of
    ``space`` (a multiple of the flit bytes; every chip of the ring uses the same address);
    or an ``ALL_TO_ALL`` of the table at ``address`` (``length`` entries, one per chip of the
    pod, ``entry_layout``; ``dim`` and ``fmt`` unused), messages read and written in
    ``space``."""
    return data.StructLayout({
        "op": Collective, "dim": range(max(2, cfg.ici.ndims)), "fmt": IciFmt, "space": IciSpace,
        "address": ADDR_BITS, "length": LENGTH_BITS,
    })


class CollectiveEngine(wiring.Component):
    """Runs one chip's part of a ring collective.

    A descriptor is taken on ``start`` when the engine is idle. With ``n`` the ring size along
    ``dim`` and ``p`` this chip's coordinate there (``coords``), the engine then walks the steps
    of the golden model's schedule (``n - 1`` for a reduce-scatter or an all-gather,
    ``2(n - 1)`` for an all-reduce); in each it sends one message to each ring neighbour, the two
    directions independently of each other: on the + ring piece ``(p - s - 1, 0)``
    (reduce-scatter step ``s``) or ``(p - s, 0)`` (all-gather step ``s``) to ``p + 1``, on the -
    ring ``(p + s + 1, 1)`` or ``(p + s, 1)`` to ``p - 1``: ``WRITE`` ``ADD`` in a
    reduce-scatter (``ADD_FINAL`` in its last step), ``STORE`` in an all-gather, ``tag`` the
    direction (0 +, 1 -). A message of direction ``h`` is one ``cmd[h]`` to a
    :class:`~.endpoint.Sender` and its flits read from memory (``read[h]``, answered in order on
    ``read_data[h]``) passed on to ``data[h]``. An empty piece is still sent, as a 0-byte
    message, so that the neighbour counts it. The message of step ``k`` in a direction waits
    until ``k`` messages of that direction have arrived (``arrived``, the
    :class:`~.endpoint.Receiver`'s completions, always taken; the engine's messages carry
    semaphore ``COLLECTIVE_SEM`` and only completions carrying it count). ``busy`` falls when
    every message has been sent and every arrival of the collective counted.

    An ``ALL_TO_ALL`` (docs/pod.md, "All-to-all") sends one message to every chip of the pod,
    this one included, cut into chunks of a packet shared by both directions (two Senders, so
    the chip injects two flits per cycle; see ``_all_to_all``). A chunk first reads the table's
    entry for its destination (``read[h]``), then sends its part of the entry's ``bytes`` from
    its ``src_address`` to the destination's ``dst_address`` as a ``WRITE`` ``STORE``; the
    collective is done when every chunk is sent and every chip's last chunks (0-byte ones too)
    have arrived. An entry of more than ``max_message`` bytes is counted in ``errors`` and sent
    as 0 bytes, so its destination still finishes.

    In ``bfloat16`` (docs/pod.md, "bfloat16") the buffer is cut in grains of half a flit's
    partials (``flit_bytes / 2`` elements), the reduce-scatter's messages carry fp32 partials
    (``ADD`` / ``ADD_FINAL`` in bfloat16: 4 bytes per element, addressed to the elements they
    add to): step 0 sends this chip's elements widened to fp32 (a flit of elements read, two
    flits of partials sent), a later step the partials that arrived in the step before, read
    from the staging slot of its direction and parity (at ``staging_base``, see
    ``staging_address``), and the all-gather's messages carry the bfloat16 results.

    A descriptor the engine cannot run is consumed and counted in ``errors``: a ring of one
    chip, an ``op`` or ``fmt`` it does not know, a piece longer than ``max_message`` (for
    bfloat16 its fp32 partials, which must also fit a staging slot), a 2-D all-reduce in
    bfloat16 (its X sums would need an fp32 copy of the X block: not built), or an
    all-to-all whose ``length`` is not the pod's chip count.

    Members
    -------
    start : In(stream of descriptor_layout)
    coords : In(coord_layout)
        This chip's coordinates.
    cmd : Out(stream of command_layout).array(2)
        Per direction (+, -), to a :class:`~.endpoint.Sender`.
    data : Out(stream of flit_bits).array(2)
        Per direction, to the same :class:`~.endpoint.Sender`.
    read : Out(stream of read_beat_layout).array(2)
    read_data : In(stream of flit_bits).array(2)
    arrived : In(stream of completion_layout)
        From the :class:`~.endpoint.Receiver`'s ``done``.
    busy : Out(1)
    errors : Out(32)
    """

    def __init__(self, cfg, *, staging_base=0):
        self._cfg = cfg
        self._staging_base = staging_base
        ici = cfg.ici
        super().__init__({
            "start": In(stream.Signature(descriptor_layout(cfg))),
            "coords": In(coord_layout(ici)),
            "cmd": Out(stream.Signature(command_layout(cfg))).array(2),
            "data": Out(stream.Signature(ici.flit_bits)).array(2),
            "read": Out(stream.Signature(read_beat_layout(cfg))).array(2),
            "read_data": In(stream.Signature(ici.flit_bits)).array(2),
            "arrived": In(stream.Signature(completion_layout(cfg))),
            "busy": Out(1),
            "errors": Out(COUNTER_WIDTH),
        })

    def _piece(self, m, cur, quotient, remainder, index, half, grain):
        """(element offset, element count) of piece ``(index, half)`` of the buffer split for
        a ring of ``n`` with a grain of ``grain(g)`` elements per ``g`` grains (``split_sizes``
        of the golden model), from the buffer's grains divided by ``n`` (``quotient``,
        ``remainder``)."""
        block = quotient + (index < remainder)
        first = Mux(index < remainder, index, remainder) + index * quotient
        lower = (block + 1) >> 1
        start = Signal(LENGTH_BITS, name=f"piece_start{half}")
        count = Signal(LENGTH_BITS, name=f"piece_grains{half}")
        m.d.comb += [start.eq(first + (lower if half else 0)),
                     count.eq((block >> 1) if half else lower)]
        offset = grain(start)
        end = grain(start + count)
        end = Mux(end > cur.length, cur.length, end)
        return offset, Mux(end > offset, end - offset, 0)

    def elaborate(self, platform):
        m = Module()
        ctx = self._phases(m)
        self._ring(m, ctx)
        self._arrivals(m, ctx)
        self._ready_tokens(m, ctx)
        # Every arrival counter, for tests: between collectives each is 0 unless a
        # neighbour's next collective has begun.
        self.counters = [ctx.exchanged, *ctx.ready_from]
        sent, idle, too_long = [], [], []
        for h in range(2):
            direction_sent, direction_idle, oversize = self._direction(m, h, ctx)
            sent.append(direction_sent)
            idle.append(direction_idle)
            too_long.append(oversize)
        m.d.comb += self.arrived.ready.eq(1)
        error = self._control(m, ctx, sent, idle)
        count_events(m, self, {"errors": error + too_long[0] + too_long[1]})
        return m

    def _phases(self, m):
        """The descriptor register and the ring collective of the current phase (``cur``);
        returns them in the namespace the other parts of ``elaborate`` share."""
        cfg = self._cfg
        desc = Signal(descriptor_layout(cfg))
        a2a = desc.op == Collective.ALL_TO_ALL
        two_d = desc.op == Collective.ALL_REDUCE_2D
        # The ring collective of the current phase: the descriptor's, or a 2-D all-reduce's
        # reduce-scatter along X (phase 0), all-reduce along Y of this chip's X block
        # (phase 1, at ``xoff`` elements, ``xlen`` long) and all-gather along X (phase 2).
        phase = Signal(range(3))
        bf16 = desc.fmt == IciFmt.BF16
        cur = Signal(descriptor_layout(cfg))
        xoff, xlen = Signal(LENGTH_BITS), Signal(LENGTH_BITS)
        m.d.comb += cur.eq(desc)
        with m.If(two_d):
            m.d.comb += cur.dim.eq(phase == 1)
            with m.Switch(phase):
                with m.Case(0):
                    m.d.comb += cur.op.eq(Collective.REDUCE_SCATTER)
                with m.Case(1):
                    m.d.comb += [cur.op.eq(Collective.ALL_REDUCE),
                                 cur.address.eq(desc.address + Mux(bf16, xoff << 1, xoff << 2)),
                                 cur.length.eq(xlen)]
                with m.Default():
                    m.d.comb += cur.op.eq(Collective.ALL_GATHER)
        return SimpleNamespace(desc=desc, a2a=a2a, two_d=two_d, phase=phase, bf16=bf16,
                               cur=cur, xoff=xoff, xlen=xlen)

    def _ring(self, m, ctx):
        """The ring of ``cur``: its size ``n``, this chip's place ``p`` in it, its ``steps``,
        its buffer's grains split ``n`` ways (``quotient``, ``remainder``), and this chip's
        node number ``me``; added to ``ctx``."""
        cfg, ici = self._cfg, self._cfg.ici
        shift = (cfg.flit_bytes - 1).bit_length()
        cur, bf16 = ctx.cur, ctx.bf16
        width = range(4 * max(ici.dims))
        n = Signal(range(max(ici.dims) + 1))
        p = Signal(range(max(ici.dims)))
        m.d.comb += n.eq(1)
        for d, k in enumerate(ici.dims):
            with m.If(cur.dim == d):
                m.d.comb += [n.eq(k), p.eq(self.coords[f"c{d}"])]

        # A grain: a flit of 32-bit elements, or in bfloat16 half a flit of elements (a flit of
        # their fp32 partials), so that every piece starts on a flit in both formats.
        def grain(g):
            return Mux(bf16, g << (shift - 1), g << (shift - 2))

        grains = Signal(LENGTH_BITS)
        steps = Signal(width)
        m.d.comb += [
            grains.eq(Mux(bf16, (cur.length + cfg.flit_bytes // 2 - 1) >> (shift - 1),
                          (cur.length + cfg.flit_bytes // 4 - 1) >> (shift - 2))),
            steps.eq(Mux(cur.op == Collective.ALL_REDUCE, 2 * (n - 1), n - 1)),
        ]
        quotient = Signal(LENGTH_BITS)
        remainder = Signal(range(max(ici.dims)))
        m.d.comb += [quotient.eq(grains // n), remainder.eq(grains % n)]
        me = Signal(range(ici.nodes))
        m.d.comb += me.eq(node_number(ici, [self.coords[f"c{d}"] for d in range(ici.ndims)]))
        vars(ctx).update(width=width, n=n, p=p, grain=grain, steps=steps, quotient=quotient,
                         remainder=remainder, me=me)

    def _arrivals(self, m, ctx):
        """The arrivals the engine counts (``ours``), the all-to-all's last chunks counted
        (``exchanged``), what a finished collective takes off each ring count (``expected``)
        and the ``running``, ``finished`` and ``advance`` strobes; added to ``ctx``."""
        ici = self._cfg.ici
        a2a, two_d = ctx.a2a, ctx.two_d
        running = Signal()                      # the directions are sending
        arrived = self.arrived.payload
        ours = (self.arrived.valid & (arrived.kind == PacketKind.WRITE)
                & (arrived.sem == COLLECTIVE_SEM))
        finished = Signal()                     # the collective, every phase
        advance = Signal()                      # a 2-D all-reduce's next phase
        # Arrivals are counted per tag, so a neighbour's messages of a later phase (or of the
        # next collective) that land early are kept; a collective's own are taken off when
        # it finishes.
        exchanged = Signal(range(4 * ici.nodes + 1))
        ring_tag = arrived.tag & ~PARITY_BIT
        m.d.sync += exchanged.eq(exchanged + (ours & (arrived.tag == A2A_TAG))
                                 - Mux(finished & a2a, 2 * ici.nodes, 0))
        if ici.ndims >= 2:
            nx, ny = ici.dims[0], ici.dims[1]
        else:
            nx = ny = 1
        expected = [Mux(two_d, nx - 1, Mux(a2a, 0, ctx.steps)), Mux(two_d, 2 * (ny - 1), 0),
                    Mux(two_d, nx - 1, 0), ~a2a, two_d]
        vars(ctx).update(running=running, arrived=arrived, ours=ours, finished=finished,
                         advance=advance, exchanged=exchanged, ring_tag=ring_tag, nx=nx, ny=ny,
                         expected=expected)

    def _ready_tokens(self, m, ctx):
        """The all-to-all ready tokens, counted per source chip (``ready_from``, added to
        ``ctx``)."""
        # All-to-all ready tokens, counted per source chip (sent from its port 0).
        ready_from = Array(Signal(2, name=f"a2a_ready{k}") for k in range(self._cfg.ici.nodes))
        for k, count in enumerate(ready_from):
            token = (ctx.ours & (ctx.arrived.tag == A2A_READY)
                     & (ctx.arrived.src == k * LOCAL_PORTS))
            m.d.sync += count.eq(count + token - (ctx.finished & ctx.a2a))
        ctx.ready_from = ready_from

    def _direction(self, m, h, ctx):
        """Direction ``h`` (0 +, 1 -): its step counter, ready token, piece, flit reads and
        messages, of a ring collective or an all-to-all; returns (every message sent, every
        arrival counted, an oversized all-to-all entry sent)."""
        cfg, ici = self._cfg, self._cfg.ici
        step = Signal(ctx.width, name=f"step{h}")
        arrivals, ready = self._ring_arrivals(m, h, ctx, step)
        # Phase 0 (and a 2-D all-reduce's phase 1) first sends a token to the neighbour
        # that sends to this chip (its buffer is ready: the neighbour may write or add
        # into it), and waits for the token of the neighbour it sends to.
        token = Signal(name=f"token{h}")
        tokened = Signal(name=f"tokened{h}")
        m.d.comb += token.eq(~ctx.a2a & ((ctx.phase == 0) | (ctx.two_d & (ctx.phase == 1)))
                             & ~tokened)
        reducing, count, address = self._ring_piece(m, h, ctx, step)
        read = self.read[h]
        staged = Signal(name=f"staged{h}")      # reading partials from a staging slot
        remaining = flit_reads(m, cfg, read, name=f"remaining{h}", wrap=staged)
        m.d.comb += read.payload.space.eq(ctx.desc.space)

        a2a_sent, oversize = self._all_to_all(m, h, ctx.desc, ctx.me, ctx.running & ctx.a2a,
                                              remaining, ctx.ready_from)
        with m.If(~ctx.a2a):
            self._ring_send(m, h, ctx, step, ready, token, tokened, staged, remaining,
                            reducing, count, address)
        with m.If((self.start.valid & self.start.ready) | ctx.advance):
            m.d.sync += [step.eq(0), tokened.eq(0)]
        return (Mux(ctx.a2a, a2a_sent, (step >= ctx.steps) & ~token) & (remaining == 0),
                Mux(ctx.a2a, ctx.exchanged >= 2 * ici.nodes, arrivals >= ctx.steps),
                oversize)

    def _ring_arrivals(self, m, h, ctx, step):
        """Direction ``h``'s arrival counts, one per kind (ring messages of phases 0, 1 and 2,
        ready tokens of phases 0 and 1), added to ``counters``; returns (the current phase's
        ring arrivals, whether the message of ``step`` may go)."""
        phase = ctx.phase
        counts = []
        kinds = [ctx.ring_tag == h, ctx.ring_tag == 4 + h, ctx.ring_tag == 8 + h,
                 ctx.arrived.tag == TOKEN_TAG + h, ctx.arrived.tag == TOKEN_TAG + 2 + h]
        for k, kind in enumerate(kinds):
            count = Signal(ctx.width, name=f"arrivals{h}_{k}")
            m.d.sync += count.eq(count + (ctx.ours & kind)
                                 - Mux(ctx.finished, ctx.expected[k], 0))
            counts.append(count)
            self.counters.append(count)
        arrivals = Signal(ctx.width, name=f"arrivals{h}")
        m.d.comb += arrivals.eq(Array(counts[:3])[phase])
        ready = Mux(step == 0, Mux(phase == 0, counts[3] != 0,
                                   (phase != 1) | (counts[4] != 0)),
                    arrivals >= step)
        return arrivals, ready

    def _ring_piece(self, m, h, ctx, step):
        """The piece direction ``h`` sends at ``step`` (its ring ``index``, element count and
        byte ``address``); returns (whether the step reduces, the count, the address)."""
        cur, n, p = ctx.cur, ctx.n, ctx.p
        reducing = (cur.op != Collective.ALL_GATHER) & (step < n - 1)
        s = Mux((cur.op == Collective.ALL_REDUCE) & ~reducing, step - (n - 1), step)
        lag = Mux(reducing, 1, 0)
        unwrapped = (p + s + lag) if h else (p + n - s - lag)
        index = Signal(ctx.width, name=f"index{h}")
        m.d.comb += index.eq(Mux(unwrapped >= n, unwrapped - n, unwrapped))
        offset, count = self._piece(m, cur, ctx.quotient, ctx.remainder, index, h, ctx.grain)
        address = Signal(ADDR_BITS, name=f"address{h}")
        m.d.comb += address.eq(cur.address + Mux(ctx.bf16, offset << 1, offset << 2))
        return reducing, count, address

    def _ring_send(self, m, h, ctx, step, ready, token, tokened, staged, remaining, reducing,
                   count, address):
        """Direction ``h``'s ring messages: the ready ``token`` or the message of ``step``
        once ``ready`` on ``cmd[h]``, its data path, and its flit reads (in bfloat16 from
        this chip's elements or a staging slot) started as the command is taken."""
        cfg, bf16 = self._cfg, ctx.bf16
        cmd, read = self.cmd[h], self.read[h]
        parity = bf16 & reducing & step[0]
        self._widen(m, h, cmd.valid & cmd.ready & ~token, bf16 & reducing & (step == 0),
                    self._flits(count, 4))
        self._command(m, cmd.payload, ctx.cur, ctx.n, ctx.p, step, h, reducing, address, count,
                      ctx.phase, token, parity)
        m.d.comb += cmd.valid.eq(ctx.running & (remaining == 0)
                                 & (token | ((step < ctx.steps) & ready)))
        with m.If(cmd.valid & cmd.ready & token):
            m.d.sync += tokened.eq(1)
        with m.Elif(cmd.valid & cmd.ready):
            # bfloat16: step 0 reads this chip's elements (widen), a later step the
            # partials of the step before from the staging slot they landed in.
            from_slot = bf16 & reducing & (step != 0)
            slot = staging_address(cfg, self._staging_base, Cat(Const(h, 1), ~step[0]),
                                   address)
            m.d.sync += [step.eq(step + 1), staged.eq(from_slot),
                         remaining.eq(Mux(bf16 & ~from_slot, self._flits(count, 2),
                                          self._flits(count, 4))),
                         read.payload.address.eq(Mux(from_slot, slot, address))]

    def _flits(self, elements, esize):
        """Flits of ``elements`` elements of ``esize`` bytes."""
        cfg = self._cfg
        return (elements * esize + cfg.flit_bytes - 1) >> (cfg.flit_bytes - 1).bit_length()

    def _control(self, m, ctx, sent, idle):
        """The engine's states: a descriptor taken (IDLE), checked (CHECK), then run phase by
        phase until every direction has ``sent`` and is ``idle`` (SEND); returns the error
        strobe of a descriptor refused."""
        cfg, ici = self._cfg, self._cfg.ici
        shift = (cfg.flit_bytes - 1).bit_length()
        desc, phase, a2a, two_d = ctx.desc, ctx.phase, ctx.a2a, ctx.two_d
        quotient, remainder, n = ctx.quotient, ctx.remainder, ctx.n
        error = Signal()
        # The largest piece's bytes on the wire: a grain is a flit (in bfloat16, two of fp32).
        largest = ((quotient + (remainder != 0) + 1) >> 1) << Mux(ctx.bf16, shift + 1, shift)
        ring_error = ((n < 2) | (desc.fmt.as_value() == 3) | (largest > cfg.max_message)
                      | (ctx.bf16 & (largest > cfg.staging_slot)))
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.start.ready.eq(1)
                with m.If(self.start.valid):
                    m.d.sync += [desc.eq(self.start.payload), phase.eq(0)]
                    m.next = "CHECK"
            with m.State("CHECK"):
                m.d.comb += [self.busy.eq(1),
                             error.eq((desc.op.as_value() > Collective.ALL_REDUCE_2D.value)
                                      | Mux(a2a, desc.length != ici.nodes, ring_error)
                                      | (two_d & ((ici.ndims != 2) | (ctx.nx < 2)
                                                  | (ctx.ny < 2))))]
                m.next = "SEND"
                with m.If(error):
                    m.next = "IDLE"
            with m.State("SEND"):
                done = sent[0] & sent[1] & idle[0] & idle[1]
                m.d.comb += [self.busy.eq(1), ctx.running.eq(1),
                             ctx.advance.eq(done & two_d & (phase != 2)),
                             ctx.finished.eq(done & ~ctx.advance)]
                with m.If(ctx.advance):
                    m.d.sync += phase.eq(phase + 1)
                    with m.If(phase == 0):
                        self._x_block(m, ctx)
                with m.If(ctx.finished):
                    m.next = "IDLE"
        return error

    def _x_block(self, m, ctx):
        """A 2-D all-reduce's X block registered (``xoff``, ``xlen``) as its phase 0 ends."""
        quotient, remainder, p, grain = ctx.quotient, ctx.remainder, ctx.p, ctx.grain
        # This chip's X block: block p of the X split (``_piece``'s halves).
        block = quotient + (p < remainder)
        first = grain(Mux(p < remainder, p, remainder) + p * quotient)
        end = first + grain(block)
        end = Mux(end > ctx.desc.length, ctx.desc.length, end)
        m.d.sync += [ctx.xoff.eq(first), ctx.xlen.eq(Mux(end > first, end - first, 0))]

    def _all_to_all(self, m, h, desc, me, active, remaining, ready_from):
        """Direction ``h``'s part of an all-to-all (while ``active``): every message is cut into
        chunks of a packet, chunk ``k`` sent by direction ``k mod 2``, so both Senders carry half of
        every message. Each direction visits the destinations in turn, one chunk each per round (so
        every link carries all the messages routed over it at once): step ``s`` goes to this chip
        displaced by ``a2a_displacements`` (a translation of the torus, the same on every chip, so
        the chips' chunks of one step load the links evenly). A chunk first reads its destination's
        table entry (while the previous chunk's data still streams out), then its data, before its
        command is taken. A direction's last chunk to a destination is tagged ``A2A_TAG`` (a 0-byte
        one if it has no chunk there), the others ``A2A_PART``: packets of one Sender to one chip
        arrive in order, so a destination has every byte once it has counted two ``A2A_TAG`` from
        every chip. A chunk goes to a chip once its ready token is here (``ready_from``): direction
        0 first sends this chip's token to every chip (``A2A_READY``, 0 bytes), to chips ``me``,
        ``me + 1``, ... Returns (every chunk sent, an entry of more than ``max_message`` bytes sent
        now as 0 bytes, counted by direction 0)."""
        nodes = self._cfg.ici.nodes
        cmd = self.cmd[h]
        a = self._a2a_registers(h)
        self._a2a_read_port(m, h, a, active)
        target = self._a2a_target(m, h, a.step)
        # Direction 0's ready tokens first: to chip (me + k) mod nodes, k = 0 ..
        told = Signal(range(2 * nodes), name=f"a2a_told{h}")
        m.d.comb += told.eq(me + nodes - a.announce)
        telling = active & (a.announce != 0)
        self._a2a_visit(m, h, a, desc, active, telling, target, remaining, ready_from)
        oversize, last = self._a2a_chunk(m, h, a, desc, active, telling, told, remaining)
        with m.If(cmd.valid & cmd.ready & telling):
            m.d.sync += a.announce.eq(a.announce - 1)
        with m.Elif(cmd.valid & cmd.ready):
            m.d.sync += [a.held.eq(0), a.fetched.eq(0), a.step.eq(a.step + 1)]
            with m.If(last):
                m.d.sync += [a.done.eq(a.done | (1 << a.dest)), a.left.eq(a.left - 1)]
        with m.If(self.start.valid & self.start.ready):
            m.d.sync += [a.step.eq(0), a.rnd.eq(0), a.done.eq(0), a.left.eq(nodes),
                         a.waiting.eq(0), a.held.eq(0), a.fetched.eq(0), a.owed.eq(0),
                         a.announce.eq(nodes if h == 0 else 0)]
        sent = (a.left == 0) & ~a.waiting & ~a.held & (a.owed == 0) & (a.announce == 0)
        # Both directions send an oversized entry's (empty) message: count it once.
        return sent, cmd.valid & cmd.ready & ~telling & oversize & (a.rnd == 0) & (h == 0)

    def _a2a_registers(self, h):
        """Direction ``h``'s all-to-all registers: where it is in its walk of the destinations
        (``step``, ``rnd``), what it has sent, the chunk in hand and the tokens to announce."""
        cfg, ici = self._cfg, self._cfg.ici
        nodes = ici.nodes
        return SimpleNamespace(
            step=Signal(range(nodes + 1), name=f"a2a_step{h}"),
            rnd=Signal(range(cfg.max_message // cfg.packet_bytes + 2), name=f"a2a_round{h}"),
            dest=Signal(range(nodes), name=f"a2a_dest{h}"),
            done=Signal(nodes, name=f"a2a_done{h}"),            # destinations fully sent
            left=Signal(range(nodes + 1), name=f"a2a_left{h}"),
            waiting=Signal(name=f"a2a_waiting{h}"),             # the entry's read is in flight
            held=Signal(name=f"a2a_held{h}"),                   # the entry is here, chunk unsent
            fetched=Signal(name=f"a2a_fetched{h}"),             # the chunk's reads are issued
            entry=Signal(entry_layout(), name=f"a2a_entry{h}"),
            owed=Signal(range(ici.max_packet + 1), name=f"a2a_owed{h}"),  # data beats to pass
            announce=Signal(range(nodes + 1), name=f"a2a_announce{h}"),   # ready tokens to send
        )

    def _a2a_read_port(self, m, h, a, active):
        """Direction ``h``'s all-to-all read answers: the chunk's data flits (``owed``) pass on
        to ``data[h]``, then the next table entry is held."""
        read_data, out = self.read_data[h], self.data[h]
        # The read port answers the chunk's data flits first, then the next entry.
        m.d.comb += [out.payload.eq(read_data.payload),
                     out.valid.eq(active & read_data.valid & (a.owed != 0)),
                     read_data.ready.eq(active & Mux(a.owed != 0, out.ready, a.waiting))]
        with m.If(out.valid & out.ready):
            m.d.sync += a.owed.eq(a.owed - 1)
        with m.If(active & a.waiting & (a.owed == 0) & read_data.valid):
            m.d.sync += [a.entry.eq(read_data.payload[:len(a.entry.as_value())]),
                         a.waiting.eq(0), a.held.eq(1)]

    def _a2a_target(self, m, h, step):
        """Direction ``h``'s destination at all-to-all ``step``; returns it."""
        ici = self._cfg.ici
        # Step s's destination: this chip displaced by s's coordinates (direction 1: plus half
        # of every dimension), each coordinate modulo its radix.
        target = Signal(range(ici.nodes), name=f"a2a_target{h}")
        coords = []
        for d, (k, rom) in enumerate(zip(ici.dims, a2a_displacements(ici.dims, h), strict=True)):
            # (``step`` reaches ``nodes`` for the cycle that starts the next round: padded.)
            shift_d = Array(Const(v, range(k)) for v in (*rom, 0))[step]
            moved = Signal(range(2 * k), name=f"a2a_c{d}_{h}")
            m.d.comb += moved.eq(self.coords[f"c{d}"] + shift_d)
            coords.append(Mux(moved >= k, moved - k, moved))
        m.d.comb += target.eq(node_number(ici, coords))
        return target

    def _a2a_visit(self, m, h, a, desc, active, telling, target, remaining, ready_from):
        """Direction ``h``'s all-to-all walk while it has nothing in hand: the next round,
        a step past a destination it has finished, or the ``target``'s entry read once the
        target's ready token is here."""
        cfg, nodes = self._cfg, self._cfg.ici.nodes
        shift = (cfg.flit_bytes - 1).bit_length()
        with m.If(active & (a.left != 0) & ~a.waiting & ~a.held & (remaining == 0) & ~telling):
            with m.If(a.step >= nodes):
                m.d.sync += [a.step.eq(0), a.rnd.eq(a.rnd + 1)]
            with m.Elif(a.done.bit_select(target, 1)):
                m.d.sync += a.step.eq(a.step + 1)
            with m.Elif(ready_from[target] == 0):
                pass
            with m.Else():
                m.d.sync += [a.dest.eq(target), remaining.eq(1), a.waiting.eq(1),
                             self.read[h].payload.address.eq(desc.address + (target << shift))]

    def _a2a_chunk(self, m, h, a, desc, active, telling, told, remaining):
        """Direction ``h``'s all-to-all command: a ready token to chip ``told`` (modulo the
        chips) while ``telling``, else the held chunk, whose data reads start at once; returns
        (its entry is oversized, it is the last chunk to its destination)."""
        cfg, ici = self._cfg, self._cfg.ici
        nodes, chunk = ici.nodes, cfg.packet_bytes
        shift = (cfg.flit_bytes - 1).bit_length()
        cmd, read, entry = self.cmd[h], self.read[h], a.entry
        oversize = entry.bytes > cfg.max_message
        total = Mux(oversize, 0, entry.bytes)
        offset = (2 * a.rnd + h) * chunk
        rest = Mux(total > offset, total - offset, 0)
        last = rest <= 2 * chunk
        size = Mux(rest > chunk, chunk, rest)
        to = Mux(telling, Mux(told >= nodes, told - nodes, told), a.dest)
        for d, coord in enumerate(node_coordinates(ici, to)):
            m.d.comb += cmd.payload.dst[f"c{d}"].eq(coord)
        m.d.comb += [
            cmd.valid.eq(telling | (active & a.held & a.fetched)),
            cmd.payload.kind.eq(PacketKind.WRITE), cmd.payload.dst_port.eq(0),
            cmd.payload.space.eq(desc.space), cmd.payload.address.eq(entry.dst_address + offset),
            cmd.payload.bytes.eq(Mux(telling, 0, size)), cmd.payload.fmt.eq(desc.fmt),
            cmd.payload.op.eq(IciOp.STORE),
            cmd.payload.tag.eq(Mux(telling, A2A_READY, Mux(last, A2A_TAG, A2A_PART))),
            cmd.payload.sem.eq(COLLECTIVE_SEM),
        ]
        # The held chunk's data is read at once, so its first flits wait at the Sender when it
        # takes the command (the read port's latency is not paid between packets).
        with m.If(active & a.held & ~a.fetched):
            flits = (size + cfg.flit_bytes - 1) >> shift
            m.d.sync += [a.fetched.eq(1), remaining.eq(flits), a.owed.eq(flits),
                         read.payload.address.eq(entry.src_address + offset)]
        return oversize, last

    def _widen(self, m, h, issued, widen, partials):
        """Direction ``h``'s data path of a ring collective: the flits read pass on to
        ``data[h]`` as they are, or, for a message ``issued`` with ``widen`` (a bfloat16
        reduce-scatter's step 0), each flit of bfloat16 elements as two flits of their fp32
        values (exact), ``partials`` flits in all."""
        cfg = self._cfg
        lanes = cfg.ici.flit_bits // 32
        read_data, out = self.read_data[h], self.data[h]
        widening = Signal(name=f"widening{h}")
        half = Signal(name=f"half{h}")
        left = Signal(range((cfg.max_message >> (cfg.flit_bytes - 1).bit_length()) + 2),
                      name=f"partials{h}")
        with m.If(issued):
            m.d.sync += [widening.eq(widen), half.eq(0), left.eq(partials)]
        wide = Cat(*(Cat(Const(0, 16), Mux(half, read_data.payload[16 * (k + lanes):][:16],
                                           read_data.payload[16 * k:][:16]))
                     for k in range(lanes)))
        with m.If(widening):
            m.d.comb += [out.payload.eq(wide), out.valid.eq(read_data.valid & (left != 0)),
                         read_data.ready.eq(out.ready & (left != 0) & (half | (left == 1)))]
            with m.If(out.valid & out.ready):
                m.d.sync += [half.eq(~half), left.eq(left - 1)]
        with m.Else():
            wiring.connect(m, wiring.flipped(read_data), wiring.flipped(out))

    def _command(self, m, cmd, cur, n, p, step, minus, reducing, address, count, phase, token,
                 parity):
        """The message of ``step`` in direction ``minus`` (0 +, 1 -) of ``phase`` on ``cmd``,
        or with ``token`` the direction's ready token (0 bytes, to the other neighbour);
        ``parity`` the staging slot of a bfloat16 partial's."""
        ici = self._cfg.ici
        ahead = Mux(p == n - 1, 0, p + 1)
        behind = Mux(p == 0, n - 1, p - 1)
        neighbour = Mux(token, ahead, behind) if minus else Mux(token, behind, ahead)
        for d in range(ici.ndims):
            m.d.comb += cmd.dst[f"c{d}"].eq(Mux(cur.dim == d, neighbour, self.coords[f"c{d}"]))
        m.d.comb += [
            cmd.kind.eq(PacketKind.WRITE), cmd.dst_port.eq(0), cmd.space.eq(cur.space),
            cmd.address.eq(address),
            cmd.bytes.eq(Mux(token, 0, Mux(reducing | (cur.fmt != IciFmt.BF16), count << 2,
                                          count << 1))),
            cmd.fmt.eq(cur.fmt),
            cmd.op.eq(Mux(reducing & ~token, Mux(step == n - 2, IciOp.ADD_FINAL, IciOp.ADD),
                          IciOp.STORE)),
            cmd.tag.eq(Mux(token, TOKEN_TAG + (phase << 1) + minus,
                           (phase << 2) | (parity << 1) | minus)),
            cmd.sem.eq(COLLECTIVE_SEM),
        ]
