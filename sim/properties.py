"""Property sets of Podium's protocols, in Amaranth (``Assert`` / ``Assume``), one reusable set
per protocol, bound to a design's real instance by a harness (sim/formal.py).

Each set takes the side it checks as ``check`` and the side it assumes as ``assume``: the
rules a block under proof must keep are asserted, the rules its environment keeps are
assumed. For a stream or bus whose producer is the environment the producer's rules are
assumed; for one the block drives they are asserted. Every assumption here is named in its
message and listed in docs/formal.md. ``Cover`` statements mark what must be reachable (a
transfer done, a buffer full), so a proof that passes because nothing can happen is seen.

    stream_rules    valid held until ready, payload stable while waiting
    stream_order    a buffer between two streams: nothing dropped, duplicated or reordered
                    (the tracked-token method), and a held beat is offered
    secded_rules    SECDED over a codeword: no flip read back, one flip corrected, two detected
    axilite_rules   AXI4-Lite subordinate: handshakes held, one response per request, none
                    without one, in order, legal responses, outstanding limit
    split_rules     a burst splitter between two AXI4 address channels: every INCR burst
                    leaves as parts that do not cross 4 KiB and tile it exactly
    split_w_rules   the write data of such a splitter: ``wlast`` exactly on the last beat of
                    each part (tracked burst)
    allocator_rules a switch allocator: no output granted twice, no input sent twice, no
                    grant without a request
    axi4_rules      AXI4 subordinate: handshakes held, wlast / rlast on the last beat, B only
                    after the last W, IDs returned, no burst across 4 KiB, outstanding limit
    delivery_order  a channel without back-pressure (a link): every value delivered exactly
                    once and in order (tracked token)
    served_within   fairness: a waiting request served within a bound
    same_address_order  a queue served out of order: same-address requests leave in order,
                    unchanged (tracked pair)
"""

from dataclasses import dataclass

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Cat, Cover, Mux, Signal, Value
from amaranth.lib.wiring import In

__all__ = ["free_inputs", "past", "stream_rules", "stream_order", "secded_rules", "axilite_rules",
           "axi4_rules", "split_rules", "split_w_rules", "allocator_rules", "delivery_order",
           "served_within", "axi4_protocol", "hbm_timing_rules", "hbm_bus_rules",
           "same_address_order"]


def free_inputs(m, component):
    """Drive every input of ``component`` (its ``In`` members) with ``AnySeq``: a free
    environment, constrained only by the assumptions of the property sets. An input left
    undriven would be a constant (its reset value), and a proof over it vacuous."""
    for _path, member, value in component.signature.flatten(component):
        if member.flow == In:
            value = Value.cast(value)
            m.d.comb += value.eq(AnySeq(len(value)))


def past(m, value, name):
    """A register holding ``value`` of the previous cycle (its reset value in the first)."""
    value = Value.cast(value)
    reg = Signal(len(value), name=name)
    m.d.sync += reg.eq(value)
    return reg


def _held(m, check, valid, ready, payload, name):
    """``valid`` stays high and ``payload`` stays the same until ``ready`` takes the beat."""
    payload = Value.cast(payload)
    waiting = past(m, valid & ~ready, f"{name}_waiting")
    before = past(m, payload, f"{name}_before")
    with m.If(waiting):
        m.d.comb += [check(valid, f"{name}: valid held until ready"),
                     check(payload == before, f"{name}: payload stable while waiting")]


def stream_rules(m, s, check, name):
    """A stream's producer rules: ``valid`` held until ``ready``, payload stable meanwhile."""
    _held(m, check, s.valid, s.ready, s.payload, name)


def stream_order(m, i, o, *, capacity, level=None, name="stream"):
    """A buffer from stream ``i`` to stream ``o`` holding up to ``capacity`` beats.

    Assumed of the environment: ``i``'s producer rules. Asserted of the buffer: ``o``'s
    producer rules; no beat leaves that was not taken (no duplicate, nothing made up); beats
    held = taken - given, at most ``capacity`` and equal to ``level`` if given; a held beat is
    offered (``o.valid``) and room is offered (``i.ready``) while fewer than ``capacity`` are
    held (nothing is dropped by refusing forever); and the tracked token: one beat, chosen
    freely among all (``AnySeq`` pick, ``AnyConst`` value), leaves after exactly the beats
    that were in before it and with its value (nothing dropped, duplicated or reordered).
    """
    stream_rules(m, i, Assume, f"{name}.i")
    stream_rules(m, o, Assert, f"{name}.o")
    take = i.valid & i.ready
    give = o.valid & o.ready
    held = Signal(range(capacity + 2), name=f"{name}_held")
    m.d.sync += held.eq(held + take - give)
    m.d.comb += [
        Assert(held <= capacity, f"{name}: at most {capacity} beats held"),
        Assert(~give | (held != 0), f"{name}: no beat given that was not taken"),
        Assert(o.valid == (held != 0), f"{name}: a held beat is offered"),
        Assert(i.ready == (held < capacity), f"{name}: room is offered"),
    ]
    if level is not None:
        m.d.comb += Assert(level == held, f"{name}: level counts the beats held")

    width = len(Value.cast(i.payload))
    token = AnyConst(width)
    pick = AnySeq(1)
    inside = Signal(name=f"{name}_token_inside")
    done = Signal(name=f"{name}_token_done")
    ahead = Signal(range(capacity + 1), name=f"{name}_token_ahead")
    behind = Signal(name=f"{name}_token_behind")     # beats were ahead of it as it came in
    with m.If(~inside & ~done & take & pick):
        m.d.comb += Assume(Value.cast(i.payload) == token)
        m.d.sync += [inside.eq(1), ahead.eq(held - give), behind.eq(held - give != 0)]
    with m.If(inside):
        m.d.comb += Assert(ahead < held, f"{name}: the tracked token is held")
        with m.If(give):
            with m.If(ahead == 0):
                m.d.comb += Assert(Value.cast(o.payload) == token,
                                   f"{name}: the tracked token leaves in its turn, unchanged")
                m.d.sync += [inside.eq(0), done.eq(1)]
            with m.Else():
                m.d.sync += ahead.eq(ahead - 1)
    # Reachable, so the assertions are not vacuous (make formal's cover runs): the buffer
    # full, and the token leaving behind others.
    m.d.comb += [Cover(held == capacity, f"{name}: full"),
                 Cover(inside & give & (ahead == 0) & behind,
                       f"{name}: a token leaves after beats ahead of it")]
    return held


