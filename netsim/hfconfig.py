"""Models from a Hugging Face transformers ``config.json``, and today's presets in that form.

``model_from_hf(data, name)`` reads the keys a decoder-only transformer's config carries:

=========================== =====================================================
``num_hidden_layers``        layers
``hidden_size``              hidden
``num_attention_heads``      heads
``num_key_value_heads``      kv_heads (absent: multi-head attention, as transformers)
``head_dim``                 head width (absent: hidden / heads)
``intermediate_size``        ffn_hidden (dense layers)
``vocab_size``               vocab
``max_position_embeddings``  seq (a job's ``seq`` overrides it)
``hidden_act``               silu / swish: gated (SwiGLU) feed-forward, the MLP of every
                             transformers architecture that uses it (Llama, Mistral, Mixtral,
                             Qwen2, DeepSeek); gelu*, relu: plain two-matrix MLP
``tie_word_embeddings``      tied_embeddings (absent: True, transformers' default)
``num_local_experts`` (Mixtral) / ``n_routed_experts`` (DeepSeek) / ``num_experts`` (Qwen)
                             experts
``num_experts_per_tok``      top_k
``moe_intermediate_size``    expert width (absent: intermediate_size, as Mixtral)
``n_shared_experts``         shared experts (DeepSeek); Qwen's
                             ``shared_expert_intermediate_size`` as a multiple of the expert
``first_k_dense_replace``    leading dense layers (DeepSeek)
``decoder_sparse_step``      every k-th layer is MoE (Qwen)
``q_lora_rank``, ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``
                             multi-head latent attention (DeepSeek-V2/V3)
=========================== =====================================================

A missing required key or two keys that contradict each other is a ``ValueError`` naming the
key. RMSNorm models without biases (every architecture above) have ``bias=False`` and rotary
positions (no learned position table).

Presets (``HF_PRESETS``) are the published ``config.json`` values (Hugging Face model repos
``meta-llama/Meta-Llama-3-8B``, ``meta-llama/Meta-Llama-3-70B``, ``meta-llama/Llama-3.1-405B``,
``mistralai/Mixtral-8x7B-v0.1``, ``deepseek-ai/DeepSeek-V3``; the Llama shapes also in Llama 3
paper, Dubey et al. 2024, arXiv:2407.21783, Table 3). Their training sequence length replaces
``max_position_embeddings``: 8,192 for Llama 3 pre-training (paper section 3.4.1), 4,096 for
DeepSeek-V3 (arXiv:2412.19437 section 4.2), 32,768 for Mixtral (arXiv:2401.04088 section 2).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inputspec import InputError, from_dict, read_data, rule

GATED_ACTS = ("silu", "swish", "swiglu")
PLAIN_ACTS = ("gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "relu", "quick_gelu")
EXPERT_KEYS = ("num_local_experts", "n_routed_experts", "num_experts")
REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
            "vocab_size", "hidden_act")

_LLAMA3 = {"hidden_act": "silu", "vocab_size": 128256, "tie_word_embeddings": False,
           "num_key_value_heads": 8}
HF_PRESETS: dict[str, tuple[dict[str, Any], int]] = {
    # name: (config.json keys, training sequence length)
    "llama3-8b": ({**_LLAMA3, "num_hidden_layers": 32, "hidden_size": 4096,
                   "num_attention_heads": 32, "intermediate_size": 14336,
                   "max_position_embeddings": 8192}, 8192),
    "llama3-70b": ({**_LLAMA3, "num_hidden_layers": 80, "hidden_size": 8192,
                    "num_attention_heads": 64, "intermediate_size": 28672,
                    "max_position_embeddings": 8192}, 8192),
    "llama3-405b": ({**_LLAMA3, "num_hidden_layers": 126, "hidden_size": 16384,
                     "num_attention_heads": 128, "intermediate_size": 53248,
                     "max_position_embeddings": 131072}, 8192),
    "mixtral-8x7b": ({"hidden_act": "silu", "vocab_size": 32000, "tie_word_embeddings": False,
                      "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                      "num_key_value_heads": 8, "intermediate_size": 14336,
                      "max_position_embeddings": 32768, "num_local_experts": 8,
                      "num_experts_per_tok": 2}, 32768),
    "deepseek-v3": ({"hidden_act": "silu", "vocab_size": 129280, "tie_word_embeddings": False,
                     "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
                     "num_key_value_heads": 128, "intermediate_size": 18432,
                     "moe_intermediate_size": 2048, "max_position_embeddings": 163840,
                     "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
                     "first_k_dense_replace": 3, "moe_layer_freq": 1, "q_lora_rank": 1536,
                     "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                     "v_head_dim": 128}, 4096),
}


def _int(data: Mapping, key: str, default: int | None = None) -> int:
    if key not in data or data[key] is None:
        if default is None:
            raise ValueError(f"config.json: missing key {key!r} (required for a decoder-only "
                             "transformer)")
        return default
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"config.json: {key!r} must be a non-negative integer, got {value!r}")
    return value


def _gated(data: Mapping) -> bool:
    act = data.get("hidden_act")
    if act is None:
        raise ValueError("config.json: missing key 'hidden_act' (silu for SwiGLU, gelu, relu)")
    act = str(act).lower()
    if act in GATED_ACTS:
        return True
    if act in PLAIN_ACTS:
        return False
    raise ValueError(f"config.json: hidden_act {act!r} unknown: use one of "
                     f"{', '.join(GATED_ACTS + PLAIN_ACTS)}")


def _experts(data: Mapping) -> int:
    given = {k: data[k] for k in EXPERT_KEYS if data.get(k)}
    if len(set(given.values())) > 1:
        raise ValueError(f"config.json: contradictory expert counts {given}: keep one of "
                         f"{', '.join(EXPERT_KEYS)}")
    return _int(given, next(iter(given)), 0) if given else 0


def _moe_keys(data: Mapping, layers: int, ffn: int) -> dict[str, int]:
    experts = _experts(data)
    if not experts:
        if data.get("num_experts_per_tok"):
            raise ValueError("config.json: num_experts_per_tok is set but no expert count "
                             f"(one of {', '.join(EXPERT_KEYS)})")
        return {}
    top_k = _int(data, "num_experts_per_tok")
    if not 0 < top_k <= experts:
        raise ValueError(f"config.json: num_experts_per_tok {top_k} must lie in 1..{experts}")
    width = _int(data, "moe_intermediate_size", ffn)
    shared = _int(data, "n_shared_experts", 0)
    if data.get("shared_expert_intermediate_size"):
        wide = _int(data, "shared_expert_intermediate_size")
        if wide % width or shared:
            raise ValueError("config.json: shared_expert_intermediate_size must be a multiple of "
                             "moe_intermediate_size and not combined with n_shared_experts")
        shared = wide // width
    first = _int(data, "first_k_dense_replace", 0)
    step = _int(data, "decoder_sparse_step", 1) or 1
    if _int(data, "moe_layer_freq", 1) not in (0, 1, step):
        raise ValueError("config.json: moe_layer_freq contradicts decoder_sparse_step")
    if first >= layers:
        raise ValueError(f"config.json: first_k_dense_replace {first} leaves no MoE layer of "
                         f"num_hidden_layers {layers}")
    return {"experts": experts, "top_k": top_k, "moe_ffn_hidden": width,
            "shared_experts": shared, "first_dense_layers": first, "moe_every": step}


def _mla_keys(data: Mapping) -> dict[str, int]:
    if not data.get("kv_lora_rank"):
        return {}
    return {"kv_lora_rank": _int(data, "kv_lora_rank"), "q_lora_rank": _int(data, "q_lora_rank", 0),
            "head_dim": _int(data, "qk_nope_head_dim"),
            "qk_rope_head_dim": _int(data, "qk_rope_head_dim"),
            "v_head_dim": _int(data, "v_head_dim")}


def model_from_hf(data: Mapping[str, Any], name: str, seq: int | None = None):
    """A ``ModelConfig`` from the keys of a transformers ``config.json``."""
    from netsim.models import ModelConfig

    if not isinstance(data, Mapping):
        raise ValueError("config.json: expected a JSON object of transformers config keys")
    layers, hidden = _int(data, "num_hidden_layers"), _int(data, "hidden_size")
    heads, ffn = _int(data, "num_attention_heads"), _int(data, "intermediate_size")
    kv = _int(data, "num_key_value_heads", heads)
    head_dim = _int(data, "head_dim", 0)
    if not head_dim and hidden % heads and not data.get("kv_lora_rank"):
        raise ValueError(f"config.json: hidden_size {hidden} is not divisible by "
                         f"num_attention_heads {heads}; give head_dim")
    if kv == 0 or heads % kv:
        raise ValueError(f"config.json: num_key_value_heads {kv} must divide "
                         f"num_attention_heads {heads}")
    fields = dict(name=name, layers=layers, hidden=hidden, heads=heads, ffn_hidden=ffn,
                  kv_heads=kv, head_dim=head_dim, vocab=_int(data, "vocab_size"),
                  seq=seq or _int(data, "max_position_embeddings"), gated=_gated(data),
                  bias=False, learned_positions=False,
                  tied_embeddings=bool(data.get("tie_word_embeddings", True)))
    fields.update(_moe_keys(data, layers, ffn))
    fields.update(_mla_keys(data))
    return ModelConfig(**fields)


def hf_presets() -> dict:
    """The ``HF_PRESETS`` as ``ModelConfig`` objects."""
    return {name: model_from_hf(cfg, name, seq) for name, (cfg, seq) in HF_PRESETS.items()}


def is_config_path(spec: str) -> bool:
    """Whether ``spec`` names a file (a config.json) rather than a preset."""
    return spec.endswith(".json") or os.sep in spec or Path(spec).is_file()


def load_hf_config(path: str):
    """A ``ModelConfig`` from a config.json file; its name is ``_name_or_path`` or the folder."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"--model {path}: no such config.json file (or give a preset name)")
    return _load(str(p.resolve()), p.stat().st_mtime_ns)


