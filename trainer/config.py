"""Configuration of a training run: model shape, parallel layout, optimizer, I/O.

Small typed dataclasses, validated on construction with errors that name the field and the fix.
Presets are functions of nothing: ``preset(name)`` returns a :class:`ModelConfig`. A YAML/JSON
file loads into the same dataclasses (:func:`load_config_file`).

GPT-3 shapes are from Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1
(1.3B uses 16 heads and 13B a hidden size of 5120 so that heads divide the hidden size; the
table's 24 heads and 5140 are not consistent with its d_head). The vocabulary 50257 is padded to
51200 (= 50257 rounded up to a multiple of 1024), as Megatron-LM pads the vocabulary
(``--make-vocab-size-divisible-by``, default 128 x tp), so that tp up to 8 divides it.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hfconfig import (
    GATED_ACTS,
    architecture,
    canonical_keys,
    int_key,
    moe_keys,
    read_hf_file,
    training_seq,
)
from hfconfig import is_config_path as hf_is_config_path
from inputspec import InputError

DTYPES = ("float32", "float64", "bfloat16", "float16")
ORDERS_AXES = frozenset(("tp", "dp", "pp"))
OPTIONAL_AXES = frozenset(("cp", "ep"))
"""Axes an order string may also name (Megatron-Core's ``tp-cp-ep-dp-pp``); left out, they are
inserted where Megatron-Core puts them (cp after tp, ep just inside dp)."""
FFN_KINDS = ("plain", "gated")
ACTIVATIONS = ("gelu", "silu")
DP_REDUCE_MODES = ("all_reduce", "reduce_scatter")


@dataclass(kw_only=True)
class ModelConfig:
    """Shape of a decoder-only GPT."""

    layers: int
    """Number of transformer blocks."""
    hidden: int
    """Model width h."""
    heads: int
    """Attention heads; must divide ``hidden``."""
    seq: int
    """Sequence length s in tokens."""
    vocab: int
    """Vocabulary size V (already padded; must be divisible by tp)."""
    ffn_hidden: int = 0
    """MLP width; 0 means 4 x hidden."""
    tied: bool = True
    """Tie the output head to the word embedding (Megatron-LM's default)."""
    ln_eps: float = 1e-5
    """Layer norm epsilon."""
    kv_heads: int = 0
    """Key/value heads (grouped-query attention, Ainslie et al. 2023); 0 means ``heads``."""
    ffn: str = "plain"
    """``plain`` (fc1, activation, fc2) or ``gated`` (SwiGLU: act(x W_gate) * (x W_up), then
    W_down; Shazeer 2020), three matrices of width ``ffn_hidden``."""
    activation: str = ""
    """``gelu`` (tanh approximation) or ``silu``; empty: gelu for plain, silu for gated."""
    experts: int = 0
    """Routed experts of a mixture-of-experts MLP; 0: every MLP is dense."""
    top_k: int = 2
    """Experts each token is routed to (used when ``experts`` > 0)."""
    moe_ffn_hidden: int = 0
    """Width of one expert's MLP; 0 means ``ffn_hidden``."""
    shared_experts: int = 0
    """Always-active experts beside the routed ones (DeepSeek's n_shared_experts), one dense
    MLP of width shared_experts x moe_ffn_hidden."""
    first_dense_layers: int = 0
    """The first k blocks keep a dense MLP (DeepSeek's first_k_dense_replace)."""
    moe_every: int = 1
    """Block i (counting from 1 after the dense ones) is MoE when i is a multiple of this
    (Qwen's decoder_sparse_step)."""
    name: str = ""
    """The model's own name (a preset or config.json's name), for reports."""

    def __post_init__(self) -> None:
        if self.ffn_hidden == 0:
            self.ffn_hidden = 4 * self.hidden
        if self.kv_heads == 0:
            self.kv_heads = self.heads
        if self.moe_ffn_hidden == 0:
            self.moe_ffn_hidden = self.ffn_hidden
        if not self.activation:
            self.activation = "silu" if self.ffn == "gated" else "gelu"
        self._check_modern()
        for name in ("layers", "hidden", "heads", "seq", "vocab", "ffn_hidden"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"model.{name} must be a positive integer, got {getattr(self, name)}")
        if self.hidden % self.heads:
            raise ValueError(
                f"model.heads={self.heads} must divide model.hidden={self.hidden}: pick heads among "
                f"the divisors of hidden"
            )

    def _check_modern(self) -> None:
        """GQA, gated FFN and MoE fields (errors name the field and the fix)."""
        if self.ffn not in FFN_KINDS:
            raise ValueError(f"model.ffn={self.ffn!r} must be one of {', '.join(FFN_KINDS)}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"model.activation={self.activation!r} must be one of "
                             f"{', '.join(ACTIVATIONS)}")
        if self.kv_heads < 1 or self.heads % self.kv_heads:
            raise ValueError(f"model.kv_heads={self.kv_heads} must divide model.heads={self.heads}"
                             f" (each key/value head serves heads/kv_heads query heads)")
        for name in ("experts", "shared_experts", "first_dense_layers"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"model.{name} must be >= 0, got {getattr(self, name)}")
        if self.experts and not 1 <= self.top_k <= self.experts:
            raise ValueError(f"model.top_k={self.top_k} must be between 1 and model.experts="
                             f"{self.experts}")
        if self.moe_every < 1 or self.moe_ffn_hidden < 1:
            raise ValueError("model.moe_every and model.moe_ffn_hidden must be positive")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def is_moe_layer(self, index: int) -> bool:
        """Whether block ``index`` (0-based, whole model) has a mixture-of-experts MLP."""
        if not self.experts or index < self.first_dense_layers:
            return False
        return (index - self.first_dense_layers + 1) % self.moe_every == 0

    @property
    def moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.layers))


