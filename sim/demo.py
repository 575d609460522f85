"""The main job: generate the default chip, run the UCI digits MLP on it in Verilator, check
it, and report; with ``--model vit``, the Vision Transformer of the digits on the ViT's chip.

A 64-32-10 ReLU MLP is trained with scikit-learn on the digits data set inside its wheel,
quantized to int8 (or bfloat16), and compiled to one program that classifies the whole test
split from HBM: the TensorCore DMAs the batch in, runs both layers on the MXU with the bias,
ReLU and requantization on the VPU, and writes the logits back. The same program runs on the
golden ISA simulator; the classes of the RTL must equal the golden simulator's and numpy's
inference of the same quantized model exactly.

    python -m sim.demo [--dtype int8|bfloat16] [--config chip.json]
    python -m sim.demo --model vit [--images N] [--batch B] [--config chip.json]
    make demo ARGS="--dtype bfloat16" CONFIG=chip.json

``--model vit`` trains the ViT of podium/workloads/vit.py (once; cached in build/vit),
compiles it with the encoder compiler (podium/encoder.py) and classifies the test split (or
its first ``--images``) on the RTL in programs of ``--batch`` images, a line per program; the
logits must equal the golden simulator's bit for bit, and the accuracy must be at least 95%
and within 0.5 point of the float model's.

``--config`` takes a chip configuration file as ``podium generate --config`` does,
``{"block": "chip", "parameters": {...}}``, of a chip with a TensorCore (an int8 or bfloat16
MXU) on the HBM controller (``memory`` ``"hbm"``) and no network interface.
"""

import sys
import time

import numpy as np

from hdl.generate import config_file, make_config
from podium.runner import run
from podium.workloads import digits, vit
from sim import programs  # noqa: F401  (registers the verilator backend)
from sim.cli import Parser, fill, reporting
from sim.runner import BUILD, generated
from spec.chip import ChipConfig
from spec.config import check, check_choice
from spec.files import in_file
from spec.mxu import MXUConfig
from spec.tensorcore import TensorCoreConfig


def _config(path, dtype):
    """The chip of ``--config`` (default: the default chip, its MXU in ``dtype``) and the
    model format."""
    if path is None:
        dtype = dtype or "int8"
        return ChipConfig(tensorcore=TensorCoreConfig(mxu=MXUConfig(fmt=dtype))), dtype
    chip = make_config(*config_file(path, "chip"))
    with in_file(path):
        check("tensorcore", chip.tensorcore is not None, "given (the demo runs on a "
              "TensorCore)", None)
        fmt = check_choice("tensorcore.mxu.fmt", chip.tensorcore.mxu.fmt, ("int8", "bfloat16"))
        check("memory", chip.memory == "hbm", "'hbm' (the demo runs on the HBM device model)",
              chip.memory)
        check("nic", chip.nic is None, "None (the demo's chip has no network interface)",
              chip.nic)
        check("tensorcore.mxu.fmt", dtype in (None, fmt), f"{dtype!r} (--dtype)", fmt)
    return chip, fmt


def main(argv=None):
    p = Parser(prog="make demo", description=fill(__doc__.split("\n\n")[0]))
    p.add_argument("--model", choices=("mlp", "vit"), default="mlp",
                   help="the 64-32-10 MLP (default) or the Vision Transformer")
    p.add_argument("--images", type=int, help="vit: classify only the first N test images")
    p.add_argument("--batch", type=int, default=30,
                   help="vit: images per RTL program (a progress line each; default 30)")
    p.add_argument("--dtype", choices=("int8", "bfloat16"),
                   help="the model's format (default: the MXU's with --config, else int8)")
    p.add_argument("--config", help="chip configuration file {\"block\": \"chip\", "
                   "\"parameters\": {...}} (default: the default chip)")
    args = p.parse_args(argv)
    return reporting(_vit_demo if args.model == "vit" else _demo, args, prog="make demo")


def _generate(chip):
    start = time.perf_counter()
    design = generated("chip", chip)
    vpath = design.write(BUILD / "demo")
    gen_seconds = time.perf_counter() - start
    print(f"chip generated (or read back from build/verilog-cache): {vpath} "
          f"({len(design.verilog) / 1e6:.1f} MB, {gen_seconds:.1f} s)", flush=True)
    return gen_seconds


