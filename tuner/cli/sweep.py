"""``netsim sweep SPEC.yaml -o DIR``: run a grid of ``netsim`` commands or Python calls on Dask.

The spec names a subcommand (``command: simulate``) or a callable (``command: pkg.mod:fn``,
returning a JSON-able dict), fixed ``args`` and one of ``grid`` (cartesian), ``list`` (explicit
points) and ``sample`` (``n`` seeded draws). Results go to ``DIR/results.jsonl`` (one line per
finished point) and ``DIR/results.csv``; a rerun into the same DIR resumes. See
``docs/experiments.md`` and :mod:`tuner.sweep`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tuner.cli._output import add_json_flag, format_table, print_json


def register(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "sweep",
        help="run a parameter grid of a netsim command or a Python function on Dask",
        description="Run every point of a sweep spec (YAML) on a Dask cluster, appending each "
        "result to DIR/results.jsonl as it finishes; a rerun skips finished points.",
    )
    p.add_argument("spec", help="sweep spec: command (or module:function), args, "
                                "grid | list | sample")
    p.add_argument("-o", "--out", required=True, metavar="DIR",
                   help="results directory (results.jsonl, results.csv, spec.yaml)")
    p.add_argument("--workers", type=int, default=None,
                   help="worker processes of the local Dask cluster (default: the machine's "
                        "cores; 0 = run in this process without Dask)")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                   help="use an existing Dask cluster instead of a local one")
    p.add_argument("--retry-errors", action="store_true",
                   help="run again the points recorded with an error (default: keep them)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    add_json_flag(p)
    return p


def run(args: argparse.Namespace) -> int:
    from tuner import sweep

    if args.workers is not None and args.workers < 0:
        raise ValueError("--workers must be >= 0")
    spec_path = Path(args.spec)
    spec = sweep.load_spec(spec_path)
    if args.workers != 0 or args.scheduler:
        sweep._import_dask()  # one line naming the extra, before any work
    summary = sweep.run_sweep(spec, args.out, workers=args.workers, scheduler=args.scheduler,
                              progress=not args.no_progress, spec_text=spec_path.read_text(),
                              retry_errors=args.retry_errors)
    if args.json:
        print_json(summary)
    else:
        print(format_table(["points", "ok", "errors", "resumed", "ran", "wall_s"],
                           [[summary.points, summary.ok, summary.errors, summary.resumed,
                             summary.ran, summary.wall_s]]))
        print(f"results: {Path(args.out) / sweep.RESULTS_JSONL}, {Path(args.out) / sweep.RESULTS_CSV}")
    return 0