def secded_rules(m, encode, decode, data_bits):
    """SECDED: a word encoded by ``encode(data)``, some bits flipped, then decoded by
    ``decode(m, word, name) -> (data, corrected, uncorrectable)``.

    Free: the data (every value), how many bits flip (0, 1 or 2) and where (every pair of
    distinct codeword bits). Asserted: no flip: the data back, no flag; one flip: the data
    back, ``corrected``, not ``uncorrectable``; two flips: ``uncorrectable``, not
    ``corrected``.
    """
    data = AnyConst(data_bits)
    word = Value.cast(encode(data))
    n = len(word)
    flips = AnyConst(2)
    a = AnyConst(range(n))
    b = AnyConst(range(n))
    m.d.comb += [Assume(flips <= 2, "ecc: at most two flips"),
                 Assume(a < n, "ecc: bit in the codeword"),
                 Assume(b < n, "ecc: bit in the codeword"),
                 Assume((flips < 2) | (a != b), "ecc: two flips hit two bits")]
    # The flip mask as comparisons (a one-hot per bit), not a shift: the solver's easier case.
    mask = Signal(n, name="ecc_flip_mask")
    m.d.comb += mask.eq(Cat(((flips != 0) & (a == k)) | ((flips == 2) & (b == k))
                            for k in range(n)))
    got, corrected, uncorrectable = decode(m, word ^ mask, "ecc_dut")
    with m.Switch(flips):
        with m.Case(0):
            m.d.comb += [Assert(got == data, "ecc: clean word reads back"),
                         Assert(~corrected & ~uncorrectable, "ecc: clean word not flagged")]
        with m.Case(1):
            m.d.comb += [Assert(got == data, "ecc: one flip corrected"),
                         Assert(corrected & ~uncorrectable, "ecc: one flip flagged corrected")]
        with m.Case(2):
            m.d.comb += [Assert(uncorrectable, "ecc: two flips detected"),
                         Assert(~corrected, "ecc: two flips not miscorrected")]


def _counter(m, name, up, down, limit):
    """Requests minus responses, asserted within 0..``limit``; the value before this cycle."""
    c = Signal(range(limit + 2), name=name)
    m.d.sync += c.eq(c + up - down)
    m.d.comb += Assert(c <= limit, f"{name}: at most {limit} outstanding")
    return c


def axilite_rules(m, bus, *, outstanding=1, name="axil"):
    """The AXI4-Lite rules on ``bus`` (an ``In(AXI4LiteSignature)`` member) of a subordinate
    with at most ``outstanding`` requests of each kind open, written from the AMBA AXI
    specification (ARM IHI 0022): the handshake of A3.2.1, the write response after both the
    address and the data (A3.3.1), and its AXI4-Lite chapter (B1.1: single beats, no IDs, no
    exclusive accesses).

    Assumed of the manager: AW, W and AR valid held until ready and their payload stable.
    Asserted of the subordinate: B and R valid held until ready and their payload stable;
    ``bresp`` and ``rresp`` legal (OKAY, SLVERR or DECERR: no EXOKAY without exclusive
    accesses); no response without a request (a B only while an AW and a W are taken and not
    yet answered, an R only while an AR is), which with the counts makes one response per
    request (a second answer finds nothing open); at most ``outstanding`` AW, W and AR taken
    and not answered; response order: with no IDs every response answers the oldest open
    request of its kind, so the set keeps the open requests' addresses in order (``b_addr``,
    ``r_addr``: the address the waiting B or R answers) for a harness to check what a
    response carries. Covered: a write and a read answered. Returns an object with the
    counts ``aw``, ``w``, ``ar`` (taken, not answered) and ``b_addr``, ``r_addr``.
    """
    _held(m, Assume, bus.awvalid, bus.awready, bus.awaddr, f"{name}.aw")
    _held(m, Assume, bus.wvalid, bus.wready, Cat(bus.wdata, bus.wstrb), f"{name}.w")
    _held(m, Assume, bus.arvalid, bus.arready, bus.araddr, f"{name}.ar")
    _held(m, Assert, bus.bvalid, bus.bready, bus.bresp, f"{name}.b")
    _held(m, Assert, bus.rvalid, bus.rready, Cat(bus.rdata, bus.rresp), f"{name}.r")
    b = bus.bvalid & bus.bready
    r = bus.rvalid & bus.rready
    aw_take = bus.awvalid & bus.awready
    ar_take = bus.arvalid & bus.arready
    aw = _counter(m, f"{name}_aw_open", aw_take, b, outstanding)
    w = _counter(m, f"{name}_w_open", bus.wvalid & bus.wready, b, outstanding)
    ar = _counter(m, f"{name}_ar_open", ar_take, r, outstanding)
    exokay = 1      # AxiResp.EXOKAY
    m.d.comb += [
        Assert(~bus.bvalid | ((aw != 0) & (w != 0)), f"{name}.b: no response without its AW and W"),
        Assert(~bus.rvalid | (ar != 0), f"{name}.r: no response without its AR"),
        Assert(~bus.bvalid | (Value.cast(bus.bresp) != exokay),
               f"{name}.b: bresp legal (no EXOKAY in AXI4-Lite)"),
        Assert(~bus.rvalid | (Value.cast(bus.rresp) != exokay),
               f"{name}.r: rresp legal (no EXOKAY in AXI4-Lite)"),
        Cover(b, f"{name}.b: a write answered"), Cover(r, f"{name}.r: a read answered"),
    ]
    # Response order: the open requests' addresses, oldest first.
    wq = _Fifo(m, f"{name}_aw_q", len(bus.awaddr), outstanding, aw_take, bus.awaddr, b)
    rq = _Fifo(m, f"{name}_ar_q", len(bus.araddr), outstanding, ar_take, bus.araddr, r)
    return _AxiLiteOpen(aw, w, ar, wq.head, rq.head)


@dataclass
class _AxiLiteOpen:
    """What :func:`axilite_rules` keeps: the requests open (taken, not answered) of each kind,
    and the address the waiting B / R answers (the oldest open AW / AR)."""

    aw: Value
    w: Value
    ar: Value
    b_addr: Value
    r_addr: Value


