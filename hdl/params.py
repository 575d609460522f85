"""Validation of generator parameters.

Every configuration object in ``hdl`` checks its fields with these helpers, so an invalid
configuration is refused in Python with a message naming the parameter and what it allows.
"""

from dataclasses import asdict

__all__ = ["check_int", "check_choice", "check_bool", "ConfigDict"]


def check_int(name, value, lo, hi=None):
    """Return ``value`` if it is an int in ``lo..hi`` (``hi=None``: unbounded), else raise."""
    allowed = f"an integer in {lo}..{hi}" if hi is not None else f"an integer >= {lo}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        raise ValueError(f"{name} must be {allowed}, got {value}")
    return value


def check_choice(name, value, allowed):
    """Return ``value`` if it is one of ``allowed``, else raise."""
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def check_bool(name, value):
    """Return ``value`` if it is a bool, else raise."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


class ConfigDict:
    """Mixin for the frozen dataclass configurations: a round trip through plain dicts (JSON
    configuration files, sidecars) that refuses unknown parameters by name. ``KIND`` names the
    configuration in messages."""

    KIND = "configuration"

    def to_dict(self):
        return asdict(self)

    @classmethod
    def from_dict(cls, d):
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown {cls.KIND} parameter(s): {', '.join(sorted(unknown))}; "
                             f"allowed: {', '.join(cls.__dataclass_fields__)}")
        return cls(**d)
