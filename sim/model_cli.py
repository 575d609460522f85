"""``podium model``: the performance model on the command line.

    podium model run --preset v6e --slices 24 --workload gpt3-175b --base 4
    podium model run --preset podium --workload llama2-70b-inference
    podium model run --preset v6e --workload gpt3-175b --set chip.dcn_bandwidth=25e9
    podium model calibration [--results DIR]
    podium model report [--quick]
    podium model seed [--json]        # every claim of the Trillium announcement
    podium model heldout [--json]     # the held-out protocol: fitted and held-out points

``add_parser(subparsers)`` adds the ``model`` command to the ``podium`` argument parser; its
handler is stored as the parser default ``func``.
"""

import json
import sys
from dataclasses import asdict, fields, is_dataclass, replace

from podium.model.calibrate import measured_terms
from podium.model.costs import (
    inference,
    training_step,
    unet_images_per_second,
    weak_scaling_efficiency,
)
from podium.model.hardware import CHIPS
from podium.model.presets import (
    INFERENCE,
    INFERENCE_SLICE,
    PALM_SLICE,
    PRESETS,
    SDXL,
    inference_preset,
    system,
    training,
)
from podium.model.workloads import TRAINING
from sim.measure import table
from spec.config import parse_assignment

__all__ = ["add_parser", "main", "apply_overrides"]

INFERENCE_WORKLOADS = {f"{name}-inference": name for name in INFERENCE}
WORKLOADS = (*TRAINING, *INFERENCE_WORKLOADS, "sdxl")


def add_parser(subparsers):
    """Add ``model`` and its subcommands to an argparse ``subparsers`` object."""
    p = subparsers.add_parser("model", help="performance model from one chip to many slices",
                              description="The performance model on the command line: "
                              "a preset's step time, its calibration, the scaling report.")
    p.set_defaults(func=run)
    sub = p.add_subparsers(dest="model_command", required=True)
    r = sub.add_parser("run", help="one preset and workload: the step-time breakdown")
    r.add_argument("--preset", choices=PRESETS, default="v6e",
                   help="system preset (podium: v6e with Podium-measured efficiencies)")
    r.add_argument("--measured", action="store_true",
                   help="use Podium-measured efficiency terms with any chip")
    r.add_argument("--slices", type=int, default=1, help="slices joined over the DCN")
    r.add_argument("--workload", choices=WORKLOADS, default="gpt3-175b",
                   help="the model to train or serve")
    r.add_argument("--base", type=int, help="also report weak-scaling efficiency against "
                                            "this many slices (training; default: not)")
    r.add_argument("--images", type=int, default=1, help="SDXL images per chip at once")
    r.add_argument("--set", dest="sets", action="append", default=[], metavar="PATH=VALUE",
                   help="override a parameter, e.g. chip.hbm_bandwidth=2e12, "
                        "system.overlap=0.5, parallelism.tensor=4 (repeatable; values as "
                        "JSON, else a string)")
    r.add_argument("--results", help="directory of measured results (default: docs/results)")
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    c = sub.add_parser("calibration", help="the Podium-measured terms and their sources")
    c.add_argument("--results", help="directory of measured results (default: docs/results)")
    rep = sub.add_parser("report", help="docs/results/scaling.md, .json and plots")
    rep.add_argument("--quick", action="store_true", help="fewer points, into build/results")
    rep.add_argument("--results", help="directory of measured results (default: docs/results)")
    for name, what in (("seed", "every claim of the Trillium announcement: published, "
                                "modelled, error, status, terms"),
                       ("heldout", "the held-out protocol: the fitted parameters and their "
                                   "points, every other published point with its error")):
        q = sub.add_parser(name, help=what)
        q.add_argument("--results", help="directory of measured results (default: "
                       "docs/results)")
        q.add_argument("--json", action="store_true", help="print the rows as JSON")
    return p


def _fmt(x, digits=3):
    return "-" if x is None else f"{x:.{digits}f}"


def _seed(args):
    from podium.model.seed import claims

    rows = claims(args.results)
    if args.json:
        return json.dumps(rows, indent=1)
    return table(["claim", "published", "modelled", "error", "status", "terms", "why"],
                 [[r["claim"], _fmt(r["published"], 2), _fmt(r["modelled"]),
                   "-" if r["error"] is None else f"{100 * r['error']:+.1f}%", r["status"],
                   r["terms"], r["why"]] for r in rows])


