"""Analytic time of the pod's collectives, in cycles, for the schedules of the golden model
(verification/models/collectives.py), and the bandwidth bounds and NCCL bus-bandwidth
definitions the collective benchmark measures against (docs/pod.md). Pure Python.

Alpha-beta model of a schedule: steps run one after another; a step costs
``alpha + per_hop * hops + beta`` where ``hops`` is the longest route of the step's transfers
and ``beta`` the time the busiest resource needs for the step's bytes: a link direction at
``link_bw`` bytes per cycle, or a chip's injection or ejection at ``inject_bw``. A step with no
transfer costs ``alpha`` (the engine still steps). Transfers are routed as the ICI routes them:
dimension order, the shorter way round, a tie (distance k / 2) + from an even coordinate and -
from an odd one; so on a ring of two chips both directions of the schedule share one link.

NCCL's bus bandwidth (nccl-tests, doc/PERFORMANCE.md): ``algbw = S / t`` with ``S`` the
buffer size in bytes (the full vector: the all-reduce buffer, the reduce-scatter input, the
all-gather output, the all-to-all bytes one rank sends), and ``busbw = algbw * 2(n - 1)/n``
for all-reduce, ``algbw * (n - 1)/n`` for reduce-scatter, all-gather and all-to-all, ``n`` the
ranks taking part.
"""

from dataclasses import dataclass

import numpy as np

from spec.config import ConfigError
from spec.topology import node_coords, node_index
from verification.models.collectives import FORMATS, MINUS, PLUS, Step

__all__ = ["Network", "OPS", "bus_factor", "algbw", "busbw", "transfer_bytes", "route",
           "step_time", "schedule_time", "all_to_all_time", "ring_links", "ring_bound",
           "busbw_bound", "all_reduce_2d_bound", "bisection_bound", "injection_bound",
           "all_to_all_bound", "payload_bw"]

OPS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")


@dataclass(frozen=True)
class Network:
    """Costs of the pod a schedule runs on.

    Parameters
    ----------
    dims : (X, Y) chips of the torus.
    alpha : cycles every step costs whatever it carries (start, completion counting, sync).
    per_hop : cycles a packet's head takes per hop (2 on the ICI router with one-cycle links).
    link_bw : payload bytes per cycle of one direction of one link.
    inject_bw : payload bytes per cycle a chip injects into the network (and ejects).
    """

    dims: tuple
    alpha: float
    per_hop: float
    link_bw: float
    inject_bw: float

    def __post_init__(self):
        if len(self.dims) != 2 or any(not isinstance(k, int) or k < 1 for k in self.dims):
            raise ConfigError("dims", f"must be (X, Y) of integers >= 1, got {self.dims!r}")
        for name in ("alpha", "per_hop"):
            if getattr(self, name) < 0:
                raise ConfigError(name, f"must be >= 0, got {getattr(self, name)!r}")
        for name in ("link_bw", "inject_bw"):
            if getattr(self, name) <= 0:
                raise ConfigError(name, f"must be > 0, got {getattr(self, name)!r}")


def _op(op):
    if op not in OPS:
        raise ConfigError("op", f"must be one of {', '.join(OPS)}, got {op!r}")
    return op


def bus_factor(op, n):
    """busbw / algbw of ``op`` among ``n`` ranks."""
    share = (n - 1) / n
    return 2 * share if _op(op) == "all-reduce" else share


def algbw(nbytes, cycles):
    """Algorithm bandwidth, bytes per cycle."""
    return nbytes / cycles


def busbw(op, nbytes, cycles, n):
    """NCCL's bus bandwidth of ``op`` on ``n`` ranks, bytes per cycle."""
    return algbw(nbytes, cycles) * bus_factor(op, n)


def transfer_bytes(transfer, fmt):
    """Bytes a transfer puts on the wire: partial sums in the accumulation format."""
    f = FORMATS[fmt]
    return transfer.count * (f.partial_bytes if transfer.partial else f.bytes)


def _first_direction(k, a, b):
    ahead = (b - a) % k
    if ahead == 0:
        return 0
    if 2 * ahead == k:
        return PLUS if a % 2 == 0 else MINUS
    return PLUS if 2 * ahead < k else MINUS


def route(dims, src, dst):
    """The links ``(node, dim, direction)`` a packet from src to dst leaves on, as the ICI
    routes it."""
    links = []
    here = list(node_coords(dims, src))
    target = node_coords(dims, dst)
    for d, k in enumerate(dims):
        direction = _first_direction(k, here[d], target[d])
        while here[d] != target[d]:
            links.append((node_index(dims, here), d, direction))
            here[d] = (here[d] + direction) % k
    return links


def _step_loads(net, step, fmt):
    links, injected, ejected = {}, {}, {}
    for t in step.transfers:
        size = transfer_bytes(t, fmt)
        for link in route(net.dims, t.src, t.dst):
            links[link] = links.get(link, 0) + size
        if t.src != t.dst:
            injected[t.src] = injected.get(t.src, 0) + size
            ejected[t.dst] = ejected.get(t.dst, 0) + size
    return links, injected, ejected