@dataclass(frozen=True)
class HFConfigKeys:
    """The ``config.json`` keys this module reads, with their types (``inputspec`` schema);
    every other key of a transformers config is ignored."""

    num_hidden_layers: int | None = rule(None, min=1, max=2**16, example=32)
    hidden_size: int | None = rule(None, min=1, max=2**24, example=4096)
    num_attention_heads: int | None = rule(None, min=1, max=2**20, example=32)
    intermediate_size: int | None = rule(None, min=1, max=2**26, example=14336)
    vocab_size: int | None = rule(None, min=1, max=2**24, example=128256)
    hidden_act: str | None = rule(None, example="silu")
    num_key_value_heads: int | None = rule(None, min=1, max=2**20, example=8)
    head_dim: int | None = rule(None, min=0, max=2**16, example=128)
    max_position_embeddings: int | None = rule(None, min=1, max=2**24, example=8192)
    tie_word_embeddings: bool | None = None
    num_local_experts: int | None = rule(None, min=0, max=2**16, example=8)
    n_routed_experts: int | None = rule(None, min=0, max=2**16, example=256)
    num_experts: int | None = rule(None, min=0, max=2**16, example=64)
    num_experts_per_tok: int | None = rule(None, min=0, max=2**16, example=2)
    moe_intermediate_size: int | None = rule(None, min=1, max=2**26, example=2048)
    n_shared_experts: int | None = rule(None, min=0, max=2**16, example=1)
    shared_expert_intermediate_size: int | None = rule(None, min=0, max=2**26, example=5632)
    first_k_dense_replace: int | None = rule(None, min=0, max=2**16, example=3)
    decoder_sparse_step: int | None = rule(None, min=0, max=2**16, example=1)
    moe_layer_freq: int | None = rule(None, min=0, max=2**16, example=1)
    q_lora_rank: int | None = rule(None, min=0, max=2**20, example=1536)
    kv_lora_rank: int | None = rule(None, min=0, max=2**20, example=512)
    qk_nope_head_dim: int | None = rule(None, min=0, max=2**16, example=128)
    qk_rope_head_dim: int | None = rule(None, min=0, max=2**16, example=64)
    v_head_dim: int | None = rule(None, min=0, max=2**16, example=128)
    _name_or_path: str | None = None


