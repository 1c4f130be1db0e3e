"""``netsim predict``: iteration time, tokens/s and MFU of a 3D-parallel training job.

Example::

    netsim predict --model gpt3-175b --gpu a100 --gpus 12288 --tp 8 --pp 8 --dp 192 \\
        --fabric megascale --json

With ``--fabric`` the collectives run on it with the flow engine (``--comm flow``, the
default there: ``netsim.workload.flowcomm.FlowCommModel``); ``--comm analytic`` prices them
with the alpha-beta model per scope, the only choice without a fabric.
"""

from __future__ import annotations

import argparse
import sys

from tuner.cli._output import add_command, add_json_flag, format_table, print_json, progress

COMM_MODELS = ("flow", "analytic")


def register(sub) -> argparse.ArgumentParser:
    p = add_command(
        sub, "predict",
        "predict iteration time and MFU of a 3D-parallel training job",
        "Predict one training iteration (compute, pipeline bubble, TP/PP/DP "
        "communication on the fabric) of a GPT model. Flags override the model preset.")
    from tuner.jobs import add_job_arguments

    add_job_arguments(p, prefix="")
    p.add_argument("--like", metavar="TRACE_DIR", default=None,
                   help="take the job (model, degrees, batch, micro-batches) from a trace; "
                   "flags win")
    p.add_argument("--fabric", default=None,
                   help="fabric preset or file; default: a rail-optimised fabric sized to the job")
    p.add_argument("--placement", default=None,
                   help="placement.json written by netsim place/recommend (with the same "
                   "--fabric), or a file with one GPU position per rank (whitespace separated)")
    p.add_argument("--calibration", default=None, help="calibration.json from netsim calibrate")
    p.add_argument("--nic-scale", type=float, default=1.0,
                   help="what-if multiplier of every NIC's bandwidth")
    p.add_argument("--comm", choices=COMM_MODELS, default=None,
                   help="how collectives are priced: 'flow' runs them on the fabric with the "
                   "flow engine (concurrent groups contend; default with --fabric), 'analytic' "
                   "is alpha-beta per scope (default without --fabric)")
    p.add_argument("--straggler", action="append", metavar="RANK:FACTOR",
                   help="what-if: rank RANK computes FACTOR times slower (repeatable)")
    p.add_argument("--degrade", action="append", metavar="LINK:FACTOR",
                   help="what-if with --fabric: link u->v (or its id) carries 1/FACTOR of its "
                   "capacity, e.g. a 400G port trained down to 200G is FACTOR 2 (repeatable)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the flow model's QP numbers (ECMP paths); default 0")
    p.add_argument("--background", default=None,
                   help="RUNNING.yaml: jobs already on the fabric, whose traffic shares it "
                   "(flow engine; output gains 'background' rows)")
    _add_megascale_arguments(p)
    add_json_flag(p)
    return p


def _add_megascale_arguments(p: argparse.ArgumentParser) -> None:
    """MegaScale's algorithmic switches (netsim.workload.megascale_opts)."""
    g = p.add_argument_group("MegaScale optimizations (netsim.workload.megascale_opts)")
    g.add_argument("--ptb", action="store_true", help="parallel transformer block: one fused "
                   "TP all-reduce per layer pass instead of two")
    g.add_argument("--swa", type=int, default=0, metavar="WINDOW",
                   help="sliding-window attention over WINDOW tokens (0 = full attention)")
    g.add_argument("--efficient-ops", action="store_true",
                   help="fused element-wise kernels and FlashAttention")
    g.add_argument("--lamb", action="store_true", help="LAMB: global batch x3 (the paper's)")
    g.add_argument("--lamb-batch-scale", type=int, default=None, metavar="FACTOR",
                   help="LAMB with the global batch multiplied by FACTOR (--lamb: 3)")
    g.add_argument("--megascale", action="store_true",
                   help="PTB, SWA (window 512 unless --swa), efficient operators and every "
                   "MegaScale overlap; the global batch is kept unless --lamb or "
                   "--lamb-batch-scale is given")


