"""The torus (or mesh) a pod's chips sit in, defined once: node numbering, coordinates, the
network ports and their neighbours, and where the datelines are (docs/ici.md, "Topology").

* Node ``n`` of a ``k0 x k1 [x k2]`` pod has coordinates ``(n mod k0, n / k0 mod k1, ...)``:
  dimension 0 varies fastest. Endpoint ``n * local_ports + l`` is local port ``l`` of node
  ``n``.
* Network port ``2 d`` leads to the + neighbour along dimension ``d``, port ``2 d + 1`` to the
  - neighbour; local ports follow the network ports.
* The dateline of a wrapped dimension of radix ``k`` is the wraparound link: the hop from
  ``k - 1`` to ``0`` going +, from ``0`` to ``k - 1`` going -.

The RTL, the golden models and the software all read these functions; none of them numbers
nodes on its own.
"""

import math

__all__ = ["node_coords", "node_index", "endpoint_index", "nodes", "port_of", "port_dim",
           "neighbour", "wraparound_hop"]


def nodes(dims):
    """Number of nodes of a pod of ``dims``."""
    return math.prod(dims)


def node_coords(dims, n):
    """Coordinates of node ``n`` (dimension 0 varies fastest)."""
    out = []
    for k in dims:
        out.append(n % k)
        n //= k
    return tuple(out)


def node_index(dims, coords):
    """Node number of ``coords`` (the inverse of :func:`node_coords`)."""
    n = 0
    for c, k in zip(reversed(tuple(coords)), reversed(tuple(dims)), strict=True):
        n = n * k + c
    return n


def endpoint_index(dims, local_ports, coords, port):
    """Endpoint number of local port ``port`` of the node at ``coords``."""
    return node_index(dims, coords) * local_ports + port


def port_of(dim, plus):
    """The network port towards the + (``plus``) or - neighbour along ``dim``."""
    return 2 * dim + (0 if plus else 1)


def port_dim(port):
    """``(dim, plus)`` of network port ``port``."""
    dim, minus = divmod(port, 2)
    return dim, not minus


def neighbour(dims, coords, port):
    """Coordinates of the node network port ``port`` of ``coords`` leads to (wrapping around:
    in a mesh dimension the caller never takes the port past the edge)."""
    dim, plus = port_dim(port)
    out = list(coords)
    out[dim] = (coords[dim] + (1 if plus else -1)) % dims[dim]
    return tuple(out)


def wraparound_hop(k, coord, plus):
    """Whether the hop from ``coord`` along a dimension of radix ``k`` crosses its dateline."""
    return coord == (k - 1 if plus else 0)
