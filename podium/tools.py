"""``podium asm``, ``disasm``, ``compile`` and ``run``: the TensorCore's software on the
command line.

    podium asm prog.s -o prog.hex                 (one 64-bit word a line, hex)
    podium disasm prog.hex | prog.json | prog.s
    podium compile gemm --m 512 --k 512 --n 512 -o gemm.json [--config tc.json]
    podium compile mlp --layers 64,32,10 --batch 100 -o mlp.json   (random weights, --seed)
    podium compile digits [--dtype int8|bfloat16] -o digits.json
    podium compile softmax|layernorm|rmsnorm|gelu|silu|add --rows 64 --features 200
                   [--dtype float32|bfloat16] [--form tanh|erf] -o op.json
    podium compile attention --seq 128 --head-dim 64 [--heads 1] [--batch 1] [--causal]
                   [--kv-block 64] [--q-block 64] -o attn.json
    podium run gemm.json [--sim golden] [--seed S] [--json]
    podium run gemm.json --input A=a.npy --input B=b.npy --outputs build/out   (C.npy)
    podium run prog.s | prog.hex [--config tc.json]
    podium run spmd.json --pod 2x2 [--sim native] --input X=x.npy --outputs out  (Y.chip<k>.npy)

``--config`` takes a JSON file or inline JSON of TensorCoreConfig parameters, such as
``'{"mxu": {"fmt": "bfloat16"}}'``. ``run`` takes a program file (``.json``, from
``compile``), assembly (``.s``) or hex words (any other name; one 64-bit word a line, as
``asm`` writes them): assembly and hex are bare programs, with no inputs or outputs, run on
the TensorCore of ``--config`` with the chip's HBM. ``run`` reads inputs from ``.npy`` files
(``--input NAME=FILE``; integer inputs need integer arrays whose values fit, float inputs take
any numeric array, rounded to the input's format), fills those not given with seeded random
values, writes every output to ``<dir>/<name>.npy`` with ``--outputs`` (bfloat16 and fp8 as
float32, exactly), and checks what it can: a GEMM against numpy / the MXU golden model, the
digits program against its numpy inference and labels, a transformer operation against its
float64 reference and documented tolerance, attention against its float64 reference (the
bound ``max |O - ref| <= tolerance * max |V|`` per head). ``--pod`` runs the program on every
chip of a pod (docs/pod.md): an input file holds the input or one per chip along a leading
axis, each chip's outputs are written as ``<name>.chip<k>.npy``, each chip reported and
checked.
"""

import json
import os
import sys
from pathlib import Path

import numpy as np

from spec.chip import ChipConfig
from spec.config import ConfigError
from spec.files import (
    FileError,
    check_output_dir,
    check_output_file,
    in_file,
    load_json,
    parse_json,
    read_text,
    write_text,
)
from spec.hbm import HBMConfig
from spec.ici import ICIConfig
from spec.mxu import MXUConfig
from spec.nic import NICConfig
from spec.pod import PodConfig
from spec.protocol import LOCAL_PORTS
from spec.tensorcore import TensorCoreConfig
from verification.models.transformer import REFERENCES
from verification.models.transformer import attention as attention_reference

from .asm import AsmError, assemble, disassemble
from .program import DTYPES, Program
from .runner import BACKENDS, LIMITS, POD_LIMITS, pod_sims, run, run_pod

__all__ = ["add_parsers"]


