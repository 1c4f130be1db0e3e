"""What a calibration saw, and how far a prediction made with it reaches beyond that.

- ``seen_of``: the layouts and shapes of the calibration runs (``Calibration.seen``): per axis
  (``AXES``) the smallest and largest value, and the cores the runs had left to them.
- ``holdout_error``: the calibration's own out-of-sample error: each layout of its runs left
  out in turn, the iteration fit redone on the others, the left-out runs predicted; the worst
  relative error over the product of its extrapolation ratios (a left-out layout at an end of
  an axis is an extrapolation of the others by that ratio, and ``interval`` widens by the same
  rule): ``host["iteration_fit"]["holdout_max_rel"]``, with each layout's ``[error, ratio]``.
- ``extrapolation``: the axes on which a job lies outside what was seen, each with its
  distance ratio (``max(value / largest, smallest / value)``).
- ``interval``: ``prediction x (1 -/+ h)``: ``h`` the held-out error, at least the iteration
  fit's worst residual over its runs (the scatter of one run about the fit: repeats of a
  layout differ by more than a left-out layout's median is off) (or, without one, the
  host fit's relative RMS residual over rank-steps, or the worst in-sample residual of the
  compute and comm fits, whichever is larger), multiplied by every extrapolation
  ratio: no extra parameter, wider the further the job is from the calibration runs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

AXES = ("tp", "pp", "dp", "cp", "ep", "micro_batches", "layers", "seq", "world_size")
"""Job axes a calibration records the range of (trace meta keys; layers and seq of the
model)."""


def _axes_of(meta: dict[str, Any]) -> dict[str, int]:
    model = meta.get("model") or {}
    vals = {k: meta.get(k, 1) for k in ("tp", "pp", "dp", "cp", "ep", "micro_batches",
                                         "world_size")}
    vals.update(layers=model.get("layers"), seq=model.get("seq"))
    return {k: int(v) for k, v in vals.items() if v is not None}


def layout_key(meta: dict[str, Any]) -> tuple:
    """What tells one layout (and shape) of a run from another: its ``AXES`` values."""
    return tuple(sorted(_axes_of(meta).items()))


def seen_of(runs) -> dict[str, Any]:
    """``{"axes": {axis: [min, max]}, "available_cores": [min, max] or None, "runs": n}``."""
    axes: dict[str, list[int]] = {}
    for run in runs:
        for k, v in _axes_of(run.meta).items():
            lo, hi = axes.get(k, [v, v])
            axes[k] = [min(lo, v), max(hi, v)]
    cores = [float(r.host["available_cores"]) for r in runs
             if r.host.get("available_cores") is not None]
    return {"runs": len(runs), "axes": {k: axes[k] for k in AXES if k in axes},
            "available_cores": [min(cores), max(cores)] if cores else None}


def job_axes(job) -> dict[str, int]:
    """The ``AXES`` values of a ``JobSpec``."""
    model = job.model_config()
    return {"tp": job.tp, "pp": job.pp, "dp": job.dp, "cp": job.cp, "ep": job.ep,
            "micro_batches": job.micro_batches, "layers": model.layers, "seq": model.seq,
            "world_size": job.world}


def extrapolation(seen: dict[str, Any], job) -> list[dict[str, Any]]:
    """The axes on which ``job`` lies outside ``seen``: ``{"axis", "value", "seen", "ratio"}``."""
    out = []
    for axis, value in job_axes(job).items():
        rng = (seen.get("axes") or {}).get(axis)
        if not rng or rng[0] <= value <= rng[1]:
            continue
        ratio = max(value / rng[1], rng[0] / value)
        out.append({"axis": axis, "value": int(value), "seen": list(rng), "ratio": float(ratio)})
    return out


def base_half_width(cal) -> tuple[float, str]:
    """(relative half-width, its basis) of a prediction on the calibrated layouts."""
    it = (cal.host or {}).get("iteration_fit")
    if isinstance(it, dict) and it.get("holdout_max_rel") is not None:
        held, noise = float(it["holdout_max_rel"]), float(it.get("max_rel", 0.0))
        if noise > held:  # one run strays this far from the fit even on a calibrated layout
            return noise, (f"worst residual of the iteration fit over its {it['runs']} runs "
                           "(more than any of its layouts left out)")
        return held, (
            f"worst error per unit of extrapolation of the calibration's "
            f"{it['holdout_layouts']} layouts each left out of the iteration fit")
    host_rms = float((cal.host or {}).get("rel_rms", 0.0))
    fits = list(cal.compute.values()) + list(cal.comm.values())
    worst = max((f.max_rel for f in fits), default=0.0)
    if host_rms > worst:  # no layout to leave out: the host fit's spread over rank-steps
        return host_rms, "relative RMS residual of the host fit over rank-steps (no layout left out)"
    return float(worst), "worst in-sample residual of the compute and comm fits"


def interval(cal, job, iteration_s: float) -> dict[str, Any]:
    """``{"low_s", "high_s", "half_width", "basis", "extrapolation"}`` of a prediction."""
    h, basis = base_half_width(cal)
    ext = extrapolation(getattr(cal, "seen", {}) or {}, job)
    for e in ext:
        h *= e["ratio"]
    if ext:
        basis += "; widened by " + ", ".join(f"{e['axis']} x{e['ratio']:.3g}" for e in ext)
    return {"low_s": iteration_s * max(0.0, 1.0 - h), "high_s": iteration_s * (1.0 + h),
            "half_width": h, "basis": basis, "extrapolation": ext}


def extrapolation_warning(ext: list[dict[str, Any]]) -> str | None:
    """One line naming the axes a prediction extrapolates on, or None."""
    if not ext:
        return None
    parts = [f"{e['axis']} {e['value']} (calibrated {e['seen'][0]}-{e['seen'][1]})"
             for e in ext]
    return ("the job lies outside the calibration runs on " + ", ".join(parts)
            + ": the prediction extrapolates and its interval is widened by the distance")


def holdout_error(base, runs, refit, job_of) -> dict[str, Any]:
    """Leave each layout of ``runs`` out of ``refit(base, others)`` and predict it
    (``job_of``: the job a run executed, ``netsim.diagnose.calibration.job_from_trace``).

    Returns ``{"holdout_max_rel", "holdout_layouts", "holdout_errors"}``: the worst relative
    error of a layout's median iteration time per unit of extrapolation ratio, the layouts,
    each one's ``[error, ratio]``; ``{}`` with fewer than two layouts."""
    from netsim.workload.predict import predict

    groups: dict[tuple, list] = {}
    for run in runs:
        groups.setdefault(layout_key(run.meta), []).append(run)
    if len(groups) < 2:
        return {}
    errs = []
    for key, left in groups.items():
        others = [r for k, rs in groups.items() if k != key for r in rs]
        cal = refit(base, others)
        cores = float(np.median([min(cal.host_cores, float(r.host.get("available_cores",
                                                                         cal.host_cores)))
                                 for r in left]))
        hw = cal.hardware().replace(host_cores=cores)
        pred = predict(job_of(left[0]), hardware=hw, calibration=cal).iteration_s
        measured = float(np.median([np.median(r.iteration_s(skip=1)) for r in left]))
        reach = math.prod(e["ratio"] for e in extrapolation(seen_of(others),
                                                            job_of(left[0])))
        errs.append((abs(pred / measured - 1.0), reach))
    worst = max(e / reach for e, reach in errs)
    return {"holdout_max_rel": float(worst) if math.isfinite(worst) else None,
            "holdout_layouts": len(groups),
            "holdout_errors": [[float(e), float(reach)] for e, reach in errs]}
