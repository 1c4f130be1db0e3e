"""Packaged example jobs and the shared job input of ``netsim place`` and ``netsim recommend``.

A job is a YAML file whose keys are ``netsim predict``'s flags (``model``, ``gpu``, ``gpus``,
``tp``, ``pp``, ``dp``, ``global_batch``, ``micro_batch``, ``seq``, ...: the fields of
``netsim.workload.JobSpec``), the name of a packaged example (``gpt3-175b``, ``tiny``), or the
same keys given as flags.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from inputspec import InputError, read_data

_HERE = Path(__file__).parent

#: Flags accepted instead of (or on top of) a job file, with their types.
JOB_FLAGS: dict[str, type] = {"model": str, "gpu": str, "gpus": int, "tp": int, "pp": int,
                              "dp": int, "global_batch": int, "micro_batch": int, "seq": int,
                              "vocab": int, "virtual_stages": int}


def packaged_jobs() -> list[str]:
    """Names of the example jobs shipped with the package."""
    return sorted(p.stem for p in _HERE.glob("*.yaml"))


def resolve_job(spec: str) -> Path:
    """The file a ``--job`` value names: a path, or a packaged example's name."""
    path = Path(spec)
    if path.is_file():
        return path
    named = _HERE / f"{spec}.yaml"
    if named.is_file() and not path.exists():
        return named
    raise InputError(f"--job {spec!r}", problem="no such file and no packaged job of that "
                     f"name (packaged: {', '.join(packaged_jobs())})")


def read_job_dict(spec: str) -> dict[str, Any]:
    """Keys of a job file path or packaged example name (file errors name the file)."""
    path = resolve_job(spec)
    data = read_data(path, "job")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"job file {path}", None, data,
                         "a mapping of keys such as model, tp, pp, dp", {"tp": 8})
    return data


def job_source(spec: str | None) -> str:
    """How errors name a job: its file, plus the flags that override it."""
    if not spec:
        return "job flags"
    try:
        return f"job file {resolve_job(spec)}"
    except ValueError:
        return f"job {spec!r}"


def load_job(spec: str | None = None, **overrides: Any):
    """A ``netsim.workload.JobSpec`` from a file/name plus flag overrides (None ignored)."""
    from netsim.workload import JobSpec

    data = read_job_dict(spec) if spec else {}
    flags = {k: v for k, v in overrides.items() if v is not None}
    data.update(flags)
    if not data:
        raise ValueError("no job given: pass --job FILE|NAME or --model/--tp/--pp/--dp flags")
    source = job_source(spec) + (" with flags" if spec and flags else "")
    return JobSpec.from_dict(data, source=source)


def add_job_arguments(p: argparse.ArgumentParser) -> None:
    """``--job`` plus one flag per job key (``--global-batch`` for ``global_batch``)."""
    p.add_argument("--job", default=None,
                   help=f"job YAML file or packaged name ({', '.join(packaged_jobs())})")
    g = p.add_argument_group("job as flags (override the file's keys)")
    for key, typ in JOB_FLAGS.items():
        names = ["--" + key.replace("_", "-")] + (["--micro-batch-size"]
                                                  if key == "micro_batch" else [])
        g.add_argument(*names, dest=f"job_{key}", type=typ, default=None, metavar=key.upper())
    add_micro_batches_argument(g, dest="job_micro_batches")


def add_micro_batches_argument(p, dest: str = "micro_batches") -> None:
    """``--micro-batches`` (a count, as the trainer's flag) next to ``--micro-batch`` (a size)."""
    p.add_argument("--micro-batches", dest=dest, type=int, default=None, metavar="M",
                   help="micro-batches per pipeline per iteration (a count, as in the trainer); "
                   "with --global-batch sets the micro-batch size, else global batch = "
                   "M x dp x micro-batch size")


def apply_micro_batches(data: dict[str, Any], count: int | None, global_flag: int | None,
                        size_flag: int | None) -> dict[str, Any]:
    """Turn a micro-batch *count* into the job keys (``micro_batch`` is a size, as in
    Megatron-LM's ``--micro-batch-size``; the trainer's ``--micro-batches`` is a count)."""
    if count is None:
        return data
    if count < 1:
        raise InputError("--micro-batches", None, count, "an integer >= 1", 4)
    dp = int(data.get("dp", 1) or 1)
    if global_flag is not None and size_flag is None:
        if global_flag % (dp * count):
            raise InputError("--micro-batches", None, count, f"a divisor of global batch "
                             f"{global_flag} / dp {dp}", max(1, global_flag // dp))
        return {**data, "micro_batch": global_flag // (dp * count)}
    want = count * dp * int(data.get("micro_batch", 1) or 1)
    if global_flag is not None and global_flag != want:
        raise InputError("--micro-batches", None, count, f"global batch {global_flag} = "
                         "micro-batches x dp x micro-batch size", global_flag //
                         (dp * int(data.get("micro_batch", 1) or 1)) or 1)
    return {**data, "global_batch": want}


def job_from_args(args: argparse.Namespace):
    """The JobSpec the parsed ``--job`` and job flags describe."""
    overrides = {k: getattr(args, f"job_{k}") for k in JOB_FLAGS}
    count = getattr(args, "job_micro_batches", None)
    if count is None:
        return load_job(args.job, **overrides)
    data = read_job_dict(args.job) if args.job else {}
    data.update({k: v for k, v in overrides.items() if v is not None})
    data = apply_micro_batches(data, count, overrides["global_batch"], overrides["micro_batch"])
    from netsim.workload import JobSpec

    return JobSpec.from_dict(data, source=job_source(args.job) + " with flags")
