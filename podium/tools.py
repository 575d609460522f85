"""``podium asm``, ``disasm``, ``compile`` and ``run``: the TensorCore's software on the
command line.

    podium asm prog.s -o prog.hex                 (one 64-bit word a line, hex)
    podium disasm prog.hex | prog.json
    podium compile gemm --m 512 --k 512 --n 512 -o gemm.json [--config tc.json]
    podium compile mlp --layers 64,32,10 --batch 100 -o mlp.json   (random weights, --seed)
    podium compile digits [--dtype int8|bfloat16] -o digits.json
    podium run gemm.json [--sim golden] [--seed S] [--json]

``--config`` takes a JSON file or inline JSON of TensorCoreConfig parameters, such as
``'{"mxu": {"fmt": "bfloat16"}}'``. ``run`` fills inputs the program does not hold with seeded
random values, and checks what it can: a GEMM against numpy / the MXU golden model, the
digits program against its numpy inference and labels.
"""

import json
import sys

import numpy as np

from spec.config import ConfigError
from spec.mxu import MXUConfig
from spec.tensorcore import TensorCoreConfig

from .asm import assemble, disassemble
from .compiler import gemm, gemm_reference, mlp, result_bits
from .program import DTYPES, Program
from .runner import BACKENDS, run

__all__ = ["add_parsers", "run_command"]


def add_parsers(sub):
    """Add ``asm``, ``disasm``, ``compile`` and ``run`` to an argparse ``subparsers``."""
    a = sub.add_parser("asm", help="assemble TensorCore assembly into hex words")
    a.add_argument("source", help="assembly file")
    a.add_argument("-o", "--out", help="output file (default: standard output)")
    a.set_defaults(func=_asm)
    d = sub.add_parser("disasm", help="disassemble hex words or a program file")
    d.add_argument("source", help="hex words (one a line) or a program .json")
    d.set_defaults(func=_disasm)
    c = sub.add_parser("compile", help="compile a GEMM, an MLP or the digits workload")
    c.add_argument("what", choices=("gemm", "mlp", "digits"))
    c.add_argument("--config", help="TensorCoreConfig parameters: a JSON file or inline JSON")
    c.add_argument("--m", type=int, help="GEMM rows of A and C")
    c.add_argument("--k", type=int, help="GEMM reduction")
    c.add_argument("--n", type=int, help="GEMM columns of B and C")
    c.add_argument("--layers", help="MLP widths, such as 64,32,10")
    c.add_argument("--batch", type=int, default=64, help="MLP batch rows")
    c.add_argument("--activation", default="relu", help="MLP hidden activation")
    c.add_argument("--dtype", choices=("int8", "bfloat16"),
                   help="digits: model format (default int8); gemm: must match the MXU")
    c.add_argument("--seed", type=int, default=0, help="random MLP weights / digits split")
    c.add_argument("-o", "--out", required=True, help="program file (.json)")
    c.set_defaults(func=_compile)
    r = sub.add_parser("run", help="run a program file and report")
    r.add_argument("program", help="program file (.json)")
    r.add_argument("--sim", choices=sorted(BACKENDS), default="golden")
    r.add_argument("--seed", type=int, default=0, help="random inputs the program lacks")
    r.add_argument("--max-steps", type=int, default=50_000_000)
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.set_defaults(func=_run)


def _config(text, dtype=None):
    if text is None:
        return TensorCoreConfig(mxu=MXUConfig(fmt=dtype or "int8"))
    if text.lstrip().startswith("{"):
        params = json.loads(text)
    else:
        with open(text) as f:
            params = json.load(f)
    return TensorCoreConfig.from_dict(params)