def add_parsers(sub):
    """Add ``asm``, ``disasm``, ``compile`` and ``run`` to an argparse ``subparsers``."""
    a = sub.add_parser("asm", help="assemble TensorCore assembly into hex words")
    a.add_argument("source", help="assembly file")
    a.add_argument("-o", "--out", help="output file (default: standard output)")
    a.set_defaults(func=_asm)
    d = sub.add_parser("disasm", help="disassemble hex words or a program file")
    d.add_argument("source", help="hex words (one a line), a program .json or assembly .s")
    d.set_defaults(func=_disasm)
    c = sub.add_parser("compile", help="compile a GEMM, an MLP, the digits workload, a "
                       "transformer operation, attention or a JAX function")
    c.add_argument("what", nargs="?", choices=("gemm", "mlp", "digits", *_TRANSFORMER,
                                               "attention"),
                   help="what to compile (none with --jax)")
    c.add_argument("--jax", metavar="MODULE:FUNCTION", help="a JAX function to trace and "
                   "lower (docs/jax.md); its arguments fp32 of --shapes (default: none; "
                   "then WHAT is needed)")
    c.add_argument("--shapes", help="--jax: the arguments' shapes, comma separated, each "
                   "dimensions joined by x: 32x64,64,s (s: a scalar; default: none; --jax "
                   "needs it)")
    c.add_argument("--config", help="TensorCoreConfig parameters: a JSON file or inline JSON "
                   "(default: the default TensorCore, its MXU in --dtype)")
    c.add_argument("--m", type=int, help="GEMM rows of A and C (default: none; gemm needs it)")
    c.add_argument("--k", type=int, help="GEMM reduction (default: none; gemm needs it)")
    c.add_argument("--n", type=int, help="GEMM columns of B and C (default: none; gemm needs "
                   "it)")
    c.add_argument("--layers", help="MLP widths, such as 64,32,10 (default: none; mlp needs "
                   "it)")
    c.add_argument("--batch", type=int, help="MLP batch rows (default 64); attention: "
                   "batches (default 1)")
    c.add_argument("--seq", type=int, help="attention: sequence length (default: none; it "
                   "needs it)")
    c.add_argument("--head-dim", type=int, help="attention: head dimension (default: none; "
                   "it needs it)")
    c.add_argument("--heads", type=int, default=1, help="attention: heads")
    c.add_argument("--causal", action="store_true", help="attention: causal mask")
    c.add_argument("--kv-block", type=int, help="attention: K/V block rows (default: chosen)")
    c.add_argument("--q-block", type=int, help="attention: Q block rows (default: chosen)")
    c.add_argument("--activation", default="relu", help="MLP hidden activation")
    c.add_argument("--dtype", choices=("int8", "bfloat16", "float32"),
                   help="digits and mlp: model format (int8, bfloat16); gemm: must match the "
                   "MXU (default: the MXU's format, int8 without --config); transformer "
                   "operations: float32 (default) or bfloat16")
    c.add_argument("--rows", type=int, help="transformer operations: rows (default: none; "
                   "they need it)")
    c.add_argument("--features", type=int, help="transformer operations: features per row "
                   "(default: none; they need it)")
    c.add_argument("--form", default="tanh", choices=("tanh", "erf"), help="gelu's form")
    c.add_argument("--seed", type=int, default=0, help="random MLP weights / digits split")
    c.add_argument("-o", "--out", required=True, help="program file (.json)")
    c.set_defaults(func=_compile)
    r = sub.add_parser("run", help="run a program (.json, assembly .s or hex) and report",
                       description="Run a program (.json, assembly .s or hex) on the golden "
                       "ISA simulator or the RTL chip and report its status, counters and "
                       "checks; a run still going after --max-steps stops with status "
                       "timeout.")
    r.add_argument("program", help="program file (.json), assembly (.s) or hex words")
    r.add_argument("--config", help="assembly and hex: TensorCoreConfig parameters, a JSON "
                   "file or inline JSON (default: the default TensorCore)")
    r.add_argument("--sim", choices=sorted(set(BACKENDS) | set(pod_sims())),
                   default="golden",
                   help="where to run: the golden ISA simulator (with --pod: the golden pod "
                   "simulator), or the RTL chip (pod) through its cocotb testbench "
                   "(verilator) or a C++ host (native: the same cycles, for long programs)")
    r.add_argument("--pod", metavar="DIMS|FILE", help="run the program on every chip of a "
                   "pod (SPMD): its torus dimensions, such as 2x2 or 4 (chips of the "
                   "program's TensorCore, which needs the ICI queue, each with an HBM "
                   "controller; docs/pod.md), or a PodConfig .json file; an input .npy may "
                   "then have one array per chip along a leading axis, and outputs are "
                   "written as <name>.chip<k>.npy (default: one chip)")
    r.add_argument("--input", dest="inputs", action="append", default=[],
                   metavar="NAME=FILE", help="an input from a .npy file (repeatable; "
                   "default: seeded random values)")
    r.add_argument("--outputs", help="directory to write each output to as <name>.npy "
                   "(default: none written)")
    r.add_argument("--seed", type=int, default=0, help="random inputs the program lacks")
    limits = "; ".join(f"{name}: {LIMITS[name][1]}" for name in sorted(BACKENDS))
    pod_limits = "; ".join(f"{name}: {POD_LIMITS[name][1]}" for name in pod_sims())
    r.add_argument("--max-steps", type=int, help="steps (golden) or cycles (RTL) after which "
                   f"the run stops with status timeout (default: {limits}; with --pod: "
                   f"{pod_limits})")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.set_defaults(func=_run)