def _demo(args):
    chip, dtype = _config(args.config, args.dtype)
    tc = chip.tensorcore
    gen_seconds = _generate(chip)
    data = digits.load()
    program = digits.compile_digits(tc, data, dtype)
    meta = program.metadata
    print(f"digits MLP compiled: {len(program.words)} instructions, "
          f"{len(data.x_test)} test images in one batch", flush=True)
    golden, golden_out = run(program, sim="golden")
    print("golden ISA simulator: done", flush=True)
    start = time.perf_counter()
    result, outputs = run(program, sim="verilator", chip=chip)
    rtl_seconds = time.perf_counter() - start
    if result.status != "done":
        sys.exit(f"demo: the RTL stopped with {result.error.name} at {result.error_pc}")

    classes = np.argmax(outputs["Y"], axis=1)
    golden_classes = np.argmax(golden_out["Y"], axis=1)
    labels = np.array(meta["labels"])
    accuracy = float(np.mean(classes == labels))
    c = result.counters
    useful = (64 * digits.HIDDEN + digits.HIDDEN * 10) * len(labels)
    slots = c["cycles"] * tc.mxu.rows * tc.mxu.cols
    checks = {
        "logits equal the golden simulator's": np.array_equal(outputs["Y"], golden_out["Y"]),
        "classes equal the golden simulator's": np.array_equal(classes, golden_classes),
        "classes equal numpy's quantized inference": np.array_equal(classes, meta["classes"]),
    }
    lines = [
        f"# Podium demo: digits MLP on the chip ({dtype})",
        "",
        f"- chip: TensorCore {tc.mxu.rows}x{tc.mxu.cols} {tc.mxu.fmt} MXU, "
        f"{tc.vmem_bytes // 1024} KiB VMEM, {chip.hbm.standard}-{chip.hbm.speed} "
        f"{chip.hbm.pseudo_channels} pseudo-channels (golden device model)",
        f"- program: {len(program.words)} instructions, 64-32-10 ReLU MLP, "
        f"{len(labels)} images",
        "",
        "| measure | value |",
        "|---|---|",
        f"| accuracy on the RTL | {100 * accuracy:.2f}% |",
        f"| numpy, same quantized model | {100 * meta['numpy_accuracy']:.2f}% |",
        f"| scikit-learn, float | {100 * meta['float_accuracy']:.2f}% |",
        f"| cycles | {c['cycles']} |",
        f"| MXU utilization (useful MACs / cycles x rows x cols) | {100 * useful / slots:.1f}% |",
        f"| MXU busy cycles | {c['mxu_busy']} |",
        f"| HBM bytes read / written | {c['bytes_read']} / {c['bytes_written']} |",
        f"| generation, Verilator build, simulation (s) | {gen_seconds:.1f}, "
        f"{c['build_seconds']:.1f}, {c['run_seconds']:.1f} |",
        f"| this run's set-up of the RTL run (generation read back or made, build found or "
        f"made) (s) | {c['setup_seconds']:.1f} |",
    ]
    return _report(lines, checks, "report.md", rtl_seconds)


def _report(lines, checks, name, rtl_seconds):
    report = "\n".join([*lines, "", *[f"- {what}: {'yes' if ok else 'NO'}"
                                      for what, ok in checks.items()]]) + "\n"
    (BUILD / "demo" / name).write_text(report)
    print(report)
    print(f"report written to {BUILD / 'demo' / name} ({rtl_seconds:.0f} s on the RTL)")
    return 0 if all(checks.values()) else 1


def _vit_chip(path):
    """The chip of ``--config`` for the ViT (default: the ViT's TensorCore on the HBM)."""
    if path is None:
        return ChipConfig(tensorcore=vit.TENSORCORE)
    chip, fmt = _config(path, None)
    with in_file(path):
        check("tensorcore.mxu.fmt", fmt == "bfloat16", "'bfloat16' (the ViT's format)", fmt)
    return chip


