"""Regenerate every study's committed results and the numbers rendered from them.

    python -m experiments.results [--study NAME ...] [--no-ci] [--no-extras] [--fresh] [--workers N]
    python -m experiments.results --study NAME --extra EXTRA   # one extra command, compared
    python -m experiments.results --render        # only re-render the docs from results/
    python -m experiments.results --check         # rerun at CI size, compare (exit 1 on a change)

``make results`` runs it. Each study runs through its ``run.py`` into a work folder
(``out/results/NAME``; ``out/results-ci/NAME`` at the CI size), and each of its extra commands
into one of its own (``out/results/NAME/EXTRA``): the sweep studies resume there when
interrupted (run the same command again); ``--fresh`` empties it first, which is what a code
change needs. The files the study commits are then copied into ``experiments/NAME/results/``
(``results/ci/`` for the CI size) and its documents re-rendered. The studies timed on this host
(diagnose, heldout_accuracy) take hours; ``--no-extras`` skips the extra commands. The registry
is :mod:`experiments.studies`.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
from pathlib import Path

from experiments import studies as registry
from experiments.compare import MAX_LISTED, compare_csv, compare_dirs, compare_score
from experiments.render import render_file

WORK = registry.ROOT / "out"


def run_study(study: registry.Study, out: Path, ci: bool = False,
              workers: int | None = None) -> None:
    """Run ``study``'s ``run.py`` into ``out``; a non-zero exit raises."""
    rc = importlib.import_module(study.module).main(study.argv(out, ci, workers))
    if rc:
        raise RuntimeError(f"{study.module} exited {rc}")


def copy_outputs(study: registry.Study, out: Path, dest: Path, names) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copyfile(out / name, dest / name)


def rendered_values(study: registry.Study, results: Path) -> dict[str, str]:
    """``{marker: text}`` of the study's renderer on the results in ``results``."""
    if study.render is None:
        return {}
    module, fn = study.render.split(":")
    return getattr(importlib.import_module(module), fn)(results)


def render_study(study: registry.Study, root: Path = registry.ROOT) -> list[Path]:
    """Fill the study's marked numbers from its results; the documents that changed."""
    values = rendered_values(study, study.results_dir(root))
    return [p for p in study.doc_paths(root) if render_file(p, values, prefix=f"{study.name}.")]


def run_extra(study: registry.Study, extra: registry.Extra, fresh: bool,
              root: Path = registry.ROOT) -> None:
    """One extra command of ``study`` into its work folder; its files copied into the study's
    folder under ``root``."""
    out = WORK / "results" / study.name / extra.name
    if fresh and out.exists():
        shutil.rmtree(out)
    print(f"== {study.name} ({extra.name}) -> {study.folder(root)}", file=sys.stderr)
    module = f"experiments.{study.name}.{extra.entry}"
    rc = importlib.import_module(module).main([extra.out_flag, str(out), *extra.args])
    if rc:
        raise RuntimeError(f"{module} {' '.join(extra.args)} exited {rc}")
    for made, dest in extra.outputs:
        committed = study.folder(root) / dest
        if committed.exists() and committed.suffix == ".csv":
            _report(f"{study.name} ({extra.name}) {dest}", committed, out / made, study, extra)
        committed.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out / made, committed)


def _report(label: str, committed: Path, got: Path, study: registry.Study,
            extra: registry.Extra) -> None:
    """Whether an extra's CSV came out as committed; a timed one's score within chance."""
    diffs = compare_csv(committed, got, study.ignore, study.rtol)
    lines = diffs[:MAX_LISTED]
    if diffs and extra.score:
        lines = [compare_score(committed, got, extra.score)[1], *lines]
    print(f"{label}: {'moved' if diffs else 'same as committed'}", *lines, sep="\n  ",
          file=sys.stderr)


def regenerate(study: registry.Study, ci: bool, fresh: bool, workers: int | None) -> None:
    """One study at the default size, and at the CI size when that differs and ``ci``."""
    runs = [(False, WORK / "results" / study.name, study.results_dir(), study.outputs)]
    if ci and study.ci_args is not None:
        runs.append((True, WORK / "results-ci" / study.name, study.ci_dir(), study.csvs))
    for small, out, dest, names in runs:
        if fresh and out.exists():
            shutil.rmtree(out)
        print(f"== {study.name}{' (ci size)' if small else ''} -> {dest}", file=sys.stderr)
        run_study(study, out, small, workers)
        copy_outputs(study, out, dest, names)


def check(study: registry.Study, out: Path, workers: int | None = 0,
          root: Path = registry.ROOT) -> list[str]:
    """Rerun ``study`` at its CI size into ``out`` and list how it differs from the commit."""
    run_study(study, out, ci=True, workers=workers)
    return compare_dirs(study.ci_dir(root), out, study.csvs, study.ignore, study.rtol)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--study", action="append", default=[], metavar="NAME",
                   help="only this study (repeatable; default: every registered one)")
    p.add_argument("--no-ci", action="store_true", help="skip the CI-size runs")
    p.add_argument("--no-extras", action="store_true",
                   help="skip the studies' extra commands (experiments/studies.py)")
    p.add_argument("--extra", action="append", default=[], metavar="NAME",
                   help="only this extra command of the chosen studies (repeatable; the "
                        "main runs are skipped): a study of hours regenerated in parts")
    p.add_argument("--fresh", action="store_true", help="empty each work folder first")
    p.add_argument("--workers", type=int, default=None,
                   help="local Dask workers of the sweep studies (0 = in this process)")
    p.add_argument("--render", action="store_true", help="only re-render the documents")
    p.add_argument("--check", action="store_true",
                   help="rerun at the CI size into out/results-check and compare")
    args = p.parse_args(argv)
    try:
        named = [registry.get(n) for n in args.study]
    except ValueError as e:
        print(f"experiments.results: {e}", file=sys.stderr)
        return 2
    chosen = named or list(registry.STUDIES)
    unknown = set(args.extra) - {e.name for s in chosen for e in s.extras}
    if unknown:
        print(f"experiments.results: no extra {', '.join(sorted(unknown))} in "
              f"{', '.join(s.name for s in chosen)} (experiments/studies.py)", file=sys.stderr)
        return 2
    if args.check:
        return _check_all(chosen, args.workers)
    for study in chosen:
        if not args.render:
            if not args.extra:
                regenerate(study, not args.no_ci, args.fresh, args.workers)
            for extra in _extras(study, args.extra, args.no_extras):
                run_extra(study, extra, args.fresh)
        for path in render_study(study):
            print(f"rendered {path.relative_to(registry.ROOT)}", file=sys.stderr)
    return 0


def _extras(study: registry.Study, names: list[str], none: bool) -> tuple[registry.Extra, ...]:
    """The extra commands to run: those named (all when none is), none with ``--no-extras``."""
    if none:
        return ()
    return tuple(e for e in study.extras if not names or e.name in names)


def _check_all(chosen, workers) -> int:
    failed = 0
    for study in chosen:
        out = WORK / "results-check" / study.name
        shutil.rmtree(out, ignore_errors=True)
        diffs = check(study, out, workers)
        failed += bool(diffs)
        print(f"{study.name}: {'moved' if diffs else 'same'}", *diffs, sep="\n  ")
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
