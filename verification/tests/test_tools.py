"""``podium asm``, ``disasm``, ``compile`` and ``run`` end to end in a subprocess."""

import json
import subprocess
import sys

import pytest

from podium.asm import assemble
from podium.program import Program

ROOT = __file__.rsplit("/verification/", 1)[0]


def podium(*args, cwd):
    return subprocess.run([sys.executable, "-m", "sim.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, env={"PYTHONPATH": ROOT},
                          timeout=300)


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
    assert r.returncode == 2 and "line 2: bad register 'r99'" in r.stderr


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


@pytest.mark.parametrize("args, message", [
    (("compile", "gemm", "--m", 4, "-o", "x.json"), "compile gemm needs --k, --n"),
    (("compile", "gemm", "--m", 0, "--k", 1, "--n", 1, "-o", "x.json"),
     "M must be an integer in 1..65535, got 0"),
    (("compile", "gemm", "--m", 1, "--k", 1, "--n", 1, "--config", '{"vmem_banks": 3}',
      "-o", "x.json"), "vmem_banks must be one of"),
    (("compile", "mlp", "-o", "x.json"), "compile mlp needs --layers"),
    (("run", "missing.json"), "No such file"),
])
def test_cli_errors(tmp_path, args, message):
    r = podium(*args, cwd=tmp_path)
    assert r.returncode == 2 and message in r.stderr, r.stderr