def _megascale_opts(args: argparse.Namespace):
    """Flags win over the job file's ``megascale_opts`` mapping; LAMB's batch only when asked."""
    from dataclasses import replace

    from netsim.workload.megascale_opts import MegaScaleOpts, opts_from_dict

    if getattr(args, "megascale", False):
        opts = MegaScaleOpts.megascale(args.swa or 512)
    else:
        opts = opts_from_dict(getattr(args, "megascale_file", None) or {})
        flags = {"ptb": args.ptb, "swa_window": args.swa, "efficient_ops": args.efficient_ops}
        opts = replace(opts, **{k: v for k, v in flags.items() if v})
    scale = getattr(args, "lamb_batch_scale", None)
    if args.lamb or scale:
        opts = replace(opts, lamb=True, lamb_batch_factor=scale or opts.lamb_batch_factor)
    return opts


def _batch_note(opts, pred, megascale: bool = False) -> str:
    """The global batch priced and whether LAMB changed it (a report line); with
    ``--megascale`` and no ``--lamb`` it says the batch was kept."""
    batch = round(pred.tokens_per_s * pred.iteration_s / pred.sequence["seq"])
    if opts.lamb:
        return (f"global batch {batch} sequences: LAMB x{opts.lamb_batch_factor} of "
                f"{batch // opts.lamb_batch_factor} (--lamb / --lamb-batch-scale)")
    if megascale:
        return f"global batch {batch} sequences (kept: LAMB's larger batch only with --lamb)"
    return f"global batch {batch} sequences"


def _job_from_args(args: argparse.Namespace):
    from netsim.workload import JobSpec, Overlap
    from tuner.jobs import job_source, overlap_value, read_job_dict

    data: dict = dict(read_job_dict(args.job)) if args.job else {}
    args.megascale_file = data.pop("megascale_opts", None)
    flags = {"model": args.model, "gpu": args.gpu, "gpus": args.gpus, "tp": args.tp,
             "pp": args.pp, "dp": args.dp, "global_batch": args.global_batch,
             "micro_batch": args.micro_batch, "seq": args.seq, "vocab": args.vocab,
             "virtual_stages": args.virtual_stages, "recompute": args.recompute,
             "distributed_optimizer": args.distributed_optimizer}
    data.update({k: v for k, v in flags.items() if v is not None})
    from tuner.jobs import modern_values

    data.update(modern_values(args))
    if args.overlap:
        data["overlap"] = overlap_value(args.overlap)
    elif getattr(args, "megascale", False):
        data["overlap"] = Overlap.megascale()
    data = _apply_micro_batches(data, args)
    given = any(v is not None for v in flags.values()) or args.overlap or \
        getattr(args, "micro_batches", None) is not None or bool(modern_values(args))
    source = job_source(args.job) + (" with flags" if args.job and given else "")
    return JobSpec.from_dict(data, source=source)


def _apply_micro_batches(data: dict, args: argparse.Namespace) -> dict:
    from tuner.jobs import apply_micro_batches

    return apply_micro_batches(data, getattr(args, "micro_batches", None), args.global_batch,
                               args.micro_batch)


def _job_overrides(args: argparse.Namespace) -> dict:
    """The JobSpec fields the flags set (for --like)."""
    names = ("tp", "pp", "dp", "global_batch", "micro_batch", "seq", "vocab", "virtual_stages",
             "recompute", "distributed_optimizer")
    return {k: getattr(args, k) for k in names if getattr(args, k, None) is not None}


def run(args: argparse.Namespace) -> int:
    comm = _comm_kind(args)
    steps = ["placing ranks", "pricing collectives", "pricing compute", "executing the pipeline"]
    bar = progress(total=len(steps) + 2, desc="predict", enabled=sys.stderr.isatty())
    job = _job_from_args(args)
    job, hw, calibration = _hardware_and_calibration(args, job)
    stragglers, fabric = _what_ifs_and_fabric(args, bar)
    bar.update(1)
    placement = _read_placement(args.placement, fabric, job.world) if args.placement else None
    background, comm_model = _comm_model(args, job, fabric, hw, calibration, placement, comm,
                                         bar)
    opts = _megascale_opts(args)
    job, hw, comm_model, compute_model = _with_megascale(job, hw, opts, comm_model, calibration)
    pred, shared = _prediction(args, job, fabric, hw, calibration, placement, background,
                               comm_model, compute_model, stragglers, bar)
    bar.close()
    transfer = _warn_calibration(pred, calibration)
    if args.json:
        out = _json_report(pred, shared, opts, fabric, comm, hw, getattr(args, "megascale", False))
        if transfer is not None:
            out["calibration_transfer"] = transfer
        print_json(out)
        return 0
    _print_human(pred, fabric, comm, hw.name)
    print(_batch_note(opts, pred, getattr(args, "megascale", False)))
    if shared is not None:
        from tuner.cli._background import print_background

        print_background(shared.background)
    return 0


