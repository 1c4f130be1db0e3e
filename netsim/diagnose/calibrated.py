"""The newcomer's loop: trace a run, calibrate on it, predict it.

- ``default_host_cores``: CPU traces whose ``host`` records say how many cores the ranks shared
  need the shared-host model (``netsim calibrate --host-cores``); this is the default.
- ``fit_warnings``: fits that explain their points poorly, each with what to add.
- ``gaps_warning``: the collectives a prediction priced without a fit of their kind.
- ``transfer_check`` / ``calibration_transfer``: whether a calibration carries to a job of
  more ranks (a CPU one does not), and whether its host was shared (``host_sharing``) or is
  unknown (``host_unknown_warning``: a CPU calibration without the cores its ranks shared).
- ``hardware_for``: the hardware a calibration describes; applying it to other hardware is
  refused (a CPU calibration cannot price an A100).
- ``job_like``: the job a trace ran (``netsim predict --like TRACE_DIR``), with the cores that
  were left to it.
"""

from __future__ import annotations

import math
from typing import Any

from netsim.traces.records import TraceRun

POOR_REL_RMS = 0.3
"""A fit whose relative RMS residual exceeds this explains its points poorly."""


def default_host_cores(runs: list[TraceRun]) -> float | None:
    """Cores the ranks of CPU runs shared (their host records), or None (GPU runs, unknown)."""
    if not runs or any(str(r.meta.get("device", "")).split(":")[0] != "cpu" for r in runs):
        return None
    cores = [r.host.get("host_cores") for r in runs]
    if any(c is None for c in cores):
        return None
    return float(max(cores))


def fit_warnings(cal, runs: list[TraceRun]) -> list[str]:
    """One line per poor or under-determined fit, saying what to add."""
    out = []
    for key, f in cal.comm.items():
        if f.rel_rms > POOR_REL_RMS:
            out.append(f"comm {key}: relative RMS residual {f.rel_rms:.2f} over {f.points} "
                       "points: message sizes alone do not explain these calls; add a "
                       "microbenchmark (python -m trainer.bench --nproc N -b 1KiB -e 16MiB -o "
                       "bench.json, then calibrate on it too) or runs with other --seq / "
                       "--micro-batches")
        elif f.points < 2:
            out.append(f"comm {key}: one message size only: the latency and the bandwidth are "
                       "not separated; add runs with another --seq or --hidden")
    for key, f in cal.compute.items():
        if f.points < 2:
            out.append(f"compute {key}: fitted on one shape: per-task overhead and throughput "
                       "are not separated; add a run with another --hidden or --seq")
        elif f.rel_rms > POOR_REL_RMS:
            out.append(f"compute {key}: relative RMS residual {f.rel_rms:.2f}: add runs")
    h = cal.host
    if h and h.get("rel_rms", 0.0) > POOR_REL_RMS:
        out.append(f"host model: relative RMS residual {h['rel_rms']:.2f} over {h['points']} "
                   "rank-steps; add runs of other layouts (tp, pp, dp) on this host")
    it = h.get("iteration_fit") if h else None
    if isinstance(it, dict) and "skipped" in it:
        out.append(f"host model not refitted on iteration times ({it['skipped']}, have "
                   f"{it['runs']}): add runs of other layouts for a closer fit")
    if math.isinf(cal.host_cores) and default_host_cores(runs) is None and any(
            str(r.meta.get("device", "")).startswith("cpu") for r in runs):
        out.append("CPU traces without the cores the ranks shared: pass --host-cores C")
    return out


def gaps_warning(gaps: list[dict]) -> str | None:
    """One line naming the collectives a prediction priced without a fit of their kind
    (``Prediction.calibration_gaps``), or None when the calibration saw them all."""
    if not gaps:
        return None
    parts = [f"{g['kind']} {g['op']} ({g['scope']}): "
             + (f"the {g['fallback']} fit of other kinds" if g["fallback"] != "uncalibrated"
                else "uncalibrated hardware profile") for g in gaps]
    return ("the calibration never saw " + "; ".join(parts) + ": those times extrapolate; "
            "calibrate on a run of a layout that has them")


