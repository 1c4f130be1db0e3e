"""Predict published large-scale GPT training throughput from the published configurations.

    python -m experiments.published.run [--json]

Sources (rows quoted from the papers' tables):

* Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
  Megatron-LM" (SC'21, arXiv:2104.04473), Table 1 (weak scaling, A100 80 GB on Selene, 8 x
  200 Gb/s HDR per server, seq 2048, V 51,200, activation recomputation; metric: achieved
  teraFLOP/s per GPU counting the recomputed forward, Eq. 3) and Table 2 (GPT-3 175B, PTD-P,
  batch 1536, micro-batch 1, model-parallel size 96 = t 8 x p 12).
* Jiang et al. 2024, "MegaScale" (NSDI'24, arXiv:2402.15627): 55.2% MFU for 175B on 12,288
  GPUs, 1.34x Megatron-LM (abstract); 12,288 GPUs = tp 8, pp 8, dp 192, batch 6144, 1,984k
  tokens/s, 6.34 s per iteration (Table 2 as tabulated in github.com/JaneLiCC/Notes eos.md).

What the papers do not state is assumed, the same way for every row: micro-batch 1;
interleaved schedule with the largest v <= 4 dividing the layers per stage (v = 1 without
pipelining); gradients reduced in fp16 (2 bytes) without overlap for Megatron-LM 2021;
MegaScale with every overlap, the distributed optimizer and FlashAttention.

Calibration: the A100 profile's ``gemm_efficiency`` is the one free compute parameter. It was
fitted on Table 1's first row only (1.7B, 32 GPUs, pure data parallelism) and every other row
is held out; ``--fit`` redoes that fit.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from netsim.model.hardware import A100, HardwareProfile
from netsim.model.models import get_model
from netsim.workload import JobSpec, Overlap, predict

A100_PEAK_TFLOPS = 312.0
# model, tp, pp, GPUs, batch, published TFLOP/s per GPU
MEGATRON_TABLE1 = (
    ("megatron-1.7b", 1, 1, 32, 512, 137), ("megatron-3.6b", 2, 1, 64, 512, 138),
    ("megatron-7.5b", 4, 1, 128, 512, 142), ("megatron-18b", 8, 1, 256, 1024, 135),
    ("megatron-39b", 8, 2, 512, 1536, 138), ("megatron-76b", 8, 4, 1024, 1792, 140),
    ("megatron-145b", 8, 8, 1536, 2304, 148), ("megatron-310b", 8, 16, 1920, 2160, 155),
    ("megatron-530b", 8, 35, 2520, 2520, 163), ("megatron-1t", 8, 64, 3072, 3072, 163),
)
MEGATRON_TABLE2 = (("megatron-gpt3-175b", 8, 12, 384, 1536, 153),
                   ("megatron-gpt3-175b", 8, 12, 768, 1536, 149),
                   ("megatron-gpt3-175b", 8, 12, 1536, 1536, 141))


def interleave(model: str, tp: int, pp: int, gpus: int, batch: int) -> int:
    """The v rule stated in the module docstring."""
    if pp == 1:
        return 1
    per_stage = get_model(model).layers // pp
    m = batch // (gpus // (tp * pp))
    return max(v for v in range(1, 5) if per_stage % v == 0 and (v == 1 or m % pp == 0))


def megatron_job(model: str, tp: int, pp: int, gpus: int, batch: int) -> JobSpec:
    return JobSpec(model=model, gpu="a100", tp=tp, pp=pp, dp=gpus // (tp * pp),
                   global_batch=batch, micro_batch=1, recompute=True, grad_bytes=2,
                   virtual_stages=interleave(model, tp, pp, gpus, batch))


def megascale_job(overlap: Overlap, dist_opt: bool) -> JobSpec:
    return JobSpec(model="megascale-175b", gpu="a100", gpus=12288, tp=8, pp=8, dp=192,
                   global_batch=6144, micro_batch=1, distributed_optimizer=dist_opt,
                   virtual_stages=interleave("megascale-175b", 8, 8, 12288, 6144),
                   overlap=overlap)


def rows(hw: HardwareProfile) -> list[dict]:
    out = []
    for source, table in (("Megatron-LM 2021 Table 1", MEGATRON_TABLE1),
                          ("Megatron-LM 2021 Table 2", MEGATRON_TABLE2)):
        for model, tp, pp, gpus, batch, published in table:
            job = megatron_job(model, tp, pp, gpus, batch)
            pred = predict(job, hardware=hw)
            out.append(_row(source, job, "TFLOP/s/GPU", pred.hfu * A100_PEAK_TFLOPS, published))
    flash = hw.replace(flash_attention=True)
    ms = predict(megascale_job(Overlap.megascale(), True), hardware=flash)
    out.append(_row("MegaScale (abstract)", megascale_job(Overlap.megascale(), True), "MFU",
                    ms.mfu, 0.552))
    out.append(_row("MegaScale Table 2", megascale_job(Overlap.megascale(), True),
                    "tokens/s", ms.tokens_per_s, 1.984e6))
    base = megascale_job(Overlap(), False)
    mg = predict(base, hardware=hw)
    out.append(_row("MegaScale: Megatron-LM baseline (55.2% / 1.34)", base, "MFU", mg.mfu,
                    0.552 / 1.34))
    return out


def _row(source: str, job: JobSpec, metric: str, predicted: float, published: float) -> dict:
    return {"source": source, "model": job.model, "gpus": job.world, "tp": job.tp,
            "pp": job.pp, "dp": job.dp, "batch": job.batch, "v": job.virtual_stages,
            "metric": metric, "published": published, "predicted": predicted,
            "error": (predicted - published) / published}


def fit_gemm_efficiency(hw: HardwareProfile = A100) -> float:
    """Bisect ``gemm_efficiency`` so that Table 1 row 1 (1.7B, 32 GPUs) is reproduced."""
    model, tp, pp, gpus, batch, published = MEGATRON_TABLE1[0]
    job = megatron_job(model, tp, pp, gpus, batch)
    lo, hi = 0.2, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        tflops = predict(job, hardware=hw.replace(gemm_efficiency=mid)).hfu * A100_PEAK_TFLOPS
        lo, hi = (mid, hi) if tflops < published else (lo, mid)
    return (lo + hi) / 2


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="refit gemm_efficiency on row 1 first")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--modern", action="store_true",
                    help="also the Llama 3 405B and DeepSeek-V3 rows (experiments.published.modern)")
    args = ap.parse_args(argv)
    hw = A100
    if args.fit:
        eff = fit_gemm_efficiency()
        print(f"fitted gemm_efficiency {eff:.4f} (profile default {A100.gemm_efficiency})",
              file=sys.stderr)
        hw = A100.replace(gemm_efficiency=eff)
    table = rows(hw)
    held = np.abs([r["error"] for r in table[1:]])
    summary = {"gemm_efficiency": hw.gemm_efficiency, "held_out_rows": int(held.size),
               "median_abs_error": float(np.median(held)), "max_abs_error": float(held.max())}
    if args.json:
        print(json.dumps({"rows": table, "summary": summary}, indent=2))
        return 0
    print(f"{'source':48s} {'model':19s} {'GPUs':>5s} {'t':>2s} {'p':>3s} {'v':>2s} "
          f"{'metric':12s} {'published':>10s} {'predicted':>10s} {'error':>7s}")
    for r in table:
        print(f"{r['source']:48s} {r['model']:19s} {r['gpus']:5d} {r['tp']:2d} {r['pp']:3d} "
              f"{r['v']:2d} {r['metric']:12s} {r['published']:10.4g} {r['predicted']:10.4g} "
              f"{r['error']:+7.1%}")
    print(f"held-out rows: median |error| {summary['median_abs_error']:.1%}, "
          f"worst {summary['max_abs_error']:.1%}")
    if args.modern:
        from experiments.published.modern import modern_rows, print_rows

        modern = modern_rows()
        print(f"\ntoday's jobs (H100/H800 gemm_efficiency {modern[0]['gemm_efficiency']:.4f} "
              "fitted on the first Llama 3 row):")
        print_rows(modern)
    return 0


if __name__ == "__main__":
    sys.exit(main())
