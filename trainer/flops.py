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
"""

from __future__ import annotations

from trainer.config import ModelConfig

# Dense bf16/fp16 tensor-core peaks per GPU (NVIDIA datasheets: A100 SXM 312 TFLOPS; H100 SXM
# and H200 989.4 TFLOPS). Matched against torch.cuda.get_device_name().
PEAK_FLOPS_BF16 = {"A100": 312e12, "H100": 989.4e12, "H200": 989.4e12}


def layer_forward_flops(cfg: ModelConfig, batch: int) -> float:
    """Forward FLOPs of one transformer layer on ``batch`` sequences of ``cfg.seq`` tokens."""
    b, s, h, f = batch, cfg.seq, cfg.hidden, cfg.ffn_hidden
    return 8.0 * b * s * h * h + 4.0 * b * s * h * f + 4.0 * b * s * s * h


def head_forward_flops(cfg: ModelConfig, batch: int) -> float:
    """Forward FLOPs of the logit layer (hidden -> vocabulary)."""
    return 2.0 * batch * cfg.seq * cfg.hidden * cfg.vocab


def training_flops(cfg: ModelConfig, batch: int) -> float:
    """Model FLOPs of one training iteration (forward + backward) on ``batch`` sequences."""
    forward = cfg.layers * layer_forward_flops(cfg, batch) + head_forward_flops(cfg, batch)
    return 3.0 * forward


def parameter_count(cfg: ModelConfig) -> int:
    """Parameters of the model (tied embedding counted once, untied head added)."""
    h, f = cfg.hidden, cfg.ffn_hidden
    per_layer = 3 * h * h + 3 * h + h * h + h + h * f + f + f * h + h + 4 * h  # + 2 layer norms
    emb = cfg.vocab * h + cfg.seq * h
    head = 0 if cfg.tied else cfg.vocab * h
    return cfg.layers * per_layer + emb + 2 * h + head


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
