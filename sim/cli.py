"""The ``podium`` command line: generate the Verilog of a block, the performance model, the
TensorCore's software tools and design-space sweeps.

    podium generate mxu --rows 16 --cols 16 --format int8 -o build/mxu16
    podium generate mxu --rows 8 --cols 8 --format bfloat16 --out-format bfloat16 -o build/bf
    podium generate --config configs/mxu.json -o build/mxu
    podium generate chip -o build/chip
    podium model run --preset v6e --slices 24 --workload gpt3-175b   (sim/model_cli.py)
    podium compile gemm --m 512 --k 512 --n 512 -o gemm.json           (podium/tools.py)
    podium run gemm.json --sim golden
    podium sweep docs/sweeps/mxu.yaml                                  (sim/sweep_cli.py)
    podium asm prog.s -o prog.hex; podium disasm prog.hex
"""

import argparse
import json
import sys
import time

from hdl.generate import BLOCKS, generate, make_config
from podium import tools

from . import model_cli, programs, sweep_cli  # noqa: F401  (programs: the verilator backend)

__all__ = ["main"]


def _parser():
    p = argparse.ArgumentParser(prog="podium", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="write a block's Verilog and JSON sidecar")
    g.add_argument("block", nargs="?", choices=sorted(BLOCKS),
                   help="block to generate (or give --config)")
    g.add_argument("--config", help="JSON file: {\"block\": ..., \"parameters\": {...}}")
    g.add_argument("--rows", type=int, help="MXU array rows")
    g.add_argument("--cols", type=int, help="MXU array columns")
    g.add_argument("--format", dest="fmt", help="MXU operand format (int8, bfloat16, "
                   "float8_e4m3fn, float8_e5m2)")
    g.add_argument("--out-format", dest="out_fmt", help="MXU result format (int32; float32 "
                   "or bfloat16)")
    g.add_argument("--acc-depth", type=int, help="MXU accumulator rows")
    g.add_argument("-o", "--out", required=True, help="output directory")
    model_cli.add_parser(sub)
    tools.add_parsers(sub)
    sweep_cli.add_parser(sub)
    return p


def _params(args):
    if args.config:
        with open(args.config) as f:
            spec = json.load(f)
        block = spec.get("block", args.block)
        params = dict(spec.get("parameters", {}))
    else:
        block, params = args.block, {}
    if block is None:
        raise ValueError("give a block name or --config")
    for key in ("rows", "cols", "fmt", "out_fmt", "acc_depth"):
        value = getattr(args, key)
        if value is not None:
            params[key] = value
    return block, params


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.command in ("model", "sweep"):
        return args.func(args)
    if args.command in ("asm", "disasm", "compile", "run"):
        return tools.run_command(args)
    try:
        block, params = _params(args)
        config = make_config(block, params)
    except (ValueError, OSError, json.JSONDecodeError) as e:
        print(f"podium: error: {e}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    design = generate(block, config)
    path = design.write(args.out)
    print(f"{path} ({len(design.verilog)} bytes, {time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