def _config(text, dtype=None):
    if text is None:
        return TensorCoreConfig(mxu=MXUConfig(fmt=dtype or "int8"))
    name = "--config" if text.lstrip().startswith("{") else text
    params = parse_json(text, name) if name == "--config" else load_json(text)
    with in_file(name):
        return TensorCoreConfig.from_dict(params)


def _write(path, text):
    if path:
        write_text(path, text)
    else:
        sys.stdout.write(text)


def _assemble(path):
    try:
        return assemble(read_text(path))
    except AsmError as e:
        raise FileError(path, e.message, e.line) from None


def _hex_words(path):
    words = []
    for number, line in enumerate(read_text(path).splitlines(), 1):
        text = line.strip()
        if not text:
            continue
        try:
            word = int(text, 16)
        except ValueError:
            word = None
        if word is None or not 0 <= word < 1 << 64:
            raise FileError(path, f"expected a 64-bit hex word (one a line), got {text!r}",
                            number)
        words.append(word)
    return words


def _load(path, config_text):
    """The program of ``path``: a program .json, else a bare program of assembly (.s) or hex
    words for the TensorCore of ``config_text``."""
    if path.endswith(".json"):
        if config_text is not None:
            raise ConfigError("--config", "must not be given with a program .json (it holds "
                                          "its configuration)")
        return Program.load(path)
    words = _assemble(path) if path.endswith(".s") else _hex_words(path)
    # The chip's HBM (HBMConfig's default), also for a TensorCore with the ICI queue (a
    # pod's: a chip of its own would refuse it).
    return Program(words, _config(config_text), HBMConfig().capacity)


def _asm(args):
    if args.out:
        check_output_file(args.out)
    _write(args.out, "".join(f"{w:016x}\n" for w in _assemble(args.source)))
    return 0


def _disasm(args):
    sys.stdout.write(disassemble(_load(args.source, None).words))
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


_TRANSFORMER = ("softmax", "layernorm", "rmsnorm", "gelu", "silu", "add")
"""The transformer operations ``compile`` knows (podium/transformer.py)."""


def _compile_transformer(args):
    """A transformer operation's program; the norms get seeded random gamma and beta."""
    from . import transformer

    missing = [f"--{d}" for d in ("rows", "features") if getattr(args, d) is None]
    if missing:
        raise ValueError(f"compile {args.what} needs {', '.join(missing)}")
    dtype = args.dtype or "float32"
    if dtype not in transformer.DTYPES:
        raise ConfigError("--dtype", f"must be float32 or bfloat16 for {args.what}, got "
                                     f"{dtype}")
    config, op = _config(args.config), args.what
    rows, features = args.rows, args.features
    if op in ("layernorm", "rmsnorm"):
        rng = np.random.default_rng(args.seed)
        gamma = 1 + 0.1 * rng.standard_normal(features or 1)
        beta = 0.1 * rng.standard_normal(features or 1)
        program = getattr(transformer, op)(config, rows, features, gamma, beta, dtype=dtype)
        program.metadata.update(gamma=gamma.tolist(), beta=beta.tolist())
        return program
    if op == "gelu":
        return transformer.gelu(config, rows, features, args.form, dtype)
    return {"softmax": transformer.softmax, "silu": transformer.silu,
            "add": transformer.residual_add}[op](config, rows, features, dtype)


