"""Configuration of the chip's ICI endpoint (docs/pod.md), validated on construction."""

from dataclasses import dataclass

from ..config import Config, ConfigError, check_bool, check_int
from ..ici.config import ICIConfig
from ..tensorcore.config import TensorCoreConfig

__all__ = ["EndpointConfig", "PodConfig", "ADDR_BITS", "TAG_BITS", "SEM_BITS", "NO_SEM",
           "COLLECTIVE_SEM", "FLIT_BITS", "REQUEST_PORT", "RESPONSE_PORT", "MINUS_PORT",
           "LOCAL_PORTS", "STAGING_SLOTS"]

ADDR_BITS = 32
"""Byte address of a message in the destination's HBM or VMEM."""
TAG_BITS = 5
"""The sender's message slot, carried so responses find their request."""
SEM_BITS = 5
"""Semaphore number a message increments at its destination (the TensorCore's 0..30)."""
NO_SEM = 2 ** SEM_BITS - 1
"""Semaphore number meaning: none."""
COLLECTIVE_SEM = NO_SEM - 1
"""Semaphore of the collective engine's messages: their completions go to the engine."""
REQUEST_PORT = 0
"""Local port of a pod router that injects and ejects requests (ICI class 0): the messages
of the host and of the collectives' + ring."""
RESPONSE_PORT = 1
"""Local port of a pod router that injects and ejects responses (ICI class 1)."""
MINUS_PORT = 2
"""Local port of a pod router that injects and ejects the requests of the collectives' - ring,
so that a chip sends and takes a flit per cycle on each ring direction."""
LOCAL_PORTS = 3
STAGING_SLOTS = 4
"""Slots of the bfloat16 reductions' staging area: one per ring direction and step parity."""
FLIT_BITS = (64, 128, 256, 512, 1024)
"""Flit widths the endpoint takes: a power-of-two number of bytes, so a packet's beat count
and a beat's byte strobe are shifts and masks."""


@dataclass(frozen=True)
class EndpointConfig(Config):
    """Parameters of the ICI endpoint.

    Parameters
    ----------
    ici : ICIConfig
        The pod's network. The endpoint needs 2 traffic classes (requests in class 0,
        responses in class 1), packets of at least 2 flits (a head and data) and flits of a
        power-of-two number of bytes wide enough for both headers in the head flit.
    max_message : int
        Longest message in bytes, a power of two, 1..2^24.
    staging_slot : int
        Bytes of each of the four staging slots of bfloat16 reductions (docs/pod.md,
        "bfloat16"): a power of two, two flits .. 2^24. A bfloat16 reduce-scatter piece's fp32
        partials must fit in a slot.
    """

    KIND = "endpoint"

    ici: ICIConfig = ICIConfig(dims=(2, 2), classes=2, flit_bits=128, max_packet=8)
    max_message: int = 4096
    staging_slot: int = 1024

    def validate(self):
        ici = self.ici
        if ici.classes < 2:
            raise ConfigError("ici.classes", f"must be at least 2 (requests and responses "
                                             f"travel in separate classes), got {ici.classes}")
        if ici.max_packet < 2:
            raise ConfigError("ici.max_packet", f"must be at least 2 (a head and a data flit), "
                                                f"got {ici.max_packet}")
        if ici.flit_bits not in FLIT_BITS:
            raise ConfigError("ici.flit_bits", f"must be one of "
                                               f"{', '.join(map(str, FLIT_BITS))}, "
                                               f"got {ici.flit_bits}")
        check_int("max_message", self.max_message, 1, 2 ** 24)
        if self.max_message & (self.max_message - 1):
            raise ConfigError("max_message", f"must be a power of two, got {self.max_message}")
        check_int("staging_slot", self.staging_slot, 2 * self.flit_bytes, 2 ** 24)
        if self.staging_slot & (self.staging_slot - 1):
            raise ConfigError("staging_slot", f"must be a power of two, got "
                                              f"{self.staging_slot}")
        need = ici.header_bits + self.endpoint_header_bits
        if ici.flit_bits < need:
            raise ConfigError("ici.flit_bits", f"must hold the ICI header ({ici.header_bits} "
                                               f"bits) and the endpoint header "
                                               f"({self.endpoint_header_bits} bits), "
                                               f"got {ici.flit_bits}")

    @property
    def flit_bytes(self):
        return self.ici.flit_bits // 8

    @property
    def packet_bytes(self):
        """Payload bytes of a full packet: every flit but the head."""
        return (self.ici.max_packet - 1) * self.flit_bytes

    @property
    def staging_bytes(self):
        """The bfloat16 reductions' staging area: a slot per ring direction and step parity."""
        return STAGING_SLOTS * self.staging_slot

    @property
    def endpoint_header_bits(self):
        """Bits of the endpoint header (kind 2, space 1, op 2, fmt 2, last 1, ack 1, tag,
        sem, bytes, address)."""
        return 9 + TAG_BITS + SEM_BITS + self.packet_bytes.bit_length() + ADDR_BITS


