"""The repository is self-contained: no tracked file links, imports or cites a path outside it.

Scans every file ``git ls-files`` lists (text files only) for paths that climb out of the
checkout into a sibling ``shared`` directory or name an absolute path of the machine it was
made on (under /work, /home, ...), and every relative Markdown link for a target outside the
root or missing. Results pages count: a JSON that records a machine's path is as unportable
as a link.
"""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Absolute paths of a particular machine or checkout; /tmp is allowed in prose (examples).
ABSOLUTE = re.compile(r"(?<![\w.])/(?:work|home|Users|root|mnt|scratch)/[\w.-]+")
OUTSIDE = re.compile(r"\.\./shared\b")
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
SKIP_SUFFIXES = {".png", ".jpg", ".svg", ".gz", ".npy", ".fst", ".vcd", ".zip"}


def _tracked():
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.fail(f"git ls-files failed in {ROOT}: {err}")
    files = [ROOT / name for name in out.decode().split("\0") if name]
    assert files, "git ls-files listed no files"
    return files


def _texts():
    for path in _tracked():
        if path.suffix in SKIP_SUFFIXES or not path.is_file():
            continue
        try:
            yield path, path.read_text()
        except UnicodeDecodeError:
            continue


def outside_references(path, text):
    """(line, what) for each reference in ``text`` (the file ``path``) to a place outside
    the repository."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for m in OUTSIDE.finditer(line):
            found.append((number, m.group(0)))
        for m in ABSOLUTE.finditer(line):
            found.append((number, m.group(0)))
        if path.suffix == ".md":
            for m in LINK.finditer(line):
                target = m.group(1).split("#")[0]
                if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # an anchor or a URL
                resolved = (path.parent / target).resolve()
                if ROOT not in resolved.parents and resolved != ROOT:
                    found.append((number, f"link {target} leaves the repository"))
                elif not resolved.exists():
                    found.append((number, f"link {target} does not exist"))
    return found


def test_detector_finds_outside_references(tmp_path):
    """The scan itself catches each kind (so an empty result below means something)."""
    doc = ROOT / "docs" / "example.md"
    up, machine = "../" + "shared", "/" + "work/wt-x"  # split: this file is scanned too
    text = (f"see {up}/reference/hbm.md\n[a](../../elsewhere.md) [b](missing.md)\n"
            "[c](https://example.org/x) [d](#anchor) [e](results/ici.md)\n"
            f'"trace": "{machine}/build/a.trace"\n')
    found = outside_references(doc, text)
    assert [n for n, _ in found] == [1, 2, 2, 4], found
    assert "leaves the repository" in found[1][1] and "does not exist" in found[2][1]


def test_no_reference_outside_the_repository():
    bad = [f"{path.relative_to(ROOT)}:{n}: {what}"
           for path, text in _texts() for n, what in outside_references(path, text)]
    assert not bad, "references outside the repository:\n" + "\n".join(bad)
