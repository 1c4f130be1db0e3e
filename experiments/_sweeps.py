"""What the sweep-driven studies share: their command line and running their sweep specs.

``experiments.ecmp_split``, ``experiments.retransmit``, ``experiments.scale_mfu`` and
``experiments.cc`` each keep their grids as sweep specs beside ``run.py`` (``NAME.yaml``, and
``NAME_full.yaml`` for ``--full``) and run them through :mod:`sweeps` (resumable, on Dask).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

import yaml

import sweeps as sweep
from tuner.cli import sweep as cli_sweep


def study_parser(doc: str, full_help: str, out_default: Path | None = None
                 ) -> argparse.ArgumentParser:
    """``--full``, ``-o/--out`` (required unless ``out_default``), ``--workers`` and
    ``--scheduler``, as every sweep study takes."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--full", action="store_true", help=full_help)
    p.add_argument("-o", "--out", required=out_default is None, type=Path, default=out_default,
                   help="output directory")
    p.add_argument("--workers", type=int, default=None,
                   help="local Dask workers (default: cores; 0 = in this process)")
    p.add_argument("--scheduler", default=None, help="tcp://HOST:PORT of a Dask cluster")
    return p


def run_spec_files(here: Path, names: Iterable[str], out: Path, full: bool, workers: int | None,
                   scheduler: str | None, progress: bool = True, size: str | None = None,
                   extra_args: dict | None = None, grid: dict | None = None
                   ) -> dict[str, list[sweep.PointResult]]:
    """Run (or resume) the spec ``here/NAME[_full].yaml`` (``NAME_SIZE.yaml`` when ``size``) of
    every name into ``out/NAME``, with ``extra_args`` added to its fixed arguments and ``grid``
    replacing axes of its grid; return each
    sweep's results by name, in the spec's order of points (not the order they finished in,
    which varies from run to run and would move sums in their last bit)."""
    suffix = f"_{size}" if size else ("_full" if full else "")
    results = {}
    for name in names:
        spec, text = load_study_spec(here / f"{name}{suffix}.yaml", extra_args, grid)
        sweep.run_sweep(spec, out / name, workers=workers, scheduler=scheduler,
                        progress=progress, spec_text=text, command_point=cli_sweep.CommandPoint)
        results[name] = in_spec_order(spec, sweep.read_results(out / name / sweep.RESULTS_JSONL))
    return results


def load_study_spec(path: Path, extra_args: dict | None = None, grid: dict | None = None
                    ) -> tuple[sweep.SweepSpec, str]:
    """The spec at ``path`` with ``extra_args`` merged into its ``args`` and ``grid`` into its
    grid, and its text (what a resumed run must match)."""
    text = path.read_text()
    if not extra_args and not grid:
        return cli_sweep.load_spec(path), text
    raw = yaml.safe_load(text)
    raw["args"] = {**(raw.get("args") or {}), **(extra_args or {})}
    if grid:
        raw["grid"] = {**raw["grid"], **grid}
    return cli_sweep.parse_spec(raw, str(path)), yaml.safe_dump(raw, sort_keys=False)


def in_spec_order(spec: sweep.SweepSpec, results: Iterable[sweep.PointResult]
                  ) -> list[sweep.PointResult]:
    """``results`` sorted as their points stand in ``spec`` (points not in it last)."""
    order = {sweep.point_key(p): i for i, p in enumerate(spec.points)}
    return sorted(results, key=lambda r: order.get(sweep.point_key(r.point), len(order)))


def ok_rows(results: Iterable[sweep.PointResult], study: str) -> list[dict]:
    """Flat rows (point + output) of the points that succeeded; failures go to stderr."""
    return [{**r.args, **r.output} for r in ok_results(results, study)]


def ok_outputs(results: Iterable[sweep.PointResult], study: str) -> list[dict]:
    """The outputs of the points that succeeded (for points whose output names them);
    failures go to stderr."""
    return [r.output for r in ok_results(results, study)]


def ok_results(results: Iterable[sweep.PointResult], study: str) -> list[sweep.PointResult]:
    """The results that succeeded; one line on stderr for each that failed."""
    out = []
    for r in results:
        if r.ok:
            out.append(r)
        else:
            print(f"{study}: point {r.point} failed: {r.error}", file=sys.stderr)
    return out
