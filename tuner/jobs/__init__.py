"""Packaged example jobs and the shared job input of ``netsim place`` and ``netsim recommend``.

A job is a YAML file whose keys are ``netsim predict``'s flags (``model``, ``gpu``, ``gpus``,
``tp``, ``pp``, ``dp``, ``cp``, ``ep``, ``sequence_parallel``, ``first_stage_layers``,
``last_stage_layers``, ``global_batch``, ``micro_batch``, ``seq``, ...: the fields of
``netsim.workload.JobSpec``; ``model`` is a preset or a transformers ``config.json`` path),
the name of a packaged example (``gpt3-175b``, ``llama3-405b``, ``deepseek-v3``, ``tiny``), or
the same keys given as flags.
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

#: Help of the job flags (the same text in every subcommand that takes a job).
JOB_HELP: dict[str, str] = {
    "model": "model preset (gpt3-175b, llama3-405b, deepseek-v3, ...) or a transformers "
             "config.json path",
    "gpu": "hardware profile: a100 (default), h100, h200, h800", "gpus": "world size",
    "tp": "tensor-parallel degree", "pp": "pipeline-parallel degree",
    "dp": "data-parallel degree", "global_batch": "sequences per iteration",
    "micro_batch": "sequences per micro-batch (a size)",
    "seq": "training sequence length (a config.json model's default is stated in the report)",
    "vocab": "vocabulary size override",
    "virtual_stages": "model chunks per stage (interleaved 1F1B when > 1)",
}

#: Job switches and the overlap list, shared like ``JOB_FLAGS``: key -> (flag, help).
JOB_SWITCHES: dict[str, tuple[str, str]] = {
    "recompute": ("--recompute", "full activation recomputation"),
    "distributed_optimizer": ("--distributed-optimizer",
                              "shard optimizer state over DP (reduce-scatter + all-gather)"),
}

#: ``--overlap`` names: the fields of ``netsim.workload.Overlap``.
OVERLAPS = ("dp_grad_reduce", "dp_param_gather", "pp_send_recv", "tp_comm", "cp_comm",
            "ep_comm")

#: Switches that also take a ``--no-`` form (their default is on).
NEGATABLE = frozenset({"fsdp_reshard_after_forward"})

#: Today's parallelism and model-dimension keys, shared by predict, place and recommend:
#: key -> (flag, type, help). Booleans are switches.
MODERN_FLAGS: dict[str, tuple[str, type, str]] = {
    "cp": ("--cp", int, "context-parallel degree (ring attention)"),
    "ep": ("--ep", int, "expert-parallel degree (MoE; divides cp x dp)"),
    "sequence_parallel": ("--sp", bool, "sequence parallelism with TP (RS/AG instead of AR)"),
    "first_stage_layers": ("--first-stage-layers", int, "layers of the first pipeline stage"),
    "last_stage_layers": ("--last-stage-layers", int, "layers of the last pipeline stage"),
    "capacity_factor": ("--capacity-factor", float, "MoE capacity factor (1: dropless)"),
    "fsdp": ("--fsdp", bool, "FSDP2 / ZeRO-3 over the data-parallel ranks (torchtitan)"),
    "dp_replicate": ("--dp-replicate", int, "HSDP replicas (FSDP shards over dp / this)"),
    "fsdp_reshard_after_forward": (
        "--fsdp-reshard-after-forward", bool,
        "FSDP2 reshard_after_forward (default on, PyTorch's): gather again in backward; "
        "--no-fsdp-reshard-after-forward keeps the forward's parameters for backward"),
    "fsdp_accumulate_unsharded": (
        "--fsdp-accumulate-unsharded", bool,
        "FSDP gradient accumulation without resharding: gather and reduce once per "
        "iteration, not per micro-batch"),
    "schedule": ("--schedule", str, "pipeline schedule: 1f1b, interleaved (with "
                 "--virtual-stages), dualpipe (DeepSeek-V3) or zb (zero-bubble ZB-H1)"),
    "fp8": ("--fp8", bool, "FP8 GEMMs in the transformer layers (the GPU's FP8 peak and "
            "efficiency; h100/h800/h200)"),
    "moe_node_limit": ("--moe-node-limit", int, "node-limited MoE routing: a token goes to at "
                       "most this many nodes (DeepSeek-V3: 4)"),
    "grad_bytes": ("--grad-bytes", int, "bytes per gradient element reduced over DP (4: fp32, "
                   "Megatron's default for bf16; 2: fp16/bf16 reduction)"),
    "layers": ("--layers", int, "layer-count override"),
    "hidden": ("--hidden", int, "hidden-size override"),
    "heads": ("--heads", int, "attention-head override"),
    "kv_heads": ("--kv-heads", int, "key/value-head override (grouped-query attention)"),
    "ffn_hidden": ("--ffn-hidden", int, "feed-forward width override"),
}


def add_modern_arguments(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """One flag per ``MODERN_FLAGS`` key (dest ``prefix + key``)."""
    g = p.add_argument_group("parallelism and model dimensions")
    for key, (flag, typ, text) in MODERN_FLAGS.items():
        if typ is bool:
            action = argparse.BooleanOptionalAction if key in NEGATABLE else "store_true"
            g.add_argument(flag, dest=prefix + key, action=action, default=None, help=text)
        else:
            g.add_argument(flag, dest=prefix + key, type=typ, default=None, help=text,
                           metavar=key.upper())


def modern_values(args: argparse.Namespace, prefix: str = "") -> dict[str, Any]:
    """The ``MODERN_FLAGS`` values given on the command line (None left out)."""
    out = {k: getattr(args, prefix + k, None) for k in MODERN_FLAGS}
    return {k: v for k, v in out.items() if v is not None}


def packaged_jobs() -> list[str]:
    """Names of the example jobs shipped with the package."""
    return sorted(p.stem for p in _HERE.glob("*.yaml"))


def resolve_job(spec: str) -> Path:
    """The file a ``--job`` value names: a path, or a packaged example's name."""
    path = Path(spec)
    if path.exists() or path.is_symlink():  # the loader says what is wrong with it (a pipe)
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


