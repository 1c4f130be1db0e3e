"""Per-token parameter and FLOP counts of one transformer layer, term by term, with sources.

A matmul of an ``n x k`` activation by a ``k x m`` weight costs ``2 n k m`` FLOPs (one
multiply and one add per multiply-accumulate), so a layer's GEMM FLOPs per token are twice
its weight count; the backward costs twice the forward (Narayanan et al. 2021, "Efficient
Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", section 5.1).
Symbols: ``h`` hidden, ``a`` query heads, ``g`` key/value heads, ``d`` head width, ``f``
feed-forward width, ``s`` sequence, ``E`` routed experts, ``k`` experts per token (top-k),
``S`` shared experts, ``f_e`` expert width.

* Attention projections, grouped-query attention (Ainslie et al. 2023, "GQA", arXiv:2305.13245,
  section 2: K and V are projected to ``g`` heads): weights ``h a d`` (Q) + ``2 h g d`` (K, V)
  + ``a d h`` (output). Multi-head attention is ``g = a``: ``4 h^2`` for ``a d = h``,
  Megatron's ``24 b s h^2`` term together with a 4h feed-forward.
* Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434, section 2.1.2; the shapes of
  DeepSeek-V3's ``config.json``): query ``h r_q + r_q a (d_n + d_r)`` (or ``h a (d_n + d_r)``
  without query compression), key/value ``h (r_kv + d_r) + r_kv a (d_n + d_v)``, output
  ``a d_v h``.
* Attention core (scores ``Q K^T`` and context ``P V``): ``2 s a d_qk + 2 s a d_v`` per token,
  ``4 s h`` for standard heads (Narayanan et al. Eq. 3's ``4 b s^2 h``; PaLM, Chowdhery et al.
  2022, appendix B counts the same ``12 L H Q T`` with its backward). Like both, the causal
  mask is not subtracted, so MFU is comparable with PaLM's and Megatron's.
* Feed-forward: two matrices ``2 h f``; gated (SwiGLU, Shazeer 2020, "GLU Variants Improve
  Transformer", arXiv:2002.05202, Eq. 6: gate, up and down) three, ``3 h f``: a plain count of
  ``2 h f`` undercounts it by a third.
* MoE layer (Fedus et al. 2021, "Switch Transformers", section 2.1; DeepSeek-V3, arXiv:2412.19437,
  section 2.1.2): the router ``h E``, then each token runs through its ``k`` routed experts and
  the ``S`` shared experts only: ``(k + S) x 3 h f_e`` per token, while the parameters hold
  all ``E + S`` experts. Megatron-Core counts the same terms (``num_floating_point_operations``
  in ``megatron/training/training.py``: ``moe_router_topk`` x ``moe_ffn_hidden_size`` plus
  the shared experts; GQA through ``num_query_groups``; SwiGLU's 3/2 factor).

MFU, as PaLM (appendix B) and Megatron define it: these model FLOPs of an iteration (no
recomputation) over iteration time x GPUs x the GPU's dense BF16 peak.
"""

from __future__ import annotations


def _mats(m) -> int:
    """Matrices of one feed-forward: 3 gated, 2 plain."""
    return 3 if m.gated else 2


def _mla(m) -> bool:
    return m.kv_lora_rank > 0


def attention_weights(m) -> int:
    """Weights of the attention projections of one layer."""
    h, a, d = m.hidden, m.heads, m.dhead
    if _mla(m):
        dq = d + m.qk_rope_head_dim
        q = h * m.q_lora_rank + m.q_lora_rank * a * dq if m.q_lora_rank else h * a * dq
        kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * a * (d + m.v_head_dim)
        return q + kv + a * m.v_head_dim * h
    return h * a * d + 2 * h * m.kv * d + a * d * h


def attention_params(m) -> int:
    """Attention weights plus biases (Q, K, V and output) when the model has biases."""
    bias = (m.heads * m.dhead + 2 * m.kv * m.dhead + m.hidden) if m.bias else 0
    return attention_weights(m) + bias


def expert_params(m) -> int:
    """Routed experts' weights of one MoE layer."""
    return m.experts * _mats(m) * m.hidden * m.expert_ffn


def ffn_params(m, moe: bool = False) -> int:
    """Feed-forward weights (and biases) of a dense layer, or router + experts of an MoE one."""
    h, f = m.hidden, m.ffn
    if moe:
        return h * m.experts + expert_params(m) + m.shared_experts * _mats(m) * h * m.expert_ffn
    bias = ((_mats(m) - 1) * f + h) if m.bias else 0
    return _mats(m) * h * f + bias


def norm_params(m) -> int:
    """Two norms per layer: LayerNorm (gain and bias) or RMSNorm (gain only)."""
    return 2 * (2 if m.bias else 1) * m.hidden


def attention_gemm_flops(m) -> float:
    """Forward FLOPs per token of the attention projections."""
    return 2.0 * attention_weights(m)


def attention_core_flops(m) -> float:
    """Forward FLOPs per token of the attention scores and context (sequence ``m.seq``)."""
    dqk = m.dhead + (m.qk_rope_head_dim if _mla(m) else 0)
    dv = m.v_head_dim if _mla(m) else m.dhead
    return 2.0 * m.seq * m.heads * (dqk + dv)


def ffn_flops(m, moe: bool = False) -> float:
    """Forward FLOPs per token of the feed-forward (dense), or router + active experts (MoE)."""
    if moe:
        active = (m.top_k + m.shared_experts) * _mats(m) * m.hidden * m.expert_ffn
        return 2.0 * (m.hidden * m.experts + active)
    return 2.0 * _mats(m) * m.hidden * m.ffn