_PRESETS: dict[str, dict[str, Any]] = {
    # tiny: the CPU test model (8 gloo processes on 2 cores must run several steps in seconds)
    "tiny": dict(layers=4, hidden=32, heads=4, seq=16, vocab=64),
    "small": dict(layers=4, hidden=256, heads=8, seq=256, vocab=4096),
    # GPT-3 family, Brown et al. 2020 Table 2.1 (see module docstring for the two fixes)
    "gpt3-125m": dict(layers=12, hidden=768, heads=12, seq=2048, vocab=51200),
    "gpt3-350m": dict(layers=24, hidden=1024, heads=16, seq=2048, vocab=51200),
    "gpt3-760m": dict(layers=24, hidden=1536, heads=16, seq=2048, vocab=51200),
    "gpt3-1.3b": dict(layers=24, hidden=2048, heads=16, seq=2048, vocab=51200),
    "gpt3-2.7b": dict(layers=32, hidden=2560, heads=32, seq=2048, vocab=51200),
    "gpt3-6.7b": dict(layers=32, hidden=4096, heads=32, seq=2048, vocab=51200),
    "gpt3-13b": dict(layers=40, hidden=5120, heads=40, seq=2048, vocab=51200),
    "gpt3-175b": dict(layers=96, hidden=12288, heads=96, seq=2048, vocab=51200),
    # tiny-moe: the CPU test model of the GQA / SwiGLU / MoE / CP parity checks: two KV heads,
    # a gated FFN, a dense first block and a 4-expert top-2 second block
    # Today's shapes, from the models' published config.json (Hugging Face repos
    # meta-llama/Meta-Llama-3-8B, meta-llama/Meta-Llama-3-70B, meta-llama/Llama-3.1-405B,
    # mistralai/Mixtral-8x7B-v0.1, deepseek-ai/DeepSeek-V3; Llama 3 also Dubey et al. 2024,
    # Table 3). seq is the pre-training length: 8192 (Llama 3, section 3.4.1), 32768 (Mixtral,
    # Jiang et al. 2024, section 2), 4096 (DeepSeek-V3, arXiv:2412.19437 section 4.2).
    # DeepSeek-V3's multi-head latent attention is run as plain multi-head attention.
    "llama3-8b": dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
                      vocab=128256, seq=8192, tied=False, ffn="gated"),
    "llama3-70b": dict(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672,
                       vocab=128256, seq=8192, tied=False, ffn="gated"),
    "llama3-405b": dict(layers=126, hidden=16384, heads=128, kv_heads=8, ffn_hidden=53248,
                        vocab=128256, seq=8192, tied=False, ffn="gated"),
    "mixtral-8x7b": dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
                         vocab=32000, seq=32768, tied=False, ffn="gated", experts=8, top_k=2),
    "deepseek-v3": dict(layers=61, hidden=7168, heads=128, kv_heads=128, ffn_hidden=18432,
                        vocab=129280, seq=4096, tied=False, ffn="gated", experts=256, top_k=8,
                        moe_ffn_hidden=2048, shared_experts=1, first_dense_layers=3),
    "tiny-moe": dict(layers=2, hidden=32, heads=4, kv_heads=2, seq=16, vocab=64, ffn="gated",
                     ffn_hidden=48, experts=4, top_k=2, moe_ffn_hidden=24, first_dense_layers=1),
}
PRESET_NAMES = tuple(_PRESETS)


