"""The ``podium`` command line: generate a block's Verilog, compile, assemble and run TensorCore
programs, run the performance model and design-space sweeps.

    podium generate mxu --rows 16 --cols 16 --format int8 -o build/mxu16
    podium generate hbm --set standard=HBM3 --set queue_depth=32 -o build/hbm3
    podium generate --config configs/mxu.json -o build/mxu
    podium generate chip --set tensorcore.mxu.rows=16 --set tensorcore.mxu.cols=16 -o build/c
    podium model run --preset v6e --slices 24 --workload gpt3-175b
    podium compile gemm --m 512 --k 512 --n 512 -o gemm.json
    podium run gemm.json --sim golden --input A=a.npy --outputs build/out
    podium run prog.s; podium asm prog.s -o prog.hex; podium run prog.hex; podium disasm prog.hex
    podium sweep docs/sweeps/mxu.yaml

A user error (a bad option, file or parameter) is one line on standard error,
``podium: error: ...``, naming the file (with line and column), the option or the parameter,
and what is allowed; the exit status is then 2.
"""

import argparse
import dataclasses
import importlib
import os
import sys
import textwrap
import time

# Set before numpy is first imported (below): the command line's own numpy work is small, and
# the worker threads OpenBLAS starts with numpy spin on the cores the simulators need (0.09
# CPU s of the digits demo's native run, by hand; the simulator processes inherit it).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from hdl.generate import BLOCKS, config_file, generate, make_config  # noqa: E402
from podium import tools  # noqa: E402
from spec.config import ConfigError, parse_assignment, set_path  # noqa: E402
from spec.files import check_output_dir  # noqa: E402

from . import programs, progress  # noqa: F401, E402  (programs: the verilator backend)

__all__ = ["main", "reporting", "Parser", "fill"]

MXU_OPTIONS = ("rows", "cols", "fmt", "out_fmt", "acc_depth")
"""The MXU shorthands of ``generate``, by parameter: ``--rows 16`` is ``--set rows=16``."""
COMMANDS = {"generate": None, "asm": None, "disasm": None, "compile": None, "run": None,
            "model": "sim.model_cli", "sweep": "sim.sweep_cli"}
"""Every command, with the module whose ``add_parser`` adds it if it is not this module's or
podium/tools.py's: those are imported only when their command (or ``--help``, or an unknown
command) is parsed, so that ``podium run`` does not import the performance model."""


class _Version(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="show the version and exit"):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        import importlib.metadata

        print(f"podium {importlib.metadata.version('podium')}")
        parser.exit()


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written, and every option's default in its help (options
    whose default is None say in their help what leaving them out does)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if ("default" not in text and action.option_strings
                and not any(action.default is v for v in (None, False, argparse.SUPPRESS))):
            value = action.default
            if isinstance(value, list | tuple):
                value = ",".join(map(str, value)) or "none"
            text += f" (default: {value})"
        return text


class _Subparsers(argparse._SubParsersAction):
    """Subcommands whose ``--help`` opens with a description: their own, else their one-line
    ``help`` as a sentence."""

    def add_parser(self, name, **kwargs):
        text = kwargs.get("help")
        if text and not kwargs.get("description"):
            kwargs["description"] = text[0].upper() + text[1:].rstrip(".") + "."
        if "\n" not in kwargs.get("description", "\n"):
            kwargs["description"] = fill(kwargs["description"])
        return super().add_parser(name, **kwargs)


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (and exit status 2), with the shared
    help formatter; its subcommands all have a description; an epilog given as a function is
    written only when the help is shown."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _Subparsers)

    def format_help(self):
        if callable(self.epilog):   # written only when the help is shown
            self.epilog = self.epilog()
        return super().format_help()

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def fill(text, width=79, indent="", hang=""):
    """``text`` (docstring markup: double backquotes dropped) filled to ``width``, its first
    line indented by ``indent``, the others by ``indent + hang``."""
    return textwrap.fill(" ".join(text.replace("``", "").split()), width,
                         initial_indent=indent, subsequent_indent=indent + hang)


