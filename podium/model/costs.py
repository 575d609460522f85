"""Costs of the performance model: per-operation rooflines, collectives on torus axes and over
the data-center network (DCN), the overlap of communication with compute, and the step time
of training and inference workloads.

Every function takes validated configuration objects (:mod:`.hardware`, :mod:`.workloads`)
and returns seconds or a breakdown of seconds; nothing here reads files or keeps state.
"""

import functools
import math
from dataclasses import dataclass

from .hardware import System
from .workloads import (
    ACT_BYTES,
    Gemm,
    Inference,
    Training,
    UNet,
    inference_ops,
    training_ops,
    unet_ops,
)

__all__ = ["Segment", "ring_all_reduce_time", "gemm_time", "stream_time", "ops_time",
           "assign_axes", "collective_time", "dcn_all_reduce_time", "exposed_communication",
           "TrainingStep", "TrainingCosts", "training_costs", "training_step",
           "tokens_per_replica", "critical_batch", "weak_scaling_efficiency",
           "InferenceResult", "inference", "unet_images_per_second"]


def ring_all_reduce_time(n, size, bandwidth):
    """Bandwidth term of a ring all-reduce of ``size`` bytes over ``n`` members whose ring
    moves ``bandwidth`` bytes/s per member: 2(n-1)/n x size / bandwidth."""
    return 2 * (n - 1) / n * size / bandwidth


