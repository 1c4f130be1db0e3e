"""Pipeline schedules that split the backward: zero-bubble ZB-H1 and DeepSeek-V3's DualPipe.

Both defer the weight-gradient part ``W`` of a backward chunk into the bubble; they are priced
by their published bubble closed forms (the 1F1B family is executed op by op in
``netsim.workload.pipeline``). Notation of the DeepSeek-V3 report (arXiv:2412.19437, section
3.2.1, Table 2): ``F`` a forward chunk, ``B`` a full backward chunk, ``W`` its
weight-gradient part, ``F&B`` a forward and a backward chunk overlapped.

* ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", arXiv:2401.10241, section 3;
  "ZB1P" in DeepSeek-V3 Table 2): bubble ``(p - 1)(F + B - 2W)``.
* DualPipe (DeepSeek-V3 Table 2): bubble ``(p/2 - 1)(F&B + B - 3W)``; the two directions'
  chunks overlap, so ``F&B`` costs ``F + B`` of compute and the expert all-to-all of one
  chunk runs under the other's compute (``netsim.workload.predict`` hides it).

``W`` is half of a backward chunk: a GEMM's backward computes the input gradient and the weight
gradient, each as many FLOPs as its forward (Narayanan et al. 2021 section 5.1). The pipeline
fill and drain add one transfer per hop each way. Every stage is charged the slowest stage's
bubble.
"""

from __future__ import annotations

import numpy as np

from netsim.workload.pipeline import PipelineRun

CLOSED_FORM = ("zb", "dualpipe")


def bubble_s(schedule: str, p: int, fwd_s: float, bwd_s: float) -> float:
    """Idle time of the schedule's pipeline for chunks of ``fwd_s`` forward, ``bwd_s`` backward."""
    w = bwd_s / 2
    if schedule == "zb":
        return (p - 1) * (fwd_s + bwd_s - 2 * w)
    if schedule == "dualpipe":
        return max(0, p // 2 - 1) * ((fwd_s + bwd_s) + bwd_s - 3 * w)
    raise ValueError(f"no closed form for schedule {schedule!r}: choose {', '.join(CLOSED_FORM)}")


def closed_form_pipeline(schedule: str, fwd_s: np.ndarray, bwd_s: np.ndarray,
                         p2p_s: np.ndarray, m: int, p: int) -> PipelineRun:
    """One iteration's pipeline under ``schedule`` (per-stage chunk times ``fwd_s``, ``bwd_s``
    and transfers ``p2p_s``, each (p,); ``m`` micro-batches)."""
    busy = m * (fwd_s + bwd_s)
    hops = p - 1 if schedule == "zb" else max(0, p // 2 - 1)
    fill = 2 * hops * float(np.max(p2p_s[:-1])) if p > 1 else 0.0
    makespan = float(busy.max() + bubble_s(schedule, p, float(fwd_s.max()),
                                           float(bwd_s.max())) + fill)
    ends = np.full(p, makespan)
    last_b = np.stack([ends - bwd_s, ends], axis=1)[:, None, :]
    path = [{"op": f"{schedule} closed form", "microbatch": m, "stage": int(np.argmax(busy)),
             "chunk": 0, "start_s": 0.0, "end_s": makespan}]
    return PipelineRun(makespan_s=makespan, stage_busy_s=busy, stage_end_s=ends,
                       chunk_last_bwd_s=last_b, critical_path=path)
