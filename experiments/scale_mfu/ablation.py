"""MegaScale's ablation through ``netsim predict``'s switches (netsim.workload.megascale_opts).

Cumulative steps at each scale: Megatron-LM baseline, +PTB, +SWA, +LAMB (batch x3),
+efficient operators, +every overlap (``Overlap.megascale()``). GPT-3 175B, TP 8, PP 8,
interleaved schedule v = 4 (the rule of ``experiments.published``), distributed optimizer,
global batch 6,144 before LAMB's multiplier, analytic (alpha-beta) collectives so that the
ablation runs in seconds. The published points are the abstract's 55.2% at 12,288 GPUs and
Megatron-LM's 55.2% / 1.34 (arXiv:2402.15627); the paper's per-scale Table 2 and its Table 3
figures were not available to this study.
"""

from __future__ import annotations

from dataclasses import replace

from netsim.hardware import A100
from netsim.workload import JobSpec, Overlap, predict
from netsim.workload.megascale_opts import MegaScaleOpts, ablation_steps, apply

SCALES = (256, 1536, 12288)
GLOBAL_BATCH = 6144
VIRTUAL_STAGES = 4


def _job(gpus: int) -> JobSpec:
    return JobSpec(model="megascale-175b", gpu="a100", tp=8, pp=8, dp=gpus // 64,
                   global_batch=GLOBAL_BATCH, micro_batch=1, distributed_optimizer=True,
                   virtual_stages=VIRTUAL_STAGES)


def _mfu(job: JobSpec, opts: MegaScaleOpts) -> float:
    j, hw, cm, cp = apply(job, A100, opts)
    return predict(j, hardware=hw, comm_model=cm, compute_model=cp).mfu


def ablation_rows(scales=SCALES) -> list[dict]:
    """One row per (scale, cumulative step): predicted MFU."""
    rows = []
    for gpus in scales:
        job = _job(gpus)
        steps = ablation_steps()
        for name, opts in steps:
            rows.append({"gpus": gpus, "step": name, "mfu": _mfu(job, opts)})
        rows.append({"gpus": gpus, "step": "+overlaps",
                     "mfu": _mfu(replace(job, overlap=Overlap.megascale()), steps[-1][1])})
    return rows


def plot_ablation(rows: list[dict], path=None):
    """Grouped bars: predicted MFU per cumulative step, one group per scale."""
    import matplotlib.pyplot as plt

    scales = sorted({r["gpus"] for r in rows})
    steps = list(dict.fromkeys(r["step"] for r in rows))
    fig, ax = plt.subplots(figsize=(8, 4.2))
    width = 0.8 / len(scales)
    for i, g in enumerate(scales):
        ys = [100 * next(r["mfu"] for r in rows if r["gpus"] == g and r["step"] == s)
              for s in steps]
        ax.bar([k + i * width for k in range(len(steps))], ys, width, label=f"{g:,} GPUs")
    ax.axhline(55.2, color="k", ls="--", lw=1, label="MegaScale published, 12,288 GPUs")
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(steps))], steps, rotation=20,
                  fontsize=8)
    ax.set_ylabel("predicted MFU (%)")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
    return fig


if __name__ == "__main__":  # pragma: no cover
    for r in ablation_rows():
        print(f"{r['gpus']:>6} {r['step']:<22} {100 * r['mfu']:.1f}%")
