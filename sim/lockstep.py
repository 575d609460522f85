"""Lockstep equivalence of two versions of a design: the tool behind "the Verilog behaves
identically" after a refactor.

``lockstep(new, old)`` returns a design with the new top's name and ports that contains both
versions (the old one's modules renamed), feeds both the same inputs, drives its outputs from
the new one and stops the simulation with ``$fatal`` in the first cycle (out of reset) where any
output of the two differs, naming the port and both values. Every existing testbench then runs
on it unchanged, so a regression run on lockstep designs checks cycle-exact equivalence under
all the stimulus the tests produce. Ports are matched by name with ``__`` and ``_`` treated
alike (so ``s0_axi_awid`` matches ``s0_axi__awid``); a port of one version with no partner
in the other is an error.

``old_design(checkout, block, params)`` generates the old version from another checkout of
the repository (for example a ``git worktree`` of the revision before the refactor), in a
separate process.

In the regression: ``PODIUM_LOCKSTEP=<checkout> make test`` runs every cocotb test on the
lockstep design of its configuration (verification/tests/conftest.py); a Python file named by
``PODIUM_LOCKSTEP_MAP`` may define ``translate(block, params)`` returning the old generator's
block name and parameters, for refactors that renamed them.
"""

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from hdl.generate import Design

__all__ = ["lockstep", "old_design"]

PREFIX = "lockstep_old_"


def _module_names(verilog):
    return re.findall(r"^module\s+(\\\S+|[A-Za-z_][\w$]*)", verilog, re.M)


def _rename_modules(verilog, prefix):
    """Every module of ``verilog`` renamed ``prefix + name``, declarations and instances."""
    names = set(_module_names(verilog))
    out = []
    for line in verilog.splitlines():
        m = re.match(r"^(module\s+|\s+)(\\\S+|[A-Za-z_][\w$]*)(\s.*|\(.*)?$", line)
        if m and m.group(2) in names:
            name = m.group(2)
            new = "\\" + prefix + name[1:] if name.startswith("\\") else prefix + name
            line = m.group(1) + new + (m.group(3) or "")
        out.append(line)
    return "\n".join(out) + "\n"


def _key(name):
    return re.sub(r"_+", "_", name)


def _decl(port):
    width = f"[{port['width'] - 1}:0] " if port["width"] > 1 else ""
    return f"  {'input' if port['direction'] == 'in' else 'output'} {width}{port['name']};"


def lockstep(new, old):
    """The lockstep design of ``new`` and ``old`` (``hdl.generate.Design``s), named and
    described as ``new``."""
    new_ports = {_key(p["name"]): p for p in new.sidecar["ports"]}
    old_ports = {_key(p["name"]): p for p in old.sidecar["ports"]}
    if set(new_ports) != set(old_ports):
        raise ValueError(f"ports differ: only new {sorted(set(new_ports) - set(old_ports))}, "
                         f"only old {sorted(set(old_ports) - set(new_ports))}")
    inner = f"{new.name}__lockstep_new"
    new_text = re.sub(rf"^module {re.escape(new.name)}\(", f"module {inner}(", new.verilog,
                      flags=re.M)
    old_text = _rename_modules(old.verilog, PREFIX)
    lines = [f"module {new.name}({', '.join(p['name'] for p in new.sidecar['ports'])});"]
    lines += [_decl(p) for p in new.sidecar["ports"]]
    conns_new, conns_old, checks = [], [], []
    for key, p in new_ports.items():
        o = old_ports[key]
        if p["direction"] == "in":
            conns_new.append(f".{p['name']}({p['name']})")
            conns_old.append(f".{o['name']}({p['name']})")
        else:
            wire = f"old__{p['name']}"
            lines.append(f"  wire [{p['width'] - 1}:0] {wire};")
            conns_new.append(f".{p['name']}({p['name']})")
            conns_old.append(f".{o['name']}({wire})")
            checks.append(f"    if ({p['name']} !== {wire}) begin\n"
                          f"      $display(\"LOCKSTEP MISMATCH %0t {p['name']}: new %h old %h\","
                          f" $time, {p['name']}, {wire});\n      bad = 1;\n    end")
    lines.append(f"  {inner} new_ ({', '.join(conns_new)});")
    lines.append(f"  {PREFIX}{old.name} old_ ({', '.join(conns_old)});")
    lines += ["  reg bad;", "  always @(posedge clk) if (!rst) begin", "    bad = 0;", *checks,
              "    if (bad) $fatal(1, \"lockstep: the two versions differ\");", "  end",
              "endmodule", ""]
    return Design(new.block, new.name, new_text + "\n" + old_text + "\n".join(lines),
                  new.sidecar)


_GENERATE = """
import json, sys
from hdl.generate import generate, make_config
design = generate(sys.argv[1], make_config(sys.argv[1], json.loads(sys.argv[2])))
path = design.write(sys.argv[3])
print(design.name)
"""


def old_design(checkout, block, params):
    """The design of ``block``/``params`` as the generator in ``checkout`` makes it."""
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run([sys.executable, "-c", _GENERATE, block, json.dumps(params), out],
                              cwd=checkout, env={"PYTHONPATH": str(checkout), "PATH": ""},
                              capture_output=True, text=True, check=True)
        name = done.stdout.strip().splitlines()[-1]
        verilog = (Path(out) / f"{name}.v").read_text()
        sidecar = json.loads((Path(out) / f"{name}.json").read_text())
    return Design(block, name, verilog, sidecar)
