"""Workloads of the performance model, reduced to the operations one chip executes: GEMMs
(``Gemm``, timed on the MXUs) and memory-bound streams (``Stream``, timed on HBM).

- ``Transformer``: a decoder-only language model (dense or mixture-of-experts layers).
- ``Training``: one training step of a Transformer under data, FSDP, tensor and expert
  parallelism (the communication it implies is costed in :mod:`podium.model.costs`).
- ``Inference``: prefill and decode of a Transformer with tensor parallelism.
- ``UNet``: an SDXL-shaped denoising UNet as GEMMs (convolutions as im2col GEMMs).

Preset models carry their sources; the batch of a training preset is given per chip, since
the published scaling results fix the per-chip batch (weak scaling).
"""

import math
from dataclasses import dataclass, replace

from .checks import check_bool, check_choice, check_int, check_number

__all__ = ["Gemm", "Stream", "Transformer", "Parallelism", "Training", "Inference", "UNet",
           "MODELS", "ACT_BYTES", "TRAINING", "PALM_MFU", "PALM_HFU", "MAXTEXT_V5E",
           "maxtext_model", "training_preset",
           "recompute_for_ratio", "layer_forward", "training_ops", "inference_ops",
           "unet_ops"]

ACT_BYTES = 2
"""Activations, weights and gradients move as bfloat16."""


@dataclass(frozen=True)
class Gemm:
    """``count`` products of (m x k) by (k x n) on one chip. ``traffic``: HBM bytes when the
    operation keeps intermediates on chip (fused attention); None: the blocked-GEMM traffic."""

    name: str
    m: float
    k: int
    n: int
    count: float = 1.0
    traffic: float | None = None

    @property
    def flops(self):
        return 2.0 * self.m * self.k * self.n * self.count


@dataclass(frozen=True)
class Stream:
    """An elementwise operation moving ``bytes`` through HBM on one chip. ``vpu``: (kind,
    elements) pairs of the vector unit's work (kinds as Podium's RTL bench measures them:
    rmsnorm, add, silu, gelu_tanh, softmax); its time counts only on a chip with
    ``vpu_rates``."""

    name: str
    bytes: float
    vpu: tuple = ()


@dataclass(frozen=True, kw_only=True)
class Transformer:
    """A decoder-only transformer.

    Parameters
    ----------
    name : str
    layers, d_model, heads, kv_heads, head_dim, ffn, vocab, seq : int
        Shape; ``kv_heads`` < ``heads`` is grouped-query (1: multi-query) attention; ``ffn``
        is the hidden size of the MLP (of each expert in MoE layers).
    gated : bool
        SwiGLU/GEGLU MLP (three weight matrices) rather than two.
    tied_embeddings : bool
        The output projection reuses the input embedding.
    parallel_layers : bool
        Attention and MLP read the same layer input (PaLM), so tensor parallelism needs one
        all-reduce per layer and direction instead of two.
    experts, top_k, moe_every : int
        Mixture of experts: every ``moe_every``-th layer has ``experts`` MLPs, each token goes
        to ``top_k`` of them. ``experts=1``: dense.
    """

    name: str
    layers: int
    d_model: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    seq: int
    gated: bool = True
    tied_embeddings: bool = False
    parallel_layers: bool = False
    experts: int = 1
    top_k: int = 1
    moe_every: int = 1

    def __post_init__(self):
        p = "model"
        check_int(f"{p}.layers", self.layers, 1, 10_000)
        for name in ("d_model", "heads", "head_dim", "ffn", "vocab", "seq"):
            check_int(f"{p}.{name}", getattr(self, name), 1, 10_000_000)
        check_int(f"{p}.kv_heads", self.kv_heads, 1, self.heads)
        if self.heads % self.kv_heads:
            raise ValueError(f"{p}.kv_heads must divide model.heads ({self.heads}), "
                             f"got {self.kv_heads}")
        for name in ("gated", "tied_embeddings", "parallel_layers"):
            check_bool(f"{p}.{name}", getattr(self, name))
        check_int(f"{p}.experts", self.experts, 1, 4096)
        check_int(f"{p}.top_k", self.top_k, 1, self.experts)
        check_int(f"{p}.moe_every", self.moe_every, 1, self.layers)

    @property
    def moe_layers(self):
        return self.layers // self.moe_every if self.experts > 1 else 0

    @property
    def attention_params(self):
        q = self.heads * self.head_dim
        return 2 * self.d_model * q + 2 * self.d_model * self.kv_heads * self.head_dim

    @property
    def mlp_params(self):
        """Weights of one MLP (one expert)."""
        return (3 if self.gated else 2) * self.d_model * self.ffn

    @property
    def embedding_params(self):
        return self.vocab * self.d_model * (1 if self.tied_embeddings else 2)

    @property
    def dense_params(self):
        """Weights every token uses: attention, dense MLPs, embeddings (norms not counted)."""
        dense_mlps = self.layers - self.moe_layers
        return (self.layers * self.attention_params + dense_mlps * self.mlp_params
                + self.embedding_params)

    @property
    def expert_params(self):
        """Weights of all experts of all MoE layers."""
        return self.moe_layers * self.experts * self.mlp_params

    @property
    def params(self):
        return self.dense_params + self.expert_params

    @property
    def matmul_params_per_token(self):
        """Weights a token multiplies by: layers (top_k experts in MoE layers) and the output
        projection (the input embedding is a lookup, not a product)."""
        mlps = (self.layers - self.moe_layers) + self.moe_layers * self.top_k
        return (self.layers * self.attention_params + mlps * self.mlp_params
                + self.vocab * self.d_model)

    def training_flops_per_token(self):
        """Model FLOPs of training per token (PaLM, appendix B): 6 x matmul parameters per
        token + 12 x layers x heads x head_dim x seq for attention (QK^T and AV, forward and
        backward, the causal mask not discounted)."""
        return (6.0 * self.matmul_params_per_token
                + 12.0 * self.layers * self.heads * self.head_dim * self.seq)


