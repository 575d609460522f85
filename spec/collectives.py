"""How collectives lay out their data, defined once: the all-to-all's step schedule (which
chip each chip sends to at each step, what the network interface's engine follows) and the
table software writes for it (docs/pod.md, "All-to-all").
"""

import math

from .config import ConfigError

__all__ = ["a2a_displacements", "all_to_all_table"]


def a2a_displacements(dims, h):
    """Per dimension, the coordinate displacement of every all-to-all step ``s`` (0 .. nodes - 1)
    of direction ``h``: ``s``'s mixed-radix digits (dimension 0 the fastest), plus half the
    radix in direction 1. Every step is a translation of the torus, so it loads the links of
    a dimension evenly, and the two directions' translations are half a ring apart."""
    nodes = math.prod(dims)
    out, stride = [], 1
    for k in dims:
        out.append([((s // stride) % k + h * (k // 2)) % k for s in range(nodes)])
        stride *= k
    return out


def all_to_all_table(sizes, flit_bytes, src_base, dst_base):
    """The all-to-all's layout, as software lays it out for the engine: ``sizes[src][dst]``
    bytes go from chip ``src`` to chip ``dst`` (a square matrix over the pod's chips). Every
    chip holds its messages in destination order from ``src_base`` and receives them in source
    order from ``dst_base``, each message starting on a flit boundary (a slot of its bytes
    rounded up to whole flits). Returns ``(tables, landing)``: ``tables[src][dst]`` the entry
    of chip ``src`` for ``dst`` (``src_address``, ``dst_address``, ``bytes``), and
    ``landing[dst][src]`` where src's message lands at dst."""
    nodes = len(sizes)
    if any(len(row) != nodes for row in sizes) or any(b < 0 for row in sizes for b in row):
        raise ConfigError("sizes", f"must be a {nodes} x {nodes} matrix of byte counts >= 0")
    for name, base in (("src_base", src_base), ("dst_base", dst_base)):
        if base % flit_bytes:
            raise ConfigError(name, f"must be a multiple of {flit_bytes} (the flit bytes), "
                                    f"got {base}")

    def slot(size):
        return -(-size // flit_bytes) * flit_bytes

    landing = [[0] * nodes for _ in range(nodes)]
    for dst in range(nodes):
        address = dst_base
        for src in range(nodes):
            landing[dst][src] = address
            address += slot(sizes[src][dst])
    tables = []
    for src in range(nodes):
        address, row = src_base, []
        for dst in range(nodes):
            row.append({"src_address": address, "dst_address": landing[dst][src],
                        "bytes": sizes[src][dst]})
            address += slot(sizes[src][dst])
        tables.append(row)
    return tables, landing
