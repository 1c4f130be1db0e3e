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
``max_position_embeddings``  the longest sequence the model allows; NOT the training
                             sequence: without a job's ``seq`` a config.json model trains
                             ``DEFAULT_SEQ`` tokens (capped at this), and reports say so
``hidden_act``               the activation; whether the feed-forward is gated (three matrices)
                             is the architecture's (``model_type``, ``ARCHITECTURES``): Gemma's
                             ``gelu`` is GeGLU; without a known ``model_type``, silu / swish /
                             the ``*glu`` names are gated, gelu* and relu plain
``sliding_window``           attention window (Mistral all layers; Gemma-2 every other layer;
                             Qwen2 only with ``use_sliding_window`` from ``max_window_layers``;
                             ``layer_types`` when given)
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

Other architectures' names for these keys are read too (``KEY_ALIASES``, from each
transformers configuration class's ``attribute_map`` or ``__init__``): GPT-2 (``n_embd``,
``n_layer``, ``n_head``, ``n_positions``, ``n_inner``, ``activation_function``), BLOOM
(``n_embed``, ``n_layer``, ``n_head``; no ``intermediate_size``: 4 x hidden), OPT (``ffn_dim``,
``activation_function``; ``word_embed_proj_dim`` other than ``hidden_size`` is refused: its
embedding projections are not modelled), Gemma (``hidden_activation``). Encoder-decoder and
encoder-only types (``REFUSED_TYPES``) are refused with the reason.

A missing required key or two keys that contradict each other is a ``ValueError`` naming the
key. Unknown types are read as Llama-style RMSNorm models without biases (``bias=False``) and
rotary positions (no learned position table); known ones take ``ARCHITECTURES``' traits.

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

GATED_ACTS = ("silu", "swish", "swiglu", "geglu", "reglu")
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


#: ``model_type`` -> (gated feed-forward, linear biases and LayerNorm betas, learned position
#: table): what each architecture's transformers ``modeling_<type>.py`` builds. Gated: an MLP of
#: ``gate_proj``, ``up_proj`` and ``down_proj`` whatever its activation (Gemma's GeLU: GeGLU).
_ROTARY_GATED = (True, False, False)
ARCHITECTURES: dict[str, tuple[bool, bool, bool]] = {
    **{t: _ROTARY_GATED for t in ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3",
                                  "qwen3_moe", "gemma", "gemma2", "gemma3_text", "deepseek_v2",
                                  "deepseek_v3", "phi3", "olmo", "olmo2")},
    "gpt2": (False, True, True), "opt": (False, True, True),
    "bloom": (False, True, False),  # ALiBi: no position table (Press et al. 2022)
    "gpt_neox": (False, True, False),  # rotary
}
#: Types refused, with the reason.
REFUSED_TYPES: dict[str, str] = {
    **{t: "an encoder-decoder model; netsim and the trainer model decoder-only transformers"
       for t in ("t5", "mt5", "bart", "mbart", "pegasus", "whisper", "marian")},
    **{t: "an encoder-only model; netsim and the trainer model decoder-only transformers"
       for t in ("bert", "roberta", "deberta", "deberta-v2", "electra", "albert")},
}
#: canonical key <- other architectures' names (transformers ``GPT2Config.attribute_map``,
#: ``BloomConfig.attribute_map`` and its ``n_embed`` argument, ``OPTConfig``'s ``ffn_dim`` and
#: ``activation_function``, ``GemmaConfig.hidden_activation``).
KEY_ALIASES: dict[str, tuple[str, ...]] = {
    "hidden_size": ("n_embd", "n_embed"), "num_hidden_layers": ("n_layer",),
    "num_attention_heads": ("n_head",), "max_position_embeddings": ("n_positions",),
    "intermediate_size": ("n_inner", "ffn_dim"),
    "hidden_act": ("hidden_activation", "activation_function"),
}
#: Sequence length of a config.json model when the job gives none: Llama 2's pre-training
#: context (Touvron et al. 2023, arXiv:2307.09288, Table 1), capped at max_position_embeddings.
DEFAULT_SEQ = 4096