@dataclass(frozen=True, kw_only=True)
class Parallelism:
    """How one slice's chips share the work: ``data`` x ``fsdp`` x ``tensor`` must equal the
    chips of a slice. ``data``: replicas; ``fsdp``: replicas that also shard weights, gradients
    and optimizer state (ZeRO-3); ``tensor``: Megatron-style sharding of every layer;
    ``expert``: chips of the FSDP group that share the experts of a MoE layer (divides
    ``fsdp``). Slices are always data parallel over the DCN."""

    data: int = 1
    fsdp: int = 1
    tensor: int = 1
    expert: int = 1

    def __post_init__(self):
        for name in ("data", "fsdp", "tensor", "expert"):
            check_int(f"parallelism.{name}", getattr(self, name), 1, 1_000_000)
        if self.fsdp % self.expert:
            raise ValueError(f"parallelism.expert must divide parallelism.fsdp ({self.fsdp}), "
                             f"got {self.expert}")

    @property
    def chips(self):
        return self.data * self.fsdp * self.tensor


@dataclass(frozen=True, kw_only=True)
class Training:
    """One training step.

    Parameters
    ----------
    model : Transformer
    parallelism : Parallelism
    global_batch : int
        Sequences per step over all slices.
    recompute : float
        Fraction of the layers' forward pass recomputed in the backward pass (activation
        rematerialization), in [0, 1].
    flash_attention : bool
        Attention fused on chip: scores and probabilities never go to HBM, and the backward
        pass recomputes the scores.
    state_bytes : int
        Optimizer state per parameter (fp32 master copy and Adam's two moments: 12).
    dcn_overlap : bool
        The DCN gradient all-reduce runs layer by layer during the backward pass (one message
        per layer, hidden under the overlap window). False: the gradients cross the DCN in one
        exchange after the backward pass, on the critical path (PaLM's Pathways schedule).
    sequence_parallel : bool
        Norms and residual adds sharded over the tensor-parallel group (see
        ``_stream_bytes_per_token``); False: every chip of the group repeats them.
    master_bytes : int
        Bytes per weight and per gradient in the FSDP gathers and reductions and the DCN
        all-reduce: 2 (bf16), or 4 where the run keeps fp32 master weights and gradients and
        communicates them (MaxText's default, ``weight_dtype: float32`` in its base.yml).
    tensor_overlap : bool
        The run's compiler overlaps collectives with independent compute
        (``--xla_tpu_overlap_compute_collective_tc=true`` in the run script's
        LIBTPU_INIT_ARGS). A tensor-parallel collective can then hide only under compute that
        neither feeds it nor waits for it: in the backward pass, the all-reduce of a layer's
        activation gradients is independent of the same layer's weight-gradient GEMMs and
        hides under them (up to their time; the schedule of Megatron-LM's
        ``LinearWithGradAccumulationAndAsyncCommunication`` with ``async_grad_allreduce``,
        megatron/core/tensor_parallel/layers.py); forward and recomputed-forward all-reduces feed
        the next operation and stay exposed (``costs.training_costs``). False: every
        tensor-parallel collective exposed.
    recompute_elementwise : bool
        A remat policy that saves the weight GEMMs' outputs only (MaxText's ``minimal``:
        ``jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims``): the layers'
        elementwise work and the attention's batched products (scores and context) are
        recomputed in the backward pass for the part of the forward that ``recompute`` does
        not already recompute.
    """

    model: Transformer
    parallelism: Parallelism
    global_batch: int
    recompute: float = 1.0
    flash_attention: bool = True
    state_bytes: int = 12
    dcn_overlap: bool = True
    sequence_parallel: bool = False
    master_bytes: int = 2
    tensor_overlap: bool = False
    recompute_elementwise: bool = False

    def __post_init__(self):
        if not isinstance(self.model, Transformer):
            raise ValueError(f"training.model must be a Transformer, got {self.model!r}")
        if not isinstance(self.parallelism, Parallelism):
            raise ValueError(f"training.parallelism must be a Parallelism, "
                             f"got {self.parallelism!r}")
        check_int("training.global_batch", self.global_batch, 1, 10 ** 9)
        check_number("training.recompute", self.recompute, lo=0, hi=1)
        check_bool("training.flash_attention", self.flash_attention)
        check_bool("training.dcn_overlap", self.dcn_overlap)
        check_bool("training.sequence_parallel", self.sequence_parallel)
        check_bool("training.tensor_overlap", self.tensor_overlap)
        check_bool("training.recompute_elementwise", self.recompute_elementwise)
        check_choice("training.master_bytes", self.master_bytes, (2, 4))
        check_int("training.state_bytes", self.state_bytes, 0, 64)
        tp = self.parallelism.tensor
        m = self.model
        if m.heads % tp or m.ffn % tp:
            raise ValueError(f"parallelism.tensor must divide model.heads ({m.heads}) and "
                             f"model.ffn ({m.ffn}), got {tp}")
        if m.experts % self.parallelism.expert:
            raise ValueError(f"parallelism.expert must divide model.experts ({m.experts}), "
                             f"got {self.parallelism.expert}")


