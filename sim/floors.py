"""The floors of the code base and the rule that keeps them: every import points down (or
within its own package), never up, and inside the RTL never sideways between blocks.

    python -m sim.floors            the floor table (markdown) and any import that breaks it
    python -m sim.floors --write    the table written into docs/architecture.md

Floors, bottom up (``FLOORS``): the spec (pure Python: configurations, ISA, protocol codes,
topology, formats) that everything reads; the RTL and the golden models, side by side and
blind to each other; the software (assembler, compilers, ISA and pod simulators, the
performance model), which reads the spec and the golden numerics; the testbenches, which read
the spec, sidecars, golden models and software but never the RTL; the top (simulation
runners, benchmarks, sweeps, the command line); the tests, which may read anything.

Inside the RTL a block may import only blocks of a lower rank (``RTL_RANKS``): the shared
gateware, then the leaf blocks, then the blocks that compose them, up to the chip, the pod and
the generator. verification/tests/test_floors.py fails on any import that breaks either rule,
naming the file and line, and on a docs/architecture.md whose table is not this module's.
"""

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FLOORS", "RTL_RANKS", "Import", "imports", "violations", "table",
           "write_table"]

ROOT = Path(__file__).resolve().parent.parent

FLOORS = [
    ("spec", ("spec",), "configurations, ISA, protocol codes, topology, number formats",
     (), ()),
    ("RTL", ("hdl",), "Amaranth components, one package per block", ("amaranth",), ("spec",)),
    ("golden models", ("verification.models",), "numpy models written from the spec", (),
     ("spec",)),
    ("software", ("podium",), "assembler, compiler, ISA and pod simulators, performance model",
     (), ("spec", "golden models")),
    ("testbenches", ("verification.tb", "verification.traffic"),
     "cocotb benches, drivers, scoreboards, traffic", ("cocotb",),
     ("spec", "golden models", "software")),
    ("top", ("sim",), "runners, build cache, benchmarks, sweeps, the command line",
     ("amaranth", "cocotb"), ("spec", "RTL", "golden models", "software", "testbenches")),
    ("tests", ("verification.tests",), "pytest suites", ("amaranth", "cocotb"),
     ("spec", "RTL", "golden models", "software", "testbenches", "top")),
]
"""(name, packages, what lives there, simulation libraries it may import, floors it may read)
from the bottom up. A floor reads its own packages and the floors it names, all below it: the
RTL and the golden models never read each other, and neither the software nor the
testbenches read the RTL (a testbench knows a design by its sidecar)."""

RTL_RANKS = {
    "lib": 0, "top": 1, "fp_units": 2, "mxu": 2, "hbm": 2, "ici": 2, "tensorcore": 3,
    "sparsecore": 3, "nic": 4, "chip": 5, "pod": 6, "generate": 7,
}
"""Rank of each RTL block (a package or module of hdl/): a block imports itself and blocks of
lower rank only."""

_SIMULATION = ("amaranth", "cocotb", "cocotb_tools", "cocotbext")


@dataclass(frozen=True)
class Import:
    """An import of project module ``target`` by ``module`` (file ``path``, line ``line``)."""

    path: str
    line: int
    module: str
    target: str

    def __str__(self):
        return f"{self.path}:{self.line}: {self.module} imports {self.target}"


def _module_name(path, root):
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module, is_package, node):
    if not node.level:
        return node.module
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(root=ROOT):
    """Every import in the project's Python (each floor's packages), as :class:`Import`s;
    imports of third-party modules are kept too (``target`` their top-level name)."""
    out = []
    for _, packages, *_ in FLOORS:
        for package in packages:
            for path in sorted((root / package.replace(".", "/")).rglob("*.py")):
                module = _module_name(path, root)
                tree = ast.parse(path.read_text(), filename=str(path))
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import):
                        targets = [a.name for a in node.names]
                    elif isinstance(node, ast.ImportFrom):
                        targets = [_resolve(module, path.name == "__init__.py", node)]
                    else:
                        continue
                    rel = path.relative_to(root).as_posix()
                    out.extend(Import(rel, node.lineno, module, t) for t in targets)
    return out


def floor_of(module):
    """Index in ``FLOORS`` of the floor ``module`` sits on, or None (not the project's)."""
    best = None
    for i, (_, packages, *_) in enumerate(FLOORS):
        for package in packages:
            if module == package or module.startswith(package + "."):
                if best is None or len(package) > len(FLOORS[best][1][0]):
                    best = i
    return best


def _rtl_block(module):
    return module.split(".")[1] if module.count(".") >= 1 else None


def _breaks(imp):
    """Why ``imp`` breaks a rule, or None."""
    here, there = floor_of(imp.module), floor_of(imp.target)
    name = FLOORS[here][0]
    if there is None:
        top = imp.target.split(".")[0]
        if top in _SIMULATION and not any(imp.target.startswith(lib)
                                          for lib in FLOORS[here][3]):
            return f"the {name} floor does not import {top}"
        return None
    if there > here:
        return f"points up: {name} -> {FLOORS[there][0]}"
    if there != here and FLOORS[there][0] not in FLOORS[here][4]:
        return f"{name} must not read {FLOORS[there][0]}"
    if name == "RTL" and there == here:
        src, dst = _rtl_block(imp.module), _rtl_block(imp.target)
        if src and dst and src != dst and RTL_RANKS[dst] >= RTL_RANKS[src]:
            side = "sideways" if RTL_RANKS[dst] == RTL_RANKS[src] else "up"
            return f"points {side} between RTL blocks: {src} -> {dst}"
    return None


def violations(root=ROOT):
    """``(import, reason)`` for every import that breaks a floor rule."""
    return [(imp, why) for imp in imports(root) if (why := _breaks(imp)) is not None]


def table(root=ROOT):
    """The floor table in markdown: each floor, its packages, and the floors it reads."""
    reads = {i: set() for i in range(len(FLOORS))}
    for imp in imports(root):
        here, there = floor_of(imp.module), floor_of(imp.target)
        if there is not None and there != here:
            reads[here].add(there)
    rows = ["| floor | packages | what | may read | reads today |", "|---|---|---|---|---|"]
    for i in reversed(range(len(FLOORS))):
        name, packages, what, _, allowed = FLOORS[i]
        below = ", ".join(FLOORS[j][0] for j in sorted(reads[i])) or "nothing of the project"
        rows.append(f"| {i} {name} | {', '.join(f'`{p}`' for p in packages)} | {what} | "
                    f"{', '.join(allowed) or 'nothing of the project'} | {below} |")
    ranks = {}
    for block, rank in RTL_RANKS.items():
        ranks.setdefault(rank, []).append(f"`{block}`")
    rows += ["", "RTL blocks by rank (a block imports lower ranks only): "
             + "; ".join(f"{r}: {', '.join(b)}" for r, b in sorted(ranks.items())) + "."]
    return "\n".join(rows) + "\n"


BEGIN, END = "<!-- floors: begin (python -m sim.floors --write) -->", "<!-- floors: end -->"


def write_table(doc):
    """``doc``'s text with the floor table between the markers replaced by the current one."""
    text = doc.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table()}{END}{tail}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", action="store_true", help="write the table into "
                   "docs/architecture.md")
    args = p.parse_args(argv)
    doc = ROOT / "docs" / "architecture.md"
    if args.write:
        doc.write_text(write_table(doc))
        print(f"wrote the floor table into {doc.relative_to(ROOT)}")
    else:
        print(table())
    bad = violations()
    for imp, why in bad:
        print(f"{imp}: {why}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