def host_sharing(info: dict[str, Any], ranks: int, cores: float) -> str | None:
    """How the calibrated ranks shared their host (``cores``: the cores they were fitted on,
    ``info``: ``Calibration.hardware_info``), or None when nothing says it was shared."""
    parts = []
    if cores < math.inf and ranks > cores:
        parts.append(f"{ranks} ranks time-sliced {cores:g} cores")
    total, avail = info.get("host_cores"), info.get("available_cores")
    if total and avail is not None and float(avail) < float(total) - 0.5:
        parts.append(f"other processes used {float(total) - float(avail):.1f} of the host's "
                     f"{total} cores")
    return "; ".join(parts) or None


def transfer_check(info: dict[str, Any], calibrated_ranks: int, cores: float,
                   ranks: int) -> dict[str, Any]:
    """Whether a calibration fitted on ``calibrated_ranks`` ranks (``info``: its
    ``hardware_info``; empty in files from before it was recorded) carries to a job of
    ``ranks`` ranks: a CPU (gloo) calibration projected onto more ranks does not (its
    latencies, bandwidths and compute rates are one host's). ``warning`` is set when not."""
    device = str(info.get("device") or "unknown")
    backend = str(info.get("backend") or "unknown")
    cpu = device == "cpu" or (device == "unknown" and (backend == "gloo" or cores < math.inf))
    out: dict[str, Any] = {"device": device, "backend": backend,
                           "calibrated_ranks": int(calibrated_ranks), "predicted_ranks": int(ranks),
                           "transfers": not (cpu and ranks > calibrated_ranks),
                           "shared_host": host_sharing(info, calibrated_ranks, cores),
                           "host_unknown": cpu and math.isinf(cores)}
    if not out["transfers"]:
        shared = f", {out['shared_host']}" if out["shared_host"] else ""
        out["warning"] = (f"a CPU calibration does not transfer: fitted on {calibrated_ranks} "
                          f"{device}/{backend} ranks{shared}, projected onto {ranks} ranks "
                          "with that host's latencies, bandwidths and compute rates; "
                          "calibrate on GPU traces, or predict on a GPU profile (--gpu) "
                          "without --calibration")
    return out


def host_unknown_warning(transfer: dict[str, Any]) -> str | None:
    """A line when a CPU calibration has no shared-host model (``transfer_check``'s
    ``host_unknown``: a profiler-only trace without the cores its ranks shared), else None."""
    if not transfer.get("host_unknown"):
        return None
    return (f"the calibration's {transfer['calibrated_ranks']} CPU ranks carry no record of the "
            "cores they shared, so each was priced as if it had a core of its own (a shared "
            "host makes the run slower than predicted): recalibrate with --host-cores C, or "
            "trace with the trainer, whose traces record the host")


def calibration_transfer(cal, ranks: int) -> dict[str, Any]:
    """``transfer_check`` of a ``Calibration`` for a job of ``ranks`` ranks."""
    return transfer_check(getattr(cal, "hardware_info", {}) or {}, cal.world_size,
                          cal.host_cores, ranks)


def hardware_for(cal, gpu: str | None):
    """The hardware a prediction with ``cal`` prices: the calibrated machine, or ``gpu``.

    Raises ValueError when ``gpu`` names other hardware than the calibration's (a calibration
    fitted on CPU ranks applied to a GPU preset).
    """
    from netsim.model.hardware import get_hardware

    info: dict[str, Any] = getattr(cal, "hardware_info", {}) or {}
    if not info:  # a calibration from before hardware was recorded
        return get_hardware(gpu or "a100")
    if gpu is not None and info.get("device") != "cuda":
        raise ValueError(f"the calibration was fitted on {info.get('name')} "
                         f"({info.get('device')} ranks), not on {gpu}: leave out --gpu to "
                         f"predict the calibrated hardware, or calibrate on {gpu} traces")
    return get_hardware(gpu) if gpu is not None else cal.hardware()


def job_like(path: str, overrides: dict[str, Any]):
    """(JobSpec of the run in ``path``, the cores left to it or None); ``overrides`` (the
    predict flags given) replace its fields."""
    import dataclasses

    from netsim.diagnose.calibration import job_from_trace
    from netsim.traces.kineto import read_traces

    run = read_traces(path)
    job = job_from_trace(run)
    job = dataclasses.replace(job, **{k: v for k, v in overrides.items() if v is not None})
    return job, run.host.get("available_cores")