def _heldout(args):
    from podium.model import protocol

    cal = protocol.calibrate(args.results)
    rows = protocol.evaluate(cal, args.results)
    summary = protocol.summary(rows)
    if args.json:
        return json.dumps({"calibration": asdict(cal), "fitted": protocol.FITTED,
                           "rows": rows, "summary": summary}, indent=1)
    s = summary["mfu"]
    return "\n".join([
        table(["parameter", "value", "fitted on"],
              [[n, f"{getattr(cal, n):.4g}", ", ".join(ids)]
               for n, ids in protocol.FITTED.items()]),
        "",
        table(["point", "status", "published", "modelled", "error (points)", "needs"],
              [[r["id"], r["status"], f"{100 * r['published']:.2f}%",
                f"{100 * r['modelled']:.2f}%", f"{r['error_points']:+.2f}", r["needs"]]
               for r in rows]),
        "",
        f"held-out MFU/HFU: {s['points']} points, MAE {s['mae']:.2f}, "
        f"within {protocol.TARGET_POINTS:g}: {s['within']}"])


def apply_overrides(objects, sets):
    """Apply ``PATH=VALUE`` strings to the dataclasses in ``objects`` ({prefix: object}),
    returning the updated dict; the objects' own validation names any bad value."""
    objects = dict(objects)
    for item in sets:
        path, value = parse_assignment(item, "--set")
        prefix, dot, name = path.partition(".")
        if not dot or prefix not in objects:
            raise ValueError(f"--set takes PATH=VALUE with PATH one of "
                             f"{', '.join(p + '.<name>' for p in objects)}, got {item!r}")
        obj = objects[prefix]
        names = [f.name for f in fields(obj) if not is_dataclass(getattr(obj, f.name))
                 and f.name != "sources"]
        if name not in names:
            raise ValueError(f"unknown parameter {path!r}; {prefix} has {', '.join(names)}")
        value = tuple(value) if isinstance(value, list) else value
        objects[prefix] = replace(obj, **{name: value})
    return objects


def _system(args, workload):
    if workload == "palm-540b":
        slice_ = PALM_SLICE
    elif workload in INFERENCE_WORKLOADS or workload == "sdxl":
        slice_ = INFERENCE_SLICE
    else:
        slice_ = None
    return system(args.preset, slices=args.slices, slice_=slice_, measured=args.measured,
                  results=args.results)


def _split(sets, prefixes):
    return ([s for s in sets if s.split(".", 1)[0] in prefixes],
            [s for s in sets if s.split(".", 1)[0] not in prefixes])


def _configure(args):
    """The system and workload of ``run``, overrides applied."""
    sys_sets, work_sets = _split(args.sets, ("system", "chip", "slice", "efficiency"))
    base = _system(args, args.workload)
    hw = apply_overrides({"system": base, "chip": base.chip, "slice": base.slice,
                          "efficiency": base.efficiency}, sys_sets)
    sys_ = replace(hw["system"], chip=hw["chip"], slice=hw["slice"],
                   efficiency=hw["efficiency"])
    if args.workload in TRAINING:
        work = training(args.workload, sys_)
        w = apply_overrides({"training": work, "model": work.model,
                             "parallelism": work.parallelism}, work_sets)
        work = replace(w["training"], model=w["model"], parallelism=w["parallelism"])
    elif args.workload == "sdxl":
        work = apply_overrides({"unet": SDXL}, work_sets)["unet"]
    else:
        work = inference_preset(INFERENCE_WORKLOADS[args.workload])
        w = apply_overrides({"inference": work, "model": work.model}, work_sets)
        work = replace(w["inference"], model=w["model"])
    return sys_, work


