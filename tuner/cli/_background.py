"""``--background RUNNING.yaml`` of ``netsim predict``, ``place`` and ``recommend``."""

from __future__ import annotations

from tuner.cli._output import format_table


def load(args, fabric):
    """The background jobs of ``args.background`` (empty without the flag)."""
    if not getattr(args, "background", None):
        return []
    if fabric is None:
        raise ValueError("--background needs --fabric (the jobs share a fabric)")
    from tuner.background import load_background

    return load_background(args.background, fabric)


def shared_comm(args, job, fabric, hw, calibration, placement, comm: str, bar):
    """The background jobs of ``args.background`` (checked against the new job's GPUs) and
    the comm model the new job shares the fabric with them in (before any wrapper)."""
    from tuner.background import shared_comm_model

    if comm != "flow":
        raise ValueError("--background needs --comm flow: the jobs share the fabric in the "
                         "flow engine")
    background = load(args, fabric)
    _check_disjoint_named(args.background, background, job, placement)
    return background, shared_comm_model(fabric, hw, background, args.seed, calibration,
                                         bar.set_description)


def _check_disjoint_named(path, background, job, placement) -> None:
    """The new job's GPUs against the background file's, the file named on a clash."""
    import numpy as np

    from inputspec import InputError
    from tuner.background import check_disjoint

    gpus = np.arange(job.world) if placement is None else np.asarray(placement, np.int64)
    try:
        check_disjoint(background, gpus)
    except ValueError as exc:
        raise InputError(f"background file {path}", problem=str(exc)) from None


def print_background(rows: list[dict]) -> None:
    """The background jobs' table (nothing when there are none)."""
    if not rows:
        return
    print("background jobs:")
    print(format_table(["name", "iteration_s_alone", "iteration_s_shared", "slowdown"],
                       [[r["name"], r["iteration_s_alone"], r["iteration_s_shared"],
                         r["slowdown"]] for r in rows], floatfmt=".4f"))
