"""Packing numpy values into stream payload integers and back, from a design's sidecar.

Amaranth lays out structs and arrays LSB first; the sidecar written by ``hdl.generate``
describes every port (fields with offsets, lanes with element width, enum values by name), so
testbenches pack beats from that description instead of hard-coding bit positions.
"""

import json
import os

__all__ = ["load_sidecar", "Port", "pack_lanes", "unpack_lanes", "enum_values"]


def load_sidecar(path=None):
    with open(path or os.environ["PODIUM_SIDECAR"]) as f:
        return json.load(f)


def pack_lanes(values, width):
    """Pack integers into lanes of ``width`` bits, element 0 at the LSB (two's complement)."""
    mask = (1 << width) - 1
    word = 0
    for i, v in enumerate(values):
        word |= (int(v) & mask) << (i * width)
    return word


def unpack_lanes(word, width, count, signed=True):
    mask = (1 << width) - 1
    out = []
    for i in range(count):
        v = (word >> (i * width)) & mask
        if signed and v >> (width - 1):
            v -= 1 << width
        out.append(v)
    return out


def enum_values(sidecar, port):
    """``{name: value}`` of the enum-shaped port ``port`` (a full port name)."""
    return {p["name"]: p for p in sidecar["ports"]}[port]["enum"]


class Port:
    """A struct payload, packed and unpacked by field name, from its description (the form
    ``hdl.generate.describe_shape`` gives and the sidecar holds). An enum field takes its
    member name as well as its value."""

    def __init__(self, desc):
        self.desc = desc

    @classmethod
    def of(cls, sidecar, name):
        """Port ``name`` of a design, or the payload of stream ``name``, from its sidecar."""
        ports = {p["name"]: p for p in sidecar["ports"]}
        return cls(ports[name] if name in ports else ports[f"{name}__payload"])

    def field(self, name):
        return self.desc["fields"][name]

    def pack(self, **values):
        word = 0
        for name, value in values.items():
            f = self.field(name)
            if "lanes" in f:
                value = pack_lanes(value, f["lanes"]["width"])
            elif isinstance(value, str):
                value = f["enum"][value]
            word |= (int(value) & ((1 << f["width"]) - 1)) << f["offset"]
        return word

    def unpack(self, word):
        out = {}
        for name, f in self.desc["fields"].items():
            raw = (word >> f["offset"]) & ((1 << f["width"]) - 1)
            if "lanes" in f:
                lanes = f["lanes"]
                out[name] = unpack_lanes(raw, lanes["width"], lanes["count"], lanes["signed"])
            else:
                out[name] = raw
        return out