def _warn_calibration(pred, calibration) -> dict | None:
    """Stderr lines when the calibration never saw a collective the job uses, does not
    transfer to the job (a CPU calibration on more ranks) or came from a shared host; the
    transfer check (None without a calibration)."""
    from netsim.diagnose.calibrated import calibration_transfer, gaps_warning, host_unknown_warning
    from netsim.diagnose.coverage import extrapolation_warning

    for line in (gaps_warning(pred.calibration_gaps),
                 extrapolation_warning(pred.interval.get("extrapolation", []))):
        if line:
            print(f"warning: {line}", file=sys.stderr)
    if calibration is None:
        return None
    transfer = calibration_transfer(calibration, pred.gpus)
    if "warning" in transfer:
        print(f"warning: {transfer['warning']}", file=sys.stderr)
    elif transfer["shared_host"]:
        print(f"note: the calibration's host was shared: {transfer['shared_host']}",
              file=sys.stderr)
    if line := host_unknown_warning(transfer):
        print(f"warning: {line}", file=sys.stderr)
    return transfer


def _comm_kind(args: argparse.Namespace) -> str:
    """``flow`` or ``analytic``: ``--comm``, else flow with a fabric."""
    comm = args.comm or ("flow" if args.fabric else "analytic")
    if comm == "flow" and not args.fabric:
        raise ValueError("--comm flow needs --fabric (the flow engine runs on a fabric)")
    return comm


def _hardware_and_calibration(args: argparse.Namespace, job):
    """(job, hardware profile, calibration): the calibrated profile, the job of ``--like``
    with the host cores of that run, and the ``--nic-scale`` what-if."""
    from netsim.model.hardware import get_hardware

    hw = get_hardware(job.gpu)
    calibration, avail = None, None
    if args.calibration:
        from netsim.diagnose.calibrated import hardware_for
        from netsim.diagnose.calibration import load_calibration

        calibration = load_calibration(args.calibration)
        hw = hardware_for(calibration, args.gpu)
    if args.like:
        from netsim.diagnose.calibrated import job_like

        job, avail = job_like(args.like, _job_overrides(args))
    if avail is not None and hw.host_cores < float("inf"):
        hw = hw.replace(host_cores=min(hw.host_cores, avail))  # the load during that run
    if args.nic_scale != 1.0:
        hw = hw.scaled_network(args.nic_scale)
    return job, hw, calibration


def _what_ifs_and_fabric(args: argparse.Namespace, bar):
    """(stragglers, fabric with its degraded links, or None)."""
    from netsim.workload.whatif import degrade_links, parse_degrades, parse_stragglers

    stragglers, degrades = parse_stragglers(args.straggler), parse_degrades(args.degrade)
    if degrades and not args.fabric:
        raise ValueError("--degrade needs --fabric (it names a link of the fabric)")
    fabric = None
    if args.fabric:
        from topologies import load_fabric

        bar.set_description("building fabric")
        fabric = load_fabric(args.fabric)
        degrade_links(fabric, degrades)
    return stragglers, fabric


def _comm_model(args: argparse.Namespace, job, fabric, hw, calibration, placement, comm: str,
                bar):
    """(background jobs or None, comm model or None): with ``--background`` the model the new
    job shares the fabric in, else the flow engine's model on ``--comm flow``."""
    if getattr(args, "background", None):
        from tuner.cli._background import shared_comm

        return shared_comm(args, job, fabric, hw, calibration, placement, comm, bar)
    if comm != "flow":
        return None, None
    return None, _flow_comm_model(args, fabric, hw, calibration, bar)


def _flow_comm_model(args: argparse.Namespace, fabric, hw, calibration, bar):
    from netsim.workload.flowcomm import FlowCommModel

    overrides = calibration.comm_model(hw).overrides if calibration else None
    return FlowCommModel(fabric, hw, seed=args.seed, overrides=overrides,
                         progress=bar.set_description)


