"""The base of every generated top: its configuration, its Verilog module name, the modules
emitted once below it (``hdl.lib.hier``) joined into one Verilog file, and its sidecar.

The sidecar is the JSON description that travels with the Verilog: the configuration, every
port (name, direction, width; for structured payloads their fields and lanes, for enums their
values by name) and whatever else a testbench needs to drive the Verilog without the Python
that made it (``extras``: constants of the design, layouts of memories it exposes).
``hdl.generate`` writes both; a component that is only ever a part of something larger stays a
plain ``wiring.Component``.
"""

from amaranth.hdl import Shape
from amaranth.lib import data, enum, wiring

from .lib.hier import convert_hierarchy

__all__ = ["Top", "describe_shape"]


def describe_shape(shape):
    """Width and, for a layout, its fields (LSB first) or lanes, for an enum its values, as
    plain JSON."""
    desc = {"width": Shape.cast(shape).width}
    if isinstance(shape, data.ArrayLayout):
        desc["lanes"] = {"count": shape.length, **describe_shape(shape.elem_shape)}
    elif isinstance(shape, data.Layout):
        desc["fields"] = {name: {"offset": field.offset, **describe_shape(field.shape)}
                          for name, field in shape}
    else:
        desc["signed"] = Shape.cast(shape).signed
        if isinstance(shape, enum.EnumType):
            desc["enum"] = {member.name: member.value for member in shape}
    return desc


class Top(wiring.Component):
    """A component that can be generated on its own.

    Parameters
    ----------
    config : Config
        Its validated configuration; ``config.name`` is the Verilog module name.
    members : dict
        The signature members (as for ``wiring.Component``).
    """

    def __init__(self, config, members):
        self._config = config
        super().__init__(members)

    @property
    def config(self):
        return self._config

    @property
    def name(self):
        return self._config.name

    @property
    def submodules(self):
        """Modules emitted once and instantiated by name (``Submodule``, ``SRAM``) that this
        top or anything inside it uses; none by default."""
        return []

    @property
    def extras(self):
        """Further sidecar entries (a dict); none by default."""
        return {}

    def to_verilog(self):
        """This top's Verilog module followed by every module it instantiates by name."""
        return convert_hierarchy(self, self.name, self.submodules)

    def ports(self):
        """Every port of the top's Verilog module, described as in the sidecar."""
        ports = [{"name": "clk", "direction": "in", "width": 1},
                 {"name": "rst", "direction": "in", "width": 1}]
        for path, member, _ in self.signature.flatten(self):
            ports.append({"name": "__".join(map(str, path)),
                          "direction": "in" if member.flow == wiring.In else "out",
                          **describe_shape(member.shape)})
        return ports

    def sidecar(self, block):
        """The sidecar of this top, generated as block ``block``."""
        return {"block": block, "top": self.name, "parameters": self.config.to_dict(),
                "ports": self.ports(), **self.extras}
