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
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DTYPES = ("float32", "float64", "bfloat16", "float16")
ORDERS_AXES = frozenset(("tp", "dp", "pp"))
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

    def __post_init__(self) -> None:
        if self.ffn_hidden == 0:
            self.ffn_hidden = 4 * self.hidden
        for name in ("layers", "hidden", "heads", "seq", "vocab", "ffn_hidden"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"model.{name} must be a positive integer, got {getattr(self, name)}")
        if self.hidden % self.heads:
            raise ValueError(
                f"model.heads={self.heads} must divide model.hidden={self.hidden}: pick heads among "
                f"the divisors of hidden"
            )

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


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
}
PRESET_NAMES = tuple(_PRESETS)


def preset(name: str, **overrides: Any) -> ModelConfig:
    """Return the model preset ``name`` with non-None ``overrides`` applied.

    Raises
    ------
    ValueError
        If ``name`` is not a preset.
    """
    if name not in _PRESETS:
        raise ValueError(f"unknown model preset {name!r}: choose one of {', '.join(_PRESETS)}")
    fields = dict(_PRESETS[name])
    fields.update({k: v for k, v in overrides.items() if v is not None})
    return ModelConfig(**fields)


@dataclass(kw_only=True)
class ParallelConfig:
    """Degrees of the three parallel axes and the batch split."""

    tp: int = 1
    """Tensor-parallel degree (Megatron column/row-parallel linears)."""
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

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "micro_batches", "global_batch"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"parallel.{name} must be a positive integer, got {getattr(self, name)}")
        axes = self.order.split("-")
        if sorted(axes) != sorted(ORDERS_AXES):
            raise ValueError(
                f"parallel.order={self.order!r} must be a permutation of tp, dp, pp joined by '-', "
                f"e.g. 'tp-dp-pp' (innermost first)"
            )
        if self.global_batch % (self.dp * self.micro_batches):
            raise ValueError(
                f"parallel.global_batch={self.global_batch} must be a multiple of dp x micro_batches"
                f" = {self.dp * self.micro_batches}"
            )

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def micro_batch_size(self) -> int:
        """Sequences per micro-batch."""
        return self.global_batch // (self.dp * self.micro_batches)

    def check_world(self, world_size: int) -> None:
        """Raise ValueError unless tp x pp x dp equals ``world_size``."""
        if self.world_size != world_size:
            raise ValueError(
                f"tp={self.tp} x pp={self.pp} x dp={self.dp} = {self.world_size} does not equal the "
                f"world size {world_size}: change --tp/--pp/--dp or --nproc-per-node"
            )


def check_model_fits(model: ModelConfig, par: ParallelConfig) -> None:
    """Raise ValueError when the model cannot be split by the layout."""
    checks = (
        (model.layers % par.pp, f"model.layers={model.layers} must be divisible by pp={par.pp}"),
        (model.heads % par.tp, f"model.heads={model.heads} must be divisible by tp={par.tp}"),
        (model.vocab % par.tp, f"model.vocab={model.vocab} must be divisible by tp={par.tp}"),
        (model.ffn_hidden % par.tp, f"model.ffn_hidden={model.ffn_hidden} must be divisible by tp={par.tp}"),
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
    inject_slow_rank: int | None = None
    """Fault injection (``trainer.faults``): this layout rank computes ``slow_factor`` x slower."""
    slow_factor: float = 1.0
    inject_slow_link: tuple[int, int] | None = None
    """Fault injection: (R, PEER), R's sends to PEER take ``link_delay_us`` longer."""
    link_delay_us: float = 0.0

    def fault_config(self):
        """The :class:`trainer.faults.FaultConfig` of the injection fields."""
        from trainer.faults import FaultConfig

        link = tuple(self.inject_slow_link) if self.inject_slow_link is not None else None
        return FaultConfig(slow_rank=self.inject_slow_rank, slow_factor=self.slow_factor,
                           slow_link=link, link_delay_us=self.link_delay_us)

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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    """Build a :class:`TrainConfig` from a plain dict (the YAML/JSON file layout).

    ``model`` may be a preset name or a mapping (optionally with ``preset`` plus overrides).
    """
    data = dict(data)
    unknown = set(data) - {f.name for f in dataclasses.fields(TrainConfig)}
    if unknown:
        raise ValueError(f"unknown config keys {sorted(unknown)}: valid keys are the TrainConfig fields")
    model = data.pop("model", "tiny")
    if isinstance(model, str):
        model = preset(model)
    elif isinstance(model, dict):
        m = dict(model)
        model = preset(m.pop("preset"), **m) if "preset" in m else ModelConfig(**m)
    par = data.pop("parallel", {})
    return TrainConfig(model=model, parallel=ParallelConfig(**par), **data)


def load_config_file(path: str | Path) -> TrainConfig:
    """Load a YAML (``.yaml``/``.yml``) or JSON config file into a :class:`TrainConfig`."""
    path = Path(path)
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text) or {}
    else:
        data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the config file must hold a mapping of TrainConfig fields")
    try:
        return config_from_dict(data)
    except TypeError as exc:  # unknown field inside model/parallel
        raise ValueError(f"{path}: {exc}") from None