def axi4_rules(m, bus, *, name="axi"):
    """AXI4 subordinate rules on ``bus`` (an ``In(AXI4Signature)`` member), for a subordinate
    with one write burst and one read burst open at a time (the limit is asserted).

    Assumed of the manager: AW, W and AR valid held until ready and their payload stable; W
    beats only for an AW taken (W does not lead AW); ``wlast`` exactly on the burst's last
    beat; INCR bursts that do not cross 4 KiB. Asserted of the subordinate: at most one write
    and one read burst open; B and R valid held until ready, payload stable; B only after the
    burst's last W, with its ``awid``; R only for an AR taken, with its ``arid``, ``rlast``
    exactly on the ``arlen + 1``-th beat; no response without a request.
    """
    aw_p = [bus.awid, bus.awaddr, bus.awlen, bus.awsize, bus.awburst]
    ar_p = [bus.arid, bus.araddr, bus.arlen, bus.arsize, bus.arburst]
    _held(m, Assume, bus.awvalid, bus.awready, Cat(*aw_p), f"{name}.aw")
    _held(m, Assume, bus.wvalid, bus.wready, Cat(bus.wdata, bus.wstrb, bus.wlast), f"{name}.w")
    _held(m, Assume, bus.arvalid, bus.arready, Cat(*ar_p), f"{name}.ar")
    _held(m, Assert, bus.bvalid, bus.bready, Cat(bus.bid, bus.bresp), f"{name}.b")
    _held(m, Assert, bus.rvalid, bus.rready, Cat(bus.rid, bus.rdata, bus.rresp, bus.rlast),
          f"{name}.r")
    for ch, addr, length, size, burst in (("aw", *aw_p[1:]), ("ar", *ar_p[1:])):
        valid = getattr(bus, f"{ch}valid")
        span = (addr[:12] + ((length + 1) << size))
        m.d.comb += Assume(~valid | (Value.cast(burst) != 1) | (span <= 4096),
                           f"{name}.{ch}: an INCR burst does not cross 4 KiB")

    aw_take = bus.awvalid & bus.awready
    w_take = bus.wvalid & bus.wready
    b_take = bus.bvalid & bus.bready
    # The open write burst: its ID, the W beats still due, whether its last W was taken.
    w_open = Signal(name=f"{name}_w_open")
    w_id = Signal(len(bus.awid), name=f"{name}_w_id")
    w_left = Signal(9, name=f"{name}_w_left")
    w_all = Signal(name=f"{name}_w_all")
    m.d.comb += [Assert(~aw_take | ~w_open, f"{name}.aw: one write burst open at a time"),
                 Assume(~w_take | (w_open & ~w_all), f"{name}.w: W does not lead its AW"),
                 Assume(~w_take | (bus.wlast == (w_left == 1)),
                        f"{name}.w: wlast exactly on the last beat"),
                 Assert(~bus.bvalid | (w_open & w_all), f"{name}.b: B only after the last W"),
                 Assert(~bus.bvalid | (bus.bid == w_id), f"{name}.b: bid is the burst's awid")]
    with m.If(aw_take):
        m.d.sync += [w_open.eq(1), w_id.eq(bus.awid), w_left.eq(bus.awlen + 1), w_all.eq(0)]
    with m.If(w_take):
        m.d.sync += w_left.eq(w_left - 1)
        with m.If(w_left == 1):
            m.d.sync += w_all.eq(1)
    with m.If(b_take):
        m.d.sync += [w_open.eq(0), w_all.eq(0)]

    ar_take = bus.arvalid & bus.arready
    r_take = bus.rvalid & bus.rready
    r_open = Signal(name=f"{name}_r_open")
    r_id = Signal(len(bus.arid), name=f"{name}_r_id")
    r_left = Signal(9, name=f"{name}_r_left")
    m.d.comb += [Assert(~ar_take | ~r_open, f"{name}.ar: one read burst open at a time"),
                 Assert(~bus.rvalid | r_open, f"{name}.r: no R without its AR"),
                 Assert(~bus.rvalid | (bus.rid == r_id), f"{name}.r: rid is the burst's arid"),
                 Assert(~bus.rvalid | (bus.rlast == (r_left == 1)),
                        f"{name}.r: rlast exactly on the last beat")]
    with m.If(ar_take):
        m.d.sync += [r_open.eq(1), r_id.eq(bus.arid), r_left.eq(bus.arlen + 1)]
    with m.If(r_take):
        m.d.sync += r_left.eq(r_left - 1)
        with m.If(r_left == 1):
            m.d.sync += r_open.eq(0)
    m.d.comb += [Cover(b_take & past(m, w_take & (w_left == 1) & (w_id != 0), f"{name}_lw"),
                       f"{name}.b: a burst of ID != 0 answered"),
                 Cover(r_take & bus.rlast & (r_left == 1) & past(m, r_take, f"{name}_rb"),
                       f"{name}.r: the last beat of a burst of two or more")]
    return {"w_open": w_open, "w_left": w_left, "w_all": w_all, "r_open": r_open,
            "r_left": r_left, "w_id": w_id, "r_id": r_id}


def allocator_rules(m, grants, requests, name="alloc"):
    """A switch allocator's grants in one cycle: ``grants[o]`` the one-hot inputs granted
    output ``o`` (zero for none), ``requests[o][i]`` whether input ``i`` requests ``o`` (a
    flit it may send there now). Asserted: an output grants at most one input; an input is
    granted at most one output; no grant without a request."""
    for o, g in enumerate(grants):
        m.d.comb += Assert((g & (g - 1)) == 0, f"{name}: output {o} grants one input at most")
        for i in range(len(g)):
            m.d.comb += Assert(~g[i] | requests[o][i],
                               f"{name}: output {o} grants input {i} only on its request")
    m.d.comb += Cover(Cat(g.any() for g in grants).all(), f"{name}: every output grants")
    for i in range(len(grants[0])):
        hits = Cat(g[i] for g in grants)
        m.d.comb += Assert((hits & (hits - 1)) == 0, f"{name}: input {i} sent once at most")