def _with_megascale(job, hw, opts, comm_model, calibration):
    """(job, hw, comm model, compute model) with MegaScale's switches applied, if any."""
    from netsim.workload.megascale_opts import apply, needs_apply

    if not needs_apply(opts, job.model_config()):
        return job, hw, comm_model, None

    return apply(job, hw, opts, comm_model or (calibration.comm_model(hw) if calibration else None),
                 calibration.compute_model(hw) if calibration else None)


def _prediction(args, job, fabric, hw, calibration, placement, background, comm_model,
                compute_model, stragglers, bar):
    """(prediction, shared-fabric result or None): with background jobs, the new job and them
    on one fabric, with the same compute model, stragglers and MegaScale wrapper."""
    if background is not None:
        from tuner.background import predict_shared

        shared = predict_shared(job, fabric, hw, background, placement=placement,
                                calibration=calibration, seed=args.seed,
                                comm_model=comm_model, compute_model=compute_model,
                                stragglers=stragglers or None)
        return shared.prediction, shared
    from netsim.workload import predict

    def say(msg: str) -> None:
        bar.set_description(msg)
        bar.update(1)

    return predict(job, fabric, hw, calibration=calibration, placement=placement,
                   comm_model=comm_model, compute_model=compute_model, progress=say,
                   stragglers=stragglers or None), None


def _json_report(pred, shared, opts, fabric, comm: str, hw, megascale: bool = False) -> dict:
    out = pred.to_json()
    if shared is not None:
        out["background"] = shared.background
    out["megascale_opts"] = {"ptb": opts.ptb, "swa_window": opts.swa_window,
                             "efficient_ops": opts.efficient_ops, "lamb": opts.lamb,
                             "lamb_batch_factor": opts.lamb_batch_factor,
                             "global_batch_note": _batch_note(opts, pred, megascale),
                             "fused_bytes_fraction": opts.fused_bytes_fraction}
    out["fabric"] = fabric.name if fabric is not None else None
    out["comm_model"] = comm
    out["hardware"] = hw.name
    return out


def _runs(values: list[int]) -> str:
    """``[7, 8, 8, 8, 7]`` as ``7, 8 x3, 7``."""
    out, i = [], 0
    while i < len(values):
        j = i
        while j < len(values) and values[j] == values[i]:
            j += 1
        out.append(f"{values[i]}" + (f" x{j - i}" if j - i > 1 else ""))
        i = j
    return ", ".join(out)


def _read_placement(path: str, fabric=None, world: int | None = None) -> list[int]:
    """``placement.json`` from place/recommend (needs its --fabric) or GPU positions."""
    from tuner.inputs import placement_positions

    return placement_positions(path, fabric, world)


def _print_human(pred, fabric, comm: str, hw_name: str) -> None:
    j = pred.job
    sc = pred.schedule
    print(f"{pred.model_name or j['model']} on {pred.gpus} x {hw_name} (tp {j['tp']}, "
          f"cp {j.get('cp', 1)}, ep {j.get('ep', 1)}, pp {j['pp']}, dp {j['dp']}"
          f"{', sp' if j.get('sequence_parallel') else ''}{', fsdp' if j.get('fsdp') else ''}"
          f"{', fp8' if j.get('fp8') else ''}, "
          f"{pred.micro_batches} micro-batches, v {j['virtual_stages']}) fabric "
          f"{fabric.name if fabric is not None else 'synthetic'}, comm model {comm}")
    if pred.sequence:
        print(f"sequence {pred.sequence['seq']} tokens ({pred.sequence['source']})")
    if sc:
        print(f"schedule {sc['schedule']} (v {sc['virtual_stages']}), {sc['micro_batches']} "
              f"micro-batches, layers per stage {_runs(sc['stage_layers'])}")
    rows = [("iteration_s", pred.iteration_s)]
    if pred.interval:
        rows += [("iteration_s.low", pred.interval["low_s"]),
                 ("iteration_s.high", pred.interval["high_s"])]
    rows += [("tokens_per_s", pred.tokens_per_s),
            ("mfu", pred.mfu), ("hfu", pred.hfu), ("bubble_fraction", pred.bubble_fraction),
            ("compute_s", pred.compute_s), ("optimizer_s", pred.optimizer_s)]
    rows += [(f"exposed_comm_s.{k}", v) for k, v in pred.exposed_comm_s.items()]
    print(format_table(["metric", "value"], rows, floatfmt=".4g"))
