"""The ICI network top: a k1 x k2 [x k3] torus (or mesh) of routers and their links.

Every router is the same Verilog module (emitted once, instantiated by name, see
``hdl.lib.hier``), its coordinates tied to constants; above ``HIER_NODES`` routers it is also
verilated once (a Verilator ``hier_block``). Output port (d, +) of a router drives
input port (d, +) of its + neighbour and takes that port's reverse channel back; likewise for
(d, -). Ports that face the edge of a mesh are tied off (an input sees no flit, an output an
all-zero reverse message, whose CRC is valid); dimension-order routing never uses them.

A link of ``link_latency`` cycles is the sender's output register followed by a delay line
of ``link_latency - 1`` cycles each way (:class:`~hdl.lib.delay.DelayLine`).

With ``faults`` (test only), every link passes through a fault injector, a module that flips
one random bit of the flit wire and, independently, of the reverse message, each with
probability ``fault_rate / 65536`` per cycle.
"""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec.topology import node_coords, node_index

from ..lib.delay import DelayLine
from ..lib.hier import Submodule
from ..lib.tree import tree_sum
from ..lib.xorshift import xorshift
from ..top import Top
from .packet import eject_layout, reverse_layout, wire_layout
from .router import COUNTER_WIDTH, COUNTERS, Router

__all__ = ["Network", "FaultInjector", "HIER_NODES"]

HIER_NODES = 16
"""Networks of more routers than this verilate the router once, as a library
(``hier_block``): an 8x8 torus harness then builds in 50 s instead of 190 s, and simulates
about 12% slower (2,743 against 3,127 cycles/s, uniform traffic at 0.3, identical cycles)."""


class FaultInjector(wiring.Component):
    """Random single-bit flips on one link (both directions), for link-layer tests."""

    def __init__(self, cfg):
        self._fw = wire_layout(cfg).size
        self._rw = reverse_layout(cfg).size
        super().__init__({
            "flit_i": In(self._fw), "flit_o": Out(self._fw),
            "rev_i": In(self._rw), "rev_o": Out(self._rw),
            "rate": In(16), "seed": In(32), "event": Out(2),
        })

    def elaborate(self, platform):
        m = Module()
        r = xorshift(m, 64, self.seed, name="rng")
        for i, (src, dst, width) in enumerate([(self.flit_i, self.flit_o, self._fw),
                                               (self.rev_i, self.rev_o, self._rw)]):
            hit = r[32 * i: 32 * i + 16] < self.rate
            pos = Signal(range(width), name=f"pos{i}")
            m.d.comb += pos.eq((r[32 * i + 16: 32 * i + 32] * width) >> 16)
            m.d.comb += [dst.eq(src ^ Mux(hit, (Const(1, width) << pos)[:width], 0)),
                         self.event[i].eq(hit)]
        return m