def split_rules(m, mgr, bus, ch, *, size, name="split"):
    """A block that passes address channel ``ch`` (``"aw"`` or ``"ar"``) of AXI4 bus ``mgr``
    (its input, from a manager) to ``bus`` (its output), splitting bursts at 4 KiB.

    Assumed of the manager: valid held until ready, payload stable; INCR bursts of beats of
    ``2**size`` bytes from a beat-aligned address, at most 4 KiB long, within the address
    space. Asserted on ``bus``: valid held until ready, payload
    stable; no burst crosses 4 KiB; the parts tile the manager's burst: the first starts at its
    address, each next where the last ended, and the part taken with the manager's burst
    ends where that burst ends; the ID, size and burst type pass unchanged; no part leaves
    without a burst waiting."""
    def get(bus, field):
        return getattr(bus, f"{ch}{field}")

    def payload(b):
        return Cat(*[get(b, f) for f in ("id", "addr", "len", "size", "burst")])

    _held(m, Assume, get(mgr, "valid"), get(mgr, "ready"), payload(mgr), f"{name}.{ch}.mgr")
    _held(m, Assert, get(bus, "valid"), get(bus, "ready"), payload(bus), f"{name}.{ch}.bus")
    addr, length = get(mgr, "addr"), get(mgr, "len")
    end = addr + ((length + 1) << size)
    m.d.comb += [
        Assume(~get(mgr, "valid") | (Value.cast(get(mgr, "burst")) == 1),
               f"{name}.{ch}.mgr: INCR bursts"),
        Assume(~get(mgr, "valid") | (get(mgr, "size") == size),
               f"{name}.{ch}.mgr: full-width beats"),
        Assume(~get(mgr, "valid") | (addr[:size] == 0), f"{name}.{ch}.mgr: beat-aligned addresses"),
        Assume(~get(mgr, "valid") | ((length + 1) << size <= 4096),
               f"{name}.{ch}.mgr: a burst of at most 4 KiB"),
        Assume(~get(mgr, "valid") | (end <= 2 ** len(addr)),
               f"{name}.{ch}.mgr: a burst within the address space"),
    ]
    b_addr, b_len = get(bus, "addr"), get(bus, "len")
    b_end = b_addr + ((b_len + 1) << size)
    first = Signal(init=1, name=f"{name}_{ch}_first")      # the next part is a burst's first
    next_addr = Signal(len(addr) + 1, name=f"{name}_{ch}_next")
    took = get(bus, "valid") & get(bus, "ready")
    whole = get(mgr, "valid") & get(mgr, "ready")
    m.d.comb += [
        Assert(~get(bus, "valid") | get(mgr, "valid"), f"{name}.{ch}: no part without a burst"),
        Assert(~get(bus, "valid") | (b_addr[:12] + ((b_len + 1) << size) <= 4096),
               f"{name}.{ch}: no part crosses 4 KiB"),
        Assert(~get(bus, "valid") | (payload(bus)[:len(get(bus, "id"))] == get(mgr, "id")),
               f"{name}.{ch}: the ID passes unchanged"),
        Assert(~get(bus, "valid") | ((get(bus, "size") == get(mgr, "size"))
                                     & (Value.cast(get(bus, "burst"))
                                        == Value.cast(get(mgr, "burst")))),
               f"{name}.{ch}: size and burst type pass unchanged"),
        Assert(~get(bus, "valid") | (b_addr == Mux(first, addr, next_addr)),
               f"{name}.{ch}: a part starts where the burst or the last part does"),
        Assert(~whole | (b_end == end), f"{name}.{ch}: the last part ends with the burst"),
        Assert(~whole | took, f"{name}.{ch}: a burst is taken with its last part"),
    ]
    with m.If(took):
        m.d.sync += [first.eq(whole), next_addr.eq(b_end)]
    return first


def split_w_rules(m, mgr, bus, first, *, size, capacity, name="split"):
    """The W channel of a 4 KiB splitter (see :func:`split_rules`; ``first`` is the AW
    harness's "next part is a burst's first" flag), with the tracked-burst method: one write
    burst, picked freely as its first part's AW is taken, is followed through the W beats.

    Assumed of the manager: W valid held until ready, payload stable; the picked burst's
    ``wlast`` on its ``awlen + 1``-th beat. Asserted on ``bus``: W valid held until ready,
    payload stable; the picked burst's beats pass with ``wlast`` exactly on the last beat of
    each part (the first part ends at the 4 KiB boundary, the second with the burst)."""
    w_payload = Cat(mgr.wdata, mgr.wstrb, mgr.wlast)
    _held(m, Assume, mgr.wvalid, mgr.wready, w_payload, f"{name}.w.mgr")
    _held(m, Assert, bus.wvalid, bus.wready, Cat(bus.wdata, bus.wstrb, bus.wlast),
          f"{name}.w.bus")
    m.d.comb += Assert(~bus.wvalid | (mgr.wvalid & (bus.wdata == mgr.wdata)
                                      & (bus.wstrb == mgr.wstrb)),
                       f"{name}.w: beats pass unchanged")
    first_take = bus.awvalid & bus.awready & first
    w_take = bus.wvalid & bus.wready
    burst_end = w_take & mgr.wlast
    # Bursts whose first part was taken and whose W has not ended (the design's own count).
    open_ = Signal(range(2 * capacity + 2), name=f"{name}_w_open")
    m.d.sync += open_.eq(open_ + first_take - burst_end)
    m.d.comb += Assert(open_ <= capacity, f"{name}.w: at most {capacity} bursts open")
    m.d.comb += Assert(~w_take | (open_ != 0) | first_take,
                       f"{name}.w: no W beat before its burst's first AW")
    pick = AnySeq(1)
    state = Signal(2, name=f"{name}_w_state")      # 0 waiting, 1 tracked, 2 done
    ahead = Signal(range(2 * capacity + 2), name=f"{name}_w_ahead")
    beat = Signal(9, name=f"{name}_w_beat")
    length = Signal(9, name=f"{name}_w_len")
    part = Signal(9, name=f"{name}_w_part")     # beats of the first part
    addr = bus.awaddr
    to_4k = (4096 - addr[:12]) >> size
    with m.If((state == 0) & first_take & pick):
        m.d.sync += [state.eq(1), ahead.eq(open_ - burst_end), beat.eq(0),
                     length.eq(mgr.awlen + 1),
                     part.eq(Mux(mgr.awlen + 1 > to_4k, to_4k, mgr.awlen + 1))]
    with m.If((state == 1) & w_take):
        with m.If(ahead != 0):
            with m.If(mgr.wlast):
                m.d.sync += ahead.eq(ahead - 1)
        with m.Else():
            m.d.comb += [
                Assume(mgr.wlast == (beat == length - 1), f"{name}.w.mgr: wlast on the last beat"),
                Assert(bus.wlast == ((beat == part - 1) | (beat == length - 1)),
                       f"{name}.w: wlast exactly on the last beat of each part"),
            ]
            m.d.sync += beat.eq(beat + 1)
            with m.If(beat == length - 1):
                m.d.sync += state.eq(2)


