"""Golden model of the ICI, written from its specification (docs/ici.md), not from the RTL.

* Topology: node ``n`` has coordinates ``(n mod k0, n / k0 mod k1, ...)``; endpoint
  ``n * local_ports + l`` is local port ``l`` of node ``n``.
* Routing: dimension order; in a wrapped dimension the shorter way round, a tie (distance
  exactly k/2) going + from an even coordinate and - from an odd one; in a mesh dimension
  straight towards the destination. Output VC = ``tclass * vcs + class * vcs/2 + lane`` in a
  wrapped dimension, ``tclass * vcs + lane`` in a mesh one. The dateline class is 1 on the
  wraparound hop of the dimension (k-1 -> 0 going +, 0 -> k-1 going -) and on every later hop
  in it (the packet continues on the port it arrived on, in a class-1 VC); entering the
  dimension, a packet whose route there never wraps takes its flow bit (the parity of
  destination coordinates and port, source coordinates and port, packed LSB first), any other
  class 0. ``lane`` looks ahead: 0 if the packet goes straight on at the next router, else
  ``1 + q mod (n - 1)`` for the port ``q`` it turns to or ejects at there, with ``n`` lanes
  (``vcs/2`` wrapped, ``vcs`` mesh; lane 0 when ``n`` is 1). At injection the packet waits in
  VC ``tclass * vcs + (its first output port mod vcs)``.
* Deadlock freedom: the channel dependency graph (channels are (node, output port, VC); an edge
  joins consecutive channels of every route) must be acyclic (Dally and Seitz).
* Delivery contract: every packet that was not dropped at injection is delivered exactly once,
  intact, at its destination endpoint, in order per (source, destination, class), its header
  showing the injecting endpoint as source and a hop count equal to the minimal
  dimension-order distance. A head with a destination outside the pod, a class >= classes or a
  length outside 1..max_packet is dropped at injection with ``length`` flits (one flit when
  the length itself is bad).
* Timing at zero load: a packet's tail leaves ``1 + (1 + s) * (hops + 1) + link_latency * hops
  + (length - 1)`` cycles after its head was taken on the injection port, ``s`` 1 with the
  registered allocation (``switch_stage``), else 0: two cycles per hop on one-cycle links.
"""

from collections import defaultdict, deque
from dataclasses import dataclass

# Node numbering is part of the configuration (dimension 0 varies fastest), not of the RTL.
from spec.topology import node_coords, node_index

__all__ = ["Header", "crc16", "pack_fields", "out_vc_of", "out_vc",
           "min_hops", "route_step", "path", "flow_bit", "lookahead_lane", "injection_vc",
           "channel_dependency_graph", "find_cycle", "zero_load_latency", "average_hops",
           "channel_loads", "ideal_throughput", "Delivery", "pattern_destination",
           "PATTERN_NAMES"]

PATTERN_NAMES = ("uniform", "transpose", "bitcomp", "hotspot", "neighbour", "alltoall")
SEQ_BITS = 8


def _dim_distance(k, wrap, a, b):
    d = abs(a - b)
    return min(d, k - d) if wrap else d


def min_hops(cfg, src, dst):
    """Minimal dimension-order distance between node coordinates ``src`` and ``dst``."""
    return sum(_dim_distance(k, w, a, b)
               for k, w, a, b in zip(cfg.dims, cfg.wrap, src, dst, strict=True))


def flow_bit(cfg, src, src_port, dst, dst_port):
    """Parity of a flow's destination (coordinates, port) and source, packed LSB first."""
    bits = 0
    for values, port in ((dst, dst_port), (src, src_port)):
        for c in values:
            bits ^= bin(c).count("1")
        bits ^= bin(port).count("1")
    return bits & 1


def _direction(cfg, d, cur, dst):
    k, wrap = cfg.dims[d], cfg.wrap[d]
    if wrap:
        delta = (dst - cur) % k
        return 2 * delta < k or (2 * delta == k and cur % 2 == 0)
    return dst > cur


def output_port(cfg, cur, dst, dst_port):
    """Output port at node ``cur`` of a packet for ``dst``/``dst_port`` (eject: the local
    port's number ``net_ports + dst_port``)."""
    for d in range(cfg.ndims):
        if cur[d] != dst[d]:
            return 2 * d + (0 if _direction(cfg, d, cur[d], dst[d]) else 1)
    return cfg.net_ports + dst_port