def check_hf_config(data: Any, source: str) -> dict[str, Any]:
    """``data`` with the keys this module reads checked against ``HFConfigKeys`` (one
    ``InputError`` naming ``source``, the key, the value and an example)."""
    if not isinstance(data, Mapping):
        raise InputError(source, None, data, "a JSON object of transformers config keys",
                         {"num_hidden_layers": 32, "hidden_size": 4096})
    known = {f.name for f in dataclasses.fields(HFConfigKeys)}
    from_dict(HFConfigKeys, {k: v for k, v in data.items() if k in known}, source)
    return dict(data)


def hf_from_file(path: str | Path, name: str | None = None, seq: int | None = None):
    """A ``ModelConfig`` from a config.json file, every refusal naming the file (InputError)."""
    p = Path(path)
    source = f"model config file {p}"
    data = check_hf_config(read_data(p, "model config", default_format="json"), source)
    if name is None:
        default = p.parent.name if p.name == "config.json" else p.stem
        name = str(data.get("_name_or_path") or default).rstrip("/").split("/")[-1] or default
    try:
        return model_from_hf(data, name, seq)
    except InputError:
        raise
    except ValueError as exc:
        msg = str(exc).splitlines()[0].removeprefix("config.json: ")
        raise InputError(source, problem=msg) from None


@functools.lru_cache(maxsize=64)
def _load(path: str, _mtime: int):
    return hf_from_file(path)