@dataclass(frozen=True, kw_only=True)
class Inference:
    """Serving a Transformer on one slice with tensor parallelism over all its chips.

    Parameters
    ----------
    model : Transformer
    batch : int
        Sequences served together.
    prompt : int
        Prompt tokens per sequence (prefill).
    output : int
        Generated tokens per sequence (decode; each step sees the prompt and half the output
        on average).
    """

    model: Transformer
    batch: int
    prompt: int
    output: int

    def __post_init__(self):
        if not isinstance(self.model, Transformer):
            raise ValueError(f"inference.model must be a Transformer, got {self.model!r}")
        check_int("inference.batch", self.batch, 1, 1_000_000)
        check_int("inference.prompt", self.prompt, 1, self.model.seq)
        check_int("inference.output", self.output, 1, self.model.seq)

    @property
    def decode_context(self):
        return self.prompt + self.output / 2


@dataclass(frozen=True, kw_only=True)
class UNet:
    """A latent-diffusion UNet (SDXL's shape by default).

    Parameters
    ----------
    latent : int
        Latent height and width (128 for 1024 x 1024 images).
    channels : tuple of int
        Channels per resolution level.
    depths : tuple of int
        Transformer blocks per attention block at each level (0: no attention).
    resnets : int
        ResNet blocks per level going down (one more per level going up).
    context, context_dim, head_dim : int
        Text-encoder tokens and width; attention head size.
    steps : int
        Denoising steps per image.
    guidance : bool
        Classifier-free guidance: two UNet evaluations per step.
    """

    name: str = "SDXL UNet"
    latent: int = 128
    latent_channels: int = 4
    channels: tuple = (320, 640, 1280)
    depths: tuple = (0, 2, 10)
    resnets: int = 2
    context: int = 77
    context_dim: int = 2048
    head_dim: int = 64
    steps: int = 20
    guidance: bool = True

    def __post_init__(self):
        p = "unet"
        check_int(f"{p}.latent", self.latent, 8, 1024)
        check_int(f"{p}.latent_channels", self.latent_channels, 1, 64)
        if len(self.channels) != len(self.depths) or not self.channels:
            raise ValueError(f"{p}.depths must have one entry per level "
                             f"({len(self.channels)}), got {len(self.depths)}")
        for i, (c, d) in enumerate(zip(self.channels, self.depths, strict=True)):
            check_int(f"{p}.channels[{i}]", c, 1, 100_000)
            check_int(f"{p}.depths[{i}]", d, 0, 1000)
            if c % self.head_dim:
                raise ValueError(f"{p}.head_dim must divide unet.channels[{i}] ({c}), "
                                 f"got {self.head_dim}")
        if self.latent % 2 ** (len(self.channels) - 1):
            raise ValueError(f"{p}.latent must be divisible by 2^(levels - 1), "
                             f"got {self.latent}")
        check_int(f"{p}.resnets", self.resnets, 1, 16)
        check_int(f"{p}.context", self.context, 1, 100_000)
        check_int(f"{p}.context_dim", self.context_dim, 1, 100_000)
        check_int(f"{p}.head_dim", self.head_dim, 1, 4096)
        check_int(f"{p}.steps", self.steps, 1, 10_000)
        check_bool(f"{p}.guidance", self.guidance)


