"""``netsim sweep SPEC.yaml -o DIR``: run a grid of ``netsim`` commands or Python calls on Dask.

The spec names a subcommand (``command: simulate``) or a callable (``command: pkg.mod:fn``,
returning a JSON-able dict), fixed ``args`` and one of ``grid`` (cartesian), ``list`` (explicit
points) and ``sample`` (``n`` seeded draws). Results go to ``DIR/results.jsonl`` (one line per
finished point) and ``DIR/results.csv``; a rerun into the same DIR resumes. See
``docs/experiments.md`` and :mod:`sweeps` (the engine; this module adds the ``netsim``
commands as a kind of point).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import sweeps
from inputspec import read_text
from tuner.cli._output import add_command, add_json_flag, format_table, print_json


def register(sub) -> argparse.ArgumentParser:
    p = add_command(
        sub, "sweep",
        "run a parameter grid of a netsim command or a Python function on Dask",
        "Run every point of a sweep spec (YAML) on a Dask cluster, appending each "
        "result to DIR/results.jsonl as it finishes; a rerun skips finished points.")
    p.add_argument("spec", nargs="?", help="sweep spec: command (or module:function), args, "
                                           "grid | list | sample")
    p.add_argument("-o", "--out", metavar="DIR",
                   help="results directory (results.jsonl, results.csv, spec.yaml); required "
                        "with SPEC")
    p.add_argument("--init-study", metavar="NAME", default=None,
                   help="instead of running a sweep, lay out a new study: DIR/NAME/ (run.py, "
                        "study.py, grid specs, render.py, README.md), DIR/notebooks/NAME.ipynb "
                        "and tests/experiments/test_NAME.py beside DIR; an existing NAME is "
                        "refused")
    p.add_argument("--dir", default="experiments", type=Path,
                   help="the experiments folder --init-study writes into (default: "
                        "experiments)")
    p.add_argument("--workers", type=int, default=None,
                   help="worker processes of the local Dask cluster (default: the machine's "
                        "cores; 0 = run in this process without Dask)")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                   help="use an existing Dask cluster instead of a local one")
    p.add_argument("--retry-errors", action="store_true",
                   help="run again the points recorded with an error (default: keep them)")
    p.add_argument("--allow-failures", action="store_true",
                   help="exit 0 even when points failed (default: exit 1 with a one-line "
                        "summary on stderr)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    add_json_flag(p)
    return p


def run(args: argparse.Namespace) -> int:
    if args.init_study is not None:
        return _init_study(args)
    if args.spec is None or args.out is None:
        raise ValueError("give a sweep SPEC and -o DIR (or --init-study NAME)")
    if args.workers is not None and args.workers < 0:
        raise ValueError("--workers must be >= 0")
    from tuner.outputs import check_resumable_dir, output_lock

    spec_path = Path(args.spec)
    spec = load_spec(spec_path)
    if args.workers != 0 or args.scheduler:
        sweeps.runner._import_dask()  # one line naming the extra, before any work
    check_resumable_dir(args.out)  # an unwritable -o fails before any point runs
    spec_text = read_text(spec_path, "sweep spec")
    with output_lock(args.out):  # a second sweep into this DIR is refused meanwhile
        sweeps.claim_dir(Path(args.out), spec, spec_text)  # another sweep's DIR: refused
        if not args.no_progress:
            print(f"netsim sweep: {estimate_line(spec)}", file=sys.stderr)
        summary = sweeps.run_sweep(spec, args.out, workers=args.workers,
                                   scheduler=args.scheduler, progress=not args.no_progress,
                                   spec_text=spec_text,
                                   retry_errors=args.retry_errors, command_point=CommandPoint)
    if args.json:
        print_json(summary)
    else:
        print(format_table(["points", "ok", "errors", "resumed", "ran", "wall_s"],
                           [[summary.points, summary.ok, summary.errors, summary.resumed,
                             summary.ran, summary.wall_s]]))
        print(f"results: {Path(args.out) / sweeps.RESULTS_JSONL}, {Path(args.out) / sweeps.RESULTS_CSV}")
    if summary.errors and not args.allow_failures:
        print(f"netsim sweep: {failure_line(Path(args.out), summary)}", file=sys.stderr)
        return 1
    return 0


def estimate_line(spec: sweeps.SweepSpec) -> str:
    """What the sweep will run, said before it starts: ``24 points (grid 4 x 6) of netsim
    simulate``."""
    kind = next(k for k in ("grid", "list", "sample") if k in spec.raw)
    shape = " x ".join(str(len(v)) for v in spec.raw["grid"].values()) if kind == "grid" \
        else ""
    target = f"netsim {spec.command}" if spec.command else spec.function
    return (f"{len(spec.points):,} points ({kind}{' ' + shape if shape else ''}) of {target}, "
            f"at most {sweeps.MAX_POINTS:,} a sweep may run")


def _init_study(args: argparse.Namespace) -> int:
    from tuner.cli.init_study import init_study

    if args.spec is not None:
        raise ValueError("--init-study takes no SPEC")
    files = init_study(args.init_study, args.dir)
    if args.json:
        print_json({"study": args.init_study, "files": [str(f) for f in files]})
        return 0
    print("\n".join(str(f) for f in files))
    print(f"run it: python -m experiments.{args.init_study}.run -o "
          f"{args.dir / args.init_study / 'results'}")
    return 0


def failure_line(out: Path, summary: sweeps.SweepSummary) -> str:
    """``3 of 8 points failed (first: {"x": 3}: worker died (exit code 3)); ...``."""
    first = next((r for r in sweeps.read_results(out / sweeps.RESULTS_JSONL)
                  if not r.ok), None)
    cause = "" if first is None else f" (first: {sweeps.point_key(first.point)}: {first.error})"
    line = (f"{summary.errors} of {summary.points} points failed{cause}; see "
            f"{out / sweeps.RESULTS_CSV}; --retry-errors reruns them, --allow-failures "
            "exits 0")
    return line if len(line) <= 400 else line[:397] + "..."


def _subcommands() -> tuple[str, ...]:
    from tuner.cli import SUBCOMMANDS

    return SUBCOMMANDS


def load_spec(path) -> sweeps.SweepSpec:
    """:func:`sweeps.load_spec` with the ``netsim`` subcommands as the commands a spec may name,
    and each flag and value checked against the command's parser (``_sweep_flags``)."""
    from tuner.cli._sweep_flags import check_flags

    spec = sweeps.load_spec(path, commands=_subcommands())
    if spec.command:
        check_flags(spec.raw, spec.command, f"sweep spec file {path}")
    return spec