def _shapes(text):
    """The shapes of ``--shapes``: ``32x64,64,s``."""
    shapes = []
    for item in (text or "").split(","):
        try:
            dims = () if item.strip() == "s" else tuple(int(d) for d in item.split("x"))
        except ValueError:
            dims = None
        if dims is None or any(d < 1 for d in dims):
            raise ConfigError("--shapes", f"must be shapes such as 32x64,64,s (positive "
                                          f"dimensions joined by x, s a scalar), got {text!r}")
        shapes.append(dims)
    return shapes


def _compile_jax(args):
    """The program of ``--jax MODULE:FUNCTION`` on fp32 arguments of ``--shapes``."""
    import importlib
    module, _, name = args.jax.partition(":")
    if not module or not name:
        raise ConfigError("--jax", f"must be MODULE:FUNCTION, got {args.jax!r}")
    if args.shapes is None:
        raise ConfigError("--shapes", "must be given with --jax (the arguments' shapes)")
    shapes = _shapes(args.shapes)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ConfigError("--jax", f"cannot find {args.jax}: {e}") from None
    import jax
    import numpy

    from .jax import compile_fn
    from .workloads.vit import TENSORCORE
    config = _config(args.config, "bfloat16") if args.config else TENSORCORE
    structs = [jax.ShapeDtypeStruct(s, numpy.float32) for s in shapes]
    try:
        return compile_fn(fn, *structs, config=config).program
    except TypeError as e:
        raise ConfigError("--shapes", f"{args.jax} cannot take arguments of shapes "
                                      f"{args.shapes}: {e}") from None


def _compile(args):
    from .attention import attention
    from .compiler import gemm, mlp

    check_output_file(args.out)
    if args.jax:
        if args.what:
            raise ConfigError("what", f"must be left out with --jax, got {args.what!r}")
        program = _compile_jax(args)
        args.what = "jax"
    elif args.what is None:
        raise ConfigError("what", f"must be one of gemm, mlp, digits, "
                                  f"{', '.join(_TRANSFORMER)}, attention (or --jax)")
    if args.what == "jax":
        pass
    elif args.what in _TRANSFORMER:
        program = _compile_transformer(args)
        args.what = "transformer"
    else:
        config = _config(args.config, args.dtype if args.what != "gemm" else None)
    if args.what in ("transformer", "jax"):
        pass
    elif args.what == "attention":
        missing = [f"--{d}" for d in ("seq", "head-dim")
                   if getattr(args, d.replace("-", "_")) is None]
        if missing:
            raise ValueError(f"compile attention needs {', '.join(missing)}")
        program = attention(_config(args.config, "bfloat16"), args.seq, args.head_dim,
                            args.heads, 1 if args.batch is None else args.batch, args.causal,
                            args.kv_block, args.q_block)
    elif args.what == "gemm":
        missing = [f"--{d}" for d in ("m", "k", "n") if getattr(args, d) is None]
        if missing:
            raise ValueError(f"compile gemm needs {', '.join(missing)}")
        program = gemm(config, args.m, args.k, args.n, dtype=args.dtype)
    elif args.what == "mlp":
        if not args.layers:
            raise ValueError("compile mlp needs --layers, such as 64,32,10")
        widths = [int(w) for w in args.layers.split(",")]
        layers, requant = _random_mlp(config, widths, args.seed)
        program = mlp(config, layers, 64 if args.batch is None else args.batch,
                      args.activation, requant)
    else:
        from .workloads.digits import compile_digits, load
        program = compile_digits(config, load(args.seed), args.dtype or "int8")
    program.save(args.out)
    meta = {k: v for k, v in program.metadata.items() if k in ("tiling", "grid", "tm",
                                                                 "span", "q_block",
                                                                 "kv_block", "steps")}
    print(f"{args.out}: {len(program.words)} instructions, {program.metadata['kind']}"
          f"{' ' + json.dumps(meta) if meta else ''}")
    return 0


