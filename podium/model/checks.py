"""Validation of the model's configuration objects.

Every parameter is checked on construction; a bad value raises ``ValueError`` naming its full
path (``chip.hbm_bandwidth``) and the allowed range. Integers and choices use the generator's
helpers (``hdl.config``); this module adds real numbers, tuples and mappings.
"""

import math
from numbers import Real

from spec.config import check_bool, check_choice, check_int

__all__ = ["check_number", "check_int", "check_choice", "check_bool", "check_dims",
           "check_mapping"]


def _bound(lo, hi, lo_open, hi_open):
    if hi is None:
        return f"{'>' if lo_open else '>='} {lo:g}"
    if lo is None:
        return f"{'<' if hi_open else '<='} {hi:g}"
    return f"in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"


def check_number(name, value, *, lo=None, hi=None, lo_open=False, hi_open=False):
    """Return ``value`` as a float if it is a finite real number within the bounds (open or
    closed at each end, ``None``: unbounded), else raise naming ``name`` and the range."""
    allowed = _bound(lo, hi, lo_open, hi_open)
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number {allowed}, got {value!r}")
    if ((lo is not None and (value < lo or (lo_open and value == lo)))
            or (hi is not None and (value > hi or (hi_open and value == hi)))):
        raise ValueError(f"{name} must be {allowed}, got {value:g}")
    return float(value)


def check_dims(name, value, *, lo=1, hi=64, max_len=3):
    """Return ``value`` as a tuple of 1..``max_len`` integers, each in ``lo..hi``."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise ValueError(f"{name} must be a list of 1 to {max_len} integers, got {value!r}")
    dims = tuple(value)
    if not 1 <= len(dims) <= max_len:
        raise ValueError(f"{name} must have 1 to {max_len} entries, got {len(dims)}")
    for i, k in enumerate(dims):
        check_int(f"{name}[{i}]", k, lo, hi)
    return dims


def check_mapping(name, value, check_value):
    """Return ``value`` as a dict of non-empty string keys whose values pass
    ``check_value(path, value)``; at least one entry."""
    if not isinstance(value, dict) or not value:
        raise ValueError(f"{name} must be a non-empty mapping, got {value!r}")
    out = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"{name} keys must be non-empty strings, got {key!r}")
        out[key] = check_value(f"{name}.{key}", item)
    return out