def parse_spec(raw: Any, where: str = "spec") -> sweeps.SweepSpec:
    """:func:`sweeps.parse_spec` with the ``netsim`` subcommands."""
    return sweeps.parse_spec(raw, where, commands=_subcommands())


_CLI_LOCK = threading.Lock()  # stdout is per process: one captured CLI call at a time


@dataclasses.dataclass(frozen=True)
class CommandPoint:
    """Runs ``netsim COMMAND --flag value ... --json`` in the worker and returns its JSON."""

    command: str
    args: dict

    def __call__(self, point: dict) -> Any:
        from tuner.cli import main

        argv = [self.command, *cli_flags({**self.args, **point}), "--json"]
        out, err = io.StringIO(), io.StringIO()
        with _CLI_LOCK, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as exc:  # argparse rejected a flag: its message is on stderr
                rc = exc.code if isinstance(exc.code, int) else 2
        if rc:
            lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
            raise RuntimeError(lines[-1] if lines else f"netsim {self.command} exited {rc}")
        return json.loads(out.getvalue())


def cli_flags(args: Mapping) -> list[str]:
    """``{fail_links: [1, 2], no_pxn: true, size: 4MB}`` -> ``--fail-links 1,2 --no-pxn --size 4MB``."""
    flags: list[str] = []
    for k, v in args.items():
        flag = "--" + str(k).replace("_", "-")
        if v is None or v is False:
            continue
        if v is True:
            flags.append(flag)
        elif isinstance(v, list):
            flags += [flag, ",".join(str(x) for x in v)]
        else:
            flags += [flag, str(v)]
    return flags