def canonical_keys(data: Mapping) -> dict[str, Any]:
    """``data`` with other architectures' key names (``KEY_ALIASES``) under the canonical ones,
    BLOOM's 4 x hidden feed-forward filled in; refused types and contradictions raise."""
    out = dict(data)
    kind = str(out.get("model_type") or "").lower()
    if kind in REFUSED_TYPES or out.get("is_encoder_decoder"):
        reason = REFUSED_TYPES.get(kind, "an encoder-decoder model (is_encoder_decoder)")
        raise ValueError(f"config.json: model_type {kind or '?'!r} is {reason}")
    for key, names in KEY_ALIASES.items():
        given = {n: out[n] for n in (key, *names) if out.get(n) is not None}
        if len(set(map(str, given.values()))) > 1 and key != "hidden_act":
            raise ValueError(f"config.json: contradictory {', '.join(given)} = "
                             f"{list(given.values())}: keep one")
        if given and out.get(key) is None:
            out[key] = next(iter(given.values()))
        elif key == "hidden_act" and out.get("hidden_activation"):
            out[key] = out["hidden_activation"]  # Gemma: hidden_activation wins when set
    if out.get("intermediate_size") is None and kind in ("gpt2", "bloom") and out.get("hidden_size"):
        out["intermediate_size"] = 4 * int_key(out, "hidden_size")  # n_inner None / dense_h_to_4h
    if kind == "bloom" and out.get("hidden_act") is None:
        out["hidden_act"] = "gelu"  # BloomGelu, the tanh approximation
    proj = out.get("word_embed_proj_dim")
    if proj is not None and proj != out.get("hidden_size"):
        raise ValueError(f"config.json: word_embed_proj_dim {proj} differs from hidden_size "
                         f"{out.get('hidden_size')} (OPT-350m's embedding projections are not "
                         "modelled)")
    return out


def architecture(data: Mapping) -> tuple[bool, bool, bool]:
    """(gated, bias, learned_positions) of a config: its ``model_type``'s, else from
    ``hidden_act`` alone with no biases and rotary positions (the Llama-style default)."""
    kind = str(data.get("model_type") or "").lower()
    if kind in ARCHITECTURES:
        is_gated(data)  # the activation is still checked
        return ARCHITECTURES[kind]
    return is_gated(data), False, False


def training_seq(data: Mapping, seq: int | None) -> tuple[int, str]:
    """(sequence length, where it came from): ``seq`` when given, else ``DEFAULT_SEQ`` capped
    at ``max_position_embeddings`` (never silently the model's longest context)."""
    if seq:
        return seq, "given"
    longest = int_key(data, "max_position_embeddings", 0)
    if longest and longest < DEFAULT_SEQ:
        return longest, f"max_position_embeddings {longest} (below the default {DEFAULT_SEQ})"
    where = f"; max_position_embeddings {longest}" if longest else ""
    return DEFAULT_SEQ, f"default {DEFAULT_SEQ} for a config.json (--seq to change{where})"


def sliding_layers(data: Mapping, layers: int) -> tuple[int, int]:
    """(window, windowed layers) of a config's ``sliding_window`` (0, 0 without one):
    ``layer_types`` when given, Qwen2's ``use_sliding_window`` from ``max_window_layers``,
    Gemma-2's every other layer (even indices, ``Gemma2Attention.is_sliding``), Gemma-3's
    ``sliding_window_pattern`` (every n-th layer full), else every layer (Mistral)."""
    window = int_key(data, "sliding_window", 0)
    kind = str(data.get("model_type") or "").lower()
    types = data.get("layer_types")
    if not window:
        return 0, 0
    if isinstance(types, list):
        return window, sum(1 for t in types if str(t) == "sliding_attention")
    if kind.startswith("qwen2") or "use_sliding_window" in data:
        if not data.get("use_sliding_window"):
            return 0, 0
        return window, max(0, layers - int_key(data, "max_window_layers", 0))
    if kind == "gemma2":
        return window, (layers + 1) // 2
    if kind.startswith("gemma3"):
        n = int_key(data, "sliding_window_pattern", 6) or 1
        return window, layers - layers // n
    return window, layers


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
    model_type: str | None = None
    sliding_window: int | None = rule(None, min=0, max=2**24, example=4096)
    max_window_layers: int | None = rule(None, min=0, max=2**16, example=28)
    sliding_window_pattern: int | None = rule(None, min=0, max=2**16, example=6)
    n_embd: int | None = rule(None, min=1, max=2**24, example=768)
    n_embed: int | None = rule(None, min=1, max=2**24, example=14336)
    n_layer: int | None = rule(None, min=1, max=2**16, example=12)
    n_head: int | None = rule(None, min=1, max=2**20, example=12)
    n_positions: int | None = rule(None, min=1, max=2**24, example=1024)
    n_inner: int | None = rule(None, min=1, max=2**26, example=3072)
    ffn_dim: int | None = rule(None, min=1, max=2**26, example=49152)
    word_embed_proj_dim: int | None = rule(None, min=1, max=2**24, example=12288)


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
