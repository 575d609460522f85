"""Hardware descriptions of the performance model: a chip, a slice (one torus of chips), a
system of slices joined over the data-center network (DCN), the efficiency terms that turn
datasheet peaks into achievable rates, and the published presets.

Every preset number carries its source in ``sources``. Where Google's pages disagree the
preset says which figure it uses. The figures quoted here are from the Cloud TPU pages
(https://cloud.google.com/tpu/docs/<version>), the TPU v4 paper (arXiv 2304.01433), the JAX
scaling book ("How to Scale Your Model", https://jax-ml.github.io/scaling-book/) and Google
Cloud's Trillium blog (December 2024).
"""

import math
from dataclasses import dataclass, field

from .checks import check_bool, check_dims, check_int, check_mapping, check_number

__all__ = ["Chip", "Slice", "Efficiency", "System", "CHIPS", "SLICES", "GB", "GIB", "MIB"]

GB = 1e9
GIB = 2 ** 30
MIB = 2 ** 20


@dataclass(frozen=True, kw_only=True)
class Chip:
    """One accelerator chip.

    Parameters
    ----------
    name : str
    mxus : int
        Matrix units per chip (all TensorCores together).
    mxu_rows, mxu_cols : int
        Size of each weight-stationary systolic array.
    mac_rate : float
        bfloat16 multiply-accumulates per second per processing element: the clock times the
        MACs a PE does per cycle. Peak bf16 FLOP/s = 2 x mxus x rows x cols x mac_rate.
    formats : dict of str to float
        Matrix operand formats and their throughput relative to bfloat16 (int8 at 2.0 doubles
        the peak).
    vmem_bytes : float
        On-chip vector memory a GEMM tiles its operands into; sets the HBM traffic of a GEMM.
    hbm_bytes, hbm_bandwidth : float
        HBM capacity (bytes) and peak bandwidth (bytes/s).
    ici_ports : int
        ICI links per chip (2 per torus dimension).
    ici_link_bandwidth : float
        Bytes/s of one ICI link in one direction.
    ici_hop_latency : float
        Seconds per hop of a message between neighbouring chips.
    dcn_bandwidth : float
        Bytes/s per chip, one direction, over the data-center network.
    partial_bytes : int
        Bytes per element of the partial sums a reduce-scatter moves: 0 (default) the
        payload's own width; 4 when bfloat16 reductions carry fp32 partials on the wire, as
        Podium's pod does (docs/pod.md, "Formats and rounding").
    vpu_rates : dict of str to float
        Elements per second the vector unit processes per elementwise operation kind
        ("rmsnorm", "add", "silu", ...). Empty (the published presets): the VPU's time is not
        modelled and elementwise work costs its HBM traffic only; set by
        :func:`podium.model.physical.physical_system` from Podium's RTL measurement.
    sources : dict of str to str
        Where each figure comes from (not validated, not compared).
    """

    name: str
    mxus: int
    mxu_rows: int
    mxu_cols: int
    mac_rate: float
    formats: dict
    vmem_bytes: float
    hbm_bytes: float
    hbm_bandwidth: float
    ici_ports: int
    ici_link_bandwidth: float
    ici_hop_latency: float
    dcn_bandwidth: float
    partial_bytes: int = 0
    vpu_rates: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        p = "chip"
        check_int(f"{p}.partial_bytes", self.partial_bytes, 0, 8)
        if self.vpu_rates:
            rates = check_mapping(f"{p}.vpu_rates", self.vpu_rates,
                                  lambda n, v: check_number(n, v, lo=0, lo_open=True))
            object.__setattr__(self, "vpu_rates", rates)
        elif not isinstance(self.vpu_rates, dict):
            raise ValueError(f"{p}.vpu_rates must be a mapping, got {self.vpu_rates!r}")
        check_int(f"{p}.mxus", self.mxus, 1, 1024)
        check_int(f"{p}.mxu_rows", self.mxu_rows, 1, 4096)
        check_int(f"{p}.mxu_cols", self.mxu_cols, 1, 4096)
        check_number(f"{p}.mac_rate", self.mac_rate, lo=0, lo_open=True)
        formats = check_mapping(f"{p}.formats", self.formats,
                                lambda n, v: check_number(n, v, lo=0, lo_open=True))
        if "bfloat16" not in formats:
            raise ValueError(f"{p}.formats must include 'bfloat16' (the reference format), "
                             f"got {sorted(formats)}")
        object.__setattr__(self, "formats", formats)
        for name in ("vmem_bytes", "hbm_bytes", "hbm_bandwidth", "ici_link_bandwidth",
                     "dcn_bandwidth"):
            check_number(f"{p}.{name}", getattr(self, name), lo=0, lo_open=True)
        check_int(f"{p}.ici_ports", self.ici_ports, 2, 12)
        check_number(f"{p}.ici_hop_latency", self.ici_hop_latency, lo=0)

    def peak_flops(self, fmt="bfloat16"):
        """Peak FLOP/s (2 per MAC) in operand format ``fmt``."""
        if fmt not in self.formats:
            raise ValueError(f"format must be one of {sorted(self.formats)} on {self.name}, "
                             f"got {fmt!r}")
        return 2 * self.mxus * self.mxu_rows * self.mxu_cols * self.mac_rate * self.formats[fmt]


