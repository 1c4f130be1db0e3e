"""``netsim diagnose TRACE_DIR``: stragglers, slow links and rank skew in a run's traces.

TRACE_DIR holds native trainer traces (``trace-rank*.jsonl``) or torch.profiler Chrome traces
(``*.json``, e.g. ``kineto-rank*.json`` from ``--profile``). Prints per-rank compute and
communication per step, the stragglers (rank, host, slowdown, confidence), the slow links, the
skew at the last data-parallel reduction and what replacing each straggler is worth in MFU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tuner.cli._output import add_command, add_json_flag, format_table, print_json


def register(sub) -> argparse.ArgumentParser:
    p = add_command(
        sub, "diagnose",
        "find stragglers and slow links in trainer or torch.profiler traces",
        "Per-rank, per-step compute and communication; stragglers (ranks slower "
        "than their peers in the same role), slow links (groups slower than their peers), the "
        "skew at the last data-parallel reduction, and what-ifs through the predictor.")
    p.add_argument("trace_dir", metavar="TRACE_DIR", help="native or torch.profiler traces")
    p.add_argument("--plot", metavar="DIR", help="write the rank x step heat map DIR/heatmap.png")
    p.add_argument("--at-scale", type=int, metavar="GPUS",
                   help="also predict the what-ifs at this many GPUs (data parallelism scaled) "
                   "on a GPU profile, as netsim predict --straggler does")
    p.add_argument("--gpu", default=None,
                   help="hardware profile of --at-scale (default: the job's, a100); a CPU "
                   "calibration is never projected onto it")
    p.add_argument("--at-scale-job", metavar="JOB", default=None,
                   help="job of --at-scale (predict's --job: packaged name or YAML, e.g. "
                   "gpt3-175b), its data parallelism scaled to GPUS; default: the traced job")
    p.add_argument("--calibration", help="calibration.json for the what-ifs (default: fitted "
                   "on the traces themselves)")
    p.add_argument("--skip", type=int, default=1, help="warm-up steps left out (default 1)")
    add_layout_flags(p)
    add_json_flag(p)
    return p


def add_layout_flags(p: argparse.ArgumentParser) -> None:
    """``--tp --pp --dp --cp --ep`` (predict's names): the degrees of a foreign job's
    torch.profiler traces (default: inferred from their process groups)."""
    for axis, what in (("tp", "tensor"), ("pp", "pipeline"), ("dp", "data"), ("cp", "context"),
                       ("ep", "expert")):
        p.add_argument(f"--{axis}", type=int, default=None,
                       help=f"{what}-parallel degree of a PyTorch job's profiler traces "
                       "(default: from their process groups; Megatron-LM rank order)")


def run(args: argparse.Namespace) -> int:
    from netsim.diagnose.diagnosis import diagnose, plot_heatmap, whatifs
    from netsim.traces.detect import read_traces
    from netsim.traces.generic_kineto import layout_of

    run_ = read_traces(args.trace_dir, layout_of(args))
    if args.at_scale is not None and args.at_scale < 1:
        raise ValueError(f"--at-scale must be a positive GPU count, got {args.at_scale}")
    d = diagnose(run_, skip=args.skip)
    d.notes += getattr(run_, "notes", [])
    cal = None
    if args.calibration:
        from netsim.diagnose.calibration import load_calibration

        cal = load_calibration(args.calibration)
    scale_job = None
    if args.at_scale_job:
        from tuner.jobs import load_job

        scale_job = load_job(args.at_scale_job)
    d.whatif = whatifs(run_, d.stragglers, args.at_scale, cal, scale_job, args.gpu)
    transfer = _transfer(run_, cal, args.at_scale)
    line = _projection_warning(run_, cal, args, scale_job)
    if line:
        if transfer is not None:
            transfer["warning"] = line
        print(f"netsim diagnose: warning: {line}", file=sys.stderr)
    if args.plot:
        Path(args.plot).mkdir(parents=True, exist_ok=True)
        plot_heatmap(d, Path(args.plot) / "heatmap.png")
    if args.json:
        out = d.to_json()
        if transfer is not None:
            out["calibration_transfer"] = transfer
        print_json(out)
        return 0
    _print_human(d, args.plot)
    return 0


def _transfer(run_, cal, at_scale: int | None) -> dict | None:
    """Whether the what-ifs' calibration (``cal``, or the one fitted on the traces) carries
    to ``at_scale`` ranks (``netsim.diagnose.calibrated.transfer_check``); None without."""
    if at_scale is None:
        return None
    from netsim.diagnose.calibrated import calibration_transfer, transfer_check
    from netsim.diagnose.calibration import hardware_of

    if cal is not None:
        return calibration_transfer(cal, at_scale)
    return transfer_check(hardware_of([run_]), len(run_.ranks), float("inf"), at_scale)


def _projection_warning(run_, cal, args: argparse.Namespace, scale_job) -> str | None:
    """A loud line when ``--at-scale`` left out a calibration not fitted on GPUs (the
    one given, else the one fitted on the traces): the projection uses a GPU profile."""
    if args.at_scale is None:
        return None
    from netsim.diagnose.calibration import hardware_of

    info = (getattr(cal, "hardware_info", None) or {}) if cal is not None else hardware_of([run_])
    if info.get("device") == "cuda":
        return None
    return (f"the calibration ({info.get('device', 'unknown')}/{info.get('backend', 'unknown')}"
            f" ranks) is not projected onto {args.at_scale} GPUs (a CPU calibration does not "
            f"transfer to GPUs): the at-scale what-ifs are priced on the "
            f"{_scale_hw(args, scale_job)} profile, as netsim predict --straggler prices them")


def _scale_hw(args: argparse.Namespace, scale_job) -> str:
    """The hardware profile the projection is priced on (the rows name it too)."""
    return args.gpu or (scale_job.gpu if scale_job is not None else "a100")


def _print_human(d, plot: str | None) -> None:
    rows = [(f"{r} ({h})", float(d.times.compute_s[i].mean()), float(d.times.comm_s[i].mean()))
            for i, (r, h) in enumerate(zip(d.ranks, d.hosts, strict=True))]
    print(f"steps {d.times.steps[0]}..{d.times.steps[-1]}: mean per step")
    print(format_table(["rank (host)", "compute_s", "comm_s"], rows, floatfmt=".4g"))
    print("stragglers: " + (", ".join(f"rank {s.rank} ({s.host}"
                                     f"{', shared' if s.host_shared else ''}) x{s.slowdown:.2f}"
                                     f" confidence {s.confidence:.2f}" for s in d.stragglers)
                           or "none"))
    print("slow links: " + (", ".join(f"{sl.ranks} x{sl.slowdown:.2f} ({sl.family})"
                                     for sl in d.slow_links) or "none"))
    if d.dp_skew:
        k = d.dp_skew
        print(f"last DP reduction skew: median {k['median_s'] * 1e3:.3g} ms, max "
              f"{k['max_s'] * 1e3:.3g} ms; last most often: rank {k['most_often_last']['rank']}"
              f" ({k['most_often_last']['times']} of {k['samples']})")
    for w in d.whatif:
        print(f"what-if: {w['action']}: MFU {w['mfu_before']:.4f} -> {w['mfu_after']:.4f}")
    for note in d.notes:
        print(f"note: {note}")
    if plot:
        print(f"wrote {Path(plot) / 'heatmap.png'}")
