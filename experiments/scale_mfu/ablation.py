"""MegaScale's ablation through ``netsim predict``'s switches (netsim.workload.megascale_opts).

Cumulative steps at each scale, in the row order of the paper's Table 3
(``ablation_steps``): Megatron-LM baseline, +PTB, +SWA, +TP overlap, +PP overlap, +DP
overlap (with the distributed optimizer), +efficient operators, +LAMB (batch x3). The
paper's setup (``experiments.scale_mfu.megascale_tables.paper_job``: TP 8, PP 8, six
interleaved chunks per stage, micro-batch 1, analytic collectives). Batch before LAMB: 256 at
256 GPUs (Table 3's setting); at the other scales Table 2's batch (768 up to 1,024 GPUs,
6,144 above), so the LAMB step there is a what-if beyond the published batches.
The published rows themselves are compared in ``experiments.scale_mfu.megascale_tables``.
"""

from __future__ import annotations

from experiments._output import finish_figure
from experiments.scale_mfu.megascale_tables import WINDOW, paper_job, predicted_mfu
from netsim.workload.megascale_opts import ablation_steps

SCALES = (256, 1024, 12288)


def ablation_batch(gpus: int) -> int:
    """Global batch before LAMB's multiplier (module docstring)."""
    if gpus == 256:
        return 256
    return 768 if gpus <= 1024 else 6144


def ablation_rows(scales=SCALES, window: int = WINDOW) -> list[dict]:
    """One row per (scale, cumulative step): predicted MFU."""
    rows = []
    for gpus in scales:
        for name, opts, overlap in ablation_steps(window):
            job = paper_job(gpus, ablation_batch(gpus), overlap=overlap,
                            distributed_optimizer=overlap.dp_param_gather)
            rows.append({"gpus": gpus, "step": name, "mfu": predicted_mfu(job, opts)})
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
    ax.axhline(65.3, color="k", ls="--", lw=1, label="MegaScale published, 256 GPUs (Table 3)")
    ax.axhline(55.2, color="k", ls=":", lw=1, label="MegaScale published, 12,288 GPUs")
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(steps))], steps, rotation=20,
                  fontsize=8)
    ax.set_ylabel("predicted MFU (%)")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    return finish_figure(fig, path)


if __name__ == "__main__":  # pragma: no cover
    for r in ablation_rows():
        print(f"{r['gpus']:>6} {r['step']:<22} {100 * r['mfu']:.1f}%")