@dataclass(frozen=True)
class PodConfig(Config):
    """Parameters of a pod: chips on an ICI torus (docs/pod.md, "Pod top"), each an endpoint
    with its collective engine and message unit around a local memory (a simulation chip
    driven by the host) or around a TensorCore's VMEM (a chip that runs programs).

    Parameters
    ----------
    endpoint : EndpointConfig
        The chips' endpoint; its ``ici`` is the pod's network, with 3 local ports per router
        (requests on port 0, responses on port 1, so neither waits behind the other at an
        ejection port; the requests of the collectives' - ring on port 2).
    memory_words : int
        Flits of each chip's local memory (its VMEM; the simulation chip has no HBM): a power
        of two, 16..65536, holding at least the staging area of bfloat16 reductions (its top
        ``endpoint.staging_bytes``).
    faults : bool
        A fault injector on every link (test only: bit flips the link layer must repair).
    tensorcore : TensorCoreConfig or None
        None: simulation chips. Else every chip is this TensorCore (with ``ici``, its VMEM
        rows a flit wide, ``memory_words`` its VMEM rows: docs/pod.md, "Programs on the
        pod").
    hbm : bool
        Chips with an HBM port (an AXI4 manager per chip, ``hbm`` on the top) for the
        endpoint's accesses to space HBM (docs/pod.md, "HBM"), and with ``tensorcore`` the
        DMA's port to the same HBM (``dma``); without it they are refused.
    """

    KIND = "pod"

    endpoint: EndpointConfig = EndpointConfig(ici=ICIConfig(
        dims=(2, 2), classes=2, vcs=2, buffer_depth=8, flit_bits=128, max_packet=8,
        local_ports=LOCAL_PORTS))
    memory_words: int = 1024
    faults: bool = False
    tensorcore: TensorCoreConfig | None = None
    hbm: bool = False

    def validate(self):
        ports = self.endpoint.ici.local_ports
        if ports != LOCAL_PORTS:
            raise ConfigError("endpoint.ici.local_ports",
                              f"must be {LOCAL_PORTS} (requests on port {REQUEST_PORT}, "
                              f"responses on port {RESPONSE_PORT}, the - ring's requests on "
                              f"port {MINUS_PORT}), got {ports}")
        check_int("memory_words", self.memory_words, 16, 65536)
        if self.memory_words & (self.memory_words - 1):
            raise ConfigError("memory_words", f"must be a power of two, got "
                                              f"{self.memory_words}")
        check_bool("faults", self.faults)
        check_bool("hbm", self.hbm)
        tc = self.tensorcore
        if tc is not None:
            if not tc.ici:
                raise ConfigError("tensorcore.ici", "must be True (the chip's ICI queue "
                                                    "drives its endpoint)")
            if 8 * tc.row_bytes != self.ici.flit_bits:
                raise ConfigError("tensorcore.row_bytes", f"must be a flit "
                                                          f"({self.ici.flit_bits // 8} bytes: "
                                                          f"endpoint.ici.flit_bits / 8), got "
                                                          f"{tc.row_bytes}")
            if self.memory_words != tc.vmem_rows:
                raise ConfigError("memory_words", f"must be the TensorCore's VMEM rows "
                                                  f"({tc.vmem_rows}: tensorcore.vmem_bytes / "
                                                  f"tensorcore.row_bytes), got "
                                                  f"{self.memory_words}")
        if self.memory_bytes < self.endpoint.staging_bytes:
            raise ConfigError("memory_words", f"must hold the bfloat16 staging area "
                                              f"({self.endpoint.staging_bytes} bytes: "
                                              f"endpoint.staging_slot x {STAGING_SLOTS}), got "
                                              f"{self.memory_words} words of "
                                              f"{self.endpoint.flit_bytes} bytes")

    @property
    def memory_bytes(self):
        return self.memory_words * self.endpoint.flit_bytes

    @property
    def staging_base(self):
        """Byte address of the staging area: the top of each chip's memory."""
        return self.memory_bytes - self.endpoint.staging_bytes

    @property
    def ici(self):
        return self.endpoint.ici

    @property
    def chips(self):
        return self.ici.nodes

    @property
    def name(self):
        """Verilog module name of the pod top."""
        return (f"podium_pod_{self.ici.suffix}_e{self.endpoint.max_message}"
                f"_s{self.endpoint.staging_slot}_m{self.memory_words}"
                + ("_fi" if self.faults else "") + ("_hbm" if self.hbm else "")
                + (f"_{self.tensorcore.name}" if self.tensorcore else ""))