def _block_help():
    """Every block's parameters with defaults and descriptions, from the configuration
    classes: the epilog of ``podium generate --help``."""
    owners = {}
    for name, block in BLOCKS.items():
        owners.setdefault(block.config, name)
    lines = ["blocks and their parameters (--set PATH=VALUE; a nested configuration's by "
             "dotted path, such as tensorcore.mxu.rows):"]

    def add(text, indent):
        lines.append(fill(text, 98, indent, "    "))

    def describe(cls, prefix, indent):
        default, docs = cls(), cls.parameter_docs()
        for f in dataclasses.fields(cls):
            path, sub = prefix + f.name, cls.field_config(f.name)
            value = getattr(default, f.name)
            if sub is None:
                shown = "derived" if f.name in default.derived else repr(value)
                add(f"{path} = {shown}: {docs.get(f.name, '')}".rstrip(": "), indent)
                continue
            text = f"{path}: {sub.KIND} configuration" + (
                " (default: none)" if value is None else "")
            if sub in owners:
                add(f"{text}: the parameters of block {owners[sub]}", indent)
            else:
                add(text, indent)
                describe(sub, path + ".", indent + "  ")

    for name, block in BLOCKS.items():
        lines.append(f"{name} ({block.config.__name__}, {block.config.KIND}):")
        describe(block.config, "", "  ")
    return "\n".join(lines)


def _parser(command=None):
    """The parser; ``command`` (a name in :data:`COMMANDS`) leaves out the commands that
    other modules add except its own (default: every command)."""
    p = Parser(prog="podium", description=fill(__doc__.split("\n\n")[0]),
               epilog="examples:\n" + __doc__.split("\n\n")[1])
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True, metavar="command")
    g = sub.add_parser("generate", help="write a block's Verilog and JSON sidecar",
                       description=fill("Write the Verilog and JSON sidecar of a block's "
                                         "configuration: the defaults, changed by a --config "
                                         "file, then by --set and the MXU options."),
                       epilog=_block_help)
    g.add_argument("block", nargs="?", choices=sorted(BLOCKS),
                   help="block to generate (default: the --config file's block)")
    g.add_argument("--config", help="JSON file {\"block\": ..., \"parameters\": {...}} "
                   "(default: the block's default parameters)")
    g.add_argument("--set", dest="sets", action="append", default=[], metavar="PATH=VALUE",
                   help="set a parameter (repeatable): a dotted path into nested "
                   "configurations, the value as JSON, else a string (a string parameter "
                   "takes the text as it is)")
    mxu = BLOCKS["mxu"].config()
    g.add_argument("--rows", type=int, help=f"MXU array rows, as --set rows=ROWS (default: "
                   f"{mxu.rows})")
    g.add_argument("--cols", type=int, help=f"MXU array columns (default: {mxu.cols})")
    g.add_argument("--format", dest="fmt", help=f"MXU operand format: int8, bfloat16, "
                   f"float8_e4m3fn, float8_e5m2 (default: {mxu.fmt})")
    g.add_argument("--out-format", dest="out_fmt", help="MXU result format: int32; float32 "
                   "or bfloat16 (default: the accumulator's)")
    g.add_argument("--acc-depth", type=int, help=f"MXU accumulator rows (default: "
                   f"{mxu.acc_depth})")
    g.add_argument("-o", "--out", required=True, help="output directory (made if missing)")
    g.set_defaults(func=_generate)
    tools.add_parsers(sub)
    for name, module in COMMANDS.items():
        if module and command in (None, name):
            importlib.import_module(module).add_parser(sub)
    return p


def _params(args):
    """The block and parameters: the --config file's, then --set and the MXU options."""
    if args.config:
        block, params = config_file(args.config, args.block)
    elif args.block is None:
        raise ConfigError("block", "must be given (or --config)")
    else:
        block, params = args.block, {}
    def kind(path):
        try:
            return BLOCKS[block].config.check_path(path)
        except ConfigError as e:
            raise e.within(block) from None

    sets = [parse_assignment(item, "--set", kind) for item in args.sets]
    sets += [(key, getattr(args, key)) for key in MXU_OPTIONS if getattr(args, key) is not None]
    for path, value in sets:
        kind(path)
        set_path(params, path, value)
    return block, params


def _generate(args):
    check_output_dir(args.out)
    block, params = _params(args)
    config = make_config(block, params)
    progress.stage(f"generating the Verilog of {block} (seconds for a block, tens of seconds "
                   f"for a chip)")
    progress.first_generation()
    start = time.perf_counter()
    design = generate(block, config)
    path = design.write(args.out)
    print(f"{path} ({len(design.verilog)} bytes, {time.perf_counter() - start:.1f} s)")
    return 0


def reporting(handler, args, prog="podium"):
    """``handler(args)``, its exit status; a user error it raises (``ValueError``: a bad
    parameter, file or option; ``OSError``) is one line on standard error and status 2."""
    try:
        return handler(args)
    except (ValueError, OSError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2


def main(argv=None):
    """Run ``podium`` with ``argv`` (default: the process's); return the exit status. Every
    command's user errors leave through :func:`reporting`."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    args = _parser(command if command in COMMANDS else None).parse_args(argv)
    return reporting(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