@dataclass(frozen=True, kw_only=True)
class Slice:
    """One torus (or mesh) of chips joined by ICI.

    Parameters
    ----------
    dims : tuple of int
        Chips along each axis (1 to 3 axes), e.g. (16, 16) for a Trillium pod.
    wrap : tuple of bool
        Per axis, whether the axis closes into a ring. Use :meth:`in_pod` for the rule that
        wraparound exists only on axes that span the whole pod.
    """

    dims: tuple
    wrap: tuple

    def __post_init__(self):
        dims = check_dims("slice.dims", self.dims, lo=1, hi=4096)
        wrap = tuple(self.wrap) if hasattr(self.wrap, "__len__") else self.wrap
        if not isinstance(wrap, tuple) or len(wrap) != len(dims):
            raise ValueError(f"slice.wrap must have one entry per axis ({len(dims)}), "
                             f"got {self.wrap!r}")
        for i, w in enumerate(wrap):
            check_bool(f"slice.wrap[{i}]", w)
        object.__setattr__(self, "dims", dims)
        object.__setattr__(self, "wrap", wrap)

    @classmethod
    def in_pod(cls, dims, pod_dims):
        """A slice of ``dims`` cut from a pod of ``pod_dims``: an axis wraps only if it spans
        the whole pod (the JAX scaling book: wraparound only on full axes)."""
        dims = check_dims("slice.dims", dims, lo=1, hi=4096)
        pod = check_dims("slice.pod_dims", pod_dims, lo=1, hi=4096)
        if len(pod) != len(dims) or any(d > q for d, q in zip(dims, pod, strict=True)):
            raise ValueError(f"slice.dims must fit in the pod {list(pod)}, got {list(dims)}")
        return cls(dims=dims, wrap=tuple(d == q for d, q in zip(dims, pod, strict=True)))

    @property
    def chips(self):
        return math.prod(self.dims)