def delivery_order(m, take, value_in, give, value_out, *, capacity, name):
    """A channel that takes values (``take``, ``value_in``) and delivers them (``give``,
    ``value_out``) with no back-pressure on delivery (a link, whose receiver always has room):
    every value delivered exactly once and in order, by the tracked-token method of
    :func:`stream_order`; a value is delivered in a cycle after the one it is taken in (the
    channel has a register). Asserted: no more delivered than taken, at most ``capacity`` taken
    and not yet delivered; one value, picked freely among all taken (``AnySeq`` pick,
    ``AnyConst`` value), is delivered after exactly the values taken before it and unchanged.
    Covered: the token delivered behind others. Returns the number held (taken, not given)."""
    held = Signal(range(capacity + 2), name=f"{name}_held")
    m.d.sync += held.eq(held + take - give)
    m.d.comb += [Assert(held <= capacity, f"{name}: at most {capacity} values in flight"),
                 Assert(~give | (held != 0), f"{name}: nothing delivered not taken")]
    value_in, value_out = Value.cast(value_in), Value.cast(value_out)
    token = AnyConst(len(value_in))
    pick = AnySeq(1)
    inside = Signal(name=f"{name}_token_inside")
    done = Signal(name=f"{name}_token_done")
    ahead = Signal(range(capacity + 1), name=f"{name}_token_ahead")
    behind = Signal(name=f"{name}_token_behind")
    with m.If(inside):
        m.d.comb += Assert(ahead < held, f"{name}: the tracked token is in flight")
        with m.If(give):
            with m.If(ahead == 0):
                m.d.comb += Assert(value_out == token,
                                   f"{name}: the tracked token delivered in its turn, unchanged")
                m.d.sync += [inside.eq(0), done.eq(1)]
            with m.Else():
                m.d.sync += ahead.eq(ahead - 1)
    with m.If(~inside & ~done & take & pick):
        m.d.comb += Assume(value_in == token)
        m.d.sync += [inside.eq(1), ahead.eq(held - give), behind.eq(held - give != 0)]
    m.d.comb += Cover(inside & give & (ahead == 0) & behind,
                      f"{name}: a token delivered after values ahead of it")
    return held


def served_within(m, waiting, served, bound, *, shown=None, name):
    """Fairness: a request that keeps ``waiting`` (each of ``waiting`` a bit) is ``served``
    (the bit of the same index) at the latest in its ``bound``-th cycle of waiting (the cycle
    it is served counted): per request, the cycles it has waited unserved, asserted below
    ``bound - 1`` while it waits unserved. Covered: a request served in its ``shown``-th cycle
    of waiting (default ``bound``: the bound is reached, so it is tight; a smaller ``shown``
    where the worst case takes longer to set up than a cover run reaches)."""
    shown = shown or bound
    worst = []
    for k, (w, s) in enumerate(zip(waiting, served, strict=True)):
        age = Signal(range(bound + 2), name=f"{name}_wait{k}")
        with m.If(w & ~s):
            with m.If(age <= bound):
                m.d.sync += age.eq(age + 1)
        with m.Else():
            m.d.sync += age.eq(0)
        m.d.comb += Assert(~w | s | (age < bound - 1),
                           f"{name}: request {k} served within {bound} cycles")
        worst.append(w & s & (age == shown - 1))
    m.d.comb += Cover(Cat(*worst).any(), f"{name}: a request served in its cycle {shown}")


class _Fifo:
    """A shift-register FIFO of the property side (not the design's): ``depth`` entries of
    ``width`` bits, ``push`` writes ``value``, ``pop`` drops ``head``; ``count`` may reach
    ``depth + 1`` (an overflow, which the caller's limit assertion catches)."""

    def __init__(self, m, name, width, depth, push, value, pop):
        self.entries = [Signal(width, name=f"{name}{k}") for k in range(depth)]
        self.count = Signal(range(depth + 2), name=f"{name}_n")
        self.head = self.entries[0]
        slot = Mux(pop, self.count - 1, self.count)     # where a push lands
        for k, entry in enumerate(self.entries):
            shifted = Mux(pop, self.entries[k + 1], entry) if k + 1 < depth else entry
            m.d.sync += entry.eq(Mux(push & (slot == k), value, shifted))
        m.d.sync += self.count.eq(self.count + push - pop)


