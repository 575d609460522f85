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

from spec.tensorcore import TensorCoreConfig

__all__ = ["Tensor", "Program", "DTYPES", "FORMAT"]

FORMAT = "podium-program"
DTYPES = {"int8": np.int8, "int32": np.int32, "float32": np.float32,
          "bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
          "float8_e5m2": ml_dtypes.float8_e5m2}
"""Element types of tensors, by name."""


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
        return {"address": self.address, "shape": list(self.shape), "dtype": self.dtype,
                "row_bytes": self.row_bytes}


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
        if d.get("format") != FORMAT or d.get("version") != 1:
            raise ValueError(f"not a {FORMAT} version 1 file")

        def tensors(items):
            return {n: Tensor(t["address"], tuple(t["shape"]), t["dtype"], t["row_bytes"])
                    for n, t in items.items()}

        return cls(words=[int(w, 16) for w in d["words"]],
                   config=TensorCoreConfig.from_dict(d["config"]),
                   hbm_capacity=d["hbm_capacity"],
                   hbm={e["address"]: base64.b64decode(e["data"]) for e in d["hbm"]},
                   inputs=tensors(d["inputs"]), outputs=tensors(d["outputs"]),
                   metadata=d["metadata"])

    def save(self, path):
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=1)
            f.write("\n")

    @classmethod
    def load(cls, path):
        with open(path) as f:
            return cls.from_dict(json.load(f))