def _gemm_traffic(chip, g):
    """HBM bytes of a GEMM blocked into square tiles of t x t that fit VMEM three at a time:
    A is read once per column block of C, B once per row block, C written once."""
    if g.traffic is not None:
        return g.traffic
    t = max(1, math.isqrt(int(chip.vmem_bytes // (3 * ACT_BYTES))))
    per = g.m * g.k * math.ceil(g.n / t) + g.k * g.n * math.ceil(g.m / t) + g.m * g.n
    return ACT_BYTES * per * g.count


def gemm_time(system, g):
    """Roofline time of a GEMM on one chip: the larger of the MXU time and the HBM time.

    MXU time: each of ceil(K/R) x ceil(N/C) weight tiles streams max(M, R) rows through an
    R x C array (the weight-stationary streaming bound), spread over the chip's MXUs, at the
    chip's MAC rate times the measured MXU efficiency. HBM time: the blocked-GEMM traffic at
    the HBM bandwidth times the measured HBM efficiency."""
    chip, eff = system.chip, system.efficiency
    folds = math.ceil(g.k / chip.mxu_rows) * math.ceil(g.n / chip.mxu_cols)
    cycles = folds * g.count / chip.mxus * max(g.m, chip.mxu_rows)
    e = (eff.attention or eff.mxu) if _is_attention(g) else eff.mxu
    compute = cycles / (chip.mac_rate * e)
    memory = _gemm_traffic(chip, g) / (chip.hbm_bandwidth * eff.hbm)
    return max(compute, memory)


def _is_attention(g):
    """A self-attention GEMM (scores or context, forward or backward) of a fused kernel:
    timed at the attention efficiency (Podium's RTL flash-attention MXU utilization,
    transformer.json) instead of the plain GEMM's."""
    return g.traffic is not None and g.name.rsplit(".", 1)[-1].split("_")[0] in (
        "scores", "context")


def stream_time(system, s):
    """Time of an elementwise operation: the larger of its bytes at the achieved HBM
    bandwidth and its vector-unit work at the chip's VPU rate per kind (the VPU runs the
    kinds one after another; kinds without a rate, or a chip without ``vpu_rates``, add no
    VPU time)."""
    hbm = s.bytes / (system.chip.hbm_bandwidth * system.efficiency.hbm)
    rates = system.chip.vpu_rates
    vpu = sum(e / rates[k] for k, e in s.vpu if k in rates) if rates else 0.0
    return max(hbm, vpu)


def ops_time(system, weighted_ops):
    """Sum of the roofline times of (op, weight) pairs: operations do not overlap."""
    total = 0.0
    for op, weight in weighted_ops:
        if weight:
            t = gemm_time(system, op) if isinstance(op, Gemm) else stream_time(system, op)
            total += weight * t
    return total


@dataclass(frozen=True)
class Segment:
    """The part of one torus axis a parallel group spans: ``length`` members, ``stride``
    chips apart, closed into a ring if ``wrap``."""

    length: int
    wrap: bool
    stride: int = 1


def assign_axes(slice_, groups):
    """Map parallel groups onto the slice's torus axes, innermost group first.

    ``groups``: (name, size) pairs in order. Each group takes whole remaining axes, or a
    contiguous part of one axis (a line: no wraparound); the groups after it on that axis
    then form strided rings. Returns {name: [Segment, ...]}; raises ValueError if a group
    cannot be laid out on the axes."""
    remaining = list(slice_.dims)
    stride = [1] * len(remaining)
    out = {}
    axis = 0
    for name, size in groups:
        segments, g = [], size
        while g > 1:
            while axis < len(remaining) and remaining[axis] == 1:
                axis += 1
            if axis == len(remaining):
                raise ValueError(f"parallelism.{name}={size} does not fit the slice's torus "
                                 f"{list(slice_.dims)} after the groups before it")
            r = remaining[axis]
            if g % r == 0:
                segments.append(Segment(r, slice_.wrap[axis], stride[axis]))
                remaining[axis], g = 1, g // r
            elif r % g == 0:
                segments.append(Segment(g, False, stride[axis]))
                remaining[axis] //= g
                stride[axis] *= g
                g = 1
            else:
                raise ValueError(f"parallelism.{name}={size} must be a product of whole "
                                 f"axes or a divisor of one axis of the slice "
                                 f"{list(slice_.dims)}")
        out[name] = segments
    return out


def collective_time(kind, segments, volume, system):
    """Time of one collective over a group laid out as ``segments``.

    ``all_gather`` / ``reduce_scatter``: ``volume`` is the full (gathered) array per chip;
    (g-1)/g x volume over the sum of the axes' ring bandwidths, where an axis moves
    2 x link / stride bytes/s when it wraps (bidirectional ring) and half that as a line;
    plus (length - 1) x stride hops of latency per axis. ``all_reduce``: twice both terms.
    ``all_to_all``: ``volume`` is the bytes each chip sends; the busiest axis carries
    volume x length x stride / 8 per link direction on a ring (/ 4 on a line), the
    bisection bound of uniform traffic (Dally & Towles), at the all-to-all
    efficiency."""
    if not segments or volume == 0:
        return 0.0
    chip, eff = system.chip, system.efficiency
    b, hop = chip.ici_link_bandwidth, chip.ici_hop_latency
    if kind == "all_to_all":
        load = max(s.length * s.stride / (8 if s.wrap else 4) for s in segments)
        latency = sum((s.length // 2 if s.wrap else s.length - 1) * s.stride for s in segments)
        return volume * load / (b * eff.ici_all_to_all) + latency * hop
    g = math.prod(s.length for s in segments)
    bandwidth = sum((2 if s.wrap else 1) * b / s.stride for s in segments)
    one_way = ((g - 1) / g * volume / (bandwidth * eff.collective(kind))
               + sum((s.length - 1) * s.stride for s in segments) * hop)
    if kind in ("all_gather", "reduce_scatter"):
        return one_way
    if kind == "all_reduce":
        return 2 * one_way
    raise ValueError(f"collective kind must be one of 'all_gather', 'reduce_scatter', "
                     f"'all_reduce', 'all_to_all', got {kind!r}")


def dcn_all_reduce_time(system, size, messages):
    """The DCN step of the hierarchical all-reduce (reduce-scatter on ICI, all-reduce over
    the DCN, all-gather on ICI): every chip all-reduces its ``size``-byte shard with its
    peers in the other slices as a ring, in ``messages`` separate messages, each paying the
    ring's 2(N-1) latency steps."""
    n = system.slices
    if n == 1:
        return 0.0
    bandwidth = system.chip.dcn_bandwidth * system.efficiency.dcn
    return ring_all_reduce_time(n, size, bandwidth) + 2 * (n - 1) * messages * system.dcn_latency


def exposed_communication(compute, overlappable_ici, dcn, overlap):
    """Communication left on the critical path: overlappable traffic hides under
    ``overlap`` x ``compute``; ICI (issued first) takes the window before the DCN does.
    Returns (exposed ICI, exposed DCN)."""
    window = overlap * compute
    exposed_ici = max(0.0, overlappable_ici - window)
    exposed_dcn = max(0.0, dcn - max(0.0, window - overlappable_ici))
    return exposed_ici, exposed_dcn


@dataclass(frozen=True)
class TrainingStep:
    """Seconds of one training step and what they are made of (per chip, all chips alike).

    ``compute``: the roofline time of every operation; ``tensor`` and ``all_to_all``: the
    tensor-parallel all-reduces and MoE dispatch/combine, exposed (but ``tensor_hidden`` of
    ``tensor``, hidden under the weight-gradient GEMMs with ``Training.tensor_overlap``);
    ``fsdp_ici``: FSDP gathers and reductions and in-slice data-parallel gradient reduction,
    overlappable; ``dcn``: the DCN gradient all-reduce, overlappable; ``exposed_ici`` (tensor
    - tensor_hidden + all-to-all + what of fsdp_ici does not hide), ``exposed_dcn``,
    ``sync``: a barrier per step; ``step`` = compute + exposed_ici + exposed_dcn + sync."""

    chips: int
    compute: float
    tensor: float
    all_to_all: float
    fsdp_ici: float
    dcn: float
    exposed_ici: float
    exposed_dcn: float
    sync: float
    step: float
    tokens: float
    model_flops: float
    hardware_flops: float
    peak_flops: float
    memory_bytes: float
    hbm_bytes: float
    tensor_hidden: float = 0.0

    @property
    def mfu(self):
        """Model FLOPs utilization: model FLOPs per chip / (step x peak)."""
        return self.model_flops / (self.step * self.peak_flops)

    @property
    def hfu(self):
        """Hardware FLOPs utilization: FLOPs executed (recomputation included) per chip /
        (step x peak)."""
        return self.hardware_flops / (self.step * self.peak_flops)

    @property
    def tokens_per_second(self):
        """Tokens per second over the whole system."""
        return self.tokens / self.step

    @property
    def fits(self):
        return self.memory_bytes <= self.hbm_bytes


@dataclass(frozen=True)
class TrainingCosts:
    """The parts of a training step that do not depend on the two software terms (overlap
    and DCN latency), so that a fit of those terms costs arithmetic only.

    ``dcn_bandwidth``: the DCN all-reduce's bandwidth term; ``dcn_steps``: its latency steps
    (2(N-1) per message); ``dcn_overlap``: whether it can hide under the overlap window (else
    it is exposed whole); ``sync_ici``: the ICI part of the per-step barrier; ``sync_steps``:
    DCN latencies of the barrier (2 ceil(log2 N), a tree over the slices);
    ``tensor_hidden``: the part of ``tensor`` hidden under independent compute (the
    backward pass's all-reduces under the weight-gradient GEMMs, ``Training.tensor_overlap``),
    never on the critical path."""

    chips: int
    compute: float
    tensor: float
    all_to_all: float
    fsdp_ici: float
    dcn_bandwidth: float
    dcn_steps: float
    dcn_overlap: bool
    sync_ici: float
    sync_steps: float
    tokens: float
    model_flops: float
    hardware_flops: float
    peak_flops: float
    memory_bytes: float
    hbm_bytes: float
    tensor_hidden: float = 0.0

    def step(self, *, overlap, dcn_latency):
        """The step with communication overlapped under ``overlap`` x compute and
        ``dcn_latency`` seconds per DCN ring step."""
        dcn = self.dcn_bandwidth + self.dcn_steps * dcn_latency
        exposed_fsdp, exposed_dcn = exposed_communication(
            self.compute, self.fsdp_ici, dcn if self.dcn_overlap else 0.0, overlap)
        if not self.dcn_overlap:
            exposed_dcn = dcn
        exposed_ici = self.tensor - self.tensor_hidden + self.all_to_all + exposed_fsdp
        sync = self.sync_ici + self.sync_steps * dcn_latency
        return TrainingStep(
            chips=self.chips, compute=self.compute, tensor=self.tensor,
            all_to_all=self.all_to_all, fsdp_ici=self.fsdp_ici, dcn=dcn,
            exposed_ici=exposed_ici, exposed_dcn=exposed_dcn, sync=sync,
            step=self.compute + exposed_ici + exposed_dcn + sync, tokens=self.tokens,
            model_flops=self.model_flops, hardware_flops=self.hardware_flops,
            peak_flops=self.peak_flops, memory_bytes=self.memory_bytes,
            hbm_bytes=self.hbm_bytes, tensor_hidden=self.tensor_hidden)


def tokens_per_replica(system, training):
    """Tokens of one tensor-parallel group per step; the global batch must split evenly."""
    par = training.parallelism
    replicas = system.slices * par.data * par.fsdp
    if training.global_batch % replicas:
        raise ValueError(f"training.global_batch must be a multiple of the data-parallel "
                         f"replicas ({replicas} = slices x data x fsdp), "
                         f"got {training.global_batch}")
    return training.global_batch * training.model.seq / replicas


def _wire(kind, payload_bytes, chip):
    """Wire bytes over payload bytes of a collective: a reduce-scatter of narrower elements
    than ``chip.partial_bytes`` moves its partial sums at that width (bfloat16 gradients
    with fp32 partials, docs/pod.md)."""
    if kind == "reduce_scatter" and chip.partial_bytes > payload_bytes:
        return chip.partial_bytes / payload_bytes
    return 1.0


def _diameter(slice_):
    return sum(k // 2 if w else k - 1 for k, w in zip(slice_.dims, slice_.wrap, strict=True))


def training_costs(system, training, *, tokens=None):
    """The costs of ``training`` on ``system`` before overlap. ``tokens``: tokens per
    tensor-parallel group, overriding the global batch (a continuous knob for the
    critical-batch search)."""
    if not isinstance(system, System):
        raise ValueError(f"system must be a System, got {system!r}")
    if not isinstance(training, Training):
        raise ValueError(f"training must be a Training, got {training!r}")
    m, par, chip = training.model, training.parallelism, system.chip
    if par.chips != system.slice.chips:
        raise ValueError(f"parallelism.data x parallelism.fsdp x parallelism.tensor must "
                         f"equal the chips of a slice ({system.slice.chips}), got "
                         f"{par.data} x {par.fsdp} x {par.tensor} = {par.chips}")
    if tokens is None:
        tokens = tokens_per_replica(system, training)
    axes = assign_axes(system.slice, [("tensor", par.tensor), ("expert", par.expert),
                                      ("fsdp", par.fsdp // par.expert), ("data", par.data)])
    ops = training_ops(training, tokens=tokens)
    compute = sum(ops_time(system, phase) for phase in ops.values())
    hardware_flops = sum(op.flops * w for phase in ops.values() for op, w in phase
                         if isinstance(op, Gemm))

    passes = 2 + training.recompute  # forward, backward, recomputed forward
    per_layer = 1 if m.parallel_layers else 2
    tensor_pass = per_layer * m.layers * collective_time(
        "all_reduce", axes["tensor"], tokens * m.d_model * ACT_BYTES, system)
    tensor = passes * tensor_pass
    tensor_hidden = 0.0
    if training.tensor_overlap and tensor_pass:
        # The backward pass's all-reduces of activation gradients do not feed the layer's
        # weight-gradient GEMMs (dW = x^T dy): they hide under them, up to their time. The
        # forward's and the recomputed forward's feed the next operation: exposed.
        layer_dw = ops_time(system, [(op, w) for op, w in ops["backward"]
                                     if isinstance(op, Gemm) and op.name.endswith("_dw")
                                     and op.name != "logits_dw"])
        tensor_hidden = min(tensor_pass, layer_dw)
    all_to_all = (2 * m.moe_layers * passes
                  * collective_time("all_to_all", axes["expert"],
                                    tokens * m.top_k * m.d_model * ACT_BYTES / par.tensor,
                                    system))
    wb = training.master_bytes  # bytes per weight / gradient on the wire
    dense_bytes = m.dense_params * wb / par.tensor
    expert_bytes = m.expert_params / par.expert * wb / par.tensor
    # ZeRO-3: weights gathered for the forward and again for the backward pass, gradients
    # reduce-scattered; one message per layer and collective. Experts are gathered only
    # within the chips that hold the same experts.
    fsdp_ici = 0.0
    for volume, segments in ((dense_bytes, axes["expert"] + axes["fsdp"]),
                             (expert_bytes, axes["fsdp"])):
        fsdp_ici += m.layers * sum(
            collective_time(kind, segments, volume * _wire(kind, wb, chip) / m.layers, system)
            for kind in ("all_gather", "all_gather", "reduce_scatter"))
    grad_shard = m.params * wb / (par.tensor * par.fsdp)
    fsdp_ici += m.layers * sum(
        collective_time(kind, axes["data"], grad_shard * _wire(kind, wb, chip) / m.layers, system)
        for kind in ("reduce_scatter", "all_gather"))
    n = system.slices
    replicas = n * par.data * par.fsdp
    global_tokens = tokens * replicas
    state = m.params / (par.fsdp * par.tensor) * (2 * ACT_BYTES + training.state_bytes)
    gathered = 2 * (m.params / m.layers) * ACT_BYTES / par.tensor
    # Saved layer inputs (and, without recomputation, about 16 x d of intermediates per
    # token), sharded over the tensor-parallel group (sequence parallelism).
    saved = (m.layers * tokens * ACT_BYTES * m.d_model * (1 + (1 - training.recompute) * 16)
             / par.tensor)
    return TrainingCosts(
        chips=system.chips, compute=compute, tensor=tensor, all_to_all=all_to_all,
        fsdp_ici=fsdp_ici,
        dcn_bandwidth=dcn_all_reduce_time(system, m.params * wb / system.slice.chips,
                                          messages=0),
        dcn_steps=2 * (n - 1) * (m.layers if training.dcn_overlap else 1),
        dcn_overlap=training.dcn_overlap, sync_ici=2 * _diameter(system.slice)
        * chip.ici_hop_latency, sync_steps=2 * math.ceil(math.log2(n)), tokens=global_tokens,
        model_flops=m.training_flops_per_token() * global_tokens / system.chips,
        hardware_flops=hardware_flops, peak_flops=chip.peak_flops(),
        memory_bytes=state + gathered + saved, hbm_bytes=chip.hbm_bytes,
        tensor_hidden=tensor_hidden)


def training_step(system, training, *, tokens=None):
    """Step time of ``training`` on ``system`` (see :class:`TrainingCosts` for ``tokens``)."""
    return training_costs(system, training, tokens=tokens).step(
        overlap=system.overlap, dcn_latency=system.dcn_latency)


def _crossover(f, lo, hi):
    """The x in [lo, hi] (geometric bisection) where the increasing f(x) crosses zero; None
    if f is already >= 0 at lo (no crossing above lo), infinity if still < 0 at hi."""
    if f(lo) >= 0:
        return None
    if f(hi) < 0:
        return math.inf
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if f(mid) < 0:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def critical_batch(system, training):
    """Global batches (sequences per step) at the crossovers of the step as the batch
    shrinks (the weights' and gradients' traffic stays, the compute shrinks):
    ``dcn_dominates``: the DCN all-reduce takes as long as the compute (below it the step is
    DCN-bound whatever the overlap); ``dcn_exposed``: the DCN time starts to show in the step
    with the system's overlap; ``ici_dominates``: the FSDP traffic on ICI takes as long as the
    compute. Fractions of a sequence per chip are allowed (the knob is continuous); None:
    no crossover down to 1e-4 sequences per replica (the step's fixed costs, such as streaming
    the weights from HBM, keep the compute above the communication)."""
    costs = functools.partial(training_costs, system, training)
    par, seq = training.parallelism, training.model.seq
    per_token = system.slices * par.data * par.fsdp / seq  # sequences per replica token

    def latency_free(tokens):
        return costs(tokens=tokens).step(overlap=system.overlap,
                                         dcn_latency=system.dcn_latency)

    lo, hi = seq * 1e-4, seq * 1e4

    def batch(f):
        x = _crossover(f, lo, hi)
        return None if x is None else x * per_token

    return {
        "dcn_dominates": batch(lambda t: (s := latency_free(t)).compute - s.dcn),
        "dcn_exposed": batch(lambda t: 1e-12 - latency_free(t).exposed_dcn),
        "ici_dominates": batch(lambda t: (s := latency_free(t)).compute - s.fsdp_ici),
    }


def weak_scaling_efficiency(step, base):
    """Weak-scaling efficiency of ``step`` against ``base``, per-chip batch fixed:
    (throughput / base throughput) / (chips / base chips), i.e. base step / step."""
    return (step.tokens_per_second / base.tokens_per_second) / (step.chips / base.chips)


@dataclass(frozen=True)
class InferenceResult:
    """Prefill and decode of one batch on one slice: seconds and tokens per second."""

    prefill_seconds: float
    decode_step_seconds: float
    prefill_tokens_per_second: float
    decode_tokens_per_second: float
    memory_bytes: float
    hbm_bytes: float

    @property
    def fits(self):
        return self.memory_bytes <= self.hbm_bytes


def inference(system, inf):
    """Prefill and decode of ``inf`` with tensor parallelism over the chips of one slice of
    ``system``; the tensor-parallel all-reduces (one or two per layer) are not overlapped."""
    if not isinstance(inf, Inference):
        raise ValueError(f"inference must be an Inference, got {inf!r}")
    m, tp = inf.model, system.slice.chips
    if m.heads % tp or m.ffn % tp:
        raise ValueError(f"the slice's chips ({tp}) must divide model.heads ({m.heads}) and "
                         f"model.ffn ({m.ffn}) for tensor parallelism")
    segments = assign_axes(system.slice, [("tensor", tp)])["tensor"]
    per_layer = (1 if m.parallel_layers else 2) * m.layers
    prefill_tokens = inf.batch * inf.prompt
    prefill = (ops_time(system, inference_ops(inf, tensor=tp, phase="prefill"))
               + per_layer * collective_time("all_reduce", segments,
                                             prefill_tokens * m.d_model * ACT_BYTES, system))
    decode = (ops_time(system, inference_ops(inf, tensor=tp, phase="decode"))
              + per_layer * collective_time("all_reduce", segments,
                                            inf.batch * m.d_model * ACT_BYTES, system))
    weight_bytes = ACT_BYTES * m.params / tp
    kv = (ACT_BYTES * inf.batch * (inf.prompt + inf.output) * 2 * m.kv_heads * m.head_dim
          * m.layers / tp)
    return InferenceResult(
        prefill_seconds=prefill, decode_step_seconds=decode,
        prefill_tokens_per_second=prefill_tokens / prefill,
        decode_tokens_per_second=inf.batch / decode,
        memory_bytes=weight_bytes + kv, hbm_bytes=system.chip.hbm_bytes)


def unet_images_per_second(system, unet, *, images):
    """Images per second of the whole system, each chip denoising ``images`` latents at a
    time (data parallel, no communication): steps x UNet evaluations (two per step with
    classifier-free guidance)."""
    if not isinstance(unet, UNet):
        raise ValueError(f"unet must be a UNet, got {unet!r}")
    batch = images * (2 if unet.guidance else 1)
    evaluation = ops_time(system, unet_ops(unet, images=batch))
    return system.chips * images / (unet.steps * evaluation)

