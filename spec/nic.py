"""Configuration of a chip's network interface (hdl/nic/, docs/nic.md), validated on
construction."""

from dataclasses import dataclass

from .config import Config, ConfigError, check_int
from .ici import ICIConfig
from .protocol import ADDR_BITS, FLIT_BITS, LOCAL_PORTS, SEM_BITS, STAGING_SLOTS, TAG_BITS

__all__ = ["NICConfig", "READERS"]

READERS = 7
"""The network interface's memory readers (the host's and the endpoint's six); on an HBM port
each uses an AXI ID of its own."""


@dataclass(frozen=True)
class NICConfig(Config):
    """Parameters of a chip's network interface: its ICI endpoint, collective engine and
    message unit (docs/nic.md).

    Parameters
    ----------
    ici : ICIConfig
        The pod's network. The interface needs 2 traffic classes (requests in class 0,
        responses in class 1), packets of at least 2 flits (a head and data) and flits of a
        power-of-two number of bytes wide enough for both headers in the head flit; on a chip,
        3 local ports per router (``LOCAL_PORTS``: requests on port 0, responses on port 1,
        the collectives' - ring's requests on port 2).
    max_message : int
        Longest message in bytes, a power of two, 1..2^24.
    staging_slot : int
        Bytes of each of the four staging slots of bfloat16 reductions (docs/pod.md,
        "bfloat16"): a power of two, two flits .. 2^24. A bfloat16 reduce-scatter piece's fp32
        partials must fit in a slot.
    """

    KIND = "nic"

    ici: ICIConfig = ICIConfig(dims=(2, 2), classes=2, vcs=2, buffer_depth=8, flit_bits=128,
                               max_packet=8, local_ports=LOCAL_PORTS)
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