def _neighbour(cfg, cur, port):
    d, minus = divmod(port, 2)
    out = list(cur)
    out[d] = (cur[d] + (-1 if minus else 1)) % cfg.dims[d]
    return tuple(out)


def lookahead_lane(cfg, cur, port, dst, dst_port):
    """Lane of the hop from ``cur`` through network port ``port``: 0 if the packet goes
    straight on at the next router, else chosen by the port it leaves that router by."""
    d = port // 2
    count = cfg.vcs // 2 if cfg.wrap[d] else cfg.vcs
    nxt = _neighbour(cfg, cur, port)
    if nxt[d] != dst[d] or count == 1:
        return 0
    return 1 + output_port(cfg, nxt, dst, dst_port) % (count - 1)


def route_step(cfg, cur, dst, in_port, in_class, *, free_class=0, dateline=True):
    """Next hop at node ``cur`` of a packet for node ``dst`` that arrived on ``in_port`` in
    dateline class ``in_class``: ``(output port, dateline class)``, or ``None`` to eject.
    ``free_class`` is the class a packet whose route in a new dimension never wraps takes (its
    flow bit). ``dateline=False`` gives the same routes in class 0 throughout (for the negative
    check)."""
    for d, (k, wrap) in enumerate(zip(cfg.dims, cfg.wrap, strict=True)):
        if cur[d] == dst[d]:
            continue
        plus = _direction(cfg, d, cur[d], dst[d])
        port = 2 * d + (0 if plus else 1)
        cls = 0
        if wrap and dateline:
            wrap_hop = cur[d] == (k - 1 if plus else 0)
            if in_port == port:
                cls = int(in_class or wrap_hop)
            else:
                free = dst[d] > cur[d] if plus else dst[d] < cur[d]
                cls = int(wrap_hop or (free and free_class))
        return port, cls
    return None


