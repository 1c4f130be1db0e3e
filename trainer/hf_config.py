"""Trainer models from a Hugging Face transformers ``config.json`` (``--model PATH``).

=============================== ==========================================================
``num_hidden_layers``            layers
``hidden_size``                  hidden
``num_attention_heads``          heads
``num_key_value_heads``          kv_heads (absent: heads, transformers' default)
``intermediate_size``            ffn_hidden (dense blocks; Mixtral's experts too)
``vocab_size``                   vocab
``max_position_embeddings``      seq (``--seq`` overrides it: it is the training length)
``hidden_act``                   silu/swish: gated FFN (SwiGLU, the MLP of Llama, Mistral,
                                 Mixtral, Qwen2, DeepSeek); gelu*: plain two-matrix MLP
``tie_word_embeddings``          tied (absent: true, transformers' ``PretrainedConfig``)
``num_local_experts`` (Mixtral), ``n_routed_experts`` (DeepSeek), ``num_experts`` (Qwen)
                                 experts
``num_experts_per_tok``          top_k
``moe_intermediate_size``        moe_ffn_hidden (absent: intermediate_size)
``n_shared_experts``             shared_experts (DeepSeek); Qwen's
                                 ``shared_expert_intermediate_size`` as a multiple of it
``first_k_dense_replace``        first_dense_layers (DeepSeek)
``decoder_sparse_step``          moe_every (Qwen: block i is MoE when (i + 1) % step == 0)
=============================== ==========================================================

A missing required key, a value of the wrong type, or two keys that contradict each other is a
``ValueError`` naming the key. What the trainer does not model is said, not hidden: positions
are learned (not rotary) and norms are LayerNorm (not RMSNorm); a ``head_dim`` other than
hidden / heads and DeepSeek's multi-head latent attention are refused (MLA: the trainer runs
GQA with ``num_key_value_heads``; the keys ``kv_lora_rank`` ... are ignored, say so in the
name). The shapes, FLOPs and communication volumes are those of the config.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainer.config import ModelConfig

GATED_ACTS = ("silu", "swish", "swiglu")
PLAIN_ACTS = ("gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh")
EXPERT_KEYS = ("num_local_experts", "n_routed_experts", "num_experts")
REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
            "vocab_size", "max_position_embeddings", "hidden_act")


def _int(data: Mapping, key: str, default: int | None = None) -> int:
    if data.get(key) is None:
        if default is None:
            raise ValueError(f"config.json: missing key {key!r}")
        return default
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"config.json: {key!r} must be a non-negative integer, got {value!r}")
    return value


def _ffn_kind(data: Mapping) -> tuple[str, str]:
    act = str(data["hidden_act"]).lower()
    if act in GATED_ACTS:
        return "gated", "silu"
    if act in PLAIN_ACTS:
        return "plain", "gelu"
    raise ValueError(f"config.json: hidden_act {act!r} is not one of "
                     f"{', '.join(GATED_ACTS + PLAIN_ACTS)}")


def _experts(data: Mapping) -> int:
    given = {k: data[k] for k in EXPERT_KEYS if data.get(k)}
    if len(set(given.values())) > 1:
        raise ValueError(f"config.json: contradictory expert counts {given}: keep one of "
                         f"{', '.join(EXPERT_KEYS)}")
    return _int(given, next(iter(given))) if given else 0


def _moe(data: Mapping, layers: int, ffn: int) -> dict[str, int]:
    experts = _experts(data)
    if not experts:
        if data.get("num_experts_per_tok"):
            raise ValueError(f"config.json: num_experts_per_tok is set but no expert count "
                             f"(one of {', '.join(EXPERT_KEYS)})")
        return {}
    top_k = _int(data, "num_experts_per_tok")
    if not 1 <= top_k <= experts:
        raise ValueError(f"config.json: num_experts_per_tok={top_k} must lie in 1..{experts}")
    width = _int(data, "moe_intermediate_size", ffn)
    shared = _int(data, "n_shared_experts", 0)
    if data.get("shared_expert_intermediate_size"):
        wide = _int(data, "shared_expert_intermediate_size")
        if wide % width or shared:
            raise ValueError("config.json: shared_expert_intermediate_size must be a multiple of "
                             "moe_intermediate_size and not combined with n_shared_experts")
        shared = wide // width
    first = _int(data, "first_k_dense_replace", 0)
    if first >= layers:
        raise ValueError(f"config.json: first_k_dense_replace={first} leaves no MoE block of "
                         f"num_hidden_layers={layers}")
    return {"experts": experts, "top_k": top_k, "moe_ffn_hidden": width,
            "shared_experts": shared, "first_dense_layers": first,
            "moe_every": _int(data, "decoder_sparse_step", 1) or 1}


def model_from_hf(data: Mapping[str, Any], name: str = "", seq: int | None = None) -> ModelConfig:
    """The :class:`ModelConfig` of a transformers config (a mapping of its keys)."""
    for key in REQUIRED:
        if data.get(key) is None:
            raise ValueError(f"config.json: missing key {key!r}")
    layers, hidden = _int(data, "num_hidden_layers"), _int(data, "hidden_size")
    heads = _int(data, "num_attention_heads")
    if heads == 0 or hidden % heads:
        raise ValueError(f"config.json: num_attention_heads={heads} must divide hidden_size={hidden}")
    if data.get("head_dim") not in (None, hidden // heads):
        raise ValueError(f"config.json: head_dim={data['head_dim']} differs from hidden_size / "
                         f"num_attention_heads = {hidden // heads}: not supported by the trainer")
    kv_heads = _int(data, "num_key_value_heads", heads)
    if kv_heads == 0 or heads % kv_heads:
        raise ValueError(f"config.json: num_key_value_heads={kv_heads} must divide "
                         f"num_attention_heads={heads}")
    ffn, act = _ffn_kind(data)
    ffn_hidden = _int(data, "intermediate_size")
    tied = data.get("tie_word_embeddings", True)
    if not isinstance(tied, bool):
        raise ValueError(f"config.json: tie_word_embeddings must be true or false, got {tied!r}")
    return ModelConfig(layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                       ffn_hidden=ffn_hidden, vocab=_int(data, "vocab_size"),
                       seq=seq or _int(data, "max_position_embeddings"), tied=tied, ffn=ffn,
                       activation=act, name=name, **_moe(data, layers, ffn_hidden))


def load_hf_config(path: str | Path, seq: int | None = None) -> ModelConfig:
    """Read ``path`` (a config.json, or a directory holding one); the model is named after
    ``_name_or_path`` when the file has it, else after its directory (or file stem)."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a config.json holds one JSON object")
    name = data.get("_name_or_path") or (path.parent.name if path.name == "config.json"
                                         else path.stem)
    return model_from_hf(data, name=str(name), seq=seq)


def is_config_path(model: str) -> bool:
    """Whether ``--model`` names a file or directory rather than a preset."""
    return model.endswith(".json") or "/" in model or Path(model).is_dir()
