"""A model's shape (:class:`ModelConfig`) and its FLOP counts.

FLOP counts follow Narayanan et al. 2021 section 5.1 (Eq. 3): a transformer layer's forward
pass costs ``24 b s h^2 + 4 b s^2 h`` with a 4h feed-forward (we use the general
``2 b s (4 h^2 + 2 h f) + 4 b s^2 h`` for a feed-forward width ``f``), the logit layer
``2 b s h V``; backward costs twice the forward. Today's shapes generalise the GEMM term
(``netsim.model.flops`` writes each term down with its source): grouped-query attention
projects K and V to ``kv_heads`` heads, a gated (SwiGLU) feed-forward has three matrices,
an MoE layer runs its router, its ``top_k`` active experts and its shared experts. Model FLOPs (MFU, as PaLM and MegaScale
define it) exclude activation recomputation; hardware FLOPs (Megatron's "achieved
teraFLOP/s") include the recomputed forward of the transformer layers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

BF16_BYTES = 2  # bytes per activation / gradient element in mixed precision


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelConfig:
    """Shape of a decoder-only GPT."""

    name: str = "custom"
    """Preset name, for reports."""
    layers: int
    """Number of transformer layers."""
    hidden: int
    """Model width h (d_model)."""
    heads: int
    """Attention heads a."""
    ffn_hidden: int = 0
    """Feed-forward width f; 0 means 4 h."""
    seq: int = 2048
    """Sequence length s in tokens."""
    vocab: int = 51200
    """Vocabulary size V."""
    kv_heads: int = 0
    """Key/value heads of grouped-query attention; 0 means ``heads`` (multi-head)."""
    head_dim: int = 0
    """Width of one attention head; 0 means ``hidden / heads``."""
    gated: bool = False
    """Gated (SwiGLU) feed-forward: gate, up and down matrices instead of two."""
    bias: bool = True
    """Linear biases and LayerNorm betas (GPT); False for RMSNorm models without biases."""
    tied_embeddings: bool = True
    """The logit layer shares the token embedding (``tie_word_embeddings``)."""
    learned_positions: bool = True
    """A learned position embedding of ``seq`` rows (GPT); False for rotary models."""
    experts: int = 0
    """Routed experts of an MoE layer; 0 means a dense model."""
    top_k: int = 0
    """Experts each token is routed to."""
    moe_ffn_hidden: int = 0
    """Feed-forward width of one expert; 0 means ``ffn``."""
    shared_experts: int = 0
    """Always-active experts of an MoE layer (DeepSeek), each ``moe_ffn_hidden`` wide."""
    first_dense_layers: int = 0
    """Leading dense layers before the first MoE layer (DeepSeek ``first_k_dense_replace``)."""
    moe_every: int = 1
    """Layer i (from 0) is MoE when ``(i + 1) % moe_every == 0`` (Qwen ``decoder_sparse_step``)."""
    q_lora_rank: int = 0
    """Multi-head latent attention (DeepSeek-V2/V3): query compression rank; 0: no compression."""
    kv_lora_rank: int = 0
    """MLA key/value compression rank; 0 means standard attention."""
    qk_rope_head_dim: int = 0
    """MLA rotary part of a query/key head."""
    v_head_dim: int = 0
    """MLA value head width."""
    seq_source: str = ""
    """Where ``seq`` came from, for reports (a preset, a job's ``seq``, a config.json default)."""
    sliding_window: int = 0
    """Attention window in tokens of the windowed layers (config.json ``sliding_window``);
    0: full attention."""
    sliding_layers: int = 0
    """How many layers attend through ``sliding_window`` (Gemma-2: every other one)."""

    def __post_init__(self) -> None:
        for field in ("layers", "hidden", "heads", "seq", "vocab"):
            if getattr(self, field) <= 0:
                raise ValueError(f"model.{field} must be positive, got {getattr(self, field)}")
        if self.ffn_hidden < 0:
            raise ValueError("model.ffn_hidden must be >= 0 (0 means 4 x hidden)")
        if self.hidden % self.heads and not self.head_dim:
            raise ValueError(f"model.hidden {self.hidden} is not divisible by heads {self.heads}")
        if self.kv and self.heads % self.kv:
            raise ValueError(f"model.heads {self.heads} is not divisible by kv_heads {self.kv}: "
                             "every key/value head serves the same number of query heads")
        if self.experts and not 0 < self.top_k <= self.experts:
            raise ValueError(f"model.top_k {self.top_k} must lie in 1..experts ({self.experts})")
        if self.top_k and not self.experts:
            raise ValueError("model.top_k is set but experts is 0: give experts or drop top_k")
        if self.moe_every < 1 or self.first_dense_layers < 0:
            raise ValueError("model.moe_every must be >= 1 and first_dense_layers >= 0")

    @property
    def kv(self) -> int:
        """Key/value heads in use."""
        return self.kv_heads or self.heads

    @property
    def dhead(self) -> int:
        """Head width in use."""
        return self.head_dim or self.hidden // self.heads

    @property
    def moe(self) -> bool:
        """Whether the model has MoE layers."""
        return self.experts > 0

    @property
    def expert_ffn(self) -> int:
        """Width of one expert's feed-forward."""
        return self.moe_ffn_hidden or self.ffn

    def moe_layers(self):
        """Boolean array, one entry per layer: whether it is an MoE layer."""
        import numpy as np

        i = np.arange(self.layers)
        if not self.moe:
            return np.zeros(self.layers, bool)
        return (i >= self.first_dense_layers) & ((i + 1) % self.moe_every == 0)

    @property
    def num_moe_layers(self) -> int:
        return int(self.moe_layers().sum())

    @property
    def ffn(self) -> int:
        """Feed-forward width in use."""
        return self.ffn_hidden or 4 * self.hidden

    def replace(self, **changes) -> ModelConfig:
        """Return a copy with ``changes`` applied (``None`` values are ignored)."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    # ---- parameters -------------------------------------------------------------------------
    def layer_params(self, moe: bool = False) -> int:
        """Weights and biases of one transformer layer (attention, MLP, two norms); with
        ``moe`` an MoE layer's (router, every expert, shared experts)."""
        from netsim.model.flops import attention_params, ffn_params, norm_params

        return attention_params(self) + ffn_params(self, moe) + norm_params(self)

    def expert_params(self) -> int:
        """Routed-expert weights of one MoE layer (the part split over expert parallelism)."""
        from netsim.model.flops import expert_params

        return expert_params(self)

    def embedding_params(self) -> int:
        """Token and position embeddings (and an untied output layer)."""
        pos = self.seq * self.hidden if self.learned_positions else 0
        out = 0 if self.tied_embeddings else self.vocab * self.hidden
        return self.vocab * self.hidden + pos + out

    def params(self) -> int:
        """Total parameter count."""
        n_moe = self.num_moe_layers
        final_norm = (2 if self.bias else 1) * self.hidden
        return ((self.layers - n_moe) * self.layer_params() + n_moe * self.layer_params(True)
                + self.embedding_params() + final_norm)

    # ---- FLOPs per sequence ----------------------------------------------------------------
    def layer_gemm_flops_fwd(self, tokens: int, moe: bool = False) -> float:
        """Dense-GEMM FLOPs of one layer's forward over ``tokens`` tokens (QKV, proj, MLP);
        with ``moe`` an MoE layer's (router, ``top_k`` experts, shared experts)."""
        from netsim.model.flops import attention_gemm_flops, ffn_flops

        return tokens * (attention_gemm_flops(self) + ffn_flops(self, moe))

    def layer_attn_flops_fwd(self, tokens: int) -> float:
        """Attention score and context batched-matmul FLOPs of one layer's forward."""
        from netsim.model.flops import attention_core_flops

        return tokens * attention_core_flops(self)

    def layer_flops_fwd(self, tokens: int, moe: bool = False) -> float:
        """All matmul FLOPs of one layer's forward pass."""
        return self.layer_gemm_flops_fwd(tokens, moe) + self.layer_attn_flops_fwd(tokens)

    def layers_flops_fwd(self, tokens: int) -> float:
        """Forward matmul FLOPs of all transformer layers (dense and MoE)."""
        n_moe = self.num_moe_layers
        return ((self.layers - n_moe) * self.layer_flops_fwd(tokens)
                + n_moe * self.layer_flops_fwd(tokens, True))

    def logit_flops_fwd(self, tokens: int) -> float:
        """FLOPs of the output (logit) projection's forward."""
        return 2.0 * tokens * self.hidden * self.vocab

    def model_flops(self, tokens: int) -> float:
        """Model FLOPs of one training step over ``tokens`` tokens (fwd + bwd, no recompute).

        Equals ``72 B s l h^2 (1 + s/6h + V/12lh)`` for a 4h feed-forward.
        """
        return 3.0 * (self.layers_flops_fwd(tokens) + self.logit_flops_fwd(tokens))

    def hardware_flops(self, tokens: int, recompute: bool = True) -> float:
        """FLOPs executed with full activation recomputation (Narayanan et al. 2021 Eq. 3).

        Equals ``96 B s l h^2 (1 + s/6h + V/16lh)`` for a 4h feed-forward.
        """
        extra = self.layers_flops_fwd(tokens) if recompute else 0.0
        return self.model_flops(tokens) + extra

    # ---- memory traffic of the non-GEMM (element-wise) kernels -------------------------------
    def layer_elementwise_bytes_fwd(self, tokens: int, micro_batch: int, tp: int,
                                    flash_attention: bool = False) -> float:
        """HBM bytes moved by one layer's element-wise kernels in the forward, per GPU.

        Proxy: the activation footprint of a layer given by Korthikanti
        et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", Eq. 2):
        ``s b h (34 + 5 a s / h)`` bytes, split over ``tp``. Flash attention removes the
        ``a s^2`` softmax terms.
        """
        s, h, a = self.seq, self.hidden, self.heads
        per_seq = s * h * 34.0 + (0.0 if flash_attention else 5.0 * a * s * s)
        return per_seq * (tokens / s) / tp
