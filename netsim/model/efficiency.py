"""Fractions of peak that training kernels reach: the one set the CLI and every experiment use.

Each kernel class has a *kernel fraction*: its best published microbenchmark result over the
data-sheet peak of the same precision. A training step does not run its GEMMs at the best
shape (tile and wave quantisation of the real shapes, launch gaps, fused epilogues), so each
kernel fraction is multiplied by one *training factor* ``TRAINING_FACTOR``, the single fitted
compute parameter of the suite: it is fitted on Narayanan et al. 2021 Table 1 row 1 (1.7B,
32 A100, pure data parallelism; ``python -m experiments.published.run --fit``) and held out
everywhere else.

Kernel fractions (published microbenchmarks, source named):

* Dense BF16 GEMM, ``MAMF_FRACTION``: S. Bekman, "Machine Learning Engineering", chapter
  compute/accelerator, "Maximum Achievable Matmul FLOPS comparison table" (``mamf-finder.py``,
  BF16 ``matmul``, best shape found): A100 SXM 267.9 of 312 TFLOP/s (85.9%, CUDA 12.1), H100
  SXM 792.1 of 989 (80.1%, CUDA 12.1). H800 and H200 are H100 silicon (same SMs and clocks).
* Dense FP8 GEMM, ``FP8_FRACTION``: DeepSeek-AI, DeepGEMM README (initial release, 2025-02-25),
  "Normal GEMMs for dense models" on H800 SXM5: best shape 1,358 TFLOP/s (M 4096, N 7168,
  K 16384) of the 1,979 TFLOP/s dense FP8 peak (NVIDIA H100 SXM datasheet: FP8 3,958 with
  sparsity, i.e. 1,979 dense; BF16 989 dense).
* Grouped GEMM of MoE experts, ``grouped_gemm_fraction(tokens_per_expert)``: the same README's
  grouped tables, relative to the contiguous layout at 4,096 tokens per group (the mean over its
  two N x K shapes): 256 tokens 873.5 / 1,190.5, 512 978 / 1,190.5, 1,024 1,079 / 1,190.5
  (masked layout), 4,096 and 8,192: 1 (contiguous). Interpolated linearly in log2(tokens);
  below 256 tokens the kernel is memory-bound and the fraction falls in proportion to tokens.
* Attention, ``ATTENTION_FRACTION``: FlashAttention-2 on A100 (Dao 2023, arXiv:2307.08691,
  abstract: "50-73% of the theoretical maximum FLOPs/s"): 0.73; FlashAttention-3 on H100
  (Shah et al. 2024, arXiv:2407.08608, abstract: BF16 "up to 740 TFLOPs/s (75% utilization)"):
  0.75. Its FLOPs are FlashAttention's own count, ``4 s^2 d`` per head forward (scores and
  context), half of it with a causal mask (the kernels skip the masked blocks);
  ``netsim.workload.compute``.
* Compute beside a hidden all-to-all, ``OVERLAP_SM_FRACTION``: DeepSeek-V3 (arXiv:2412.19437,
  section 3.2.2) runs its dispatch and combine on 20 of the H800's 132 SMs while the other
  chunk computes, so that compute has 112 / 132 of the GPU.
"""

from __future__ import annotations

import numpy as np

#: Fraction of the kernel fractions a training step's kernels reach; fitted once on
#: Megatron-LM 2021 Table 1 row 1 (``experiments.published.run.fit_training_factor``).
TRAINING_FACTOR = 0.733

#: Best BF16 matmul / BF16 dense peak (Bekman, MAMF table).
MAMF_FRACTION = {"a100": 267.9 / 312, "h100": 792.1 / 989}
#: Best FP8 GEMM / FP8 dense peak (DeepGEMM on H800).
FP8_FRACTION = 1358 / 1979
#: FP8 dense tensor-core peak of Hopper SXM, FLOP/s (H100 SXM datasheet).
HOPPER_FP8_PEAK_FLOPS_PER_S = 1979e12
#: FlashAttention-2 (A100) / FlashAttention-3 (Hopper) best forward utilisation.
ATTENTION_FRACTION = {"a100": 0.73, "h100": 0.75}

#: Share of the SMs left to compute while an all-to-all runs beside it (DeepSeek-V3).
OVERLAP_SM_FRACTION = (132 - 20) / 132

#: DeepGEMM grouped GEMM: tokens per expert -> throughput relative to 4,096 tokens per group.
GROUPED_TOKENS = np.array([256.0, 512.0, 1024.0, 4096.0])
GROUPED_RELATIVE = np.array([873.5, 978.0, 1079.0, 1190.5]) / 1190.5


def training_efficiency(kernel_fraction: float) -> float:
    """A kernel fraction as reached inside a training step."""
    return kernel_fraction * TRAINING_FACTOR


def grouped_gemm_fraction(tokens_per_expert: float) -> float:
    """Throughput of a grouped expert GEMM relative to a large dense GEMM (1 at >= 4,096
    tokens per expert; see the module docstring)."""
    if tokens_per_expert <= 0:
        return 1.0
    if tokens_per_expert < GROUPED_TOKENS[0]:
        return float(GROUPED_RELATIVE[0] * tokens_per_expert / GROUPED_TOKENS[0])
    return float(np.interp(np.log2(tokens_per_expert), np.log2(GROUPED_TOKENS),
                           GROUPED_RELATIVE))