def preset(name: str, /, **overrides: Any) -> ModelConfig:
    """Return the model preset ``name`` with non-None ``overrides`` applied (an override
    ``name`` renames the model).

    Raises
    ------
    ValueError
        If ``name`` is not a preset.
    """
    if name not in _PRESETS:
        raise ValueError(f"unknown model preset {name!r}: choose one of {', '.join(_PRESETS)}")
    fields = dict(_PRESETS[name], name=name)
    fields.update({k: v for k, v in overrides.items() if v is not None})
    return ModelConfig(**fields)


# --------------------------------------------------------------------------- config.json models
# The keys are read by the shared parser (:mod:`hfconfig`, also netsim's). What the trainer does
# not model is said, not hidden: positions are learned (not rotary) and norms are LayerNorm (not
# RMSNorm); a ``head_dim`` other than hidden / heads and DeepSeek's multi-head latent attention
# are refused or ignored (MLA: the trainer runs GQA with ``num_key_value_heads``); ReLU MLPs are
# refused (the trainer's plain MLP is GELU). The shapes, FLOPs and communication volumes are
# those of the config.
TRAINER_PLAIN_ACTS = ("gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh")


def _ffn_kind(data: Mapping) -> tuple[str, str]:
    act = str(data.get("hidden_act")).lower()
    allowed = tuple(a for a in GATED_ACTS + TRAINER_PLAIN_ACTS if a != "reglu")  # no ReLU here
    if act not in allowed:
        raise ValueError(f"config.json: hidden_act {act!r} is not one of {', '.join(allowed)}")
    if not architecture(data)[0]:
        return "plain", "gelu"
    return "gated", ("gelu" if act.startswith("ge") else "silu")  # Gemma's GeGLU, geglu