def _npy(item, program, chips=None):
    """``NAME=FILE`` of ``--input``: the name and the array of the .npy file, checked
    against the program's input of that name; with ``chips`` (a pod run) the file may hold
    one such array per chip along a leading axis of ``chips``."""
    name, path = item.split("=", 1) if "=" in item else ("", item)
    if name not in program.inputs:
        raise ConfigError("--input", f"must be NAME=FILE with NAME an input of the program "
                                     f"({', '.join(program.inputs) or 'it has none'}), got "
                                     f"{item!r}")
    tensor = program.inputs[name]
    try:
        array = np.load(path, allow_pickle=False)
    except OSError as e:
        raise FileError(path, f"cannot read: {e.strerror or e}") from None
    except ValueError:
        raise FileError(path, "cannot read: not a .npy array file") from None
    want = np.dtype(DTYPES[tensor.dtype])
    shape = tuple(tensor.shape)
    if tuple(array.shape) != shape and (chips is None or tuple(array.shape) != (chips, *shape)):
        per_chip = f" (every chip's) or {(chips, *shape)} (one per chip of the pod)" \
            if chips is not None else ""
        raise FileError(path, f"input {name} must have shape {shape}{per_chip}, got "
                              f"{tuple(array.shape)}")
    if want.kind in "iu":
        info = np.iinfo(want)
        if array.dtype.kind not in "iu" or array.size and not (
                info.min <= array.min() and array.max() <= info.max):
            raise FileError(path, f"input {name} must be integers in {info.min}..{info.max} "
                                  f"({tensor.dtype}), got {array.dtype}")
    elif array.dtype.kind not in "fiu":
        raise FileError(path, f"input {name} must be a numeric array (rounded to "
                              f"{tensor.dtype}), got {array.dtype}")
    return name, array.astype(want)


def _random_input(rng, tensor):
    if tensor.dtype == "int8":
        return rng.integers(-128, 128, tensor.shape, dtype=np.int8)
    return rng.standard_normal(tensor.shape).astype(DTYPES[tensor.dtype])


def _rng(program, given, seed):
    """The seeded generator of the inputs not ``given``; None when every input is given
    (importing numpy.random is about 12 ms of a run's start-up)."""
    return None if set(program.inputs) <= set(given) else np.random.default_rng(seed)


def _inputs(program, items, seed):
    """Every input: from ``--input`` files, the others seeded random values."""
    given = dict(_npy(item, program) for item in items)
    rng = _rng(program, given, seed)
    return {name: given[name] if name in given else _random_input(rng, t)
            for name, t in program.inputs.items()}


def _pod_inputs(program, items, seed, chips):
    """Every chip's inputs (a list of name -> array): from ``--input`` files (the same
    array on every chip, or one per chip along a leading axis), the others seeded random
    values, chip by chip."""
    given = dict(_npy(item, program, chips) for item in items)
    rng = _rng(program, given, seed)
    inputs = []
    for _ in range(chips):
        chip = {}
        for name, t in program.inputs.items():
            array = given.get(name)
            if array is None:
                chip[name] = _random_input(rng, t)
            else:
                chip[name] = array if array.shape == tuple(t.shape) else array[len(inputs)]
        inputs.append(chip)
    return inputs


def _save_outputs(directory, outputs, suffix=""):
    for name, array in outputs.items():
        if array.dtype.kind == "V":  # bfloat16, fp8: float32 holds every value exactly
            array = array.astype(np.float32)
        path = Path(directory) / f"{name}{suffix}.npy"
        try:
            np.save(path, array)
        except OSError as e:
            raise FileError(path, f"cannot write: {e.strerror or e}") from None


