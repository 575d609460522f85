"""The floors hold (sim/floors.py): no import points up a floor, the RTL and the golden models
never read each other, RTL blocks import only blocks of lower rank, and docs/architecture.md
shows the table the imports give. The checker itself is shown to fail on each kind of bad
import."""

import pytest

from sim.floors import ROOT, violations, write_table


def test_imports_point_down():
    bad = violations()
    assert not bad, "imports that break the floors:\n" + "\n".join(f"{i}: {w}" for i, w in bad)


def test_architecture_doc_shows_the_floors():
    doc = ROOT / "docs" / "architecture.md"
    assert doc.read_text() == write_table(doc), \
        "docs/architecture.md's floor table is stale: python -m sim.floors --write"


@pytest.mark.parametrize("path, text, reason", [
    ("spec/bad.py", "import hdl.chip\n", "points up: spec -> RTL"),
    ("verification/models/bad.py", "from hdl.ici import router\n",
     "golden models must not read RTL"),
    ("hdl/bad_model.py", "from verification.models import mxu\n",
     "points up: RTL -> golden models"),
    ("podium/bad_rtl.py", "from hdl.mxu import unit\n", "software must not read RTL"),
    ("podium/bad.py", "from sim import runner\n", "points up: software -> top"),
    ("verification/tb/bad.py", "from hdl.chip import Chip\n",
     "testbenches must not read RTL"),
    ("hdl/mxu/bad.py", "from ..hbm import controller\n",
     "points sideways between RTL blocks: mxu -> hbm"),
    ("hdl/lib/bad.py", "from ..chip import Chip\n", "points up between RTL blocks: lib -> chip"),
    ("verification/models/bad2.py", "import amaranth\n",
     "the golden models floor does not import amaranth"),
])
def test_checker_flags(tmp_path, path, text, reason):
    """A tree holding one bad import is flagged, with the file, the line and the reason."""
    for package in ("spec", "hdl/mxu", "hdl/lib", "verification/models", "verification/tb",
                    "podium", "sim", "verification/tests"):
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
    (tmp_path / path).write_text("\n" + text)
    bad = violations(tmp_path)
    assert len(bad) == 1, bad
    imp, why = bad[0]
    assert (imp.path, imp.line) == (path, 2)
    assert reason in why, why
