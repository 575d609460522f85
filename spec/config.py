"""The one configuration base of every generator block, and the checks its fields use.

A block's parameters are a frozen dataclass deriving from :class:`Config`. The base gives every
configuration the same behaviour:

* validation on construction (``validate()``), refusing a bad value with a
  :class:`ConfigError` that names the parameter and what it allows;
* nesting: a field whose type is a :class:`Config` holds a sub-configuration (the chip holds an
  MXU, an HBM and an ICI configuration); a dict given for it is converted, and an error inside
  it names the full path (``chip.hbm.queue_depth must be an integer in 2..64, got 100``);
* optional sub-configurations (a field typed ``SubConfig | None``, default ``None``: a block
  the configuration may leave out, such as the chip's SparseCore);
* tuple fields (``dims``, ``wrap``) that accept lists, as JSON gives them;
* ``replace(**changes)``, and a round trip through plain dicts (``to_dict`` / ``from_dict``)
  for JSON configuration files and sidecars, refusing unknown parameters by name.
"""

import dataclasses
import hashlib
import json
import types
import typing

__all__ = ["Config", "ConfigError", "check_int", "check_choice", "check_bool", "check"]


class ConfigError(ValueError):
    """An invalid parameter: ``path`` names it (dotted for nested configurations)."""

    def __init__(self, path, message):
        self.path = path
        self.message = message
        joint = " " if message.startswith("must") else ": "
        super().__init__(f"{path}{joint}{message}" if path else message)

    def within(self, prefix):
        """The same error seen from the configuration that holds this one as ``prefix``."""
        return ConfigError(f"{prefix}.{self.path}" if self.path else prefix, self.message)


def check(name, ok, allowed, value):
    """Raise unless ``ok``: ``<name> must be <allowed>, got <value>``."""
    if not ok:
        raise ConfigError(name, f"must be {allowed}, got {value!r}")


def check_int(name, value, lo, hi=None):
    """Return ``value`` if it is an int in ``lo..hi`` (``hi=None``: unbounded), else raise."""
    allowed = f"an integer in {lo}..{hi}" if hi is not None else f"an integer >= {lo}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(name, f"must be {allowed}, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        raise ConfigError(name, f"must be {allowed}, got {value}")
    return value


def check_choice(name, value, allowed):
    """Return ``value`` if it is one of ``allowed``, else raise."""
    allowed = tuple(allowed)
    bools = [isinstance(a, bool) for a in allowed]
    if value not in allowed or (isinstance(value, bool) and not any(bools)):
        choices = ", ".join(repr(a) for a in allowed)
        raise ConfigError(name, f"must be one of {choices}, got {value!r}")
    return value


def check_bool(name, value):
    """Return ``value`` if it is a bool, else raise."""
    if not isinstance(value, bool):
        raise ConfigError(name, f"must be True or False, got {value!r}")
    return value


def _optional_config(kind):
    """The Config class of an ``X | None`` field type, else None."""
    if typing.get_origin(kind) not in (typing.Union, types.UnionType):
        return None
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if len(args) == 1 and isinstance(args[0], type) and issubclass(args[0], Config):
        return args[0]
    return None


class Config:
    """Base of the frozen dataclass configurations (see the module docstring).

    Subclasses are ``@dataclass(frozen=True)`` and override :meth:`validate`; ``KIND`` names the
    configuration in messages about unknown parameters.
    """

    KIND = "configuration"

    def __post_init__(self):
        for name, kind in self._field_kinds().items():
            value = getattr(self, name)
            optional = _optional_config(kind)
            if optional is not None:
                if value is None:
                    continue
                kind = optional
            if kind is tuple and isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
            elif kind is tuple and not isinstance(value, tuple):
                raise ConfigError(name, f"must be a list, got {value!r}")
            elif isinstance(kind, type) and issubclass(kind, Config):
                if isinstance(value, dict):
                    try:
                        value = kind.from_dict(value)
                    except ConfigError as e:
                        raise e.within(name) from None
                    object.__setattr__(self, name, value)
                elif not isinstance(value, kind):
                    raise ConfigError(name, f"must be a {kind.__name__} or a dict, "
                                            f"got {value!r}")
        self.validate()

    def validate(self):
        """Check every field; raise :class:`ConfigError` naming the first bad one."""

    @classmethod
    def _field_kinds(cls):
        hints = typing.get_type_hints(cls)
        kinds = {}
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            kinds[f.name] = hint if _optional_config(hint) else (typing.get_origin(hint) or hint)
        return kinds

    def digest(self):
        """Eight hex digits of a hash of every parameter: what tells apart the Verilog modules
        of two configurations with the same name otherwise."""
        text = json.dumps(self.to_dict(), sort_keys=True).encode()
        return hashlib.sha256(text).hexdigest()[:8]

    def replace(self, **changes):
        """A copy with ``changes`` applied (and validated)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        """Plain JSON-able dict: tuples as lists, nested configurations as dicts."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Config):
                value = value.to_dict()
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, d):
        """The configuration of a dict (as :meth:`to_dict` gives), validated."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = set(d) - set(names)
        if unknown:
            raise ConfigError("", f"unknown {cls.KIND} parameter(s): "
                                  f"{', '.join(sorted(unknown))}; allowed: {', '.join(names)}")
        return cls(**d)