def _checks(program, inputs, outputs):
    """The program's checks against its reference (the compilers and references imported
    here, not at start-up: ``podium run`` of a program of another kind does not need them)."""
    meta = program.metadata
    if meta.get("kind") == "gemm":
        from .compiler import gemm_reference, result_bits

        expect = gemm_reference(program.config, inputs["A"], inputs["B"])
        return {"matches_reference": bool(np.array_equal(
            result_bits(program.config, outputs["C"]), expect))}
    if meta.get("kind") in REFERENCES:            # the transformer operations
        from . import transformer

        op, kwargs = meta["kind"], {}
        args = [inputs["X"]] + ([inputs["R"]] if op == "add" else [])
        if op in ("layernorm", "rmsnorm"):
            kwargs = {"gamma": meta.get("gamma"), "beta": meta.get("beta"), "eps": meta["eps"]}
        expect = REFERENCES[op](*args, **kwargs)
        y = outputs["Y"].astype(np.float64)
        err = float(np.max(np.abs(y - expect) / np.maximum(1, np.abs(expect)), initial=0))
        bound = transformer.TOLERANCE[op][meta["dtype"] == "bfloat16"]
        return {"max_error": err, "tolerance": bound, "within_tolerance": err <= bound}
    if meta.get("kind") == "attention":
        from .attention import TOLERANCE as ATTENTION_TOLERANCE

        seq, worst = meta["seq"], 0.0
        for h in range(meta["heads"] * meta["batch"]):
            rows = slice(h * seq, (h + 1) * seq)
            expect = attention_reference(inputs["Q"][rows], inputs["K"][rows],
                                         inputs["V"][rows], meta["causal"])
            scale = max(float(np.max(np.abs(inputs["V"][rows].astype(np.float64)))), 2.0**-126)
            diff = np.abs(outputs["O"][rows].astype(np.float64) - expect)
            diff[np.isnan(diff) & ~np.isnan(expect)] = np.inf      # a NaN the reference lacks
            worst = max(worst, float(np.nanmax(diff, initial=0)) / scale)
        return {"max_error": worst, "tolerance": ATTENTION_TOLERANCE,
                "within_tolerance": worst <= ATTENTION_TOLERANCE}
    if meta.get("workload") == "digits":
        classes = np.argmax(outputs["Y"], axis=1)
        labels = np.array(meta["labels"])
        return {"accuracy": float(np.mean(classes == labels)),
                "numpy_accuracy": meta["numpy_accuracy"],
                "float_accuracy": meta["float_accuracy"],
                "matches_numpy": bool(np.array_equal(classes, meta["classes"]))}
    return {}


def _pod(text, path, config):
    """The pod of ``--pod``: torus dimensions (``2x2``, ``4``) of chips of ``config`` (the
    program's TensorCore, from ``path``) with HBM controllers, or a PodConfig .json file."""
    if text.endswith(".json"):
        with in_file(text):
            pod = PodConfig.from_dict(load_json(text))
        if pod.tensorcore != config:
            raise FileError(text, f"chip.tensorcore must be the TensorCore {path} is for")
        if not pod.chip.has_hbm:
            raise FileError(text, "chip.memory must be 'hbm' (a pod run's chips hold their "
                                  "inputs and outputs in HBM)")
        return pod
    try:
        dims = tuple(int(d) for d in text.split("x"))
    except ValueError:
        dims = ()
    if not dims or any(d < 1 for d in dims):
        raise ConfigError("--pod", f"must be torus dimensions such as 2x2 or 4 (positive "
                                   f"integers joined by x) or a PodConfig .json file, got "
                                   f"{text!r}")
    if not config.ici:
        raise FileError(path, "is a program for a TensorCore without the ICI queue "
                              "(TensorCoreConfig ici false): a pod's chips need it (--pod)")
    try:
        ici = ICIConfig(dims=dims, classes=2, vcs=2, buffer_depth=8,
                        flit_bits=8 * config.row_bytes, max_packet=8, local_ports=LOCAL_PORTS)
        return PodConfig(chip=ChipConfig(tensorcore=config, memory="hbm",
                                         hbm=HBMConfig(ports=2), nic=NICConfig(ici=ici)))
    except ConfigError as e:
        raise ConfigError("--pod", f"{text} is refused by the pod configuration (chips of "
                                   f"{path}'s TensorCore): {e}") from None