@dataclass(frozen=True, kw_only=True)
class Efficiency:
    """Fractions of the datasheet peaks that the hardware achieves, each in (0, 1].

    Parameters
    ----------
    mxu : float
        MXU cycles of the streaming bound over cycles taken, on a whole GEMM (pipeline fill,
        weight loads not hidden). Tile quantization is modelled separately, per GEMM.
    hbm : float
        Achieved over peak HBM bandwidth on streaming traffic.
    ici_collective : float
        Bus bandwidth of a ring collective over the link bandwidth.
    ici_all_to_all : float
        Accepted over ideal throughput of uniform random traffic at saturation, the traffic
        of an all-to-all.
    dcn : float
        Achieved over nominal DCN bandwidth per chip.
    attention : float
        MXU utilization of a fused (flash) attention kernel, used instead of ``mxu`` for the
        attention GEMMs (scores and context, forward and backward). 0 (default): the same as
        ``mxu``; the physical presets take it from Podium's RTL attention bench
        (transformer.json).
    ici_all_gather, ici_reduce_scatter : float
        Bus bandwidth over link bandwidth of the all-gather and of the reduce-scatter (bf16
        payload, fp32 partial sums on the pod) when measured apart; 0 (default): both use
        ``ici_collective``.
    sources : dict of str to str
        Per term, "measured (file, row)", "published: ..." or "assumed: value (why)".
    """

    mxu: float = 1.0
    hbm: float = 1.0
    ici_collective: float = 1.0
    ici_all_to_all: float = 1.0
    dcn: float = 1.0
    attention: float = 0.0
    ici_all_gather: float = 0.0
    ici_reduce_scatter: float = 0.0
    sources: dict = field(default_factory=dict, compare=False)

    TERMS = ("mxu", "hbm", "ici_collective", "ici_all_to_all", "dcn")

    def __post_init__(self):
        for name in self.TERMS:
            check_number(f"efficiency.{name}", getattr(self, name), lo=0, hi=1, lo_open=True)
        for name in ("attention", "ici_all_gather", "ici_reduce_scatter"):
            check_number(f"efficiency.{name}", getattr(self, name), lo=0, hi=1)

    def collective(self, kind):
        """The bus-bandwidth efficiency of a collective of ``kind``."""
        own = {"all_gather": self.ici_all_gather,
               "reduce_scatter": self.ici_reduce_scatter}.get(kind, 0.0)
        return own or self.ici_collective

    def source(self, term):
        return self.sources.get(term, f"assumed: {getattr(self, term):g} (datasheet peak)")


@dataclass(frozen=True, kw_only=True)
class System:
    """Slices of one chip type joined over the DCN, with the model's two software terms.

    Parameters
    ----------
    name : str
    chip : Chip
    slice : Slice
    slices : int
        Slices joined over the DCN (data parallel across slices).
    efficiency : Efficiency
    overlap : float
        Fraction of a step's compute time under which overlappable communication (FSDP
        gathers and reductions, the DCN gradient all-reduce) can hide, in [0, 1].
    dcn_latency : float
        Seconds per step of a ring over the DCN, per message (host, NIC and switch latency).
    """

    name: str
    chip: Chip
    slice: Slice
    slices: int = 1
    efficiency: Efficiency = field(default_factory=Efficiency)
    overlap: float = 0.0
    dcn_latency: float = 0.0

    def __post_init__(self):
        for name, kind in (("chip", Chip), ("slice", Slice), ("efficiency", Efficiency)):
            if not isinstance(getattr(self, name), kind):
                raise ValueError(f"system.{name} must be a {kind.__name__}, "
                                 f"got {getattr(self, name)!r}")
        check_int("system.slices", self.slices, 1, 100_000)
        check_number("system.overlap", self.overlap, lo=0, hi=1)
        check_number("system.dcn_latency", self.dcn_latency, lo=0, hi=1)
        if len(self.slice.dims) * 2 > self.chip.ici_ports:
            raise ValueError(f"slice.dims has {len(self.slice.dims)} axes but chip.ici_ports "
                             f"is {self.chip.ici_ports}: a torus axis needs 2 ports")

    @property
    def chips(self):
        return self.slice.chips * self.slices


_SCALING_BOOK = "JAX scaling book (https://jax-ml.github.io/scaling-book/)"