def maxtext_model(scale):
    """MaxText's default decoder scaled by ``global_parameter_scale`` (a power of 2), as
    MaxText's ``pyconfig.get_individual_scales`` does: with 2^k = scale and (b, r) =
    divmod(k, 3), heads and MLP width double b + (r > 0) times, the embedding b + (r > 1)
    times, the layers b times, from ``configs/base.yml``'s d_model 2048, 16 heads of 128
    (as many KV heads), gated SiLU MLP of 7168, 16 layers, vocabulary 32000, logits not tied
    to the embedding."""
    k = round(math.log2(scale)) if scale >= 1 else -1
    if k < 0 or 2 ** k != scale:
        raise ValueError(f"maxtext scale must be a power of 2 (1, 2, 4, ...), got {scale}")
    b, r = divmod(k, 3)
    heads = 16 * 2 ** (b + (r > 0))
    return Transformer(name=f"MaxText {scale}B", layers=16 * 2 ** b,
                       d_model=2048 * 2 ** (b + (r > 1)), heads=heads, kv_heads=heads,
                       head_dim=128, ffn=7168 * 2 ** (b + (r > 0)), vocab=32000, seq=2048)


MODELS = {
    "gpt3-175b": Transformer(name="GPT-3 175B", layers=96, d_model=12288, heads=96,
                             kv_heads=96, head_dim=128, ffn=49152, vocab=50257, seq=2048,
                             gated=False, tied_embeddings=True),
    "llama2-70b": Transformer(name="Llama-2 70B", layers=80, d_model=8192, heads=64,
                              kv_heads=8, head_dim=128, ffn=28672, vocab=32000, seq=4096),
    "palm-540b": Transformer(name="PaLM 540B", layers=118, d_model=18432, heads=48, kv_heads=1,
                             head_dim=256, ffn=73728, vocab=256000, seq=2048,
                             tied_embeddings=True, parallel_layers=True),
    "mixtral-8x7b": Transformer(name="Mixtral 8x7B", layers=32, d_model=4096, heads=32,
                                kv_heads=8, head_dim=128, ffn=14336, vocab=32000, seq=4096,
                                experts=8, top_k=2),
    **{f"maxtext-{n}b": maxtext_model(n) for n in (16, 32, 64)},
}
"""Model shapes from their papers: GPT-3 (arXiv 2005.14165, table 2.1), Llama 2 (arXiv
2307.09288), PaLM (arXiv 2204.02311, table 1: multi-query attention, SwiGLU, parallel layers,
shared embeddings), Mixtral (arXiv 2401.04088); MaxText's scaled default decoder
(``maxtext_model``)."""


def _kv_per_chip(kv_heads, tp):
    """KV heads one chip of a tensor-parallel group of ``tp`` holds: its share when ``tp``
    divides them, one (each head replicated on tp / kv_heads chips) when they divide ``tp``,
    else all of them (replicated)."""
    if kv_heads % tp == 0:
        return kv_heads / tp
    if tp % kv_heads == 0:
        return 1
    return kv_heads