class Network(Top):
    """The pod: ``nodes`` routers in a torus or mesh.

    Members
    -------
    inject : In(stream of flit_bits).array(nodes * local_ports)
        Endpoint ``n * local_ports + l`` is local port ``l`` of node ``n``; node ``n`` has
        coordinates ``c0 + k0 * (c1 + k1 * c2)`` = ``n``.
    eject : Out(stream of {data, last}).array(nodes * local_ports)
    crc_errors, retries, dropped : Out(32)
        Sums of the routers' counters.
    fault_rate : In(16), fault_seed : In(32), faults : Out(32)
        Only with ``faults`` (a constructor argument, test only): flip probability per wire
        per cycle (/65536), seed of the injectors (taken at reset), and the count of bits
        flipped.

    ``hier_block`` (a constructor argument): verilate the router once as a library (True),
    once per instance (False), or by the network's size (None: above ``HIER_NODES``).
    """

    def __init__(self, config, *, faults=False, hier_block=None):
        cfg = config
        self._faults = faults
        hier = cfg.nodes > HIER_NODES if hier_block is None else hier_block
        self._router = Submodule(cfg.router_name, Router(cfg), hier_block=hier)
        self._subs = [self._router]
        if faults:
            self._injector = Submodule(f"{cfg.router_name}_faults", FaultInjector(cfg))
            self._subs.append(self._injector)
        members = {
            "inject": In(stream.Signature(cfg.flit_bits)).array(cfg.endpoints),
            "eject": Out(stream.Signature(eject_layout(cfg))).array(cfg.endpoints),
            **{name: Out(COUNTER_WIDTH) for name in COUNTERS},
        }
        if faults:
            members.update({"fault_rate": In(16), "fault_seed": In(32),
                            "faults": Out(COUNTER_WIDTH)})
        super().__init__(config, members)

    @property
    def name(self):
        return self.config.name + ("_fi" if self._faults else "")

    def _delay(self, m, name, flit, rev):
        """The flit wire and the reverse message after the link's extra latency."""
        extra = self._config.link_latency - 1
        if not extra:
            return flit, rev
        out = []
        for suffix, value in (("flit", flit), ("rev", rev)):
            m.submodules[f"{name}_{suffix}"] = line = DelayLine(len(value.as_value()), extra)
            m.d.comb += line.i.eq(value)
            out.append(line.o)
        return out

    @property
    def submodules(self):
        return self._subs

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        L = cfg.local_ports
        routers = []
        for n in range(cfg.nodes):
            coords = node_coords(cfg.dims, n)
            r = self._router.instance(m, f"r{'_'.join(map(str, coords))}")
            for d, c in enumerate(coords):
                m.d.comb += r.coord[f"c{d}"].eq(c)
            for lp in range(L):
                wiring.connect(m, wiring.flipped(self.inject[n * L + lp]), r.inject[lp])
                wiring.connect(m, r.eject[lp], wiring.flipped(self.eject[n * L + lp]))
            routers.append(r)

        fault_events = []
        fed = set()     # (node, port) of every input port a neighbour drives
        for n, r in enumerate(routers):
            coords = node_coords(cfg.dims, n)
            for d, (k, wrap) in enumerate(zip(cfg.dims, cfg.wrap, strict=True)):
                for s, step in enumerate((1, -1)):
                    p = 2 * d + s
                    c = coords[d] + step
                    if not wrap and not 0 <= c < k:
                        m.d.comb += r.link_out[p].rev.eq(0)
                        continue
                    to = list(coords)
                    to[d] = c % k
                    fed.add((node_index(cfg.dims, to), p))
                    peer = routers[node_index(cfg.dims, to)]
                    src, dst = r.link_out[p], peer.link_in[p]
                    flit, rev = self._delay(m, f"d{n}_{p}", src.flit, dst.rev)
                    if self._faults:
                        fi = self._injector.instance(m, f"f{n}_{p}")
                        m.d.comb += [
                            fi.flit_i.eq(flit), dst.flit.eq(fi.flit_o),
                            fi.rev_i.eq(rev), src.rev.eq(fi.rev_o),
                            fi.rate.eq(self.fault_rate),
                            fi.seed.eq(self.fault_seed ^ ((n * cfg.net_ports + p + 1)
                                                          * 0x9E3779B1 % 2**32)),
                        ]
                        fault_events += [fi.event[0], fi.event[1]]
                    else:
                        m.d.comb += [dst.flit.eq(flit), src.rev.eq(rev)]

        # Mesh edges: an input port with no neighbour behind it sees no flit.
        for n, r in enumerate(routers):
            for p in range(cfg.net_ports):
                if (n, p) not in fed:
                    m.d.comb += r.link_in[p].flit.eq(0)

        for name in COUNTERS:
            m.d.comb += getattr(self, name).eq(tree_sum(getattr(r, name) for r in routers))
        if self._faults:
            total = Signal(range(len(fault_events) + 1))
            m.d.comb += total.eq(tree_sum(fault_events))
            m.d.sync += self.faults.eq(self.faults + total)
        return m
