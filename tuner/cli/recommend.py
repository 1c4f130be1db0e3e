"""``netsim recommend``: where to put the ranks and which NCCL, NIC and switch settings to use.

Example (the README's main command)::

    netsim recommend --fabric megascale --job gpt3-175b -o reco/
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tuner.cli._output import add_command, add_json_flag, format_table, print_json, progress


def register(sub) -> argparse.ArgumentParser:
    from tuner.jobs import add_job_arguments

    p = add_command(
        sub, "recommend",
        "recommend placement and NCCL/NIC/switch settings with reasons and predicted effects",
        "Search placement, QPs per connection, NCCL algorithm/protocol per size, "
        "DCQCN/ECN parameters (packet engine on the job's hot spot) and the retransmit timeout; "
        "write nccl.env, nccl_tuner.csv, nic_dcqcn.conf, switch_qos.yaml, placement.json and "
        "report.md.")
    p.add_argument("--fabric", default="megascale", help="fabric preset or YAML/JSON file")
    add_job_arguments(p)
    p.add_argument("--calibration", default=None, help="calibration.json from netsim calibrate")
    p.add_argument("--flaps", default="max=5s",
                   help="flap model: max=5s, lognormal:median=1s,p99=6s[,count=N] or 0.5s,2s,5s")
    p.add_argument("--margin", type=float, default=1.5,
                   help="retry window / design flap ratio to keep (default 1.5)")
    p.add_argument("--adaptive-retrans", action="store_true",
                   help="model the NIC's adaptive retransmission (adap_retrans)")
    p.add_argument("--probe", action="store_true",
                   help="read HCAs and GIDs from this host's NICs (falls back to the fabric file)")
    p.add_argument("--budget", type=int, default=16,
                   help="packet-engine evaluations of the congestion-control search")
    p.add_argument("--cc-samples", type=int, default=5,
                   help="paired seeds per congestion-control scenario, in sample and held out "
                   "(>= 5: fewer decide nothing)")
    p.add_argument("--free", default=None, type=Path, help="free servers file (see netsim place)")
    p.add_argument("--background", default=None, type=Path,
                   help="RUNNING.yaml: jobs already on the fabric (their servers are taken, "
                   "their traffic shares it, topo avoids their busy uplinks)")
    p.add_argument("--scheduler", default=None,
                   help="Dask scheduler address for the CC evaluations (default: local processes)")
    p.add_argument("--workers", type=int, default=2, help="local worker processes")
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    p.add_argument("-o", "--output", type=Path, required=True, help="output directory")
    add_json_flag(p)
    return p


def _progress_reporter(stream):
    """(``step(name, fraction)``, ``close()``): a progress bar on a terminal, else one line
    per step on ``stream`` with the elapsed wall time (logs of batch jobs keep them)."""
    import time

    if stream.isatty():
        bar = progress(total=100, desc="recommend", enabled=True)
        if bar is not None:
            def bar_step(name: str, frac: float) -> None:
                bar.set_description(f"recommend: {name}")
                bar.update(int(frac * 100) - bar.n)

            return bar_step, bar.close
    t0, last = time.perf_counter(), [None]

    def line_step(name: str, frac: float) -> None:
        if name != last[0]:
            last[0] = name
            print(f"recommend: {name:<20} {frac:4.0%}  {time.perf_counter() - t0:6.1f} s",
                  file=stream, flush=True)

    return line_step, lambda: None


def run(args: argparse.Namespace) -> int:
    from tuner.outputs import RECOMMEND_FILES, check_output_dir, output_lock
    from tuner.retransmit import parse_flaps

    if args.budget < 1:
        raise ValueError("--budget must be >= 1 packet-engine evaluation")
    if args.cc_samples < 5:
        raise ValueError(f"--cc-samples must be >= 5 paired seeds (got {args.cc_samples}): "
                         "fewer cannot show a setting no worse with 95% confidence")
    parse_flaps(args.flaps)  # fail on a bad flap model before minutes of searching
    check_output_dir(args.output, RECOMMEND_FILES)  # and on an -o it cannot write
    with output_lock(args.output):  # a second recommend on this -o is refused meanwhile
        return _run_locked(args)


def _run_locked(args: argparse.Namespace) -> int:
    import sys

    from topologies import load_fabric
    from tuner.cli.place import load_calibration
    from tuner.jobs import job_from_args
    from tuner.outputs import input_hashes
    from tuner.placement import read_free_servers
    from tuner.recommend import RecommendOptions, recommend, write_outputs

    fabric = load_fabric(args.fabric)
    job = job_from_args(args)
    opts = RecommendOptions(
        budget=args.budget, cc_samples=args.cc_samples, flaps=args.flaps, margin=args.margin,
        probe=args.probe,
        calibration=load_calibration(args.calibration),
        free_servers=read_free_servers(args.free, fabric) if args.free else None,
        seed=args.seed, scheduler=args.scheduler, workers=args.workers,
        adaptive_retrans=args.adaptive_retrans)
    if args.background:
        from tuner.cli._background import load as load_background

        opts.background = load_background(args, fabric)
    step, close = _progress_reporter(sys.stderr)
    try:
        rec = recommend(fabric, job, opts, progress=step)
    finally:
        close()
    facts = {"command": "recommend",
             "options": {k: (str(v) if isinstance(v, Path) else v)
                         for k, v in vars(args).items() if not k.startswith("_")},
             "seed": args.seed,
             "inputs": input_hashes([args.fabric, args.job, args.calibration, args.free,
                                     args.background, getattr(args, "model_config", None)])}
    paths = write_outputs(rec, args.output, fabric, manifest=facts)
    if args.json:
        print_json({**rec.to_json(), "files": [str(p) for p in paths]})
        return 0
    for k, v in rec.summary.items():
        print(f"{k}: {v}")
    print()
    rows = [[s.name, s.default, s.recommended] for s in rec.settings if s.changed]
    print(format_table(["setting", "default", "recommended"], rows))
    print(f"\nwrote {', '.join(p.name for p in paths)} to {args.output}")
    return 0