def out_vc(cfg, tclass, port, cls, lane):
    d = port // 2
    if cfg.wrap[d]:
        return tclass * cfg.vcs + cls * (cfg.vcs // 2) + lane
    return tclass * cfg.vcs + lane


def injection_vc(cfg, cur, dst, dst_port, tclass):
    """The VC a packet waits in at its injection port."""
    return tclass * cfg.vcs + output_port(cfg, cur, dst, dst_port) % cfg.vcs


def path(cfg, src, dst, *, src_port=0, dst_port=0, tclass=0, dateline=True):
    """Hops of a packet from node ``src`` to node ``dst``: ``[(node, port, vc)]``."""
    hops, cur, in_port, cls = [], tuple(src), None, 0
    bit = flow_bit(cfg, src, src_port, dst, dst_port)
    while True:
        step = route_step(cfg, cur, dst, in_port, cls, free_class=bit, dateline=dateline)
        if step is None:
            return hops
        port, cls = step
        lane = lookahead_lane(cfg, cur, port, dst, dst_port)
        hops.append((cur, port, out_vc(cfg, tclass, port, cls, lane)))
        cur, in_port = _neighbour(cfg, cur, port), port
        if len(hops) > cfg.max_hops + 1:
            raise AssertionError(f"route from {src} to {dst} does not end")


def channel_dependency_graph(cfg, *, dateline=True):
    """Edges between channels (node, port, vc) used consecutively by some packet."""
    edges = defaultdict(set)
    nodes = [node_coords(cfg.dims, n) for n in range(cfg.nodes)]
    L = cfg.local_ports
    for src in nodes:
        for dst in nodes:
            for sp in range(L):
                for dp in range(L):
                    for tc in range(cfg.classes):
                        chans = path(cfg, src, dst, src_port=sp, dst_port=dp, tclass=tc,
                                     dateline=dateline)
                        for a, b in zip(chans, chans[1:], strict=False):
                            edges[a].add(b)
    return edges


def find_cycle(edges):
    """A cycle of the graph as a list of channels, or None when it is acyclic."""
    colour = {}
    for start in list(edges):
        if start in colour:
            continue
        stack = [(start, iter(edges.get(start, ())))]
        colour[start] = 1
        trail = [start]
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                colour[node] = 2
                stack.pop()
                trail.pop()
                continue
            c = colour.get(nxt, 0)
            if c == 1:
                return trail[trail.index(nxt):] + [nxt]
            if c == 0:
                colour[nxt] = 1
                trail.append(nxt)
                stack.append((nxt, iter(edges.get(nxt, ()))))
    return None


def zero_load_latency(hops, length, link_latency=1, switch_stage=False, buffer_depth=None):
    """Cycles from the head taken at injection to the tail taken at ejection, at zero load:
    one cycle into the injection buffer, at every router on the way (``hops + 1`` of them) one
    through the allocator and switch (two with ``switch_stage``), ``link_latency`` on every
    link, and the body behind the head. With ``buffer_depth`` below the credit round trip
    (``2 link_latency + 2``, one more with ``switch_stage``) a packet longer than the buffer
    is paced by the credits on its first link: flit ``j`` leaves no earlier than one cycle after
    flit ``j - 1`` and a round trip after flit ``j - buffer_depth``, and the gaps it gets there
    carry through the later links unchanged."""
    head = 1 + (1 + switch_stage) * (hops + 1) + link_latency * hops
    leave = []
    round_trip = 2 * link_latency + 2 + switch_stage
    for j in range(length):
        t = leave[-1] + 1 if leave else 0
        if hops and buffer_depth and j >= buffer_depth:
            t = max(t, leave[j - buffer_depth] + round_trip)
        leave.append(t)
    return head + leave[-1]


def average_hops(cfg):
    """Mean hop count of uniform random traffic (every destination equally likely, self
    included)."""
    nodes = [node_coords(cfg.dims, n) for n in range(cfg.nodes)]
    return sum(min_hops(cfg, a, b) for a in nodes for b in nodes) / len(nodes) ** 2


def channel_loads(cfg):
    """Flits per cycle on every channel (node, port) when every node injects one flit per
    cycle of uniform random traffic."""
    loads = defaultdict(float)
    nodes = [node_coords(cfg.dims, n) for n in range(cfg.nodes)]
    share = 1 / len(nodes)
    for a in nodes:
        for b in nodes:
            for node, port, _ in path(cfg, a, b):
                loads[(node, port)] += share
    return loads


def ideal_throughput(cfg):
    """Uniform random saturation bound, flits/node/cycle: the busiest channel reaches one
    flit per cycle, or the injection/ejection port does."""
    loads = channel_loads(cfg)
    return min(1.0, 1 / max(loads.values())) if loads else 1.0


def pattern_destination(cfg, pattern, src, rng, *, hotspot=None, hot_fraction=0.0,
                        counter=0):
    """Destination node of a packet from node ``src`` under a traffic pattern."""
    D = cfg.ndims
    if pattern == "transpose":
        return tuple(src[(d + 1) % D] % cfg.dims[d] for d in range(D))
    if pattern == "bitcomp":
        return tuple(k - 1 - c for k, c in zip(cfg.dims, src, strict=True))
    if pattern == "hotspot" and rng.random() < hot_fraction:
        return tuple(hotspot)
    if pattern == "neighbour":
        d = rng.randrange(D)
        out = list(src)
        k = cfg.dims[d]
        up = rng.random() < 0.5
        if not cfg.wrap[d]:
            up = src[d] == 0 or (up and src[d] < k - 1)
        out[d] = (src[d] + (1 if up else -1)) % k
        return tuple(out)
    if pattern == "alltoall":
        n = (node_index(cfg.dims, src) + 1 + counter % (cfg.nodes - 1)) % cfg.nodes
        return node_coords(cfg.dims, n)
    return tuple(rng.randrange(k) for k in cfg.dims)


@dataclass
class Header:
    """Header fields of a head flit (see docs/ici.md for the layout)."""

    dst: tuple
    dst_port: int
    src: tuple
    src_port: int
    tclass: int
    length: int
    seq: int
    hops: int = 0

    @staticmethod
    def widths(cfg):
        w = [(f"dst{d}", b) for d, b in enumerate(cfg.coord_bits)] + [("dst_port", cfg.port_bits)]
        w += [(f"src{d}", b) for d, b in enumerate(cfg.coord_bits)] + [("src_port", cfg.port_bits)]
        w += [("tclass", cfg.class_bits), ("length", cfg.length_bits), ("seq", SEQ_BITS),
              ("hops", max(1, cfg.max_hops.bit_length()))]
        return w

    def pack(self, cfg):
        values = {f"dst{d}": c for d, c in enumerate(self.dst)}
        values.update({f"src{d}": c for d, c in enumerate(self.src)})
        values.update(dst_port=self.dst_port, src_port=self.src_port, tclass=self.tclass,
                      length=self.length, seq=self.seq, hops=self.hops)
        word, pos = 0, 0
        for name, width in self.widths(cfg):
            word |= (values[name] & ((1 << width) - 1)) << pos
            pos += width
        return word

    @classmethod
    def unpack(cls, cfg, word):
        values, pos = {}, 0
        for name, width in cls.widths(cfg):
            values[name] = (word >> pos) & ((1 << width) - 1)
            pos += width
        D = cfg.ndims
        return cls(tuple(values[f"dst{d}"] for d in range(D)), values["dst_port"],
                   tuple(values[f"src{d}"] for d in range(D)), values["src_port"],
                   values["tclass"], values["length"], values["seq"], values["hops"])

    @staticmethod
    def bits(cfg):
        return sum(w for _, w in Header.widths(cfg))


class Delivery:
    """Scoreboard of the delivery contract: golden queues per (source, destination, class)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.queues = defaultdict(deque)
        self.expected = 0
        self.delivered = 0
        self.dropped = 0
        self.latencies = []

    def injected(self, src_ep, flits):
        """Record a packet offered at endpoint ``src_ep`` (its flits as the NI sends them)."""
        cfg = self.cfg
        h = Header.unpack(cfg, flits[0])
        L = cfg.local_ports
        ok = (all(c < k for c, k in zip(h.dst, cfg.dims, strict=True)) and h.dst_port < L
              and h.tclass < cfg.classes and 1 <= h.length <= cfg.max_packet)
        if not ok:
            self.dropped += 1
            return False
        src_node, src_port = node_coords(cfg.dims, src_ep // L), src_ep % L
        want = Header(h.dst, h.dst_port, src_node, src_port, h.tclass, h.length, h.seq,
                      min_hops(cfg, src_node, h.dst))
        hb = Header.bits(cfg)
        head = want.pack(cfg) | (flits[0] >> hb << hb)
        dst_ep = node_index(cfg.dims, h.dst) * L + h.dst_port
        self.queues[(src_ep, dst_ep, h.tclass)].append([head] + list(flits[1:]))
        self.expected += 1
        return True

    def delivered_packet(self, dst_ep, flits):
        """Check a packet taken at endpoint ``dst_ep``; raises AssertionError on a violation."""
        cfg = self.cfg
        L = cfg.local_ports
        h = Header.unpack(cfg, flits[0])
        src_ep = node_index(cfg.dims, h.src) * L + h.src_port if all(
            c < k for c, k in zip(h.src, cfg.dims, strict=True)) else None
        q = self.queues.get((src_ep, dst_ep, h.tclass))
        assert q, (f"endpoint {dst_ep}: unexpected packet {h} (lost order, duplicate or "
                   f"misrouted)")
        want = q.popleft()
        assert flits == want, (f"endpoint {dst_ep}: packet from {src_ep} class {h.tclass} "
                               f"differs from the next expected of its flow:\n got  "
                               f"{[hex(f) for f in flits]}\n want {[hex(f) for f in want]}")
        self.delivered += 1

    def outstanding(self):
        return sum(len(q) for q in self.queues.values())


def crc16(message, nbits):
    """CRC-16-CCITT (polynomial 0x1021), most significant bit first, initial value 0, no
    final XOR, of the ``nbits``-bit integer ``message``."""
    crc = 0
    for i in reversed(range(nbits)):
        top = ((message >> i) & 1) ^ (crc >> 15)
        crc = ((crc << 1) & 0xFFFF) ^ (0x1021 if top else 0)
    return crc


def pack_fields(fields):
    """Pack ``[(value, width), ...]`` least significant first; return (word, total width)."""
    word, pos = 0, 0
    for value, width in fields:
        word |= (value & ((1 << width) - 1)) << pos
        pos += width
    return word, pos


def out_vc_of(cfg, cur, header, in_port, in_vc):
    """Output port and VC the router at ``cur`` gives a head that arrived on ``in_port`` (a
    network port number, or None from injection) in ``in_vc``; port None means eject."""
    in_cls = int(cfg.vcs >= 2 and in_vc % cfg.vcs >= cfg.vcs // 2)
    bit = flow_bit(cfg, header.src, header.src_port, header.dst, header.dst_port)
    step = route_step(cfg, cur, header.dst, in_port, in_cls, free_class=bit)
    if step is None:
        return None, 0
    port, cls = step
    lane = lookahead_lane(cfg, cur, port, header.dst, header.dst_port)
    return port, out_vc(cfg, header.tclass, port, cls, lane)
