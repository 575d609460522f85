"""The object a compiler emits and a runner loads: instruction words, the HBM initial image,
where each input and output tensor lives in HBM, the chip configuration it was compiled for,
and free-form metadata. ``save`` / ``load`` keep it in a JSON file (``podium compile -o``).

A tensor in HBM is a 2-D array stored row by row from ``address``, each row ``row_bytes``
apart (a multiple of the AXI beat, so every DMA is aligned); the bytes of a row past its
``shape[1]`` elements are padding, written as zeros by :meth:`Program.image`.
"""

import base64
import json
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from spec.config import ConfigError, check, check_choice, check_int, check_keys
from spec.files import in_file, load_json, write_text
from spec.tensorcore import TensorCoreConfig

__all__ = ["Tensor", "Program", "DTYPES", "FORMAT", "SEGMENT_HBM"]

SEGMENT_HBM = "segment.hbm"
"""The output of a segment (:meth:`Program.segments`) that is the whole of HBM."""

FORMAT = "podium-program"
DTYPES = {"int8": np.int8, "int32": np.int32, "float32": np.float32,
          "bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
          "float8_e5m2": ml_dtypes.float8_e5m2}
"""Element types of tensors, by name."""
KEYS = ("format", "version", "config", "hbm_capacity", "words", "hbm", "inputs", "outputs",
        "metadata")
"""The keys of a program file, every one required."""
TENSOR_KEYS = ("address", "shape", "dtype", "row_bytes")
"""The keys of a tensor in a program file."""


@dataclass(frozen=True)
class Tensor:
    """A ``shape[0] x shape[1]`` array of ``dtype`` at HBM ``address``, rows ``row_bytes``
    apart."""

    address: int
    shape: tuple
    dtype: str
    row_bytes: int

    @property
    def itemsize(self):
        return np.dtype(DTYPES[self.dtype]).itemsize

    @property
    def nbytes(self):
        return self.shape[0] * self.row_bytes

    def pack(self, array):
        """The bytes of ``array`` in this layout, padding zero."""
        array = np.asarray(array)
        if array.shape != tuple(self.shape):
            raise ValueError(f"array of shape {array.shape} given for a tensor of shape "
                             f"{tuple(self.shape)}")
        out = np.zeros((self.shape[0], self.row_bytes), dtype=np.uint8)
        raw = np.ascontiguousarray(array.astype(DTYPES[self.dtype])).view(np.uint8)
        raw = raw.reshape(self.shape[0], -1)
        out[:, :raw.shape[1]] = raw
        return out.tobytes()

    def unpack(self, data):
        """The array held by ``data``, the bytes of this tensor's HBM range."""
        rows = np.frombuffer(data, dtype=np.uint8).reshape(self.shape[0], self.row_bytes)
        width = self.shape[1] * self.itemsize
        return rows[:, :width].copy().view(DTYPES[self.dtype])

    def to_dict(self):
        return dict(zip(TENSOR_KEYS, (self.address, list(self.shape), self.dtype,
                                      self.row_bytes), strict=True))