def _vit_demo(args):
    chip = _vit_chip(args.config)
    tc = chip.tensorcore
    gen_seconds = _generate(chip)
    model = vit.load(verbose=True)
    n = len(model.y_test) if args.images is None else args.images
    check("--images", 1 <= n <= len(model.y_test), f"1..{len(model.y_test)}", n)
    check("--batch", args.batch >= 1, "at least 1", args.batch)
    print(f"ViT trained (float accuracy {100 * model.float_accuracy:.2f}%); classifying "
          f"{n} test images in programs of {args.batch}", flush=True)
    totals = dict.fromkeys(("cycles", "mxu_busy", "vpu_busy", "mxu_vectors", "run_seconds"), 0)
    logits, same, words = [], True, 0
    start = time.perf_counter()
    for at in range(0, n, args.batch):
        images = model.x_test[at:at + args.batch]
        program = vit.compile_vit(tc, model, images)
        words = len(program.words)
        _, golden = run(program, sim="golden")
        result, outputs = run(program, sim="verilator", chip=chip,
                              max_steps=40_000 * len(images) + 100_000)
        if result.status != "done":
            sys.exit(f"demo: the RTL stopped with {result.error.name} at {result.error_pc}")
        same &= np.array_equal(outputs["Y"].view(np.uint32), golden["Y"].view(np.uint32))
        logits.append(outputs["Y"])
        for key in totals:
            totals[key] += result.counters[key]
        done = at + len(images)
        acc = np.mean(np.argmax(np.concatenate(logits), axis=1) == model.y_test[:done])
        print(f"images {done}/{n}: {result.counters['cycles']:,} cycles, accuracy so far "
              f"{100 * acc:.2f}%, {'bit-exact' if same else 'NOT bit-exact'} with the golden "
              f"simulator ({time.perf_counter() - start:.0f} s)", flush=True)
    rtl_seconds = time.perf_counter() - start
    labels = model.y_test[:n]
    accuracy = float(np.mean(np.argmax(np.concatenate(logits), axis=1) == labels))
    floats = float(np.mean(np.argmax(vit.forward(model.params, model.x_test[:n]), axis=1)
                           == labels))
    c = totals
    checks = {
        "logits equal the golden simulator's, bit for bit": same,
        "accuracy at least 95%": accuracy >= 0.95,
        "accuracy within 0.5 point of the float model's": abs(accuracy - floats) <= 0.005,
    }
    lines = [
        "# Podium demo: the digits Vision Transformer on the chip (bfloat16)",
        "",
        f"- chip: TensorCore {tc.mxu.rows}x{tc.mxu.cols} {tc.mxu.fmt} MXU, "
        f"{tc.vmem_bytes // 1024} KiB VMEM, {tc.row_bytes // 4} VPU lanes, "
        f"{chip.hbm.standard}-{chip.hbm.speed} (golden device model)",
        f"- model: {model.shape.blocks} blocks, width {model.shape.dim}, "
        f"{model.shape.heads} heads, MLP {model.shape.mlp}, 17 tokens (16 2x2 patches and a "
        f"class token); {n} images in programs of {args.batch} ({words} instructions)",
        "",
        "| measure | value |",
        "|---|---|",
        f"| accuracy on the RTL | {100 * accuracy:.2f}% |",
        f"| float model (float64) | {100 * floats:.2f}% |",
        f"| cycles (all programs) | {c['cycles']:,} ({c['cycles'] / n:,.0f} an image) |",
        f"| MXU busy / VPU busy cycles | {c['mxu_busy']:,} / {c['vpu_busy']:,} |",
        f"| MXU utilization (vectors x rows x cols / cycles x rows x cols) | "
        f"{100 * c['mxu_vectors'] / c['cycles']:.1f}% |",
        f"| generation, simulation (s) | {gen_seconds:.1f}, {c['run_seconds']:.0f} |",
        f"| simulated cycles/s | {c['cycles'] / c['run_seconds']:,.0f} |",
    ]
    return _report(lines, checks, "report-vit.md", rtl_seconds)


if __name__ == "__main__":
    sys.exit(main())