def _report_lines(report):
    return [f"{key:>18}: {value:.3g}" if key in ("max_error", "tolerance")
            else f"{key:>18}: {value:.4f}" if isinstance(value, float)
            else f"{key:>18}: {value}" for key, value in report.items()]


def _chip_report(program, result, inputs, outputs):
    """A run's status, error, steps and counters, and the checks of a finished run."""
    report = {"status": result.status, "error": result.error.name,
              "error_pc": result.error_pc, "steps": result.steps, **result.counters}
    if result.status == "done":
        report.update(_checks(program, inputs, outputs))
    return report


def _passed(report):
    return report["status"] == "done" and all(
        report.get(k, True) for k in ("matches_reference", "matches_numpy",
                                      "within_tolerance"))


def _timeout(args, steps, limits):
    unit, default = limits[args.sim]
    print(f"podium: timeout: {args.program} was still running after {steps:,} {unit} on "
          f"{args.sim} (--max-steps; default: {default})", file=sys.stderr)


def _run(args):
    program = _load(args.program, args.config)
    pod = _pod(args.pod, args.program, program.config) if args.pod else None
    if pod is not None and args.sim not in pod_sims():
        raise ConfigError("--sim", f"must be one of {', '.join(pod_sims())} with --pod, got "
                                   f"{args.sim!r}")
    inputs = _inputs(program, args.inputs, args.seed) if pod is None else \
        _pod_inputs(program, args.inputs, args.seed, pod.chips)
    if args.outputs:
        check_output_dir(args.outputs)
    if args.max_steps is not None and args.max_steps < 1:
        raise ConfigError("--max-steps", f"must be at least 1, got {args.max_steps}")
    options = {} if args.max_steps is None else {"max_steps": args.max_steps}
    try:
        if pod is None:
            result, outputs = run(program, inputs, sim=args.sim, **options)
        else:
            results, outputs = run_pod(program, pod, inputs, sim=args.sim, **options)
    except (RuntimeError, AssertionError) as e:
        if args.sim == "golden":
            raise
        # A failed RTL run (build, simulator, testbench): one line naming the log.
        print(f"podium: error: the {args.sim} run failed: {e}", file=sys.stderr)
        return 1
    if pod is not None:
        return _pod_report(args, program, pod, results, inputs, outputs)
    if args.outputs:
        _save_outputs(args.outputs, outputs)
    report = {"program": args.program, "sim": args.sim, "instructions": len(program.words),
              **_chip_report(program, result, inputs, outputs)}
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print("\n".join(_report_lines(report)))
    if result.status == "timeout":
        _timeout(args, result.steps, LIMITS)
    return 0 if _passed(report) else 1


def _pod_report(args, program, pod, results, inputs, outputs):
    """Write each chip's outputs, print the pod run's report (each chip's as a chip run's);
    the exit status: 0 if every chip finished and passed its checks."""
    if args.outputs:
        for k, chip_outputs in enumerate(outputs):
            _save_outputs(args.outputs, chip_outputs, f".chip{k}")
    chips = [_chip_report(program, r, i, o)
             for r, i, o in zip(results, inputs, outputs, strict=True)]
    report = {"program": args.program, "sim": args.sim, "pod": "x".join(map(str, pod.ici.dims)),
              "chips": len(chips), "instructions": len(program.words),
              "status": "done" if all(c["status"] == "done" for c in chips) else next(
                  c["status"] for c in chips if c["status"] != "done"),
              "steps": max(c["steps"] for c in chips), "chip": chips}
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print("\n".join(_report_lines({k: v for k, v in report.items() if k != "chip"})))
        for k, chip in enumerate(chips):
            print(f"chip {k}:")
            print("\n".join(_report_lines(chip)))
    if any(r.status == "timeout" for r in results):
        _timeout(args, report["steps"], POD_LIMITS)
    return 0 if all(_passed(c) for c in chips) else 1
