"""Configuration of the ICI generator: the network (and the one router it repeats), and the
test-only harness around it; validated on construction."""

import math
from dataclasses import dataclass

from .config import Config, ConfigError, check_bool, check_choice, check_int

__all__ = ["ICIConfig", "ICIHarnessConfig", "SEQ_BITS", "MAX_RADIX", "TIMESTAMP_BITS",
           "RETRY_DEPTHS"]

SEQ_BITS = 8
"""Width of the header's sequence number (per source, destination and class, modulo 256)."""
MAX_RADIX = 64
RETRY_DEPTHS = (4, 8, 16, 32, 64, 128, 256)
TIMESTAMP_BITS = 16
"""Creation time the harness's generators put in the head flit's payload, for latency."""


@dataclass(frozen=True)
class ICIConfig(Config):
    """Parameters of an ICI network and of the one router it repeats.

    Parameters
    ----------
    dims : tuple of int
        Radix of each dimension (1 to 3 dimensions, each 2..64): (16, 16) is a Trillium pod.
    wrap : tuple of bool
        Per dimension, torus (True, wraparound links with a dateline) or mesh (False).
        Empty: every dimension wraps.
    classes : int
        Traffic classes, 1..4; each has its own virtual channels, so classes never block each
        other inside a router.
    vcs : int
        Virtual channels per traffic class on every link: 1, 2, 4 or 8. Wrapped dimensions split
        them into two dateline classes, so a torus needs at least 2.
    buffer_depth : int
        Flits of buffer per virtual channel at every input: 1, 2, 4, 8, 16 or 32.
    flit_bits : int
        Data bits of a flit; the head flit carries the header in its low bits.
    max_packet : int
        Longest packet in flits, 1..64.
    local_ports : int
        Injection/ejection port pairs per router, 1..4.
    retry_depth : int
        Flits kept per link for go-back-N retransmission: a power of two, 4..256, and at least
        the acknowledgement round trip ``2 * link_latency + 2`` (a smaller window could never
        let the link stream).
    link_latency : int
        Cycles a flit, and a reverse message, takes on a link: 1..64. 1 is a router's output
        register wired straight into its neighbour; longer links (SerDes, cables) add delay
        stages in the network. Credits and acknowledgements then come back
        ``2 * link_latency + 2`` cycles after a flit is sent: see :attr:`credit_round_trip`.
    switch_stage : bool
        Register the allocator's decisions: the chosen flit is read from its buffer and crosses
        the switch in the next cycle (a three-stage router instead of two: one more cycle per
        hop), which cuts the router's longest combinational path about in half.
    alloc_iters : int
        Iterations of the separable switch allocator per cycle: 1, 2 or 3. More iterations
        match more inputs to outputs in a cycle (and serve packets in flight first), at the
        cost of a longer combinational path and a slower simulation (see
        :mod:`hdl.ici.allocator`).
    """

    dims: tuple = (4, 4)
    wrap: tuple = ()
    classes: int = 1
    vcs: int = 2
    buffer_depth: int = 8
    flit_bits: int = 64
    max_packet: int = 8
    local_ports: int = 1
    retry_depth: int = 8
    link_latency: int = 1
    switch_stage: bool = False
    alloc_iters: int = 1

    KIND = "ICI"

    def validate(self):
        dims = self.dims
        if not 1 <= len(dims) <= 3:
            raise ConfigError("dims", f"must have 1 to 3 dimensions, got {len(dims)}")
        wrap = self.wrap or (True,) * len(dims)
        object.__setattr__(self, "wrap", wrap)
        for d, k in enumerate(dims):
            check_int(f"dims[{d}]", k, 2, MAX_RADIX)
        if len(wrap) != len(dims):
            raise ConfigError("wrap", f"must have one entry per dimension ({len(dims)}), "
                                      f"got {len(wrap)}")
        for d, w in enumerate(wrap):
            check_bool(f"wrap[{d}]", w)
        check_int("classes", self.classes, 1, 4)
        check_choice("vcs", self.vcs, (2, 4, 8) if any(wrap) else (1, 2, 4, 8))
        check_choice("buffer_depth", self.buffer_depth, (1, 2, 4, 8, 16, 32, 64, 128))
        check_int("max_packet", self.max_packet, 1, 64)
        check_int("local_ports", self.local_ports, 1, 4)
        check_int("link_latency", self.link_latency, 1, 64)
        check_bool("switch_stage", self.switch_stage)
        check_choice("alloc_iters", self.alloc_iters, (1, 2, 3))
        windows = [r for r in RETRY_DEPTHS if r >= self.ack_round_trip]
        if self.retry_depth not in windows:
            raise ConfigError("retry_depth", f"must be one of {', '.join(map(str, windows))} "
                              f"(a power of two at least the acknowledgement round trip "
                              f"2 * link_latency + 2 = {self.ack_round_trip}), "
                              f"got {self.retry_depth!r}")
        check_int("flit_bits", self.flit_bits, self.header_bits, 1024)

    # Derived sizes -----------------------------------------------------------------------

    @property
    def ndims(self):
        return len(self.dims)

    @property
    def nodes(self):
        return math.prod(self.dims)

    @property
    def endpoints(self):
        return self.nodes * self.local_ports

    @property
    def net_ports(self):
        """Network ports of a router: (d, +) is 2d, (d, -) is 2d + 1."""
        return 2 * self.ndims

    @property
    def ports(self):
        return self.net_ports + self.local_ports

    @property
    def total_vcs(self):
        """Virtual channels per network link (all traffic classes)."""
        return self.classes * self.vcs

    @property
    def coord_bits(self):
        """Header bits per coordinate: enough to name every node and one value past the pod."""
        return tuple(k.bit_length() for k in self.dims)

    @property
    def port_bits(self):
        return self.local_ports.bit_length()

    @property
    def class_bits(self):
        return self.classes.bit_length()

    @property
    def length_bits(self):
        return self.max_packet.bit_length()

    @property
    def max_hops(self):
        return sum(k // 2 if w else k - 1 for k, w in zip(self.dims, self.wrap, strict=True))

    @property
    def hop_bits(self):
        return max(1, self.max_hops.bit_length())

    @property
    def header_fields(self):
        """(name, width) of the header fields, least significant first."""
        fields = []
        for side in ("dst", "src"):
            fields += [(f"{side}{d}", b) for d, b in enumerate(self.coord_bits)]
            fields.append((f"{side}_port", self.port_bits))
        fields += [("tclass", self.class_bits), ("length", self.length_bits),
                   ("seq", SEQ_BITS), ("hops", self.hop_bits)]
        return fields

    @property
    def header_bits(self):
        return sum(w for _, w in self.header_fields)

    @property
    def seq_bits(self):
        """Link-layer sequence number width: go-back-N needs more numbers than the window."""
        return (2 * self.retry_depth - 1).bit_length()

    @property
    def ack_round_trip(self):
        """Cycles from a flit taken by the link sender to its acknowledgement back at the
        sender: ``retry_depth`` must cover it for the link to stream."""
        return 2 * self.link_latency + 2

    @property
    def credit_round_trip(self):
        """Cycles from a flit allocated to an output to its credit usable again there, when
        the receiver forwards it at once (one cycle more with ``switch_stage``): a VC streams
        at one flit per cycle only with ``buffer_depth`` at least this."""
        return 2 * self.link_latency + 2 + self.switch_stage

    @property
    def replay_timeout(self):
        """Cycles without acknowledgement progress, with flits outstanding, before the link
        sender replays: longer than the acknowledgement round trip."""
        return 30 + 2 * self.link_latency

    @property
    def warnings(self):
        """Legal but slow choices, for the sidecar."""
        out = []
        if self.buffer_depth < self.credit_round_trip:
            out.append(f"buffer_depth {self.buffer_depth} is below the credit round trip "
                       f"{self.credit_round_trip} cycles: one VC alone cannot "
                       f"stream at full link rate; the link can with "
                       f"{-(-self.credit_round_trip // self.buffer_depth)} VCs busy")
        return out

    @property
    def credit_bits(self):
        """Width of the cumulative credit counts on the reverse channel (modulo > depth)."""
        return self.buffer_depth.bit_length()

    # Names -------------------------------------------------------------------------------

    @property
    def suffix(self):
        """The parameters in a short form, for module names."""
        topo = "x".join(f"{k}{'t' if w else 'm'}" for k, w in zip(self.dims, self.wrap,
                                                                   strict=True))
        link = f"_d{self.link_latency}" if self.link_latency > 1 else ""
        stage = "_s" if self.switch_stage else ""
        iters = f"_a{self.alloc_iters}" if self.alloc_iters > 1 else ""
        return (f"{topo}_c{self.classes}v{self.vcs}b{self.buffer_depth}_w{self.flit_bits}"
                f"_p{self.max_packet}_l{self.local_ports}_r{self.retry_depth}{link}{stage}"
                f"{iters}")

    @property
    def router_name(self):
        return f"podium_ici_router_{self.suffix}"

    @property
    def name(self):
        """Verilog module name of the network top."""
        return f"podium_ici_{self.suffix}"


@dataclass(frozen=True)
class ICIHarnessConfig(Config):
    """The test-only top of the ICI: a network with a traffic generator and a delivery checker
    on every endpoint (hdl/ici/harness.py).

    Parameters
    ----------
    ici : ICIConfig
        The network. Its flits must hold the header and a 16-bit creation time.
    faults : bool
        A fault injector (random bit flips at a rate set by a port) on every link.
    source_queue : int
        Entries of each generator's source queue (packets created and not yet injected): a
        power of two, 4..4096. Benchmarks make it deep enough never to refuse a packet at a
        stable load, as BookSim's unbounded source queues.
    verilate : str
        How Verilator builds the router: ``"auto"`` (once, as a library, ``hier_block``, in a
        network of more than 16 routers; else once per instance), ``"hierarchical"`` or
        ``"flat"`` (once per instance: a longer build, a faster simulation of a large network).
    sim_threads : int
        Threads of the Verilator model: 1, 2 or 4 (``--threads``; more than the free cores
        slows it down, so the regression keeps 1).
    """

    KIND = "ICI harness"

    ici: ICIConfig = ICIConfig()
    faults: bool = False
    source_queue: int = 16
    verilate: str = "auto"
    sim_threads: int = 1

    def validate(self):
        check_bool("faults", self.faults)
        check_choice("source_queue", self.source_queue, [1 << n for n in range(2, 13)])
        check_choice("verilate", self.verilate, ("auto", "hierarchical", "flat"))
        check_choice("sim_threads", self.sim_threads, (1, 2, 4))
        low = self.ici.header_bits + TIMESTAMP_BITS
        if self.ici.flit_bits < low:
            raise ConfigError("ici.flit_bits", f"must be at least {low} in a harness (header "
                                               f"and creation time), got {self.ici.flit_bits}")

    @property
    def name(self):
        queue = f"_q{self.source_queue}" if self.source_queue != 16 else ""
        build = {"auto": "", "hierarchical": "_hier", "flat": "_flat"}[self.verilate]
        threads = f"_t{self.sim_threads}" if self.sim_threads > 1 else ""
        return (f"podium_ici_harness_{self.ici.suffix}{queue}" + ("_fi" if self.faults else "")
                + build + threads)