def add_job_arguments(p: argparse.ArgumentParser, prefix: str = "job_") -> None:
    """``--job`` plus one flag per job key (``--global-batch`` for ``global_batch``), the job
    switches, ``--overlap``, ``--micro-batches`` and today's parallelism flags: the one set of
    job flags of predict (``prefix=""``), place, recommend and cluster (``dest = prefix + key``)."""
    p.add_argument("--job", default=None,
                   help=f"job YAML file or packaged name ({', '.join(packaged_jobs())}); "
                   "flags win")
    g = p.add_argument_group("job as flags (override the file's keys)")
    for key, typ in JOB_FLAGS.items():
        names = ["--" + key.replace("_", "-")] + (["--micro-batch-size"]
                                                  if key == "micro_batch" else [])
        g.add_argument(*names, dest=prefix + key, type=typ, default=None, metavar=key.upper(),
                       help=JOB_HELP.get(key))
    for key, (flag, text) in JOB_SWITCHES.items():
        g.add_argument(flag, dest=prefix + key, action="store_true", default=None, help=text)
    g.add_argument("--overlap", dest=prefix + "overlap", default=None,
                   help="comma list of " + ", ".join(OVERLAPS) + "; 'megascale' = every "
                   "MegaScale overlap, 'none' = Megatron-LM defaults")
    add_micro_batches_argument(g, dest=prefix + "micro_batches")
    add_modern_arguments(p, prefix=prefix)


def overlap_value(text: str | None):
    """``--overlap`` as a job-file value: ``megascale``, ``none`` or ``{name: True}``."""
    if text in (None, "megascale", "none"):
        return text
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in OVERLAPS]
    if bad or not names:
        raise InputError("--overlap", None, text, "a comma list of " + ", ".join(OVERLAPS) +
                         ", or megascale, or none", "ep_comm,cp_comm")
    return {n: True for n in names}


def switch_values(args: argparse.Namespace, prefix: str = "") -> dict[str, Any]:
    """The job switches and ``--overlap`` given on the command line (None left out)."""
    out = {k: getattr(args, prefix + k, None) for k in JOB_SWITCHES}
    out["overlap"] = overlap_value(getattr(args, prefix + "overlap", None))
    return {k: v for k, v in out.items() if v is not None}


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
    from netsim.workload.job import infer_dp

    data = infer_dp(data)  # --gpus without --dp: the micro-batch size needs the real dp
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


def job_dict_from_args(args: argparse.Namespace) -> tuple[dict[str, Any], bool]:
    """(the job keys of the parsed ``--job`` file and job flags, whether any flag was given)."""
    overrides = {k: getattr(args, f"job_{k}") for k in JOB_FLAGS}
    overrides.update(modern_values(args, prefix="job_"))
    overrides.update(switch_values(args, prefix="job_"))
    flags = {k: v for k, v in overrides.items() if v is not None}
    data = read_job_dict(args.job) if args.job else {}
    data.update(flags)
    count = getattr(args, "job_micro_batches", None)
    if count is not None:
        data = apply_micro_batches(data, count, overrides["global_batch"],
                                   overrides["micro_batch"])
    return data, bool(flags) or count is not None


def job_from_args(args: argparse.Namespace):
    """The JobSpec the parsed ``--job`` and job flags describe."""
    from netsim.workload import JobSpec

    data, flags = job_dict_from_args(args)
    if not data:
        raise ValueError("no job given: pass --job FILE|NAME or --model/--tp/--pp/--dp flags")
    source = job_source(args.job) + (" with flags" if args.job and flags else "")
    return JobSpec.from_dict(data, source=source)
