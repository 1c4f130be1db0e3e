"""Model FLOPs of GPT training and MFU.

Counting follows Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM" (SC'21), section 5.1: only matrix multiplications count, a
multiply-add is 2 FLOPs, the backward pass costs twice the forward pass, and attention is
counted over the full s x s score matrix. Per transformer layer and per sequence batch of B
sequences of s tokens the forward pass is

    QKV 6Bsh^2 + scores 2Bs^2h + attention-over-values 2Bs^2h + projection 2Bsh^2
    + MLP 4Bshf                                   (f = ffn_hidden, 4h in GPT)

and the logit layer 2BshV. With f = 4h, training (3 x forward) gives the paper's
``72 B s l h^2 (1 + s/(6h) + V/(12 l h))`` (their eq. 3 is the same with recomputation, 96).
*Model* FLOPs exclude activation recomputation, so MFU = model FLOP/s / peak (Chowdhery et al.
2022, "PaLM", appendix B).

Modern shapes, the same counting rule applied to each matrix multiplication:

- grouped-query attention (Ainslie et al. 2023): K and V project to kv_heads x d = h_kv
  columns, so QKV + projection is ``4Bsh^2 + 4Bsh h_kv`` (= 8Bsh^2 when h_kv = h);
- gated FFN (SwiGLU, Shazeer 2020; Llama): three h x f matrices, ``6Bshf``;
- mixture of experts (Fedus et al. 2022, Switch Transformers; DeepSeek-V3 report, which counts
  *activated* parameters): the router ``2BshE``, each token through its top_k routed experts
  and every shared expert, each an FFN of width moe_ffn_hidden: ``(top_k + shared) x 4Bshf_e``
  (``6Bshf_e`` gated). Experts a token does not visit cost nothing.
"""

from __future__ import annotations

from trainer.config import ModelConfig

# Dense bf16/fp16 tensor-core peaks per GPU (NVIDIA datasheets: A100 SXM 312 TFLOPS; H100 SXM
# and H200 989.4 TFLOPS). Matched against torch.cuda.get_device_name().
PEAK_FLOPS_BF16 = {"A100": 312e12, "H100": 989.4e12, "H200": 989.4e12}


def layer_forward_flops(cfg: ModelConfig, batch: int, layer: int | None = None) -> float:
    """Forward FLOPs of transformer layer ``layer`` (None: a dense layer) on ``batch`` sequences
    of ``cfg.seq`` tokens."""
    b, s, h = batch, cfg.seq, cfg.hidden
    h_kv = cfg.kv_heads * cfg.head_dim
    attention = 4.0 * b * s * h * h + 4.0 * b * s * h * h_kv + 4.0 * b * s * s * h
    return attention + mlp_forward_flops(cfg, batch, layer is not None and cfg.is_moe_layer(layer))


def mlp_forward_flops(cfg: ModelConfig, batch: int, moe: bool) -> float:
    """Forward FLOPs of a dense or mixture-of-experts MLP (active experts only)."""
    tokens = batch * cfg.seq
    per_width = (6.0 if cfg.ffn == "gated" else 4.0) * tokens * cfg.hidden
    if not moe:
        return per_width * cfg.ffn_hidden
    router = 2.0 * tokens * cfg.hidden * cfg.experts
    return router + per_width * cfg.moe_ffn_hidden * (cfg.top_k + cfg.shared_experts)


def head_forward_flops(cfg: ModelConfig, batch: int) -> float:
    """Forward FLOPs of the logit layer (hidden -> vocabulary)."""
    return 2.0 * batch * cfg.seq * cfg.hidden * cfg.vocab


def training_flops(cfg: ModelConfig, batch: int) -> float:
    """Model FLOPs of one training iteration (forward + backward) on ``batch`` sequences."""
    layers = sum(layer_forward_flops(cfg, batch, i) for i in range(cfg.layers))
    return 3.0 * (layers + head_forward_flops(cfg, batch))


def parameter_count(cfg: ModelConfig) -> int:
    """Parameters of the model (tied embedding counted once, untied head added; every expert)."""
    h = cfg.hidden
    qkv = h + 2 * cfg.kv_heads * cfg.head_dim
    attention = qkv * h + qkv + h * h + h + 4 * h  # + 2 layer norms
    layers = sum(attention + _mlp_params(cfg, i) for i in range(cfg.layers))
    emb = cfg.vocab * h + cfg.seq * h
    head = 0 if cfg.tied else cfg.vocab * h
    return layers + emb + 2 * h + head


def _mlp_params(cfg: ModelConfig, layer: int) -> int:
    def ffn(f: int) -> int:  # weights and biases of fc1 (two halves when gated) and fc2
        up = 2 * f if cfg.ffn == "gated" else f
        return cfg.hidden * up + up + f * cfg.hidden + cfg.hidden

    if not cfg.is_moe_layer(layer):
        return ffn(cfg.ffn_hidden)
    shared = ffn(cfg.shared_experts * cfg.moe_ffn_hidden) if cfg.shared_experts else 0
    return cfg.experts * cfg.hidden + cfg.experts * ffn(cfg.moe_ffn_hidden) + shared


def default_peak_flops(device_name: str, dtype: str) -> float | None:
    """Datasheet peak for a known GPU in bf16/fp16, else None (no MFU without ``--peak-flops``)."""
    if dtype not in ("bfloat16", "float16"):
        return None
    for key, peak in PEAK_FLOPS_BF16.items():
        if key in device_name:
            return peak
    return None


def mfu(model_flops: float, iteration_s: float, devices: int, peak_flops: float | None) -> float | None:
    """Model FLOPs utilization: achieved model FLOP/s over ``devices`` x peak."""
    if not peak_flops or iteration_s <= 0:
        return None
    return model_flops / iteration_s / (devices * peak_flops)
