"""The simulation runner's verdicts (sim/runner.py): a cocotb test that was skipped is reported
as skipped, never as passed; a failed one fails the run; a simulator that exits with an error
fails the run although every test passed. The cocotb runner is replaced by one that writes a
given JUnit results file and exits as told, so no simulator is needed."""

from types import SimpleNamespace

import pytest

from sim import runner

_CASE = {"passed": "", "failed": "<failure message='boom'/>", "skipped": "<skipped/>"}


def _fake(outcomes, exit_code=0):
    """A cocotb runner whose ``test`` writes ``outcomes`` (name -> passed / failed / skipped)
    as its results file, then exits with ``exit_code`` as the cocotb runner does."""

    class Fake:
        def test(self, *, results_xml, **_):
            cases = "".join(f"<testcase name='{n}'>{_CASE[o]}</testcase>"
                            for n, o in outcomes.items())
            with open(results_xml, "w") as f:
                f.write(f"<testsuites><testsuite>{cases}</testsuite></testsuites>")
            if exit_code:
                raise SystemExit(exit_code)

    return Fake()


def _run(tmp_path, monkeypatch, outcomes, exit_code=0):
    monkeypatch.setattr("cocotb_tools.runner.get_runner", lambda sim: _fake(outcomes, exit_code))
    built = SimpleNamespace(sim="verilator", design=SimpleNamespace(name="top"),
                            directory=tmp_path, sidecar_path=tmp_path / "top.json", waves=False)
    return runner.run(built, "tb", test_dir=tmp_path / "run", seed=1)


def test_skips_are_not_passes(tmp_path, monkeypatch):
    passed, skipped = _run(tmp_path, monkeypatch, {"a": "passed", "b": "skipped"})
    assert (passed, skipped) == (["a"], ["b"])


def test_failures_fail(tmp_path, monkeypatch):
    with pytest.raises(AssertionError, match="1 of 2 cocotb tests failed .*: b"):
        _run(tmp_path, monkeypatch, {"a": "passed", "b": "failed"}, exit_code=1)


def test_simulator_exit_code_fails(tmp_path, monkeypatch):
    with pytest.raises(RuntimeError, match="the simulator exited with code 3"):
        _run(tmp_path, monkeypatch, {"a": "passed"}, exit_code=3)
