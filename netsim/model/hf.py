"""netsim's models from a transformers ``config.json`` (the keys are read by the shared
:mod:`hfconfig`), and today's presets (``HF_PRESETS``) as :class:`ModelConfig` objects."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hfconfig import (  # noqa: F401  (HF_PRESETS, HFConfigKeys, check_hf_config: netsim's names too)
    HF_PRESETS,
    HFConfigKeys,
    architecture,
    canonical_keys,
    check_hf_config,
    int_key,
    is_config_path,
    mla_keys,
    moe_keys,
    read_hf_file,
    sliding_layers,
    training_seq,
)
from inputspec import InputError
from netsim.model.shape import ModelConfig


def model_from_hf(data: Mapping[str, Any], name: str, seq: int | None = None):
    """A ``ModelConfig`` from the keys of a transformers ``config.json`` (``seq``: the
    training sequence; None: ``hfconfig.DEFAULT_SEQ``, said in ``seq_source``)."""
    if not isinstance(data, Mapping):
        raise ValueError("config.json: expected a JSON object of transformers config keys")
    data = canonical_keys(data)
    layers, hidden = int_key(data, "num_hidden_layers"), int_key(data, "hidden_size")
    heads, ffn = int_key(data, "num_attention_heads"), int_key(data, "intermediate_size")
    kv = int_key(data, "num_key_value_heads", heads)
    head_dim = int_key(data, "head_dim", 0)
    if not head_dim and hidden % heads and not data.get("kv_lora_rank"):
        raise ValueError(f"config.json: hidden_size {hidden} is not divisible by "
                         f"num_attention_heads {heads}; give head_dim")
    if kv == 0 or heads % kv:
        raise ValueError(f"config.json: num_key_value_heads {kv} must divide "
                         f"num_attention_heads {heads}")
    gated, bias, learned = architecture(data)
    seq, source = training_seq(data, seq)
    window, windowed = sliding_layers(data, layers)
    fields = dict(name=name, layers=layers, hidden=hidden, heads=heads, ffn_hidden=ffn,
                  kv_heads=kv, head_dim=head_dim, vocab=int_key(data, "vocab_size"),
                  seq=seq, seq_source=source, gated=gated, bias=bias,
                  learned_positions=learned, sliding_window=window, sliding_layers=windowed,
                  tied_embeddings=bool(data.get("tie_word_embeddings", True)))
    fields.update(moe_keys(data, layers, ffn))
    fields.update(mla_keys(data))
    return ModelConfig(**fields)


def hf_presets() -> dict:
    """The ``HF_PRESETS`` as ``ModelConfig`` objects."""
    return {name: model_from_hf(cfg, name, seq).replace(seq_source=f"preset {name}")
            for name, (cfg, seq) in HF_PRESETS.items()}


def load_hf_config(path: str):
    """A ``ModelConfig`` from a config.json file; its name is ``_name_or_path`` or the folder."""
    from inputspec import check_regular

    p = Path(path)
    if not p.exists() and not p.is_symlink():
        raise ValueError(f"--model {path}: no such config.json file (or give a preset name)")
    check_regular(p, "model config")  # a pipe, a device, a directory: refused naming it
    return _load(str(p.resolve()), p.stat().st_mtime_ns)


def hf_from_file(path: str | Path, name: str | None = None, seq: int | None = None):
    """A ``ModelConfig`` from a config.json file, every refusal naming the file (InputError)."""
    data, default = read_hf_file(path)
    try:
        return model_from_hf(data, name or default, seq)
    except InputError:
        raise
    except ValueError as exc:
        msg = str(exc).splitlines()[0].removeprefix("config.json: ")
        raise InputError(f"model config file {Path(path)}", problem=msg) from None


@functools.lru_cache(maxsize=64)
def _load(path: str, _mtime: int):
    return hf_from_file(path)