def _stream_bytes_per_token(model, tp, moe, sequence_parallel=False):
    """Forward elementwise HBM traffic per token of one layer (bytes per chip), unfused:
    two norms (read + write d each), two residual adds (read 2d, write d each), the MLP
    activation (read 2 x ffn, write ffn if gated, else read + write ffn; per routed expert).
    ``sequence_parallel``: the norms and residual adds run on 1/tp of the tokens on each chip
    of the tensor-parallel group (Megatron-LM's sequence parallelism, Korthikanti et al.,
    arXiv 2205.05198, section 4.2.2), as the MLP activation already does on 1/tp of ffn."""
    mlp = (3 if model.gated else 2) * model.ffn / tp
    if moe:
        mlp = model.top_k * (mlp + 4 * model.d_model)  # + dispatch and combine buffers
    return ACT_BYTES * (10 * model.d_model / (tp if sequence_parallel else 1) + mlp)


def _vpu_per_token(model, tp, moe, sequence_parallel=False):
    """The vector unit's forward work per token of one layer, as (kind, elements) pairs:
    two RMS norms of d, two residual adds of d (on 1/tp of them under sequence
    parallelism), the MLP activation of ffn / tp (SiLU and the gate's product when gated,
    tanh-GELU otherwise; per routed expert)."""
    d = model.d_model / (tp if sequence_parallel else 1)
    f = model.ffn / tp * (model.top_k if moe else 1)
    act = [("silu", f), ("add", f)] if model.gated else [("gelu_tanh", f)]
    return (("rmsnorm", 2 * d), ("add", 2 * d), *act)


