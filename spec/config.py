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
* derived parameters: a field that defaults to ``None`` meaning "what the other parameters
  imply" (the TensorCore's ``row_bytes``, the HBM ``speed``) is filled in by ``validate()``
  with :meth:`Config.derive`, so the configuration (and its dict, digest and Verilog) is the
  same as with that value given; ``replace()`` derives it again unless it is changed;
* ``replace(**changes)``, and a round trip through plain dicts (``to_dict`` / ``from_dict``)
  for JSON configuration files and sidecars, refusing unknown parameters by name.
"""

import dataclasses
import functools
import hashlib
import inspect
import json
import types
import typing

__all__ = ["Config", "ConfigError", "check_int", "check_choice", "check_bool", "check",
           "check_keys", "set_path", "parse_assignment"]


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


def check_keys(name, given, allowed, what="key(s)"):
    """Refuse keys of mapping ``given`` that are not in ``allowed``, naming them and the
    allowed ones: ``<name>: unknown <what>: <keys>; allowed: <allowed>``."""
    unknown = [key for key in given if key not in allowed]
    if unknown:
        raise ConfigError(name, f"unknown {what}: {', '.join(map(str, unknown))}; allowed: "
                                f"{', '.join(allowed)}")


def set_path(params, path, value):
    """Set ``value`` at dotted ``path`` (``tensorcore.mxu.rows``) in the nested parameter
    dicts ``params``, making the dicts on the way as needed."""
    *outer, last = path.split(".")
    for part in outer:
        if not isinstance(params.get(part), dict):
            params[part] = {}
        params = params[part]
    params[last] = value


def parse_assignment(text, option, kind=None):
    """``PATH=VALUE`` (the argument of command-line ``option``) as ``(path, value)``: the
    value parsed as JSON, else the text itself (``fmt=bfloat16`` gives the string); with
    ``kind`` (a function of the path giving the parameter's type), a string parameter takes
    the text as it is (``speed=2000`` gives ``"2000"``)."""
    path, sep, value = text.partition("=")
    if not sep or not path:
        raise ConfigError(option, f"must be PATH=VALUE, got {text!r}")
    if kind is not None and kind(path) in (str, str | None):
        return path, value
    try:
        return path, json.loads(value)
    except json.JSONDecodeError:
        return path, value


def _is_config(kind):
    return isinstance(kind, type) and issubclass(kind, Config)


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
        object.__setattr__(self, "_derived", frozenset())
        self.validate()

    @property
    def derived(self):
        """The names of the parameters this configuration derived (given as None)."""
        return self._derived

    def derive(self, name, value):
        """Give derived parameter ``name`` (left ``None``) ``value``, from ``validate()`` once
        the parameters it depends on are checked; ``replace()`` derives it again."""
        object.__setattr__(self, name, value)
        object.__setattr__(self, "_derived", self._derived | {name})

    def validate(self):
        """Check every field; raise :class:`ConfigError` naming the first bad one."""

    @classmethod
    def field_config(cls, name):
        """The configuration class that parameter ``name`` holds (or may hold: ``X | None``),
        else None."""
        kind = cls._field_kinds()[name]
        kind = _optional_config(kind) or kind
        return kind if _is_config(kind) else None

    @classmethod
    def check_path(cls, path):
        """The type of the parameter at dotted ``path`` (``tensorcore.mxu.rows``); refuse a
        path that names no parameter, naming where it goes wrong and the parameters allowed
        there."""
        config, parts = cls, path.split(".")
        for i, part in enumerate(parts):
            names = [f.name for f in dataclasses.fields(config)]
            where = ".".join(parts[:i + 1])
            if part not in names:
                raise ConfigError(where, f"unknown {config.KIND} parameter; allowed: "
                                         f"{', '.join(names)}")
            kind = typing.get_type_hints(config)[part]
            config = config.field_config(part)
            if i < len(parts) - 1 and config is None:
                raise ConfigError(where, f"must be a nested configuration to hold "
                                         f"{'.'.join(parts[i + 1:])}; it is a value")
        return kind

    @classmethod
    def parameter_docs(cls):
        """Parameter name -> its description in the ``Parameters`` section of the class
        docstring (numpydoc: ``name : type`` lines, or ``a, b : type``, then indented text)."""
        lines = inspect.cleandoc(cls.__doc__ or "").splitlines()
        docs, names, inside = {}, [], False
        for i, line in enumerate(lines):
            if line == "Parameters" and i + 1 < len(lines) and lines[i + 1].startswith("---"):
                inside = True
            elif inside and line and not line[0].isspace() and not line.startswith("---"):
                if " : " not in line:
                    break
                names = [n.strip() for n in line.split(" : ")[0].split(",")]
                docs.update({n: "" for n in names})
            elif inside and line.strip():
                for n in names:
                    docs[n] = f"{docs[n]} {line.strip()}".strip()
        return docs

    @classmethod
    @functools.cache
    def _field_kinds(cls):
        """Parameter name -> its type (a configuration class, or the origin of a generic
        hint), worked out once per class: ``typing.get_type_hints`` evaluates every annotation
        each call."""
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
        """A copy with ``changes`` applied (and validated); derived parameters not changed are
        derived again."""
        return dataclasses.replace(self, **{**dict.fromkeys(self._derived), **changes})

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
        if not isinstance(d, dict):
            raise ConfigError("", f"must be a mapping of {cls.KIND} parameters, got {d!r}")
        check_keys("", d, [f.name for f in dataclasses.fields(cls)], f"{cls.KIND} parameter(s)")
        return cls(**d)