@dataclass
class Program:
    """A compiled TensorCore program.

    Parameters
    ----------
    words : list of int
        The instruction words, loaded at instruction 0.
    config : TensorCoreConfig
        The configuration it was compiled for.
    hbm_capacity : int
        Bytes of HBM it needs (every tensor and constant lies below).
    hbm : dict
        Initial HBM contents besides the inputs: address -> bytes (weights, constants).
    inputs, outputs : dict
        Name -> :class:`Tensor`.
    metadata : dict
        JSON-able facts about the program (what it computes, tiling, reference data).
    """

    words: list
    config: TensorCoreConfig
    hbm_capacity: int
    hbm: dict = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)
    outputs: dict = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)

    def image(self, inputs):
        """HBM contents to load before a run: the constants and ``inputs`` (name -> array,
        every input of the program) packed in their layouts."""
        missing = set(self.inputs) - set(inputs)
        extra = set(inputs) - set(self.inputs)
        if missing or extra:
            raise ValueError(f"inputs must be exactly {sorted(self.inputs)}; missing "
                             f"{sorted(missing)}, unknown {sorted(extra)}")
        image = dict(self.hbm)
        for name, tensor in self.inputs.items():
            image[tensor.address] = tensor.pack(inputs[name])
        return image

    def bind(self, **arrays):
        """Make inputs constants: pack each named input into the HBM image and drop it
        from ``inputs``."""
        for name, array in arrays.items():
            if name not in self.inputs:
                raise ValueError(f"{name!r} is not an input; inputs: {sorted(self.inputs)}")
            tensor = self.inputs.pop(name)
            self.hbm[tensor.address] = tensor.pack(array)

    def read_outputs(self, read):
        """Name -> array of every output, with ``read(address, length)`` returning HBM
        bytes after a run."""
        return {name: t.unpack(read(t.address, t.nbytes)) for name, t in self.outputs.items()}

    def segments(self):
        """The programs the host runs one after another (docs/jax.md, "Segments"): with
        ``metadata["segments"]`` (the segments' lengths in words, a program longer than
        the instruction memory) one per segment, its own words, this program's tensors and
        HBM image; else ``[self]``."""
        sizes = self.metadata.get("segments")
        if not sizes:
            return [self]
        # every segment reads back the whole HBM (an output of it): the next one's image
        rb = self.config.row_bytes
        rows = -(-self.hbm_capacity // rb)
        outputs = {**self.outputs, SEGMENT_HBM: Tensor(0, (rows, rb), "int8", rb)}
        if sum(sizes) != len(self.words) or min(sizes) < 1:
            raise ConfigError("metadata.segments", f"must be lengths adding up to the "
                                                   f"{len(self.words)} words, got {sizes}")
        meta = {k: v for k, v in self.metadata.items() if k not in ("segments", "assembly")}
        out, at = [], 0
        for k, n in enumerate(sizes):
            out.append(Program(words=self.words[at:at + n], config=self.config,
                               hbm_capacity=rows * rb, hbm=self.hbm,
                               inputs=self.inputs, outputs=outputs,
                               metadata={**meta, "segment": k}))
            at += n
        return out

    def to_dict(self):
        return {
            "format": FORMAT, "version": 1, "config": self.config.to_dict(),
            "hbm_capacity": self.hbm_capacity,
            "words": [f"{w:#018x}" for w in self.words],
            "hbm": [{"address": a, "data": base64.b64encode(bytes(d)).decode()}
                    for a, d in sorted(self.hbm.items())],
            "inputs": {n: t.to_dict() for n, t in self.inputs.items()},
            "outputs": {n: t.to_dict() for n, t in self.outputs.items()},
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, d):
        """The program of a dict as :meth:`to_dict` gives; a ``ConfigError`` names what is
        wrong by its path in the dict (``words[3]``, ``inputs.A.shape``)."""
        check("", isinstance(d, dict), f"a JSON object of a {FORMAT} file", d)
        check_keys("", d, KEYS)
        if d.get("format") != FORMAT or d.get("version") != 1:
            raise ConfigError("format", f"must be {FORMAT!r} with version 1, got "
                                        f"{d.get('format')!r} version {d.get('version')!r}")
        missing = [k for k in KEYS if k not in d]
        check("", not missing, f"a {FORMAT} file with {', '.join(KEYS)}",
              f"no {', '.join(missing)}")
        try:
            config = TensorCoreConfig.from_dict(d["config"])
        except ConfigError as e:
            raise e.within("config") from None
        check_int("hbm_capacity", d["hbm_capacity"], 1, 1 << 32)
        for name in ("words", "hbm"):
            check(name, isinstance(d[name], list), "a list", d[name])
        for name in ("inputs", "outputs", "metadata"):
            check(name, isinstance(d[name], dict), "a mapping", d[name])
        return cls(words=[_word(f"words[{i}]", w) for i, w in enumerate(d["words"])],
                   config=config, hbm_capacity=d["hbm_capacity"],
                   hbm=dict(_hbm_entry(f"hbm[{i}]", e) for i, e in enumerate(d["hbm"])),
                   inputs={n: _tensor(f"inputs.{n}", t) for n, t in d["inputs"].items()},
                   outputs={n: _tensor(f"outputs.{n}", t) for n, t in d["outputs"].items()},
                   metadata=d["metadata"])

    def save(self, path):
        write_text(path, json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path):
        """The program in file ``path``; errors name the file."""
        d = load_json(path)
        with in_file(path):
            return cls.from_dict(d)


def _word(where, text):
    try:
        word = int(text, 16) if isinstance(text, str) else None
    except ValueError:
        word = None
    check(where, word is not None and 0 <= word < 1 << 64,
          "a 64-bit word in hex, such as '0x0000000000000000'", text)
    return word


def _hbm_entry(where, entry):
    check(where, isinstance(entry, dict), "a mapping with address and data", entry)
    check_keys(where, entry, ("address", "data"))
    check_int(f"{where}.address", entry.get("address"), 0)
    try:
        data = base64.b64decode(entry.get("data"), validate=True)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}.data", f"must be base64 text, got "
                                           f"{entry.get('data')!r:.40}") from None
    return entry["address"], data


def _tensor(where, t):
    check(where, isinstance(t, dict), "a mapping with address, shape, dtype and row_bytes", t)
    check_keys(where, t, TENSOR_KEYS)
    check_int(f"{where}.address", t.get("address"), 0)
    shape = t.get("shape")
    check(f"{where}.shape", isinstance(shape, list) and len(shape) == 2 and all(
        isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape),
        "two positive integers", shape)
    check_choice(f"{where}.dtype", t.get("dtype"), tuple(DTYPES))
    itemsize = np.dtype(DTYPES[t["dtype"]]).itemsize
    check_int(f"{where}.row_bytes", t.get("row_bytes"), shape[1] * itemsize)
    return Tensor(t["address"], tuple(shape), t["dtype"], t["row_bytes"])

