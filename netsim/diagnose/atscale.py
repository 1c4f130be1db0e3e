"""What replacing a straggler is worth, predicted at the traced scale and at scale.

The at-scale projection is priced the way ``netsim predict --straggler RANK:FACTOR`` prices
it: ``netsim.workload.predict.predict(job, hardware=GPU profile, stragglers=...)``, on a GPU
hardware profile that the rows state. A calibration is used at scale only when it was fitted
on GPU ranks: a CPU (gloo) calibration carries one host's latencies, bandwidths and compute
rates, so projecting it onto thousands of GPUs (40 s iterations, MFU 0.0006 for a 12,288-GPU
job) says nothing about them; it prices the traced scale only and the projection says so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from netsim.model.shape import BF16_BYTES


@dataclass(frozen=True)
class Projection:
    """The job, hardware profile and calibration (None: the profile's own rates) one set of
    what-if rows is priced on, and how the rows name it."""

    job: Any
    hardware: Any
    calibration: Any
    label: str


def scaled_job(job, gpus: int):
    """``job`` at ``gpus`` GPUs: the same model, tp, cp and pp, data parallelism scaled up
    (global batch with it)."""
    per = job.tp * job.pp * job.cp
    if gpus % per or gpus < per:
        raise ValueError(f"--at-scale {gpus}: must be a multiple of tp x cp x pp = {per}")
    dp = gpus // per
    return dataclasses.replace(job, dp=dp, gpus=0, global_batch=job.batch // job.dp * dp)


def rank_at(job, traced_job, rank: int) -> int:
    """The rank of ``job`` at the traced rank's (tp, pp) coordinates (dp rank 0; coordinates
    beyond ``job``'s degrees wrap)."""
    tp_rank = rank % traced_job.tp % job.tp
    stage = rank // (traced_job.tp * traced_job.cp * traced_job.dp) % job.pp
    return tp_rank + stage * job.tp * job.cp * job.dp


def is_gpu_calibration(cal) -> bool:
    """Whether ``cal`` was fitted on GPU (cuda) ranks."""
    return (getattr(cal, "hardware_info", {}) or {}).get("device") == "cuda"


def at_scale(traced, gpus: int, calibration=None, job=None, gpu: str | None = None) -> Projection:
    """The projection onto ``gpus`` GPUs: ``job`` (default: the traced job, in BF16 mixed
    precision as on GPUs) with its data parallelism scaled, priced on the ``gpu`` profile
    (default: the job's), with ``calibration`` only if it was fitted on GPUs."""
    from netsim.model.hardware import get_hardware

    base = job if job is not None else dataclasses.replace(traced, act_bytes=BF16_BYTES)
    target = base if base.world == gpus else scaled_job(base, gpus)
    gpu_cal = calibration if calibration is not None and is_gpu_calibration(calibration) \
        else None
    hw = calibration.hardware() if gpu_cal is not None and gpu is None \
        else get_hardware(gpu or target.gpu)
    source = "its GPU calibration" if gpu_cal is not None else f"the {hw.name} profile"
    return Projection(target, hw, gpu_cal, f"at scale, {source}")


def whatif_rows(projection: Projection, traced, stragglers) -> list[dict[str, Any]]:
    """MFU before and after replacing each straggler (and all of them) on ``projection``."""
    from netsim.workload.predict import predict

    job, hw, cal = projection.job, projection.hardware, projection.calibration
    factors = {rank_at(job, traced, s.rank): s.slowdown for s in stragglers}

    def mfu(f: dict[int, float]) -> float:
        return predict(job, hardware=hw, calibration=cal, stragglers=f or None).mfu

    where = f"on {job.world} GPUs ({projection.label})"
    common = {"gpus": job.world, "hardware": hw.name, "mfu_before": mfu(factors)}
    out = []
    for s in stragglers:
        at = rank_at(job, traced, s.rank)
        out.append({**common, "action": f"replace rank {s.rank} ({s.host}, x{s.slowdown:.2f}) "
                    f"{where}", "rank": at, "slowdown": s.slowdown,
                    "mfu_after": mfu({r: f for r, f in factors.items() if r != at})})
    if len(stragglers) > 1:
        out.append({**common, "action": f"replace all {len(stragglers)} stragglers {where}",
                    "mfu_after": mfu({})})
    return out
