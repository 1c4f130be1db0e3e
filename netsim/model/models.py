"""Model presets by name, and :func:`get_model` (a preset or a ``config.json`` path).

Presets (``MODELS``) carry their source:

* GPT-3 family: Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1
  (n_layers, d_model, n_heads; context 2048; BPE vocabulary 50,257).
* Megatron-LM: Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
  Clusters Using Megatron-LM" (arXiv:2104.04473), Table 1 (sequence 2048, vocabulary 51,200).
* MegaScale: Jiang et al., NSDI'24 (arXiv:2402.15627), Table 1 (sequence 2048, vocabulary
  64,000); see ``shared/reference/nccl-roce.md`` section 1.7.
* llama3-8b/70b/405b, mixtral-8x7b, deepseek-v3: their published transformers ``config.json``
  (``netsim.model.hf``, which also reads any ``config.json`` given as the model).

The shape and its FLOP counts: :mod:`netsim.model.shape`.
"""

from __future__ import annotations

from netsim.model.hf import hf_presets, is_config_path, load_hf_config
from netsim.model.shape import BF16_BYTES, ModelConfig

__all__ = ["BF16_BYTES", "MODELS", "ModelConfig", "get_model"]

def _gpt3(name: str, layers: int, hidden: int, heads: int) -> ModelConfig:
    return ModelConfig(name=name, layers=layers, hidden=hidden, heads=heads, seq=2048, vocab=50257)


def _megatron(name: str, layers: int, hidden: int, heads: int) -> ModelConfig:
    return ModelConfig(name=name, layers=layers, hidden=hidden, heads=heads, seq=2048, vocab=51200)


# GPT-3 paper Table 2.1. Two rows are not self-consistent in the table: 13B prints d_model
# 5140 with 40 heads of 128 (we use 5120 = 40 x 128) and XL prints 24 heads of 128 for
# d_model 2048 (we use 16 heads of 128). FLOPs do not depend on the head count.
MODELS: dict[str, ModelConfig] = {
    m.name: m
    for m in (
        _gpt3("gpt3-125m", 12, 768, 12),
        _gpt3("gpt3-350m", 24, 1024, 16),
        _gpt3("gpt3-760m", 24, 1536, 16),
        _gpt3("gpt3-1.3b", 24, 2048, 16),
        _gpt3("gpt3-2.7b", 32, 2560, 32),
        _gpt3("gpt3-6.7b", 32, 4096, 32),
        _gpt3("gpt3-13b", 40, 5120, 40),
        _gpt3("gpt3-175b", 96, 12288, 96),
        # Megatron-LM 2021 Table 1 rows (name = parameter count in the table).
        _megatron("megatron-1.7b", 24, 2304, 24),
        _megatron("megatron-3.6b", 30, 3072, 32),
        _megatron("megatron-7.5b", 36, 4096, 32),
        _megatron("megatron-18b", 40, 6144, 48),
        _megatron("megatron-39b", 48, 8192, 64),
        _megatron("megatron-76b", 60, 10240, 80),
        _megatron("megatron-145b", 80, 12288, 96),
        _megatron("megatron-310b", 96, 16384, 128),
        _megatron("megatron-530b", 105, 20480, 128),
        _megatron("megatron-1t", 128, 25600, 160),
        _megatron("megatron-gpt3-175b", 96, 12288, 96),
        # MegaScale Table 1.
        ModelConfig(name="megascale-175b", layers=96, hidden=12288, heads=128, seq=2048,
                    vocab=64000),
        ModelConfig(name="megascale-530b", layers=105, hidden=20480, heads=160, seq=2048,
                    vocab=64000),
        # OPT-175B (Zhang et al. 2022, arXiv:2205.01068, Table 1: 96 layers, 96 heads, d_model
        # 12,288; sequence 2,048; GPT-2 BPE as in the released OPT configs, vocab_size 50,272;
        # learned positions, tied embeddings, ReLU MLP of 4 d_model): trained with FSDP + TP.
        ModelConfig(name="opt-175b", layers=96, hidden=12288, heads=96, seq=2048, vocab=50272),
        # Tiny shapes for tests and the CPU trainer: the same shapes as the trainer's presets
        # of these names (trainer/config.py), so that a name means one model everywhere.
        ModelConfig(name="tiny", layers=4, hidden=32, heads=4, seq=16, vocab=64),
        ModelConfig(name="small", layers=4, hidden=256, heads=8, seq=256, vocab=4096),
        # the trainer's GQA / SwiGLU / MoE parity model: two KV heads, a gated FFN, a dense
        # first block and a 4-expert top-2 second block
        ModelConfig(name="tiny-moe", layers=2, hidden=32, heads=4, kv_heads=2, seq=16, vocab=64,
                    ffn_hidden=48, gated=True, experts=4, top_k=2, moe_ffn_hidden=24,
                    first_dense_layers=1),
    )
}


MODELS.update(hf_presets())


def get_model(name: str) -> ModelConfig:
    """Return the preset ``name``, or the model of a transformers ``config.json`` path; raise
    ``ValueError`` listing the choices if unknown."""
    if name.lower() not in MODELS and is_config_path(name):
        return load_hf_config(name)
    try:
        return MODELS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown model {name!r}: choose one of {', '.join(MODELS)}") from None