def _training_report(args, sys_, work):
    st = training_step(sys_, work)
    result = {"system": sys_.name, "workload": args.workload, "slices": sys_.slices,
              "chips": sys_.chips, **{k: v for k, v in asdict(st).items()},
              "mfu": st.mfu, "hfu": st.hfu, "tokens_per_second": st.tokens_per_second,
              "fits": st.fits}
    rows = [["compute", f"{st.compute:.4f}", "every operation's roofline, in sequence"],
            ["tensor-parallel all-reduces", f"{st.tensor:.4f}",
             f"exposed but {st.tensor_hidden:.4f} hidden under the weight-gradient GEMMs"
             if st.tensor_hidden else "exposed"],
            ["MoE all-to-alls", f"{st.all_to_all:.4f}", "exposed"],
            ["FSDP / data-parallel ICI", f"{st.fsdp_ici:.4f}", "overlappable"],
            ["DCN all-reduce", f"{st.dcn:.4f}", "overlappable" if work.dcn_overlap
             else "after the backward pass: exposed"],
            ["exposed ICI", f"{st.exposed_ici:.4f}", "in the step"],
            ["exposed DCN", f"{st.exposed_dcn:.4f}", "in the step"],
            ["sync", f"{st.sync:.4f}", "in the step"],
            ["step", f"{st.step:.4f}", "compute + exposed ICI + exposed DCN + sync"]]
    lines = [f"{sys_.name}, {sys_.slices} slice(s) of {list(sys_.slice.dims)} = {sys_.chips} "
             f"chips; {args.workload}: global batch {work.global_batch} x {work.model.seq}",
             table(["part", "seconds", ""], rows),
             f"MFU {st.mfu:.1%}, HFU {st.hfu:.1%}, {st.tokens_per_second:,.0f} tokens/s, "
             f"{st.memory_bytes / 1e9:.1f} GB of {st.hbm_bytes / 1e9:.0f} GB HBM per chip"
             f"{'' if st.fits else ' (does not fit)'}",
             "efficiency terms: " + "; ".join(
                 f"{t} {getattr(sys_.efficiency, t):.3g} ({sys_.efficiency.source(t)})"
                 for t in sys_.efficiency.TERMS)]
    if args.base:
        base_sys = replace(sys_, slices=args.base)
        base = training_step(base_sys, replace(work, global_batch=work.global_batch
                                               * args.base // sys_.slices))
        eff = weak_scaling_efficiency(st, base)
        result["weak_scaling_efficiency"] = eff
        lines.append(f"weak-scaling efficiency against {args.base} slice(s), per-chip batch "
                     f"fixed: {eff:.2%}")
    return result, "\n".join(lines)


def _inference_report(args, sys_, work):
    if args.workload == "sdxl":
        ips = unet_images_per_second(sys_, work, images=args.images)
        result = {"system": sys_.name, "workload": "sdxl", "chips": sys_.chips,
                  "images_per_second": ips}
        return result, (f"{sys_.name}, {sys_.chips} chips; SDXL UNet, {work.steps} steps, "
                        f"{args.images} image(s) per chip: {ips:.2f} images/s")
    r = inference(sys_, work)
    result = {"system": sys_.name, "workload": args.workload, "chips": sys_.chips,
              **asdict(r), "fits": r.fits}
    return result, (
        f"{sys_.name}, {sys_.chips} chips; {work.model.name}, batch {work.batch}, prompt "
        f"{work.prompt}, output {work.output}\n"
        f"prefill {r.prefill_tokens_per_second:,.0f} tokens/s ({r.prefill_seconds:.3f} s), "
        f"decode {r.decode_tokens_per_second:,.0f} tokens/s "
        f"({r.decode_step_seconds * 1e3:.2f} ms per step), "
        f"{r.memory_bytes / 1e9:.1f} GB per chip{'' if r.fits else ' (does not fit)'}")


def run(args):
    """Handler of ``podium model``: returns the exit status (a user error raises
    ``ValueError``, which sim/cli.py reports)."""
    if args.model_command == "report":
        from .model_report import bench
        bench(quick=args.quick, results=args.results)
        return 0
    if args.model_command in ("seed", "heldout"):
        print((_seed if args.model_command == "seed" else _heldout)(args))
        return 0
    if args.model_command == "calibration":
        terms = measured_terms(CHIPS["v6e"], args.results)
        print(table(["term", "value", "source"],
                    [[n, f"{t.value:.4g}", t.source] for n, t in terms.items()]))
        return 0
    if args.slices < 1 or (args.base is not None and args.base < 1):
        raise ValueError("--slices and --base must be >= 1")
    sys_, work = _configure(args)
    if args.workload in TRAINING:
        result, text = _training_report(args, sys_, work)
    else:
        result, text = _inference_report(args, sys_, work)
    print(json.dumps(result, indent=1) if args.json else text)
    return 0


def main(argv=None):
    """``python -m sim.model_cli``: the ``model`` command on its own."""
    from .cli import main as podium

    return podium(["model", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
