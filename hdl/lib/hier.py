"""Hierarchical generation: a component emitted once as its own Verilog module.

Amaranth flattens every instance of an elaboratable into its own copy of the logic. A systolic
array repeats one processing element thousands of times, and both Yosys (at generation) and
Verilator (at build) then work on the flattened netlist, which grows as rows x cols. A
:class:`Submodule` is converted to Verilog once and instantiated by module name with
:class:`~amaranth.hdl.Instance`, so each level of the hierarchy stays small: generation and
Verilator build time scale with the number of instances, not with the logic inside them.
"""

import re

from amaranth.back import verilog
from amaranth.hdl import ClockSignal, Instance, ResetSignal
from amaranth.lib import wiring

__all__ = ["Submodule", "convert_hierarchy"]

_TOP_ATTR = re.compile(r"\(\*\s*top\s*=\s*1\s*\*\)\n")


class Submodule:
    """A component converted once to a Verilog module named ``name``.

    Parameters
    ----------
    name : str
        Verilog module name; unique within one generated design.
    component : wiring.Component
        The template. It is elaborated once, here; its signature gives the instance ports.
    children : list of Submodule
        Submodules that ``component`` instantiates, emitted before it.
    hier_block : bool
        Mark the module ``/*verilator hier_block*/``: the runner then verilates it once as its
        own library (``--hierarchical``) instead of emitting its code once per instance, which
        is what keeps a network of tens of large routers quick to build.
    no_inline : bool
        Mark the module ``/*verilator no_inline_module*/``: Verilator keeps it one C++ class
        that every instance shares instead of inlining a copy of its code into the parent per
        instance (a large module instantiated a few times, compiled once).
    """

    def __init__(self, name, component, children=(), *, hier_block=False, no_inline=False):
        self._name = name
        self._signature = component.signature
        text = verilog.convert(component, name=name, emit_src=False)
        self._verilog = _TOP_ATTR.sub("", text)
        for marked, comment in ((hier_block, "hier_block"), (no_inline, "no_inline_module")):
            if marked:
                self._verilog = re.sub(rf"(module {re.escape(name)}\([^)]*\);\n)",
                                       rf"\1  /*verilator {comment}*/\n", self._verilog,
                                       count=1)
        header = re.search(rf"module {re.escape(name)}\(([^)]*)\);", text)
        ports = {p.strip() for p in header.group(1).split(",")}
        self._has_clk = "clk" in ports
        self._has_rst = "rst" in ports
        self._children = list(children)

    @property
    def name(self):
        return self._name

    def modules(self):
        """Verilog text of this module and everything below it, children first, no repeats."""
        seen, out = set(), []
        self._collect(seen, out)
        return out

    def _collect(self, seen, out):
        for child in self._children:
            child._collect(seen, out)
        if self._name not in seen:
            seen.add(self._name)
            out.append(self._verilog)

    def instance(self, m, name, *, domain="sync"):
        """Add an instance called ``name`` to module ``m``, clocked and reset by ``domain``;
        return its interface to connect."""
        iface = self._signature.create(path=(name,))
        ports = {}
        if self._has_clk:
            ports["i_clk"] = ClockSignal(domain)
        if self._has_rst:
            ports["i_rst"] = ResetSignal(domain)
        for path, member, value in self._signature.flatten(iface):
            port = "__".join(map(str, path))
            prefix = "i_" if member.flow == wiring.In else "o_"
            ports[prefix + port] = value
        m.submodules[name] = Instance(self._name, **ports)
        return iface


def convert_hierarchy(top, name, submodules):
    """Verilog of ``top`` (module ``name``) followed by every module it instantiates."""
    seen, texts = set(), []
    for sub in submodules:
        sub._collect(seen, texts)
    texts.append(verilog.convert(top, name=name, emit_src=False))
    return "\n".join(texts)
