"""Configuration of the chip's ICI endpoint (docs/pod.md), validated on construction."""

from dataclasses import dataclass

from ..config import Config, ConfigError, check_int
from ..ici.config import ICIConfig

__all__ = ["EndpointConfig", "ADDR_BITS", "TAG_BITS", "SEM_BITS", "NO_SEM", "FLIT_BITS"]

ADDR_BITS = 32
"""Byte address of a message in the destination's HBM or VMEM."""
TAG_BITS = 4
"""The sender's message slot, carried so responses find their request."""
SEM_BITS = 5
"""Semaphore number a message increments at its destination (the TensorCore's 0..30)."""
NO_SEM = 2 ** SEM_BITS - 1
"""Semaphore number meaning: none."""
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
    """

    KIND = "endpoint"

    ici: ICIConfig = ICIConfig(dims=(2, 2), classes=2, flit_bits=128, max_packet=8)
    max_message: int = 4096

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
    def endpoint_header_bits(self):
        """Bits of the endpoint header (kind 2, space 1, op 2, fmt 2, last 1, ack 1, tag,
        sem, bytes, address)."""
        return 9 + TAG_BITS + SEM_BITS + self.packet_bytes.bit_length() + ADDR_BITS
