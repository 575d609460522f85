"""The ``podium`` command line end to end in a subprocess: ``asm``, ``disasm``, ``compile``
and ``run``, ``generate``'s options and help, and every kind of user error (one line,
status 2)."""

import argparse
import importlib.metadata
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from hdl.generate import BLOCKS
from podium.asm import assemble
from podium.compiler import gemm
from podium.program import Program, Tensor
from sim import cli
from sim.cli import _parser
from spec.mxu import MXUConfig
from spec.tensorcore import TensorCoreConfig

ROOT = __file__.rsplit("/verification/", 1)[0]


def podium(*args, cwd, timeout=300):
    # PATH and HOME: an RTL run builds (make, a C++ compiler) and generates (Yosys's
    # compiled WebAssembly is cached under HOME).
    env = {"PYTHONPATH": ROOT, **{k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}}
    return subprocess.run([sys.executable, "-m", "sim.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=timeout)


def test_asm_disasm(tmp_path):
    source = "li r1, 5\nloop: addi r1, r1, -1\nbne r1, r0, loop\nhalt\n"
    (tmp_path / "a.s").write_text(source)
    r = podium("asm", "a.s", "-o", "a.hex", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    words = [int(line, 16) for line in (tmp_path / "a.hex").read_text().split()]
    assert words == assemble(source)
    r = podium("disasm", "a.hex", cwd=tmp_path)
    assert assemble(r.stdout) == words
    (tmp_path / "b.s").write_text("nop\nadd r1, r2, r99\n")
    r = podium("asm", "b.s", cwd=tmp_path)
    assert r.returncode == 2 and "b.s:2: bad register 'r99'" in r.stderr


def test_compile_and_run_gemm(tmp_path):
    r = podium("compile", "gemm", "--m", 40, "--k", 300, "--n", 20, "--config",
               '{"mxu": {"fmt": "bfloat16"}}', "-o", "g.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert Program.load(tmp_path / "g.json").metadata["K"] == 300
    r = podium("run", "g.json", "--sim", "golden", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["status"] == "done" and report["matches_reference"] is True
    assert report["bytes_written"] == 40 * 96
    r = podium("disasm", "g.json", cwd=tmp_path)
    assert "matmul" in r.stdout and r.stdout.count("\n") == len(
        Program.load(tmp_path / "g.json").words)


def test_compile_and_run_digits_and_mlp(tmp_path):
    r = podium("compile", "digits", "-o", "d.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = podium("run", "d.json", "--json", cwd=tmp_path)
    report = json.loads(r.stdout)
    assert r.returncode == 0 and report["matches_numpy"] is True
    assert report["accuracy"] == report["numpy_accuracy"] > 0.95
    r = podium("compile", "mlp", "--layers", "30,20,5", "--batch", 33, "-o", "m.json",
               cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(podium("run", "m.json", "--json", cwd=tmp_path).stdout)["status"] == \
        "done"


def test_compile_and_run_transformer_ops(tmp_path):
    """A transformer operation compiles and runs, checked against its float64 reference
    within the documented tolerance (a bfloat16 LayerNorm with seeded gamma and beta, a
    softmax with padded rows over several tiles)."""
    for args in (("layernorm", "--rows", 30, "--features", 77, "--dtype", "bfloat16"),
                 ("softmax", "--rows", 300, "--features", 100)):
        r = podium("compile", *args, "-o", "t.json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        r = podium("run", "t.json", "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        report = json.loads(r.stdout)
        assert report["within_tolerance"] is True
        assert report["max_error"] <= report["tolerance"]


def test_run_assembly_hex_and_npy_files(tmp_path):
    """``run`` takes assembly and hex as well as a program file, inputs from .npy files and
    writes outputs to .npy files."""
    (tmp_path / "a.s").write_text("li r1, 3\nloop: addi r1, r1, -1\nbne r1, r0, loop\nhalt\n")
    assert podium("asm", "a.s", "-o", "a.hex", cwd=tmp_path).returncode == 0
    for source in ("a.s", "a.hex"):
        r = podium("run", source, "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        report = json.loads(r.stdout)
        assert report["status"] == "done" and report["instructions"] == 4
    assert podium("compile", "gemm", "--m", 8, "--k", 16, "--n", 8, "-o", "g.json",
                  cwd=tmp_path).returncode == 0
    a = np.arange(-64, 64).reshape(8, 16).astype(np.int8)
    b = np.full((16, 8), 2, dtype=np.int16)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    r = podium("run", "g.json", "--input", "A=a.npy", "--input", "B=b.npy", "--outputs", "out",
               "--json", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["matches_reference"], r.stderr
    c = np.load(tmp_path / "out/C.npy")
    assert c.dtype == np.int32 and np.array_equal(c, a.astype(np.int32) @ b.astype(np.int32))


POD_ALL_REDUCE = """
    li r1, 4096
    dma.shape 0, r1, r0, r0
    dma.load r0, r0, s3
    wait ici, s3
    li r2, 1024
    ici.coll all_reduce_2d, 0, fp32, r0, r2
    signal ici, s2
    wait dma, s2
    li r2, 32768
    dma.store r2, r0, s4
    wait dma, s4
    halt
"""
"""A pod program: its input X (32 x 32 fp32, from HBM 0) into VMEM, all-reduced over the 2-D
pod, back to HBM as its output Y."""


def pod_program():
    """:data:`POD_ALL_REDUCE` as a program file's Program, for the pod tests' TensorCore (the
    2x2 pod of ``podium run --pod 2x2`` is then the pod tests' "2x2-tc-hbm")."""
    from verification.tb.pod_programs import TENSORCORE

    return Program(assemble(POD_ALL_REDUCE), TENSORCORE, 1 << 16,
                   inputs={"X": Tensor(0, (32, 32), "float32", 128)},
                   outputs={"Y": Tensor(32768, (32, 32), "float32", 128)})


def test_run_on_a_pod(tmp_path, seed):
    """``run --pod 2x2`` on the golden pod: per-chip inputs along a leading axis (small
    integers, so any order of the fp32 sums is exact), every chip's output the sum of all
    four; one input for every chip; seeded random inputs, their all-reduce the same on
    every chip and nothing else written; the JSON report has every chip's."""
    pod_program().save(tmp_path / "ar.json")
    rng = np.random.default_rng(seed)
    x = rng.integers(-1000, 1000, (4, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x4.npy", x)
    np.save(tmp_path / "x.npy", x[1])
    r = podium("run", "ar.json", "--pod", "2x2", "--input", "X=x4.npy", "--outputs", "out",
               "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert (report["pod"], report["chips"], report["status"]) == ("2x2", 4, "done"), report
    assert [c["status"] for c in report["chip"]] == ["done"] * 4
    assert all(c["bytes_read"] == c["bytes_written"] == 4096 for c in report["chip"])
    for k in range(4):
        assert np.array_equal(np.load(tmp_path / f"out/Y.chip{k}.npy"), x.sum(0)), k
    r = podium("run", "ar.json", "--pod", "2x2", "--input", "X=x.npy", "--outputs", "same",
               cwd=tmp_path)
    assert r.returncode == 0 and "chip 3:" in r.stdout, r.stderr
    for k in range(4):
        assert np.array_equal(np.load(tmp_path / f"same/Y.chip{k}.npy"), 4 * x[1]), k
    r = podium("run", "ar.json", "--pod", "2x2", "--seed", seed, "--outputs", "random",
               cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ys = [np.load(tmp_path / f"random/Y.chip{k}.npy") for k in range(4)]
    assert all(np.array_equal(y, ys[0]) for y in ys) and np.any(ys[0] != 0)
    assert sorted(p.name for p in (tmp_path / "random").iterdir()) == [
        f"Y.chip{k}.npy" for k in range(4)]


@pytest.mark.parametrize("sim, unit, budget", [("golden", "steps", 1000),
                                               ("verilator", "cycles", 3000),
                                               ("native", "cycles", 3000)])
def test_a_program_that_never_ends_times_out_cleanly(tmp_path, sim, unit, budget):
    """``loop: jmp loop`` never deadlocks: at --max-steps the run stops with status timeout on
    the golden simulator and on the RTL alike (the cocotb testbench or the native host aborts
    the chip), exit status 1, one line on standard error and no traceback. The RTL run is on
    the default chip, which the regression builds anyway (test_chip); a cold build takes
    minutes."""
    (tmp_path / "loop.s").write_text("loop: jmp loop\n")
    r = podium("run", "loop.s", "--sim", sim, "--max-steps", budget, "--json", cwd=tmp_path,
               timeout=1800)
    assert r.returncode == 1, r.stderr
    report = json.loads(r.stdout)
    assert report["status"] == "timeout" and report["error"] == "NONE", report
    assert budget <= report["steps"] < budget + 100, report
    # Standard error: the stages of an RTL run (generation, build, simulation), each a line
    # "podium: ...", then the one line of the timeout.
    lines = r.stderr.splitlines()
    assert all(line.startswith("podium: ") for line in lines), r.stderr
    assert [line for line in lines if "timeout" in line] == lines[-1:], r.stderr
    assert lines[-1].startswith(f"podium: timeout: loop.s was still running after "
                                f"{report['steps']:,} {unit} on {sim} (--max-steps; default: ")
    if sim != "golden":
        assert f"at most {budget:,} cycles" in r.stderr


def test_the_rtl_default_budget_is_minutes():
    """The RTL's default cycle budget ends a run in minutes at the chip's simulated speed,
    and ``podium run --help`` says so."""
    from sim.programs import CYCLES_PER_SECOND, MAX_CYCLES

    assert 60 <= MAX_CYCLES / CYCLES_PER_SECOND <= 600
    text = " ".join(podium("run", "--help", cwd=ROOT).stdout.split())
    assert (f"verilator: {MAX_CYCLES:,} cycles, about "
            f"{round(MAX_CYCLES / CYCLES_PER_SECOND / 60)} minutes") in text
    assert "golden: 50,000,000 steps" in text


def test_version_and_help():
    r = podium("--version", cwd=ROOT)
    assert r.returncode == 0 and r.stdout == f"podium {importlib.metadata.version('podium')}\n"
    r = podium("--help", cwd=ROOT)
    description = r.stdout.split("\n\n")[1]
    assert description.startswith("The podium command line") and description.endswith(".")


def test_run_starts_without_the_generator():
    """``podium run`` (its parser, the runners, the native path) imports neither Amaranth nor
    the performance model nor tqdm: a run of a design whose Verilog is cached pays none of
    their start-up (issue 41's fixed costs); ``podium model`` still gets its parser."""
    code = ("import sys; from sim import cli, native, pod_native, runner; cli._parser('run'); "
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & {'amaranth', "
            "'tqdm'} | {m for m in sys.modules if m.startswith('podium.model')})))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == [], r.stdout + r.stderr
    assert "model" in podium("model", "--help", cwd=ROOT).stdout.split("\n")[0]


def _parsers(parser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_every_option_shows_its_default():
    """Every option's help shows its default: the value argparse appends, or, for an option
    left None, the help's own words on what leaving it out does."""
    for parser in _parsers(_parser()):
        formatter = parser._get_formatter()
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0 or action.required:
                continue
            text = formatter._get_help_string(action)
            assert "default" in text, f"{parser.prog} {action.option_strings[0]}: {text!r}"


def test_every_command_has_a_whole_description():
    """``podium --help`` and every subcommand's open with a description of whole sentences
    (no docstring markup)."""
    for parser in _parsers(_parser()):
        text = parser.description
        assert text and text.rstrip().endswith(".") and "``" not in text, \
            f"{parser.prog}: {text!r}"
        assert text.split("\n\n")[0] in parser.format_help(), parser.prog


def test_generate_help_documents_every_block():
    text = podium("generate", "--help", cwd=ROOT).stdout
    for name, block in BLOCKS.items():
        assert f"\n{name} ({block.config.__name__}, " in text
    assert "\n  rows = 8: Array rows, 1..256" in text
    assert "\n  row_bytes = derived: VMEM row width" in text
    assert ("\n  timing_overrides: HBM timing configuration\n"
            "    timing_overrides.cl = None") in text
    assert "tensorcore: TensorCore configuration: the parameters of block tensorcore" in text


def test_generate_set(tmp_path):
    r = podium("generate", "mxu", "--set", "rows=2", "--set", "fmt=bfloat16", "--cols", 3,
               "-o", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    sidecar = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    assert sidecar["parameters"] == {**MXUConfig().to_dict(), "rows": 2, "cols": 3,
                                     "fmt": "bfloat16"}


def test_generate_checks_the_output_before_generating(tmp_path, monkeypatch):
    def fail(*args):
        raise AssertionError("generated before the output was checked")

    monkeypatch.setattr(cli, "generate", fail)
    (tmp_path / "file").write_text("")
    assert cli.main(["generate", "pod", "-o", str(tmp_path / "file")]) == 2


def test_derived_parameters_in_compile(tmp_path):
    """A 16 x 16 MXU needs 64-byte VMEM rows: row_bytes follows unless it is given."""
    config = '{"mxu": {"rows": 16, "cols": 16}}'
    r = podium("compile", "gemm", "--m", 16, "--k", 32, "--n", 16, "--config", config, "-o",
               "g.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert Program.load(tmp_path / "g.json").config.row_bytes == 64


ONE_LINE = [
    # generate: configuration files
    (("generate", "--config", "typo.json", "-o", "out"),
     "typo.json: unknown key(s): paramters; allowed: block, parameters"),
    (("generate", "--config", "rowz.json", "-o", "out"),
     "rowz.json: mxu: unknown MXU parameter(s): rowz; allowed: rows, cols, fmt, acc_depth, "
     "out_fmt"),
    (("generate", "hbm", "--config", "mxu.json", "-o", "out"),
     "mxu.json: block must be 'hbm' (the block asked for), got 'mxu'"),
    (("generate", "--config", "list.json", "-o", "out"),
     "list.json: must be a JSON object {\"block\": ..., \"parameters\": {...}}, got a list"),
    (("generate", "--config", "bad.json", "-o", "out"),
     "bad.json:2:10: malformed JSON: expecting value"),
    (("generate", "--config", "missing.json", "-o", "out"),
     "missing.json: cannot read: No such file or directory"),
    (("generate", "mxu", "-o", "file"), "file: cannot write: it exists and is not a directory"),
    (("generate", "mxu", "-o", "file/out"), "file/out: cannot write: {tmp}/file is not a "
                                            "directory"),
    (("generate", "mxu", "--set", "rowz=3", "-o", "out"),
     "mxu.rowz: unknown MXU parameter; allowed: rows, cols, fmt, acc_depth, out_fmt"),
    (("generate", "mxu", "--set", "rows", "-o", "out"), "--set must be PATH=VALUE, got 'rows'"),
    (("generate", "chip", "--set", "tensorcore.mxu.cols=16", "--set",
      "tensorcore.row_bytes=32", "-o", "out"),
     "chip.tensorcore.row_bytes must be one of 64, 128, 256, 512, 1024 (a power of two from "
     "4 * mxu.cols = 64, a result row, up to 1024), got 32"),
    (("generate", "hbm", "--set", "standard=HBM3", "--set", "speed=2000", "-o", "out"),
     "hbm.speed must be one of '6400' (the speeds of standard HBM3), got '2000'"),
    # sweep specs
    (("sweep", "bad.yaml", "--check"),
     "bad.yaml:4:1: malformed YAML: expected ',' or ']', but got '<stream end>' (while "
     "parsing a flow sequence)"),
    (("sweep", "plot.yaml", "--check"),
     "plot.yaml: plots[0].y must be a metric of this sweep (utilization, cycles, m, k, n, "
     "scalesim_utilization, weight_wait, stall, build_seconds), got 'nonsense'"),
    # program files
    (("run", "extra.json"), "extra.json:1:3: malformed JSON: extra data"),
    (("run", "word.json"), "word.json: words[1] must be a 64-bit word in hex, such as "
                           "'0x0000000000000000', got 'zz'"),
    (("run", "bad.hex"), "bad.hex:2: expected a 64-bit hex word (one a line), got 'zz'"),
    (("disasm", "bad.hex"), "bad.hex:2: expected a 64-bit hex word (one a line), got 'zz'"),
    (("run", "bad.s"), "bad.s:2: bad register 'r99' (registers are r0..r15)"),
    (("run", "g.json", "--input", "A=a.npy"), "a.npy: input A must have shape (8, 16), got "
                                              "(2, 2)"),
    (("run", "g.json", "--outputs", "file"), "file: cannot write: it exists and is not a "
                                             "directory"),
    # compile
    (("compile", "gemm", "--m", 4, "-o", "x.json"), "compile gemm needs --k, --n"),
    (("compile", "gemm", "--m", 0, "--k", 1, "--n", 1, "-o", "x.json"),
     "M must be an integer in 1..65535, got 0"),
    (("compile", "gemm", "--m", 1, "--k", 1, "--n", 1, "--config", '{"vmem_banks": 3}',
      "-o", "x.json"), "--config: vmem_banks must be one of 1, 2, 4, 8, 16, 32, 64, got 3"),
    (("compile", "gemm", "--m", 1, "--k", 1, "--n", 1, "--config", "list.json", "-o",
      "x.json"), "list.json: must be a mapping of TensorCore parameters, got [1, 2]"),
    (("compile", "gemm", "--m", 1, "--k", 1, "--n", 1, "-o", "file/x.json"),
     "file/x.json: cannot write: {tmp}/file is not a directory"),
    (("compile", "mlp", "-o", "x.json"), "compile mlp needs --layers, such as 64,32,10"),
    (("compile", "gelu", "--rows", 3, "-o", "x.json"), "compile gelu needs --features"),
    (("compile", "silu", "--rows", 3, "--features", 9, "--dtype", "int8", "-o", "x.json"),
     "--dtype must be float32 or bfloat16 for silu, got int8"),
    (("compile", "softmax", "--rows", 3, "--features", 9000, "-o", "x.json"),
     "features 9000 of a float32 softmax do not fit vmem_bytes 65536: one row needs 72032 "
     "bytes (2 blocks of 1125 rows of 32 bytes, a statistic row); at most 5456 features"),
    (("run", "missing.json"), "missing.json: cannot read: No such file or directory"),
    # pod runs
    (("run", "ar.json", "--pod", "2x2", "--input", "X=x3.npy"),
     "x3.npy: input X must have shape (32, 32) (every chip's) or (4, 32, 32) (one per chip "
     "of the pod), got (3, 32, 32)"),
    (("run", "ar.json", "--pod", "1"),
     "--pod: 1 is refused by the pod configuration (chips of ar.json's TensorCore): dims[0] "
     "must be an integer in 2..64, got 1"),
    (("run", "ar.json", "--pod", "2x0"),
     "--pod must be torus dimensions such as 2x2 or 4 (positive integers joined by x) or a "
     "PodConfig .json file, got '2x0'"),
    (("run", "g.json", "--pod", "2x2"),
     "g.json: is a program for a TensorCore without the ICI queue (TensorCoreConfig ici "
     "false): a pod's chips need it (--pod)"),
]

FILES = {
    "typo.json": '{"block": "mxu", "paramters": {"rows": 4}}',
    "rowz.json": '{"block": "mxu", "parameters": {"rowz": 4}}',
    "mxu.json": '{"block": "mxu", "parameters": {"rows": 4}}',
    "list.json": "[1, 2]",
    "bad.json": '{"block": "mxu",\n "rows": }',
    "file": "",
    "bad.yaml": "block: mxu\nmeasurement: mxu_gemm\ngrid: {rows: [2, 3\n",
    "plot.yaml": "block: mxu\nmeasurement: mxu_gemm\ngrid: {rows: [2, 4]}\nsynthesis: false\n"
                 "plots: [{x: rows, y: nonsense}]\n",
    "extra.json": "{}x",
    "bad.hex": "0000000000000000\nzz\n",
    "bad.s": "nop\nadd r1, r2, r99\n",
}


@pytest.fixture(scope="module")
def user_files(tmp_path_factory):
    """The bad files of ONE_LINE, and a GEMM program."""
    tmp = tmp_path_factory.mktemp("user_files")
    for name, text in FILES.items():
        (tmp / name).write_text(text)
    program = gemm(TensorCoreConfig(), 8, 16, 8)
    program.save(tmp / "g.json")
    d = program.to_dict()
    d["words"][1] = "zz"
    (tmp / "word.json").write_text(json.dumps(d))
    np.save(tmp / "a.npy", np.zeros((2, 2), np.int8))
    pod_program().save(tmp / "ar.json")
    np.save(tmp / "x3.npy", np.zeros((3, 32, 32), np.float32))
    return tmp


@pytest.mark.parametrize("args, message", ONE_LINE, ids=[
    f"{i}-{args[0]}" for i, (args, _) in enumerate(ONE_LINE)])
def test_user_error_is_one_line(user_files, args, message):
    """Every user error: exit status 2 and one line naming the file (line and column where
    the parser gives them), the option or the parameter, and what is allowed."""
    r = podium(*args, cwd=user_files)
    assert r.returncode == 2 and r.stdout == "", r.stdout + r.stderr
    assert r.stderr == f"podium: error: {message.replace('{tmp}', str(user_files))}\n"


def test_demo_refuses_a_bad_config_in_one_line(user_files):
    r = subprocess.run([sys.executable, "-m", "sim.demo", "--config", "mxu.json"],
                       cwd=user_files, capture_output=True, text=True, timeout=300,
                       env={"PYTHONPATH": ROOT})
    assert r.returncode == 2 and r.stderr == ("make demo: error: mxu.json: block must be "
                                              "'chip' (the block asked for), got 'mxu'\n")


def test_argument_errors_are_one_line():
    r = podium("generate", "mxu", cwd=ROOT)
    assert r.returncode == 2
    assert r.stderr == ("podium generate: error: the following arguments are required: "
                        "-o/--out (see podium generate --help)\n")


def test_output_file_directory_is_made(tmp_path):
    """An output file's missing directories are made (as ``generate -o`` makes its
    directory): ``podium compile ... -o build/gemm.json`` works in a fresh clone."""
    r = podium("compile", "gemm", "--m", 8, "--k", 16, "--n", 8, "-o", "new/dir/g.json",
               cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "new" / "dir" / "g.json").read_text())["words"]
