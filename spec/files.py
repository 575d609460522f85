"""The user's files: reading JSON and YAML, and checking where output will go, with errors of
one line that name the file, the position the parser gives (line and column, from 1) and what
was expected.

Every ``podium`` command reads and writes the user's files through these; a
:class:`FileError` (a ``ValueError``) is printed by the command line as
``podium: error: <file>:<line>:<column>: <what>`` with exit status 2 (sim/cli.py).
"""

import contextlib
import json
import os
from pathlib import Path

from .config import ConfigError

__all__ = ["FileError", "read_text", "parse_json", "load_json", "load_yaml", "load_data",
           "in_file", "check_output_dir", "check_output_file", "write_text"]


class FileError(ValueError):
    """A file that cannot be read, parsed or written, or whose contents are refused: the
    message starts with the file's name, then the line and column when known."""

    def __init__(self, path, message, line=None, column=None):
        self.path, self.line, self.column = str(path), line, column
        where = ":".join(str(p) for p in (path, line, column) if p is not None)
        super().__init__(f"{where}: {message}")


def read_text(path):
    """The text of file ``path``."""
    try:
        return Path(path).read_text()
    except UnicodeDecodeError:
        raise FileError(path, "cannot read: not a UTF-8 text file") from None
    except OSError as e:
        raise FileError(path, f"cannot read: {e.strerror or e}") from None


def parse_json(text, name):
    """The value of JSON ``text``; ``name`` is what errors call it (a file, an option)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise FileError(name, f"malformed JSON: {e.msg[0].lower()}{e.msg[1:]}", e.lineno,
                        e.colno) from None


def load_json(path):
    """The value held by JSON file ``path``."""
    return parse_json(read_text(path), path)


def load_yaml(path):
    """The value held by YAML file ``path``."""
    import yaml

    text = read_text(path)
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        what = e.problem or e.context
        if e.context and e.problem:
            what = f"{e.problem} ({e.context})"
        raise FileError(path, f"malformed YAML: {what}", mark.line + 1,
                        mark.column + 1) from None
    except yaml.YAMLError as e:
        raise FileError(path, f"malformed YAML: {e}") from None


def load_data(path):
    """The value held by ``path``: JSON for ``.json``, YAML otherwise."""
    return load_json(path) if str(path).endswith(".json") else load_yaml(path)


@contextlib.contextmanager
def in_file(path):
    """A :class:`ConfigError` raised inside about the contents of file ``path`` becomes a
    :class:`FileError` naming the file (``mxu.json: mxu.rows must be ...``)."""
    try:
        yield
    except ConfigError as e:
        raise FileError(path, str(e)) from None


def _check_parent(path, made):
    """The directory ``path`` goes in must be writable: the nearest existing one above it
    when ``made`` (created on writing), else its parent, which must exist."""
    parent = Path(path).absolute().parent
    while made and not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise FileError(path, f"cannot write: {parent} {what}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise FileError(path, f"cannot write: permission denied in {parent}")


def check_output_dir(path):
    """Make output directory ``path`` (and its parents) if missing, before any work is done;
    refuse one that cannot be made or written."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise FileError(path, "cannot write: it exists and is not a directory")
    _check_parent(p, made=True)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise FileError(path, f"cannot make the directory: {e.strerror or e}") from None
    if not os.access(p, os.W_OK | os.X_OK):
        raise FileError(path, "cannot write: permission denied")


def write_text(path, text):
    """Write ``text`` to file ``path``, making its directory (and parents) if missing."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    except OSError as e:
        raise FileError(path, f"cannot write: {e.strerror or e}") from None


def check_output_file(path):
    """Refuse an output file that cannot be written (its directory is made on writing if
    missing, as an output directory is), before any work is done."""
    p = Path(path)
    if p.is_dir():
        raise FileError(path, "cannot write: it is a directory")
    if p.exists():
        if not os.access(p, os.W_OK):
            raise FileError(path, "cannot write: permission denied")
    else:
        _check_parent(p, made=True)