def _write(path, text):
    if path:
        with open(path, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def _asm(args):
    with open(args.source) as f:
        words = assemble(f.read())
    _write(args.out, "".join(f"{w:016x}\n" for w in words))
    return 0


def _disasm(args):
    if args.source.endswith(".json"):
        words = Program.load(args.source).words
    else:
        with open(args.source) as f:
            words = [int(line, 16) for line in f if line.strip()]
    sys.stdout.write(disassemble(words))
    return 0


def _random_mlp(config, widths, seed):
    rng = np.random.default_rng(seed)
    if config.mxu.fmt == "int8":
        layers = [(rng.integers(-127, 128, (k, n), dtype=np.int8),
                   rng.integers(-1000, 1000, n).astype(np.int32))
                  for k, n in zip(widths, widths[1:], strict=False)]
        shifts = [8 + int(k).bit_length() for k in widths[1:-1]]
        return layers, [(1, s) for s in shifts]
    layers = [(rng.standard_normal((k, n)) / np.sqrt(k), rng.standard_normal(n))
              for k, n in zip(widths, widths[1:], strict=False)]
    return [(w.astype(DTYPES["bfloat16"]), b.astype(np.float32)) for w, b in layers], None


def _compile(args):
    config = _config(args.config, args.dtype if args.what != "gemm" else None)
    if args.what == "gemm":
        missing = [f"--{d}" for d in ("m", "k", "n") if getattr(args, d) is None]
        if missing:
            raise ValueError(f"compile gemm needs {', '.join(missing)}")
        program = gemm(config, args.m, args.k, args.n, dtype=args.dtype)
    elif args.what == "mlp":
        if not args.layers:
            raise ValueError("compile mlp needs --layers, such as 64,32,10")
        widths = [int(w) for w in args.layers.split(",")]
        layers, requant = _random_mlp(config, widths, args.seed)
        program = mlp(config, layers, args.batch, args.activation, requant)
    else:
        from .workloads.digits import compile_digits, load
        program = compile_digits(config, load(args.seed), args.dtype or "int8")
    program.save(args.out)
    meta = {k: v for k, v in program.metadata.items() if k in ("tiling", "grid", "tm")}
    print(f"{args.out}: {len(program.words)} instructions, {program.metadata['kind']}"
          f"{' ' + json.dumps(meta) if meta else ''}")
    return 0


def _random_inputs(program, seed):
    rng = np.random.default_rng(seed)
    inputs = {}
    for name, t in program.inputs.items():
        if t.dtype == "int8":
            inputs[name] = rng.integers(-128, 128, t.shape, dtype=np.int8)
        else:
            inputs[name] = rng.standard_normal(t.shape).astype(DTYPES[t.dtype])
    return inputs


def _checks(program, inputs, outputs):
    meta = program.metadata
    if meta.get("kind") == "gemm":
        expect = gemm_reference(program.config, inputs["A"], inputs["B"])
        return {"matches_reference": bool(np.array_equal(
            result_bits(program.config, outputs["C"]), expect))}
    if meta.get("workload") == "digits":
        classes = np.argmax(outputs["Y"], axis=1)
        labels = np.array(meta["labels"])
        return {"accuracy": float(np.mean(classes == labels)),
                "numpy_accuracy": meta["numpy_accuracy"],
                "float_accuracy": meta["float_accuracy"],
                "matches_numpy": bool(np.array_equal(classes, meta["classes"]))}
    return {}


def _run(args):
    program = Program.load(args.program)
    inputs = _random_inputs(program, args.seed)
    result, outputs = run(program, inputs, sim=args.sim, max_steps=args.max_steps)
    report = {"program": args.program, "sim": args.sim, "instructions": len(program.words),
              "status": result.status, "error": result.error.name,
              "error_pc": result.error_pc, "steps": result.steps, **result.counters}
    if result.status == "done":
        report.update(_checks(program, inputs, outputs))
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for key, value in report.items():
            print(f"{key:>18}: {value:.4f}" if isinstance(value, float)
                  else f"{key:>18}: {value}")
    ok = result.status == "done" and all(
        report.get(k, True) for k in ("matches_reference", "matches_numpy"))
    return 0 if ok else 1


def run_command(args):
    """Handler shared by the four commands: bad input gives status 2 and a message."""
    try:
        return args.func(args)
    except (ValueError, ConfigError, OSError, json.JSONDecodeError) as e:
        print(f"podium: error: {e}", file=sys.stderr)
        return 2