def layer_forward(model, *, tokens, tensor, flash, moe=False, expert=1,
                  sequence_parallel=False):
    """The forward operations of one layer on one chip for ``tokens`` tokens of one
    tensor-parallel group (``tokens / seq`` sequences), as a list of Gemm and Stream."""
    m, tp = model, tensor
    seqs = tokens / m.seq
    heads = m.heads // tp
    kv_heads = _kv_per_chip(m.kv_heads, tp)
    hd = m.head_dim
    q_cols = heads * hd
    kv_cols = round(2 * kv_heads * hd)
    ops = [Gemm("qkv", tokens, m.d_model, q_cols + kv_cols)]
    attn_count = seqs * heads
    if flash:
        q_bytes = ACT_BYTES * tokens * q_cols
        kv_bytes = ACT_BYTES * tokens * kv_cols / 2
        ops += [Gemm("scores", m.seq, hd, m.seq, attn_count, traffic=q_bytes + kv_bytes),
                Gemm("context", m.seq, m.seq, hd, attn_count, traffic=kv_bytes + q_bytes)]
    else:
        ops += [Gemm("scores", m.seq, hd, m.seq, attn_count),
                Gemm("context", m.seq, m.seq, hd, attn_count),
                Stream("softmax", 2 * ACT_BYTES * attn_count * m.seq * m.seq)]
    ops.append(Gemm("attn_out", tokens, q_cols, m.d_model))
    width = (2 if m.gated else 1) * m.ffn // tp
    if moe:
        local = m.experts // expert
        per_expert = tokens * expert * m.top_k / m.experts
        ops += [Gemm("router", tokens, m.d_model, m.experts),
                Gemm("expert_up", per_expert, m.d_model, width, local),
                Gemm("expert_down", per_expert, m.ffn // tp, m.d_model, local)]
    else:
        ops += [Gemm("mlp_up", tokens, m.d_model, width),
                Gemm("mlp_down", tokens, m.ffn // tp, m.d_model)]
    ops.append(Stream("elementwise",
                      tokens * _stream_bytes_per_token(m, tp, moe, sequence_parallel),
                      tuple((k, tokens * e)
                            for k, e in _vpu_per_token(m, tp, moe, sequence_parallel))))
    return ops


def _backward(op, flash):
    """The backward operations of one forward operation: the gradients with respect to both
    GEMM operands; twice the forward traffic for streams; fused attention recomputes its
    scores."""
    if isinstance(op, Stream):
        return [Stream(op.name + "_grad", 2 * op.bytes, tuple((k, 2 * e) for k, e in op.vpu))]
    grads = [Gemm(op.name + "_dx", op.m, op.n, op.k, op.count, op.traffic),
             Gemm(op.name + "_dw", op.k, op.m, op.n, op.count, op.traffic)]
    if flash and op.name == "scores":
        grads.append(op)
    return grads


def training_ops(training, *, tokens):
    """Operations of one training step on one chip, by phase: ``forward``, ``backward``,
    ``recompute`` (the recomputed fraction of the layers' forward, as a list of (op, weight)
    pairs in every phase), ``optimizer``. ``tokens``: tokens per tensor-parallel group."""
    m, par = training.model, training.parallelism
    tp, flash = par.tensor, training.flash_attention
    sp = training.sequence_parallel
    dense = layer_forward(m, tokens=tokens, tensor=tp, flash=flash, sequence_parallel=sp)
    moe = layer_forward(m, tokens=tokens, tensor=tp, flash=flash, moe=True,
                        expert=par.expert, sequence_parallel=sp) if m.moe_layers else []
    n_dense = m.layers - m.moe_layers
    layers = [(op, n_dense) for op in dense] + [(op, m.moe_layers) for op in moe]
    head = [(Gemm("logits", tokens, m.d_model, math.ceil(m.vocab / tp)), 1),
            (Stream("embedding", 2 * ACT_BYTES * tokens * m.d_model), 1)]
    forward = layers + head
    backward = [(g, w) for op, w in forward for g in _backward(op, flash)]
    shard = m.params / (par.fsdp * par.data * tp)
    optimizer = [(Stream("optimizer", shard * (2 * (ACT_BYTES + training.state_bytes)
                                               + ACT_BYTES)), 1)]
    recompute = [(op, w * training.recompute) for op, w in layers]
    if training.recompute_elementwise and training.recompute < 1:
        # checkpoint_dots_with_no_batch_dims: the weight GEMMs' outputs are saved, the
        # elementwise work and the attention's batched products are recomputed
        recompute += [(op, w * (1 - training.recompute)) for op, w in layers
                      if isinstance(op, Stream) or op.name in ("scores", "context")]
    return {"forward": forward, "backward": backward, "recompute": recompute,
            "optimizer": optimizer}


def inference_ops(inference, *, tensor, phase):
    """Operations on one chip of one prefill (all prompts) or one decode step (one token per
    sequence, attending to the average context), with tensor parallelism ``tensor``."""
    check_choice("phase", phase, ("prefill", "decode"))
    m = inference.model
    if phase == "prefill":
        tokens = inference.batch * inference.prompt
        ops = layer_forward(m, tokens=tokens, tensor=tensor, flash=True)
        weighted = [(op, m.layers) for op in ops]
        return weighted + [(Gemm("logits", inference.batch, m.d_model,
                                 math.ceil(m.vocab / tensor)), 1)]
    batch, context = inference.batch, inference.decode_context
    heads = m.heads // tensor
    kv_heads = _kv_per_chip(m.kv_heads, tensor)
    hd = m.head_dim
    kv_cache = ACT_BYTES * batch * context * kv_heads * hd  # K (or V) of one layer
    group = heads / kv_heads  # queries per KV head
    width = (2 if m.gated else 1) * m.ffn // tensor
    ops = [Gemm("qkv", batch, m.d_model, heads * hd + round(2 * kv_heads * hd)),
           Gemm("scores", group, hd, context, batch * kv_heads, traffic=kv_cache),
           Gemm("context", group, context, hd, batch * kv_heads, traffic=kv_cache),
           Gemm("attn_out", batch, heads * hd, m.d_model),
           Gemm("mlp_up", batch, m.d_model, width),
           Gemm("mlp_down", batch, m.ffn // tensor, m.d_model),
           Stream("elementwise", batch * _stream_bytes_per_token(m, tensor, False))]
    return [(op, m.layers) for op in ops] + [
        (Gemm("logits", batch, m.d_model, math.ceil(m.vocab / tensor)), 1)]


def _resnet(ops, name, images, size, cin, cout):
    """A ResNet block: two 3x3 convolutions (im2col GEMMs), a 1x1 shortcut when the width
    changes, group norms and activations (read + write twice each)."""
    pixels = images * size * size
    ops += [Gemm(f"{name}.conv1", pixels, 9 * cin, cout),
            Gemm(f"{name}.conv2", pixels, 9 * cout, cout),
            Stream(f"{name}.norms", ACT_BYTES * pixels * 4 * (cin + cout))]
    if cin != cout:
        ops.append(Gemm(f"{name}.shortcut", pixels, cin, cout))


def _transformer_block(ops, name, u, images, size, width):
    """A spatial transformer block: self-attention over the pixels, cross-attention to the
    text context, a GEGLU MLP of 4 x width, three layer norms (unfused, non-flash attention
    at this size would not fit VMEM either way: the scores are streamed)."""
    tokens = images * size * size
    heads = width // u.head_dim
    seq = size * size
    ops += [Gemm(f"{name}.qkv", tokens, width, 3 * width),
            Gemm(f"{name}.scores", seq, u.head_dim, seq, images * heads,
                 traffic=ACT_BYTES * 2 * tokens * width),
            Gemm(f"{name}.context", seq, seq, u.head_dim, images * heads,
                 traffic=ACT_BYTES * 2 * tokens * width),
            Gemm(f"{name}.attn_out", tokens, width, width),
            Gemm(f"{name}.cross_q", tokens, width, width),
            Gemm(f"{name}.cross_kv", images * u.context, u.context_dim, 2 * width),
            Gemm(f"{name}.cross_scores", seq, u.head_dim, u.context, images * heads),
            Gemm(f"{name}.cross_context", seq, u.context, u.head_dim, images * heads),
            Gemm(f"{name}.cross_out", tokens, width, width),
            Gemm(f"{name}.ff_up", tokens, width, 8 * width),
            Gemm(f"{name}.ff_down", tokens, 4 * width, width),
            Stream(f"{name}.norms", ACT_BYTES * tokens * (6 * width + 12 * width))]


def _attention_level(ops, name, u, images, size, width, depth):
    """Projections in and out of a stack of ``depth`` transformer blocks."""
    tokens = images * size * size
    ops.append(Gemm(f"{name}.proj_in", tokens, width, width))
    for d in range(depth):
        _transformer_block(ops, f"{name}.block{d}", u, images, size, width)
    ops.append(Gemm(f"{name}.proj_out", tokens, width, width))


def unet_ops(u, *, images):
    """Operations of one UNet evaluation on ``images`` latents on one chip (the VAE and the
    text encoders are left out: they run once per image, not once per step)."""
    ops = []
    size = u.latent
    ops.append(Gemm("conv_in", images * size * size, 9 * u.latent_channels, u.channels[0]))
    skips = [u.channels[0]]
    cin = u.channels[0]
    levels = len(u.channels)
    for lvl, (width, depth) in enumerate(zip(u.channels, u.depths, strict=True)):
        for r in range(u.resnets):
            _resnet(ops, f"down{lvl}.res{r}", images, size, cin, width)
            if depth:
                _attention_level(ops, f"down{lvl}.attn{r}", u, images, size, width, depth)
            cin = width
            skips.append(width)
        if lvl < levels - 1:
            ops.append(Gemm(f"down{lvl}.downsample", images * (size // 2) ** 2, 9 * width,
                            width))
            size //= 2
            skips.append(width)
    _resnet(ops, "mid.res0", images, size, cin, cin)
    _attention_level(ops, "mid.attn", u, images, size, cin, u.depths[-1])
    _resnet(ops, "mid.res1", images, size, cin, cin)
    for lvl in reversed(range(levels)):
        width, depth = u.channels[lvl], u.depths[lvl]
        for r in range(u.resnets + 1):
            _resnet(ops, f"up{lvl}.res{r}", images, size, cin + skips.pop(), width)
            if depth:
                _attention_level(ops, f"up{lvl}.attn{r}", u, images, size, width, depth)
            cin = width
        if lvl > 0:
            size *= 2
            ops.append(Gemm(f"up{lvl}.upsample", images * size * size, 9 * width, width))
    ops.append(Gemm("conv_out", images * size * size, 9 * cin, u.latent_channels))
    return [(op, 1) for op in ops]


def _gemm_flops(training, recompute):
    """GEMM FLOPs of one sequence over its tensor-parallel group."""
    ops = training_ops(replace(training, recompute=recompute), tokens=training.model.seq)
    return training.parallelism.tensor * sum(op.flops * w for phase in ops.values()
                                             for op, w in phase if isinstance(op, Gemm))


def recompute_for_ratio(training, ratio):
    """The recomputed fraction of the forward pass that makes hardware FLOPs / model FLOPs
    equal ``ratio`` (a published HFU / MFU), clipped to [0, 1]."""
    check_number("ratio", ratio, lo=1)
    model = training.model.training_flops_per_token() * training.model.seq
    none, full = _gemm_flops(training, 0.0), _gemm_flops(training, 1.0)
    return min(1.0, max(0.0, (ratio * model - none) / (full - none)))


MAXTEXT_V5E = {
    "maxtext-16b": (6, {1: 0.6110, 2: 0.5937, 4: 0.5914, 8: 0.5827, 16: 0.5656, 32: 0.5465}),
    "maxtext-32b": (4, {1: 0.6686, 2: 0.6481, 4: 0.6410, 8: 0.6367, 16: 0.6226, 32: 0.6040}),
    "maxtext-64b": (2, {1: 0.5990, 2: 0.5666, 4: 0.5585, 8: 0.5496, 16: 0.5329, 32: 0.5018}),
}
"""MaxText on 1 to 32 v5e-256 slices: (sequences per chip, {slices: published MFU}), from
MaxText's ``MaxText/configs/v5e/README.md`` (AI-Hypercomputer/maxtext), run by
``configs/v5e/{16,32,64}b.sh`` (per_device_batch_size 6 / 4 / 2, remat_policy full, attention
flash, FSDP over the slice). Its 128B column is left out: that run script offloads activations
to host memory and adds 16-way tensor parallelism, which the model does not represent."""


TRAINING = {
    "gpt3-175b": "GPT-3 175B, FSDP over each slice, 1 sequence of 2048 tokens per chip "
                 "(assumed: the batch of Google's runs is not published), full "
                 "recomputation, fused attention",
    "llama2-70b": "Llama-2 70B, FSDP over each slice, 1 sequence of 4096 tokens per chip "
                  "(assumed), full recomputation, fused attention",
    "palm-540b": "PaLM 540B as published: 12-way tensor x 256-way FSDP per slice, global "
                 "batch 2048 sequences of 2048 tokens, recomputation set by PaLM's own "
                 "HFU/MFU ratio, attention not fused (2022), the cross-pod gradient exchange "
                 "after the backward pass (Pathways), not overlapped",
    "mixtral-8x7b": "Mixtral 8x7B, FSDP over each slice with 8-way expert parallelism, 1 "
                    "sequence of 4096 tokens per chip (assumed), full recomputation, fused "
                    "attention",
    **{name: f"{MODELS[name].name} (MaxText's default decoder scaled up) as its v5e run "
             f"script runs it: FSDP over each slice, {per_chip} sequences of 2048 tokens per "
             "chip, full recomputation, flash attention"
       for name, (per_chip, _) in MAXTEXT_V5E.items()},
}
"""Training presets and what they assume."""

PALM_MFU, PALM_HFU = 0.462, 0.578
"""PaLM 540B on 6144 TPU v4 chips (arXiv 2204.02311, section 4)."""


def training_preset(name, *, chips, slices):
    """The training preset ``name`` for ``slices`` slices of ``chips`` chips. Except PaLM's
    (a published global batch), the per-chip batch is fixed, so the global batch grows with
    the slices: weak scaling."""
    check_choice("workload", name, tuple(TRAINING))
    if name == "palm-540b":
        if chips % 12:
            raise ValueError(f"palm-540b needs slices of a multiple of 12 chips, got {chips}")
        # PaLM, section 4: within a pod the weights are all-gathered over the data-parallel
        # axis; across the two pods each host exchanges its gradients (about 1.3 GB) with its
        # counterpart after the backward pass, before the optimizer update.
        t = Training(model=MODELS[name], parallelism=Parallelism(tensor=12, fsdp=chips // 12),
                     global_batch=2048, flash_attention=False, dcn_overlap=False)
        return replace(t, recompute=recompute_for_ratio(t, PALM_HFU / PALM_MFU))
    expert = 8 if name == "mixtral-8x7b" else 1
    per_chip = MAXTEXT_V5E[name][0] if name in MAXTEXT_V5E else 1
    return Training(model=MODELS[name], parallelism=Parallelism(fsdp=chips, expert=expert),
                    global_batch=chips * slices * per_chip)