def step_time(net, step, fmt):
    """Cycles of one step (module docstring)."""
    links, injected, ejected = _step_loads(net, step, fmt)
    if not links:
        return net.alpha
    hops = max(len(route(net.dims, t.src, t.dst)) for t in step.transfers)
    beta = max(max(links.values()) / net.link_bw,
               max(max(injected.values()), max(ejected.values())) / net.inject_bw)
    return net.alpha + net.per_hop * hops + beta


def schedule_time(net, steps, fmt):
    """Cycles of a whole schedule: the sum of its steps."""
    return sum(step_time(net, step, fmt) for step in steps)


def all_to_all_time(net, steps, fmt):
    """Cycles of an all-to-all schedule, whose steps are not barriers: one step of all its
    transfers."""
    merged = [t for step in steps for t in step.transfers]
    return step_time(net, Step("all-to-all", None, tuple(merged)), fmt)


def ring_links(n):
    """Link directions a chip drives in a bidirectional ring of ``n``: both neighbours'
    links when n > 2; one when n == 2 (the ICI's tie rule sends both rings' chunks the same
    way); none alone."""
    return 2 if n > 2 else n - 1


def _ring_rate(n, net):
    return min(ring_links(n) * net.link_bw, net.inject_bw)


def ring_bound(op, n, nbytes, fmt, net):
    """Fewest cycles a ring collective of an ``nbytes`` buffer among ``n`` chips can take on
    ``net``'s bandwidth (no alpha, no hops, perfectly even chunks): every chip sends
    ``(n - 1)/n`` of the buffer per phase (reduce-scatter partials in the accumulation
    format) at its ring rate."""
    if _op(op) == "all-to-all":
        raise ConfigError("op", "must be a ring collective, got 'all-to-all'")
    if n == 1:
        return 0.0
    f = FORMATS[fmt]
    share = (n - 1) / n * nbytes
    wire = {"reduce-scatter": share * f.partial_bytes / f.bytes, "all-gather": share,
            "all-reduce": share * (f.partial_bytes / f.bytes + 1)}[op]
    return wire / _ring_rate(n, net)


def busbw_bound(op, n, fmt, net):
    """The bus bandwidth of a ring collective at :func:`ring_bound` (independent of the
    buffer size): the figure the benchmark's large messages are measured against."""
    return busbw(op, 1.0, ring_bound(op, n, 1.0, fmt, net), n)


def all_reduce_2d_bound(nbytes, fmt, net):
    """Fewest cycles of the 2-D all-reduce: reduce-scatter of the buffer along X, all-reduce
    of a 1/X block along Y, all-gather along X."""
    x, y = net.dims
    return (ring_bound("reduce-scatter", x, nbytes, fmt, net)
            + ring_bound("all-reduce", y, nbytes / x, fmt, net)
            + ring_bound("all-gather", x, nbytes, fmt, net))


def bisection_bound(sizes, elem_bytes, net):
    """Fewest cycles an all-to-all of ``sizes[src][dst]`` elements can take through the
    bisections of the torus: for every dimension of radix k >= 2, the chips with coordinate
    below k // 2 against the rest; the bytes crossing the cut one way over the links crossing
    it that way (two per ring when the ring wraps round both cut points, k > 2; one per ring
    for k == 2, where the ICI's tie rule routes all of one direction over one of the two
    links)."""
    sizes = np.asarray(sizes, dtype=np.int64) * elem_bytes
    nodes = len(sizes)
    worst = 0.0
    for d, k in enumerate(net.dims):
        if k < 2:
            continue
        low = np.array([node_coords(net.dims, node)[d] < k // 2 for node in range(nodes)])
        links = (nodes // k) * (2 if k > 2 else 1)
        crossing = max(sizes[low][:, ~low].sum(), sizes[~low][:, low].sum())
        worst = max(worst, crossing / (links * net.link_bw))
    return worst


def injection_bound(sizes, elem_bytes, net):
    """Fewest cycles for every chip to inject what it sends to others and eject what it
    receives from them at ``inject_bw``."""
    sizes = np.asarray(sizes, dtype=np.int64) * elem_bytes
    remote = sizes - np.diag(np.diag(sizes))
    return max(remote.sum(axis=1).max(), remote.sum(axis=0).max()) / net.inject_bw


def all_to_all_bound(sizes, elem_bytes, net):
    """The larger of the bisection and injection bounds of an all-to-all."""
    return max(bisection_bound(sizes, elem_bytes, net), injection_bound(sizes, elem_bytes, net))


def payload_bw(flit_bits, max_packet, header_bits):
    """Payload bytes per cycle of a link streaming packets of ``max_packet`` flits whose head
    carries ``header_bits`` of headers (the ICI's and the endpoint's)."""
    if header_bits >= max_packet * flit_bits:
        raise ConfigError("header_bits", f"must leave payload in a {max_packet}-flit packet "
                                         f"of {flit_bits}-bit flits, got {header_bits}")
    return (max_packet * flit_bits - header_bits) / 8 / max_packet