CHIPS = {
    "v6e": Chip(
        name="TPU v6e (Trillium)", mxus=2, mxu_rows=256, mxu_cols=256,
        mac_rate=918e12 / (2 * 2 * 256 * 256),
        formats={"bfloat16": 1.0, "int8": 2.0},
        vmem_bytes=32 * MIB, hbm_bytes=32 * GB, hbm_bandwidth=1638 * GB, ici_ports=4,
        ici_link_bandwidth=100 * GB, ici_hop_latency=1e-6, dcn_bandwidth=12.5 * GB,
        sources={
            "mxus": "2 x 256x256 per chip (Cloud TPU v6e page)",
            "mac_rate": "918 TFLOP/s bf16, 1836 TOP/s int8 (Cloud TPU v6e page); no "
                        "clock is published: two 256x256 MXUs at 918 TFLOP/s imply 3.5 G "
                        "MAC/s per PE",
            "vmem_bytes": "assumed: 32 MiB (not published; it only sets the "
                          "GEMM tile, and the model's GEMMs are compute-bound for any VMEM "
                          "above a few MiB)",
            "hbm_bandwidth": "1638 GB/s (Cloud TPU v6e page); other versions of "
                             "Google's pages give 1600 and 1640 GB/s: the preset "
                             "uses 1638",
            "hbm_bytes": "32 GB (Cloud TPU v6e page)",
            "ici_link_bandwidth": "100 GB/s per link per direction: 800 GB/s bidirectional "
                                  "per chip over 4 ports (Cloud TPU v6e page), i.e. "
                                  "3200 Gb/s per chip one way; Google's pages disagree "
                                  "(3200 vs 3584 Gb/s; 3584 would be 112 GB/s per "
                                  "link) and the scaling book gives 90 GB/s: the preset uses "
                                  "100",
            "ici_hop_latency": f"about 1 us per hop ({_SCALING_BOOK})",
            "dcn_bandwidth": "12.5 GB/s per chip: 4 x 200 Gb/s NICs per 8-chip host "
                             "(the v6e host as published); the scaling book quotes about "
                             "25 GB/s per host for TPUs in general: the preset uses the v6e "
                             "NIC figure",
        }),
    "v5e": Chip(
        name="TPU v5e", mxus=4, mxu_rows=128, mxu_cols=128,
        mac_rate=197e12 / (2 * 4 * 128 * 128),
        formats={"bfloat16": 1.0, "int8": 393 / 197},
        vmem_bytes=32 * MIB, hbm_bytes=16 * GB, hbm_bandwidth=819 * GB, ici_ports=4,
        ici_link_bandwidth=50 * GB, ici_hop_latency=1e-6, dcn_bandwidth=3.125 * GB,
        sources={
            "mxus": "4 x 128x128 (Cloud TPU v5e page)",
            "mac_rate": "197 TFLOP/s bf16, 393 TOP/s int8 (Cloud TPU v5e page): 1.5 GHz",
            "vmem_bytes": "assumed: 32 MiB (as v6e)",
            "hbm_bandwidth": "819 GB/s (Cloud TPU v5e page); one version of the page "
                             "says 800 GiB/s (859 GB/s): the preset uses 819",
            "hbm_bytes": "16 GB (Cloud TPU v5e page)",
            "ici_link_bandwidth": "50 GB/s per link per direction: 400 GB/s bidirectional "
                                  "per chip over 4 ports (Cloud TPU v5e page); the scaling "
                                  "book gives 45 GB/s: the preset uses 50",
            "ici_hop_latency": f"about 1 us per hop ({_SCALING_BOOK})",
            "dcn_bandwidth": "3.125 GB/s per chip: 2 x 100 Gb/s NICs per 8-chip host, "
                             "6.4 Tb/s per 256-chip pod (Cloud TPU v5e page)",
        }),
    "v5p": Chip(
        name="TPU v5p", mxus=8, mxu_rows=128, mxu_cols=128,
        mac_rate=459e12 / (2 * 8 * 128 * 128),
        formats={"bfloat16": 1.0, "int8": 2.0},
        vmem_bytes=32 * MIB, hbm_bytes=95 * GB, hbm_bandwidth=2765 * GB, ici_ports=6,
        ici_link_bandwidth=100 * GB, ici_hop_latency=1e-6, dcn_bandwidth=6.25 * GB,
        sources={
            "mxus": "2 TensorCores x 4 MXUs of 128x128 (Cloud TPU v5p page)",
            "mac_rate": "459 TFLOP/s bf16 (Cloud TPU v5p page): 1.75 GHz; int8 at 2x "
                        "(scaling book)",
            "vmem_bytes": "assumed: 32 MiB (as v6e)",
            "hbm_bandwidth": "2765 GB/s, 95 GB HBM2e (Cloud TPU v5p page)",
            "hbm_bytes": "95 GB (Cloud TPU v5p page)",
            "ici_link_bandwidth": "100 GB/s per link per direction: 4800 Gb/s per chip over "
                                  "6 ports (Cloud TPU v5p page); the scaling book gives 90 "
                                  "GB/s: the preset uses 100",
            "ici_hop_latency": f"about 1 us per hop ({_SCALING_BOOK})",
            "dcn_bandwidth": "6.25 GB/s per chip: 'Data center network (DCN) bandwidth per "
                             "chip (Gbps) 50' (Cloud TPU v5p page, "
                             "docs.cloud.google.com/tpu/docs/v5p)",
        }),
    "v4": Chip(
        name="TPU v4", mxus=8, mxu_rows=128, mxu_cols=128,
        mac_rate=275e12 / (2 * 8 * 128 * 128),
        formats={"bfloat16": 1.0, "int8": 1.0},
        vmem_bytes=32 * MIB, hbm_bytes=32 * GIB, hbm_bandwidth=1200 * GB, ici_ports=6,
        ici_link_bandwidth=45 * GB, ici_hop_latency=1e-6, dcn_bandwidth=6.25 * GB,
        sources={
            "mxus": "2 TensorCores x 4 MXUs of 128x128 (Cloud TPU v4 page)",
            "mac_rate": "275 TFLOP/s bf16 and int8 (TPU v4 paper): 1.05 GHz",
            "vmem_bytes": "assumed: 32 MiB (the TPU v4 paper's CMEM is not modelled)",
            "hbm_bandwidth": "1200 GB/s (TPU v4 paper)",
            "hbm_bytes": "32 GiB (TPU v4 paper)",
            "ici_link_bandwidth": "45 GB/s per link per direction (scaling book); the v4 "
                                  "page's 24 TB/s bisection over 512 links of a 16^3 torus "
                                  "gives 47 GB/s",
            "ici_hop_latency": f"about 1 us per hop ({_SCALING_BOOK})",
            "dcn_bandwidth": "6.25 GB/s per chip: about 25 GB/s per 4-chip host (scaling book)",
        }),
}
"""Published chips. The efficiency terms of these presets are 1.0: datasheet peaks."""

SLICES = {
    "v6e": Slice.in_pod((16, 16), (16, 16)),
    "v5e": Slice.in_pod((16, 16), (16, 16)),
    "v5p": Slice(dims=(16, 16, 16), wrap=(True, True, True)),
    "v4": Slice.in_pod((16, 16, 16), (16, 16, 16)),
}
"""Default slice per chip: a full 16x16 pod for v5e and v6e (wraparound on both axes: they
span the pod); the full 4096-chip v4 pod, a 3-D torus (TPU v4 paper); for v5p a
4096-chip cube assumed closed into a torus on every axis as v4's optical switches close a
v4 pod (an assumption: v5p's pod has 8960 chips). Smaller v4 slices are tori
only for the shapes of the Cloud TPU v4 page (AxBxC with 2A=B=C or 2A=2B=C, multiples of 4):
see presets.PALM_SLICE."""