def axi4_protocol(m, bus, *, checked, outstanding, crossing=False, responses="br",
                  name="axi"):
    """The AXI4 rules on ``bus`` with per-ID tracking, from either side: ``checked`` is
    ``"manager"`` (the block drives AW, W and AR: the manager's rules asserted, the
    subordinate's assumed) or ``"subordinate"`` (the other way round). Written from the AMBA
    AXI protocol specification (ARM IHI 0022): the handshake of A3.2.1, the dependencies
    between channels of A3.3, the 4 KiB rule of A3.4.1, and the ordering of transactions of
    one ID of its chapter on transaction identifiers.

    Manager's rules: AW, W and AR valid held until ready, payload stable; an INCR burst does
    not cross 4 KiB; beats no wider than the bus; no W beat before its burst's AW (AXI allows
    it; no Podium manager does it, and a subordinate proved here is proved for managers that
    do not); ``wlast`` exactly on the ``awlen + 1``-th beat of the burst in AW order; at most
    ``outstanding`` write bursts (AW taken, B not yet) and read bursts (AR taken, last R not
    yet) open. Subordinate's rules: B and R valid held until ready, payload stable; a B of ID
    ``i`` only for an open AW of ID ``i`` (the oldest of that ID) whose last W was taken in
    an earlier cycle; an R beat of ID ``i`` only for an open AR of ID ``i``, beats of one ID
    in order (each to the oldest open burst of its ID), ``rlast`` exactly on its
    ``arlen + 1``-th beat. Responses of different IDs may pass each other. ``crossing``: the
    bus before a 4 KiB splitter, whose INCR bursts may cross 4 KiB (that rule left out).
    ``responses``: the channels (``"b"``, ``"r"``) whose subordinate rules are stated; a
    channel left out is neither asserted nor assumed (a manager that does not rely on it).

    The tracking is complete within the limit: per ID a FIFO (``outstanding`` deep) of the
    open reads' lengths, a FIFO of the lengths and IDs of the writes whose W is not done, and
    per ID the count of writes open and of those whose W is done. Returns the open read and
    write counts.
    """
    mgr = Assert if checked == "manager" else Assume
    sub = Assume if checked == "manager" else Assert
    N = outstanding
    ids = 2 ** len(bus.awid)
    aw_p = [bus.awid, bus.awaddr, bus.awlen, bus.awsize, bus.awburst]
    ar_p = [bus.arid, bus.araddr, bus.arlen, bus.arsize, bus.arburst]
    _held(m, mgr, bus.awvalid, bus.awready, Cat(*aw_p), f"{name}.aw")
    _held(m, mgr, bus.wvalid, bus.wready, Cat(bus.wdata, bus.wstrb, bus.wlast), f"{name}.w")
    _held(m, mgr, bus.arvalid, bus.arready, Cat(*ar_p), f"{name}.ar")
    if "b" in responses:
        _held(m, sub, bus.bvalid, bus.bready, Cat(bus.bid, bus.bresp), f"{name}.b")
    if "r" in responses:
        _held(m, sub, bus.rvalid, bus.rready, Cat(bus.rid, bus.rdata, bus.rresp, bus.rlast),
              f"{name}.r")
    widest = (len(bus.wdata) // 8 - 1).bit_length()
    for ch, addr, length, size, burst in (("aw", *aw_p[1:]), ("ar", *ar_p[1:])):
        valid = getattr(bus, f"{ch}valid")
        span = addr[:12] + ((length + 1) << size)
        m.d.comb += mgr(~valid | (size <= widest), f"{name}.{ch}: beats no wider than the bus")
        if not crossing:
            m.d.comb += mgr(~valid | (Value.cast(burst) != 1) | (span <= 4096),
                            f"{name}.{ch}: an INCR burst does not cross 4 KiB")

    aw_take = bus.awvalid & bus.awready
    w_take = bus.wvalid & bus.wready
    b_take = bus.bvalid & bus.bready
    ar_take = bus.arvalid & bus.arready
    r_take = bus.rvalid & bus.rready
    w_end = w_take & bus.wlast

    # Writes. The W bursts due, in AW order: their lengths and IDs; the beats of the first.
    idw = len(bus.awid)
    wdue = _Fifo(m, f"{name}_wdue", 8 + idw, N, aw_take, Cat(bus.awlen, bus.awid), w_end)
    wbeat = Signal(8, name=f"{name}_wbeat")
    with m.If(w_take):
        m.d.sync += wbeat.eq(Mux(bus.wlast, 0, wbeat + 1))
    m.d.comb += [
        mgr(~bus.wvalid | (wdue.count != 0), f"{name}.w: no W before its burst's AW"),
        mgr(~bus.wvalid | (bus.wlast == (wbeat == wdue.head[:8])),
            f"{name}.w: wlast exactly on the burst's last beat"),
    ]
    # Per ID, the writes open (AW taken, no B yet) and those of them whose last W was taken:
    # W comes in AW order and B in AW order per ID, so the done ones are the oldest, and a B
    # of that ID answers the oldest.
    w_open = Signal(range(N + 2), name=f"{name}_w_open")
    m.d.sync += w_open.eq(w_open + aw_take - b_take)
    m.d.comb += mgr(w_open <= N, f"{name}.aw: at most {N} write bursts open")
    for i in range(ids):
        opened = Signal(range(N + 2), name=f"{name}_b{i}_open")
        done = Signal(range(N + 2), name=f"{name}_b{i}_done")
        answered = b_take & (bus.bid == i)
        m.d.sync += [opened.eq(opened + (aw_take & (bus.awid == i)) - answered),
                     done.eq(done + (w_end & (wdue.head[8:] == i)) - answered)]
        with m.If(bus.bvalid & (bus.bid == i) & ("b" in responses)):
            m.d.comb += [
                sub(opened != 0, f"{name}.b: no B without its AW"),
                sub(done != 0, f"{name}.b: B only after the burst's last W"),
            ]

    # Reads: per ID, the open bursts' lengths in order, and the beats of the oldest given.
    r_open = Signal(range(N + 2), name=f"{name}_r_open")
    m.d.sync += r_open.eq(r_open + ar_take - (r_take & bus.rlast))
    if "r" in responses:    # (without R's rules the reads are counted by the caller)
        m.d.comb += mgr(r_open <= N, f"{name}.ar: at most {N} read bursts open")
    counts = []
    for i in range(ids):
        mine = bus.rid == i
        q = _Fifo(m, f"{name}_r{i}_", 8, N, ar_take & (bus.arid == i), bus.arlen,
                  r_take & bus.rlast & mine)
        beat = Signal(8, name=f"{name}_rbeat{i}")
        with m.If(r_take & mine):
            m.d.sync += beat.eq(Mux(bus.rlast, 0, beat + 1))
        with m.If(bus.rvalid & mine & ("r" in responses)):
            m.d.comb += [
                sub(q.count != 0, f"{name}.r: no R without its AR"),
                sub(bus.rlast == (beat == q.head),
                    f"{name}.r: rlast exactly on the burst's last beat"),
            ]
        counts.append(q.count)
        if i == ids - 1:
            m.d.comb += Cover(r_take & mine & bus.rlast & (beat != 0),
                              f"{name}.r: the last beat of a burst of two or more")
    passes = Cat(*[(c != 0) for c in counts]).all() if ids > 1 else 0
    m.d.comb += [
        Cover(b_take & (bus.bid != 0), f"{name}.b: a write of ID != 0 answered"),
        Cover(r_take & bus.rlast & passes, f"{name}.r: a burst answered with two IDs open"),
    ]
    return r_open, w_open


def _since(m, top, name, event):
    """Cycles since ``event`` last fired, 1 in the cycle after it, saturating at ``top`` (and
    ``top`` from reset): a property-side timing counter."""
    c = Signal(range(top + 1), init=top, name=name)
    m.d.sync += c.eq(Mux(event, 1, Mux(c == top, top, c + 1)))
    return c


def hbm_timing_rules(m, row, col, timing, banks, *, auto_precharge=False, name="hbm"):
    """The DRAM timing rules of one HBM pseudo-channel on the commands it issues (``row`` and
    ``col``: ``(valid, op, bank)`` of the granted row and column command each cycle, ``op``
    codes as ``hdl/hbm/interface.py``'s ``RowOp`` and ``ColOp``), written from the JESD235
    rules as the golden device model (verification/models/hbm.py) states them, with the
    property side's own counters: per bank the cycles since its ACT, PRE, RD and WR, per
    pseudo-channel since the last REF and the last four ACTs. An ACT's bank timings count from
    its reference cycle (``timing.act_reference_cycle``: its first or second cycle).

    Asserted: ACT to a closed bank, tRP after its PRE, tRC after its ACT, tRFC after REF,
    at most four ACTs in a tFAW window; PRE of an open bank tRAS after its ACT, tRTP after its
    RD, CWL + BL/2 + tWR after its WR (PREA: each open bank); RD / WR to an open bank tRCD_RD
    / tRCD_WR after its ACT; REF with every bank closed, tRP after each PRE, tRC after each
    ACT; no RDA / WRA (the open-page policy). With ``auto_precharge`` (the closed-page policy,
    set ``hbm-ap``) RDA / WRA are allowed instead, to an open bank as RD / WR, and close it:
    its implicit precharge starts at max(RDA + tRTP, a + tRAS), or max(WRA + CWL + BL/2 + tWR,
    a + tRAS), ``a`` the reference cycle of the ACT that opened the row, and must be CWL +
    BL/2 + tWR after the bank's last WR; the bank's next ACT has its ``a`` tRP after that
    start, a REF its first cycle (a property-side count of the cycles left). Not modelled
    here: REFSB and the data bus; tRRD, tCCD and the turnarounds are :func:`hbm_bus_rules`'
    (set ``hbm-bus``)."""
    t = timing
    a = 1 if t.act_reference_cycle == "second" else 0
    top = max(t.rc, t.rp, t.ras, t.rfc, t.faw, t.cwl + t.burst_cycles + t.wr, t.rtp,
              t.rcd_rd, t.rcd_wr) + 2
    rv, rop, rbank = row
    cv, cop, cbank = col

    def since(sig_name, event):
        return _since(m, top, sig_name, event)

    act = rv & (rop == 0)
    pre, prea, ref = rv & (rop == 1), rv & (rop == 2), rv & (rop == 3)
    rd = cv & ~cop[0]
    wr = cv & cop[0]
    auto = cv & cop[1]
    wr_to_pre = t.cwl + t.burst_cycles + t.wr
    ap_top = max(t.rtp, wr_to_pre, t.ras + a) + t.rp
    since_ref = since(f"{name}_since_ref", ref)
    # The last four ACTs: the cycles since each (the fourth back first to be replaced).
    slot = Signal(2, name=f"{name}_act_slot")
    fired = [Signal(name=f"{name}_act_fire{k}") for k in range(4)]
    for k in range(4):
        m.d.comb += fired[k].eq(act & (slot == k))
    ages = []
    for k in range(4):
        ages.append(since(f"{name}_since_act_w{k}", fired[k]))
    with m.If(act):
        m.d.sync += slot.eq(slot + 1)
    m.d.comb += Assert(~act | (Cat(*[(slot == k) & (ages[k] < t.faw) for k in range(4)]) == 0),
                       f"{name}: at most four ACTs in a tFAW window")
    m.d.comb += Assert(~act | (since_ref + a >= t.rfc), f"{name}: ACT tRFC after REF")
    for b in range(banks):
        mine_r, mine_c = rbank == b, cbank == b
        is_open = Signal(name=f"{name}_open{b}")
        s_act = since(f"{name}_since_act_b{b}", act & mine_r)
        s_pre = since(f"{name}_since_pre{b}", (pre & mine_r) | (prea & is_open))
        s_rd = since(f"{name}_since_rd{b}", rd & mine_c)
        s_wr = since(f"{name}_since_wr{b}", wr & mine_c)
        with m.If(act & mine_r):
            m.d.sync += is_open.eq(1)
        with m.If((pre & mine_r) | prea):
            m.d.sync += is_open.eq(0)
        if auto_precharge:
            # The cycles left until tRP after the implicit precharge's start.
            ap_left = Signal(range(ap_top + 1), name=f"{name}_ap_left{b}")
            ap_wait = Signal(range(ap_top + 1), name=f"{name}_ap_wait{b}")
            ras_left = Mux(s_act >= t.ras + a, 0, t.ras + a - s_act)
            m.d.comb += ap_wait.eq(Mux(cop[0], Mux(ras_left > wr_to_pre, ras_left, wr_to_pre),
                                       Mux(ras_left > t.rtp, ras_left, t.rtp)))
            with m.If(auto & mine_c):
                m.d.sync += [is_open.eq(0), ap_left.eq(ap_wait + t.rp - 1)]
            with m.Elif(ap_left != 0):
                m.d.sync += ap_left.eq(ap_left - 1)
            m.d.comb += [
                Assert(~(act & mine_r) | (ap_left <= a),
                       f"{name}: ACT tRP after the auto-precharge"),
                Assert(~ref | (ap_left == 0), f"{name}: REF tRP after the auto-precharge"),
                Assert(~(auto & mine_c) | (s_wr + ap_wait >= wr_to_pre),
                       f"{name}: auto-precharge CWL + BL/2 + tWR after WR"),
            ]
        closes = (pre & mine_r) | (prea & is_open)
        m.d.comb += [
            Assert(~(act & mine_r) | ~is_open, f"{name}: ACT to a closed bank"),
            Assert(~(act & mine_r) | (s_pre + a >= t.rp), f"{name}: ACT tRP after PRE"),
            Assert(~(act & mine_r) | (s_act >= t.rc), f"{name}: ACT tRC after ACT"),
            Assert(~(closes & is_open) | (s_act >= t.ras + a), f"{name}: PRE tRAS after ACT"),
            Assert(~(closes & is_open) | (s_rd >= t.rtp), f"{name}: PRE tRTP after RD"),
            Assert(~(closes & is_open) | (s_wr >= t.cwl + t.burst_cycles + t.wr),
                   f"{name}: PRE CWL + BL/2 + tWR after WR"),
            Assert(~(rd & mine_c) | (is_open & (s_act >= t.rcd_rd + a)),
                   f"{name}: RD to an open bank tRCD_RD after ACT"),
            Assert(~(wr & mine_c) | (is_open & (s_act >= t.rcd_wr + a)),
                   f"{name}: WR to an open bank tRCD_WR after ACT"),
            Assert(~ref | (~is_open & (s_pre >= t.rp) & (s_act >= t.rc + a)),
                   f"{name}: REF with the bank closed, tRP after PRE, tRC after ACT"),
        ]
    if not auto_precharge:
        m.d.comb += Assert(~auto, f"{name}: no auto-precharge (open-page policy)")
    m.d.comb += [Cover(ref, f"{name}: a REF"),
                 Cover(act & Cat(*[(slot == k) & (ages[k] == t.faw) for k in range(4)]).any(),
                       f"{name}: an ACT exactly tFAW after the fourth ACT back")]


def hbm_bus_rules(m, row, col, timing, banks, banks_per_group, *, name="hbm.bus"):
    """The command-bus rules between banks of one HBM pseudo-channel, on the commands it
    issues (``row``, ``col`` as :func:`hbm_timing_rules`), written from the JESD235 rules as
    the golden device model (verification/models/hbm.py) states them, with the property
    side's own counters: cycles since the last ACT, column command, RD and WR, per bank group
    (bank ``b`` in group ``b // banks_per_group``) and per pseudo-channel. Timings count from
    a command's first cycle. Asserted: ACT tRRD_L after an ACT in its bank group, tRRD_S
    after any; RD / WR tCCD_L after a column command in its bank group, tCCD_S after any;
    RD CWL + BL/2 + tWTR_L after a WR in its bank group, CWL + BL/2 + tWTR_S after any (the
    write-to-read turnaround); WR CL + BL/2 + rtw - CWL after any RD (the read-to-write
    turnaround: the write burst starts ``rtw`` idle cycles after the read burst left the
    bus). Not modelled: the REFSB rules (tRREFD, ACT to REFSB) and the data bus itself."""
    t = timing
    groups = banks // banks_per_group
    wtr_s, wtr_l = t.cwl + t.burst_cycles + t.wtr_s, t.cwl + t.burst_cycles + t.wtr_l
    rtw = t.cl + t.burst_cycles + t.rtw - t.cwl
    top = max(t.rrd_s, t.rrd_l, t.ccd_s, t.ccd_l, wtr_s, wtr_l, rtw) + 1
    rv, rop, rbank = row
    cv, cop, cbank = col

    def since(sig_name, event):
        return _since(m, top, sig_name, event)

    act = rv & (rop == 0)
    rd, wr = cv & ~cop[0], cv & cop[0]
    rgroup, cgroup = rbank // banks_per_group, cbank // banks_per_group
    act_any, col_any = since(f"{name}_since_act", act), since(f"{name}_since_col", cv)
    rd_any, wr_any = since(f"{name}_since_rd", rd), since(f"{name}_since_wr", wr)
    m.d.comb += [
        Assert(~act | (act_any >= t.rrd_s), f"{name}: ACT tRRD_S after an ACT"),
        Assert(~cv | (col_any >= t.ccd_s), f"{name}: RD / WR tCCD_S after a RD / WR"),
        Assert(~rd | (wr_any >= wtr_s), f"{name}: RD CWL + BL/2 + tWTR_S after a WR"),
        Assert(~wr | (rd_any >= rtw), f"{name}: WR CL + BL/2 + rtw - CWL after a RD"),
    ]
    for g in range(groups):
        act_g = since(f"{name}_since_act_g{g}", act & (rgroup == g))
        col_g = since(f"{name}_since_col_g{g}", cv & (cgroup == g))
        wr_g = since(f"{name}_since_wr_g{g}", wr & (cgroup == g))
        m.d.comb += [
            Assert(~(act & (rgroup == g)) | (act_g >= t.rrd_l),
                   f"{name}: ACT tRRD_L after an ACT in its bank group"),
            Assert(~(cv & (cgroup == g)) | (col_g >= t.ccd_l),
                   f"{name}: RD / WR tCCD_L after a RD / WR in its bank group"),
            Assert(~(rd & (cgroup == g)) | (wr_g >= wtr_l),
                   f"{name}: RD CWL + BL/2 + tWTR_L after a WR in its bank group"),
        ]


def same_address_order(m, q, depth, name="hbm.queue"):
    """A request queue served out of order (``q``: a ``CommandQueue``: ``req`` in, ``entries``,
    ``valid``, ``blocked``, ``level`` out, ``served_index`` / ``served_remove`` the entry that
    leaves), with the tracked-pair method: one request ``a`` picked freely as it is taken,
    and a later one ``b`` to the same address (bank, row, column) where one of the two is a
    write, picked freely too. Their slots are followed through the queue's collapses.
    Asserted: while queued each keeps its address, kind and tag (nothing lost or altered);
    ``b`` stays behind ``a`` and is ``blocked`` while ``a`` is queued, so a scheduler that
    serves no blocked entry (assumed here, proved of the scheduler by ``hbm-order-sched``)
    serves ``a`` first: same-address requests leave in the order they came. Covered: ``a``
    served from a slot other than the first with ``b`` behind it."""
    Q = depth
    valid, blocked = Value.cast(q.valid), Value.cast(q.blocked)
    rm, idx = q.served_remove, q.served_index
    take = q.req.valid & q.req.ready
    r = q.req.payload
    land = q.level - rm

    def fields(e):
        return Value.cast(e.bank), Value.cast(e.row), Value.cast(e.col), Value.cast(e.write), \
            Value.cast(e.tag)

    names = ("bank", "row", "col", "write", "tag")
    tracked = []
    for k in "ab":
        t = {n: Signal(len(x), name=f"{name}_{k}_{n}")
             for x, n in zip(fields(r), names, strict=True)}
        t.update(inside=Signal(name=f"{name}_{k}_in"), done=Signal(name=f"{name}_{k}_done"),
                 slot=Signal(range(Q), name=f"{name}_{k}_slot"))
        tracked.append(t)
    a, b = tracked
    rb, rr, rc, rw, _ = fields(r)
    same = (rb == a["bank"]) & (rr == a["row"]) & (rc == a["col"]) & (rw | a["write"])
    starts = [take & AnySeq(1) & ~a["inside"] & ~a["done"],
              take & AnySeq(1) & a["inside"] & ~b["inside"] & ~b["done"] & same]
    for k, t, start in zip("ab", tracked, starts, strict=True):
        with m.If(start):
            m.d.sync += [t["inside"].eq(1), t["slot"].eq(land),
                         *[t[n].eq(x) for x, n in zip(fields(r), names, strict=True)]]
        with m.If(t["inside"] & rm):
            with m.If(idx == t["slot"]):
                m.d.sync += [t["inside"].eq(0), t["done"].eq(1)]
            with m.Elif(idx < t["slot"]):
                m.d.sync += t["slot"].eq(t["slot"] - 1)
        e = q.entries[t["slot"]]
        with m.If(t["inside"]):
            m.d.comb += [
                Assert(valid.bit_select(t["slot"], 1), f"{name}: tracked request {k} is queued"),
                Assert(Cat(*fields(e)) == Cat(*[t[n] for n in names]),
                       f"{name}: tracked request {k} kept unchanged"),
            ]
    m.d.comb += Assert(~b["inside"] | a["inside"] | a["done"], f"{name}: b leaves after a")
    with m.If(a["inside"] & b["inside"]):
        m.d.comb += [
            Assert((a["bank"] == b["bank"]) & (a["row"] == b["row"]) & (a["col"] == b["col"])
                   & (a["write"] | b["write"]), f"{name}: b is to a's address"),
            Assert(b["slot"] > a["slot"], f"{name}: a later request to the same address "
                   "stays behind"),
            Assert(blocked.bit_select(b["slot"], 1),
                   f"{name}: a later request to the same address is blocked"),
        ]
    m.d.comb += Cover(a["inside"] & rm & (idx == a["slot"]) & b["inside"] & (a["slot"] != 0),
                      f"{name}: the older of two served from behind another")
