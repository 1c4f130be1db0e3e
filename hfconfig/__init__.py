"""Hugging Face transformers ``config.json``: the one parser of its keys, for ``netsim`` and the
standalone ``trainer`` alike (each builds its own model type from what this returns).

The helpers here read the keys a decoder-only transformer's config carries:

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


def int_key(data: Mapping, key: str, default: int | None = None) -> int:
    """``data[key]`` as a non-negative integer; ``default`` when absent (None: required)."""
    if key not in data or data[key] is None:
        if default is None:
            raise ValueError(f"config.json: missing key {key!r} (required for a decoder-only "
                             "transformer)")
        return default
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"config.json: {key!r} must be a non-negative integer, got {value!r}")
    return value


def is_gated(data: Mapping) -> bool:
    """Whether ``hidden_act`` names a gated (SwiGLU) feed-forward; unknown names refused."""
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


def expert_count(data: Mapping) -> int:
    """Routed experts, from whichever of ``EXPERT_KEYS`` the config uses (0: dense)."""
    given = {k: data[k] for k in EXPERT_KEYS if data.get(k)}
    if len(set(given.values())) > 1:
        raise ValueError(f"config.json: contradictory expert counts {given}: keep one of "
                         f"{', '.join(EXPERT_KEYS)}")
    return int_key(given, next(iter(given)), 0) if given else 0


def moe_keys(data: Mapping, layers: int, ffn: int) -> dict[str, int]:
    """The MoE fields (experts, top_k, moe_ffn_hidden, shared_experts, first_dense_layers,
    moe_every) of a config, or ``{}`` for a dense model."""
    experts = expert_count(data)
    if not experts:
        if data.get("num_experts_per_tok"):
            raise ValueError("config.json: num_experts_per_tok is set but no expert count "
                             f"(one of {', '.join(EXPERT_KEYS)})")
        return {}
    top_k = int_key(data, "num_experts_per_tok")
    if not 0 < top_k <= experts:
        raise ValueError(f"config.json: num_experts_per_tok {top_k} must lie in 1..{experts}")
    width = int_key(data, "moe_intermediate_size", ffn)
    shared = int_key(data, "n_shared_experts", 0)
    if data.get("shared_expert_intermediate_size"):
        wide = int_key(data, "shared_expert_intermediate_size")
        if wide % width or shared:
            raise ValueError("config.json: shared_expert_intermediate_size must be a multiple of "
                             "moe_intermediate_size and not combined with n_shared_experts")
        shared = wide // width
    first = int_key(data, "first_k_dense_replace", 0)
    step = int_key(data, "decoder_sparse_step", 1) or 1
    if int_key(data, "moe_layer_freq", 1) not in (0, 1, step):
        raise ValueError("config.json: moe_layer_freq contradicts decoder_sparse_step")
    if first >= layers:
        raise ValueError(f"config.json: first_k_dense_replace {first} leaves no MoE layer of "
                         f"num_hidden_layers {layers}")
    return {"experts": experts, "top_k": top_k, "moe_ffn_hidden": width,
            "shared_experts": shared, "first_dense_layers": first, "moe_every": step}


def mla_keys(data: Mapping) -> dict[str, int]:
    """Multi-head latent attention fields (DeepSeek-V2/V3), or ``{}`` without ``kv_lora_rank``."""
    if not data.get("kv_lora_rank"):
        return {}
    return {"kv_lora_rank": int_key(data, "kv_lora_rank"), "q_lora_rank": int_key(data, "q_lora_rank", 0),
            "head_dim": int_key(data, "qk_nope_head_dim"),
            "qk_rope_head_dim": int_key(data, "qk_rope_head_dim"),
            "v_head_dim": int_key(data, "v_head_dim")}


def is_config_path(spec: str) -> bool:
    """Whether ``spec`` names a file (a config.json) rather than a preset."""
    return (spec.endswith(".json") or os.sep in spec or "/" in spec or Path(spec).is_file()
            or Path(spec).is_dir())


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


def read_hf_file(path: str | Path) -> tuple[dict[str, Any], str]:
    """The checked keys of a config.json (or of a directory's config.json) and the model's
    name: ``_name_or_path``'s last part, else the folder (or the file's stem). Refusals are
    ``InputError`` naming the file."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    data = check_hf_config(read_data(p, "model config", default_format="json"),
                           f"model config file {p}")
    default = p.parent.name if p.name == "config.json" else p.stem
    name = str(data.get("_name_or_path") or default).rstrip("/").split("/")[-1] or default
    return data, name