def model_from_hf(data: Mapping[str, Any], name: str = "", seq: int | None = None) -> ModelConfig:
    """The :class:`ModelConfig` of a transformers config (a mapping of its keys); ``seq``
    None: ``hfconfig.DEFAULT_SEQ`` (capped at ``max_position_embeddings``), never the
    model's longest context."""
    data = canonical_keys(data)
    layers, hidden = int_key(data, "num_hidden_layers"), int_key(data, "hidden_size")
    heads = int_key(data, "num_attention_heads")
    if heads == 0 or hidden % heads:
        raise ValueError(f"config.json: num_attention_heads={heads} must divide hidden_size={hidden}")
    if data.get("head_dim") not in (None, hidden // heads):
        raise ValueError(f"config.json: head_dim={data['head_dim']} differs from hidden_size / "
                         f"num_attention_heads = {hidden // heads}: not supported by the trainer")
    kv_heads = int_key(data, "num_key_value_heads", heads)
    if kv_heads == 0 or heads % kv_heads:
        raise ValueError(f"config.json: num_key_value_heads={kv_heads} must divide "
                         f"num_attention_heads={heads}")
    ffn, act = _ffn_kind(data)
    ffn_hidden = int_key(data, "intermediate_size")
    tied = data.get("tie_word_embeddings", True)
    if not isinstance(tied, bool):
        raise ValueError(f"config.json: tie_word_embeddings must be true or false, got {tied!r}")
    return ModelConfig(layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                       ffn_hidden=ffn_hidden, vocab=int_key(data, "vocab_size"),
                       seq=training_seq(data, seq)[0], tied=tied, ffn=ffn,
                       activation=act, name=name, **moe_keys(data, layers, ffn_hidden))


def load_hf_config(path: str | Path, seq: int | None = None) -> ModelConfig:
    """Read ``path`` (a config.json, or a directory holding one); the model is named after
    ``_name_or_path`` when the file has it, else after its directory (or file stem)."""
    data, short = read_hf_file(path)
    name = str(data.get("_name_or_path") or short)  # the trainer keeps the whole hub path
    try:
        return model_from_hf(data, name=name, seq=seq)
    except InputError:
        raise
    except ValueError as exc:
        raise ValueError(f"{path}: {str(exc).removeprefix('config.json: ')}") from None


def is_config_path(model: str) -> bool:
    """Whether ``--model`` names a file or directory rather than a preset."""
    return hf_is_config_path(model)


@dataclass(kw_only=True)
class ParallelConfig:
    """Degrees of the three parallel axes and the batch split."""

    tp: int = 1
    """Tensor-parallel degree (Megatron column/row-parallel linears)."""
    cp: int = 1
    """Context-parallel degree (ring attention over sequence chunks)."""
    ep: int = 1
    """Expert-parallel degree; carved out of dp as Megatron-Core does (ep must divide dp)."""
    pp: int = 1
    """Pipeline-parallel degree (1F1B schedule)."""
    dp: int = 1
    """Data-parallel degree."""
    order: str = "tp-dp-pp"
    """Rank order, innermost axis first (Megatron-Core's default tp-...-dp-pp)."""
    micro_batches: int = 1
    """Micro-batches per data-parallel rank per iteration (pipeline depth of work)."""
    global_batch: int = 1
    """Sequences per iteration over all data-parallel ranks."""
    sp: bool = False
    """Megatron sequence parallelism with tp (``trainer.sequence_parallel``)."""
    stage_layers: tuple[int, ...] | None = None
    """Layers of each pipeline stage (``--stage-layers 3,2``); None: ``stage_split``'s rule."""

    def __post_init__(self) -> None:
        if self.stage_layers is not None:
            self.stage_layers = tuple(int(x) for x in self.stage_layers)  # YAML gives a list
        for name in ("tp", "cp", "ep", "pp", "dp", "micro_batches", "global_batch"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"parallel.{name} must be a positive integer, got {getattr(self, name)}")
        axes = self.order.split("-")
        if (len(set(axes)) != len(axes) or not ORDERS_AXES <= set(axes)
                or not set(axes) <= ORDERS_AXES | OPTIONAL_AXES):
            raise ValueError(
                f"parallel.order={self.order!r} must name tp, dp, pp (and optionally cp, ep) once "
                f"each joined by '-', e.g. 'tp-cp-ep-dp-pp' (innermost first)"
            )
        if "ep" in axes and abs(axes.index("ep") - axes.index("dp")) != 1:
            raise ValueError(f"parallel.order={self.order!r}: ep must be next to dp (expert "
                             f"parallelism is carved out of data parallelism), e.g. tp-cp-ep-dp-pp")
        if self.dp % self.ep:
            raise ValueError(f"parallel.ep={self.ep} must divide parallel.dp={self.dp} (experts are "
                             f"spread over data-parallel ranks, Megatron-Core's layout): raise dp")
        if self.global_batch % (self.dp * self.micro_batches):
            raise ValueError(
                f"parallel.global_batch={self.global_batch} must be a multiple of dp x micro_batches"
                f" = {self.dp * self.micro_batches}"
            )

    @property
    def world_size(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def micro_batch_size(self) -> int:
        """Sequences per micro-batch."""
        return self.global_batch // (self.dp * self.micro_batches)

    def check_world(self, world_size: int) -> None:
        """Raise ValueError unless tp x cp x pp x dp equals ``world_size``."""
        if self.world_size != world_size:
            cp = f" x cp={self.cp}" if self.cp > 1 else ""
            raise ValueError(
                f"tp={self.tp}{cp} x pp={self.pp} x dp={self.dp} = {self.world_size} does not equal the "
                f"world size {world_size}: change --tp/--cp/--pp/--dp or --nproc-per-node"
            )


def stage_split(layers: int, pp: int, given: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """Layers of each pipeline stage: ``given`` (checked), else ``layers / pp`` each, else
    Megatron-Core's rule when ``layers + 2`` divides by ``pp`` (the embedding and the loss
    count as a layer each: one layer fewer on the first and on the last stage)."""
    if given is not None:
        if len(given) != pp or sum(given) != layers or min(given) < 1:
            raise ValueError(f"stage_layers={','.join(map(str, given))} must be {pp} counts "
                             f">= 1 summing to model.layers={layers}")
        return tuple(given)
    if layers % pp == 0:
        return (layers // pp,) * pp
    if pp > 1 and (layers + 2) % pp == 0 and (layers + 2) // pp >= 2:
        per = (layers + 2) // pp
        return (per - 1,) + (per,) * (pp - 2) + (per - 1,)
    raise ValueError(f"model.layers={layers} does not split over pp={pp} (evenly, or one fewer "
                     "on the first and last stage): give --stage-layers, e.g. "
                     f"{','.join(map(str, _example_split(layers, pp)))}")


def _example_split(layers: int, pp: int) -> list[int]:
    return [layers // pp + (1 if i < layers % pp else 0) for i in range(pp)]


def check_model_fits(model: ModelConfig, par: ParallelConfig) -> None:
    """Raise ValueError when the model cannot be split by the layout."""
    if par.pp > model.layers:
        raise ValueError(f"pp={par.pp} exceeds model.layers={model.layers}")
    stage_split(model.layers, par.pp, par.stage_layers)
    check_sp_fits(model, par)
    checks = (
        (model.heads % par.tp, f"model.heads={model.heads} must be divisible by tp={par.tp}"),
        (model.vocab % par.tp, f"model.vocab={model.vocab} must be divisible by tp={par.tp}"),
        (model.ffn_hidden % par.tp, f"model.ffn_hidden={model.ffn_hidden} must be divisible by tp={par.tp}"),
    )
    for bad, msg in checks:
        if bad:
            raise ValueError(msg)
    check_modern_fits(model, par)


def check_sp_fits(model: ModelConfig, par: ParallelConfig) -> None:
    """Sequence parallelism: the sequence splits over tp; not combined with cp or MoE here."""
    if not par.sp:
        return
    if par.cp > 1 or model.experts:
        raise ValueError("parallel.sp is not combined with cp or MoE experts in this trainer: "
                         "drop --sp, --cp or the experts")
    if model.seq % par.tp:
        raise ValueError(f"model.seq={model.seq} must be divisible by tp={par.tp} with --sp")


def check_modern_fits(model: ModelConfig, par: ParallelConfig) -> None:
    """The GQA, MoE and context-parallel divisibility rules."""
    checks = (
        (model.kv_heads % par.tp, f"model.kv_heads={model.kv_heads} must be divisible by tp="
                                  f"{par.tp} (Megatron shards query groups over tp)"),
        (model.seq % par.cp, f"model.seq={model.seq} must be divisible by cp={par.cp}"),
        (model.experts % par.ep if model.experts else par.ep > 1,
         f"model.experts={model.experts} must be a positive multiple of ep={par.ep}"),
        (model.experts and model.moe_ffn_hidden % par.tp,
         f"model.moe_ffn_hidden={model.moe_ffn_hidden} must be divisible by tp={par.tp}"),
    )
    for bad, msg in checks:
        if bad:
            raise ValueError(msg)


@dataclass(kw_only=True)
class TrainConfig:
    """Everything a run needs."""

    model: ModelConfig
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    steps: int = 10
    """Iterations to run (total, counting those before a resumed checkpoint)."""
    seed: int = 1234
    """Seed of the weights and the synthetic data."""
    lr: float = 1e-3
    """AdamW learning rate (constant)."""
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = 0.0
    """Decoupled weight decay, applied to every parameter."""
    dtype: str = "float32"
    """Parameter and compute dtype."""
    device: str = "auto"
    """cpu, cuda, or auto (cuda when available)."""
    dp_reduce: str = "all_reduce"
    """all_reduce, or reduce_scatter (+ sharded optimizer step + all_gather of parameters)."""
    bucket_bytes: int = 25 * 2**20
    """Gradient bucket size (PyTorch DDP's default bucket_cap_mb=25)."""
    fsdp: bool = False
    """Fully sharded data parallelism over dp (``trainer.fsdp``): one sharded unit per block."""
    trace_dir: str | None = None
    peak_flops: float | None = None
    """Peak FLOP/s of one device, for MFU; None: a device default or no MFU."""
    save_dir: str | None = None
    save_every: int = 0
    """Checkpoint every N steps (0: only at the end when save_dir is set)."""
    load_dir: str | None = None
    profile_dir: str | None = None
    """Write torch.profiler (Kineto) Chrome traces here (``trainer.profiling``)."""
    profile_schedule: tuple[int, int, int] = (1, 1, 3)
    """Profiler (wait, warmup, active) steps."""
    inject_slow_rank: int | str | list | None = None
    """Fault injection (``trainer.faults``): this layout rank computes ``slow_factor`` x slower;
    a list names several (each ``R``, ``"R:F"`` or ``[R, F]``)."""
    slow_factor: float = 1.0
    inject_slow_link: tuple[int, int] | None = None
    """Fault injection: (R, PEER), R's sends to PEER take ``link_delay_us`` longer."""
    link_delay_us: float = 0.0

    def fault_config(self):
        """The :class:`trainer.faults.FaultConfig` of the injection fields."""
        from trainer.faults import FaultConfig

        link = tuple(self.inject_slow_link) if self.inject_slow_link is not None else None
        from trainer.faults import parse_slow_rank

        spec = self.inject_slow_rank
        specs = spec if isinstance(spec, list) else ([] if spec is None else [spec])
        slow = tuple(parse_slow_rank(x, self.slow_factor) for x in specs)
        return FaultConfig(slow_ranks=slow, slow_factor=self.slow_factor, slow_link=link,
                           link_delay_us=self.link_delay_us)

    def __post_init__(self) -> None:
        if self.steps < 0:
            raise ValueError(f"steps must be >= 0, got {self.steps}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype={self.dtype!r} is not one of {', '.join(DTYPES)}")
        if self.dp_reduce not in DP_REDUCE_MODES:
            raise ValueError(f"dp_reduce={self.dp_reduce!r} is not one of {', '.join(DP_REDUCE_MODES)}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device={self.device!r} must be cpu, cuda or auto")
        if self.bucket_bytes < 1:
            raise ValueError(f"bucket_bytes must be positive, got {self.bucket_bytes}")
        self.betas = tuple(self.betas)  # YAML gives a list
        self.profile_schedule = tuple(self.profile_schedule)
        self.fault_config().check_world(self.parallel.world_size)
        check_model_fits(self.model, self.parallel)
        if self.fsdp and (self.model.experts or self.save_dir or self.load_dir):
            raise ValueError("fsdp is not combined with MoE experts or checkpoints in this "
                             "trainer: drop --fsdp, the experts or --save/--load")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: Bounds of the file's numbers beyond their types (``inputspec`` rules): counts a run can hold.
CONFIG_RULES: dict[str, dict[str, Any]] = {
    "steps": dict(min=0, max=10**9, example=10), "save_every": dict(min=0, max=10**9),
    "seed": dict(min=0, max=2**63 - 1), "lr": dict(min=0, max=1e3), "eps": dict(gt=0, max=1),
    "weight_decay": dict(min=0, max=1e3), "bucket_bytes": dict(min=1, max=2**40),
    "peak_flops": dict(gt=0, max=1e18), "slow_factor": dict(gt=0, max=1e3),
    "link_delay_us": dict(min=0, max=1e9), "inject_slow_rank": dict(min=0, max=2**24),
}
PARALLEL_RULES = {k: dict(min=1, max=2**24, example=2) for k in
                  ("tp", "cp", "ep", "pp", "dp", "micro_batches")} | {
    "global_batch": dict(min=1, max=2**40, example=8)}
MODEL_RULES = {k: dict(min=1, max=2**24, example=8) for k in
               ("layers", "hidden", "heads", "seq", "vocab")} | {
    k: dict(min=0, max=2**24) for k in ("ffn_hidden", "kv_heads", "experts", "top_k",
                                        "moe_ffn_hidden", "shared_experts",
                                        "first_dense_layers", "moe_every")} | {
    "ln_eps": dict(gt=0, max=1)}


def config_from_dict(data: dict[str, Any], source: str = "config") -> TrainConfig:
    """Build a :class:`TrainConfig` from a plain dict (the YAML/JSON file layout), every
    value typed and bounded (``inputspec``: errors name ``source`` and the field).

    ``model`` may be a preset name, a transformers config.json path, or a mapping (optionally
    with ``preset`` plus overrides).
    """
    from inputspec import check_value, from_dict
    from inputspec.core import Rule, construct

    data = dict(data)
    unknown = set(data) - {f.name for f in dataclasses.fields(TrainConfig)}
    if unknown:
        raise InputError(source, problem=f"unknown config keys {sorted(map(str, unknown))}: "
                         "valid keys are the TrainConfig fields")
    model = _model_from_dict(data.pop("model", "tiny"), source)
    par = from_dict(ParallelConfig, data.pop("parallel", {}), source, prefix="parallel",
                    rules=PARALLEL_RULES)
    hints = typing.get_type_hints(TrainConfig)
    kwargs = {k: check_value(v, hints[k], source, k, Rule(**CONFIG_RULES.get(k, {})))
              for k, v in data.items()}
    return construct(TrainConfig, dict(kwargs, model=model, parallel=par), source)


def _model_from_dict(model: Any, source: str) -> ModelConfig:
    """The ``model`` value: a preset name, a config.json path, or a (preset +) field mapping."""
    from inputspec import check_value, from_dict
    from inputspec.core import Rule

    if isinstance(model, str):
        try:
            return load_hf_config(model) if is_config_path(model) else preset(model)
        except InputError:  # names the config.json and its key
            raise
        except ValueError as exc:  # an unknown preset, a config.json the trainer cannot run
            raise InputError(source, "model", problem=str(exc)) from None
    if not isinstance(model, Mapping) or "preset" not in model:
        return from_dict(ModelConfig, model, source, prefix="model", rules=MODEL_RULES)
    m = dict(model)
    name = check_value(m.pop("preset"), str, source, "model.preset", Rule(choices=PRESET_NAMES))
    fields = {f.name for f in dataclasses.fields(ModelConfig)}
    hints = typing.get_type_hints(ModelConfig)
    for k in m:
        if k not in fields:
            raise InputError(source, problem=f"unknown key 'model.{k}'; known keys: "
                             f"preset, {', '.join(sorted(fields))}")
        m[k] = check_value(m[k], hints[k], source, f"model.{k}", Rule(**MODEL_RULES.get(k, {})))
    try:
        return preset(name, **m)
    except ValueError as exc:
        raise InputError(source, problem=f"model: {exc}") from None


def load_config_file(path: str | Path) -> TrainConfig:
    """Load a YAML (``.yaml``/``.yml``) or JSON config file into a :class:`TrainConfig`,
    through ``inputspec``'s reader: regular files only, size-capped, nesting bounded."""
    from inputspec import read_data

    path = Path(path)
    fmt = "yaml" if path.suffix.lower() in (".yaml", ".yml") else "json"
    data = read_data(path, "trainer config", default_format=fmt)
    source = f"trainer config file {path}"
    if data is None and fmt == "yaml":
        data = {}
    if not isinstance(data, dict):
        raise InputError(source, problem="the config file must hold a mapping of TrainConfig "
                         "fields")
    return config_from_dict(data, source)
