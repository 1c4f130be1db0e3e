"""The registry of studies: what ``make results`` regenerates and what the CI comparison reruns.

One :class:`Study` per study under ``experiments/NAME/``. Its ``run.py`` takes ``-o DIR`` (and,
on the sweep runner, ``--workers``); ``outputs`` are the files of a run that are committed in
``experiments/NAME/results/``. ``ci_args`` make the run small enough for CI; its CSVs are
committed in ``results/ci/`` (``ci_args=None``: the default run is the CI size and
``results/`` is compared). ``render`` (``module:function``, ``function(results_dir) ->
{marker: text}``) fills the marked numbers of ``docs`` from those results
(:mod:`experiments.render`). ``extras`` are the study's other commands whose files are committed
too (more seeds, a co-tenant load, a bigger fabric), so that ``make results`` regenerates every
committed CSV (``tests/experiments/test_results_ci.py`` checks that none is left out).

A study timed on the host (``timing``: real trainer runs) cannot reproduce its measurements;
its comparison keeps only the columns that do not come from a clock (``ignore`` lists the
others) and runs in the study tier, since even those (which rank is named) rest on
measurements.

To add a study: append a :class:`Study` to ``STUDIES``; ``python -m experiments.results
--study NAME`` then writes its results, and ``tests/experiments/test_results_ci.py`` picks it up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS_DOC = "docs/experiments.md"


@dataclasses.dataclass(frozen=True)
class Extra:
    """Another command of a study whose files are committed beside its main results."""

    #: its work folder under the study's (``out/results/STUDY/NAME``)
    name: str
    #: the module under the study's package that writes the files
    entry: str
    args: tuple[str, ...]
    #: ``(file the command writes, where it is committed relative to the study's folder)``
    outputs: tuple[tuple[str, str], ...]
    out_flag: str = "-o"
    #: a timed command's column of rows judged right ("" = none): its count, not its rows,
    #: is what a rerun should reproduce (:func:`experiments.compare.compare_score`)
    score: str = ""


@dataclasses.dataclass(frozen=True)
class Study:
    """One study of ``experiments/NAME``: its command, committed outputs and CI comparison."""

    name: str
    outputs: tuple[str, ...]
    ci_args: tuple[str, ...] | None = None
    #: columns not compared: wall or CPU time, which no two runs share
    ignore: tuple[str, ...] = ()
    #: relative tolerance per column, only for a documented nondeterminism (say which in a comment)
    rtol: Mapping[str, float] = dataclasses.field(default_factory=dict)
    render: str | None = None
    #: documents the renderer writes into: relative to the study's folder, or to the repository
    #: root when they start with ``docs/``
    docs: tuple[str, ...] = ("README.md",)
    #: whether run.py takes ``--workers``/``--scheduler`` (the sweep runner)
    sweeps: bool = True
    #: where the results sit under the study's folder ("" = the folder itself)
    results_subdir: str = "results"
    #: how the comparison of a study timed on this host works ("" = deterministic: every
    #: column but ``ignore`` compared exactly); such a study's CI rerun is in the study tier
    timing: str = ""
    extras: tuple[Extra, ...] = ()
    #: committed files (relative to the study's folder) that no command of this tree
    #: regenerates, each with why (a run of an older commit kept for comparison)
    records: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: committed data files that are inputs of the study, not results (a paper's figures)
    inputs: tuple[str, ...] = ()
    #: the module under the study's package that writes the results (``run`` by default)
    entry: str = "run"
    #: the flag of that module that names the output folder
    out_flag: str = "-o"
    #: arguments of the default run (the CI-size run takes ``ci_args`` instead)
    args: tuple[str, ...] = ()

    @property
    def module(self) -> str:
        return f"experiments.{self.name}.{self.entry}"

    @property
    def csvs(self) -> tuple[str, ...]:
        return tuple(o for o in self.outputs if o.endswith(".csv"))

    def folder(self, root: Path = ROOT) -> Path:
        """``root/experiments/NAME`` (tests pass the source tree: the package is installed)."""
        return root / "experiments" / self.name

    def results_dir(self, root: Path = ROOT) -> Path:
        return self.folder(root) / self.results_subdir

    def ci_dir(self, root: Path = ROOT) -> Path:
        """Where the committed CI-size results live."""
        return self.results_dir(root) / ("" if self.ci_args is None else "ci")

    def doc_paths(self, root: Path = ROOT) -> list[Path]:
        return [root / d if d.startswith("docs/") else self.folder(root) / d for d in self.docs]

    def committed(self) -> set[str]:
        """Every file ``make results`` writes, relative to the study's folder."""
        sub = f"{self.results_subdir}/" if self.results_subdir else ""
        files = {sub + o for o in self.outputs}
        if self.ci_args is not None:
            files |= {f"{sub}ci/{c}" for c in self.csvs}
        return files | {dest for e in self.extras for _, dest in e.outputs}

    def argv(self, out: Path, ci: bool = False, workers: int | None = None) -> list[str]:
        """The command line of ``run.py`` into ``out`` (at the CI size when ``ci``)."""
        small = ci and self.ci_args is not None
        argv = [self.out_flag, str(out), *(self.ci_args if small else self.args)]
        if workers is not None and self.sweeps:
            argv += ["--workers", str(workers)]
        return argv


def _diagnose_seeds(name: str, seeds: str, *more: str) -> Extra:
    """A ``--full`` run of the diagnose study on ``seeds``, committed as ``NAME.csv``."""
    return Extra(name, "run", ("--full", "--seeds", seeds, *more),
                 (("results.csv", f"{name}.csv"),), score="correct")


DIAGNOSE_SEEDS = (
    _diagnose_seeds("results-seeds-3-4", "3,4"),
    _diagnose_seeds("results-seeds-5-6", "5,6"),
    _diagnose_seeds("results-rerun-seeds-3-4", "3,4"),
    _diagnose_seeds("results-rerun-seeds-5-6", "5,6"),
    _diagnose_seeds("results-seeds-7-8", "7,8"),
    _diagnose_seeds("results-idle-seeds-10-15", "10,11,12,13,14,15"),
    _diagnose_seeds("results-idle-seeds-16-21", "16,17,18,19,20,21"),
    _diagnose_seeds("results-background4-seeds-10-12", "10,11,12", "--background", "4"),
)
#: heldout.csv's columns that are measured or predicted times (or the load behind them)
HELDOUT_TIMES = ("measured_s", "measured_spread_s", "predicted_s", "error", "predicted_low_s",
                 "predicted_high_s", "inside",
                 "predicted_nominal_s", "error_nominal", "host_bound_s", "critical_path_s",
                 "available_cores", "other_cores")

STUDIES: tuple[Study, ...] = (
    Study("retransmit",
          ("crosscheck.csv", "settings.csv", "stall_vs_flap.png", "survival_vs_detection.png"),
          render="experiments.retransmit.render:values",
          docs=("README.md", EXPERIMENTS_DOC)),
    Study("ecmp_split",
          ("summary.csv", "iteration.csv", "slowdown_vs_qps.png", "connection_cdf.png",
           "iteration_cost.png"),
          render="experiments.ecmp_split.render:values", docs=("README.md", EXPERIMENTS_DOC)),
    Study("cc", ("cc.csv", "summary.csv", "cc.png"), ignore=("wall_s",),
          render="experiments.cc.render:values", docs=("README.md", EXPERIMENTS_DOC)),
    Study("scale_mfu",
          ("mfu_overlaps.csv", "mfu_network.csv", "mfu_ablation.csv", "megascale_tables.csv",
           "megascale_tables_flow.csv", "megascale_table3_steps.csv", "mfu_overlaps.png",
           "mfu_network.png", "mfu_ablation.png", "megascale_tables.png",
           "megascale_tables_flow.png"),
          ci_args=("--tiny",), inputs=("megascale_published.csv",),
          render="experiments.scale_mfu.render:values"),
    Study("placement", ("placement.csv", "replay.csv", "placement.png"), ci_args=("--tiny",),
          extras=(Extra("over_time", "over_time", (),
                        (("over_time.csv", "results/over_time.csv"),
                         ("over_time.png", "results/over_time.png"))),
                  # the README's --full subset in one command (it ran as four, merged)
                  Extra("full", "run", ("--full", "--sizes", "512,2048,6144,12288",
                                        "--replay-jobs", "30"),
                        (("placement.csv", "results/full/placement.csv"),
                         ("replay.csv", "results/full/replay.csv"),
                         ("placement.png", "results/full/placement.png")))),
          records={"results/over_time_before.csv":
                   "over_time.py run on commit 720fb77 (topo before best fit), the README's "
                   "comparison; git archive 720fb77 and PYTHONPATH on it redo it (README)"},
          render="experiments.placement.render:values"),
    Study("settings_check", ("compare.csv", "compare.md", "compare.png"),
          render="experiments.settings_check.render:values",
          docs=("README.md", "docs/recommend.md")),
    Study("published", ("published.csv", "published.png"), sweeps=False,
          render="experiments.published.render:values",
          docs=("README.md", "docs/validation.md", EXPERIMENTS_DOC)),
    Study("heldout_accuracy", ("heldout.csv", "calibration.json", "heldout.png"),
          sweeps=False, out_flag="--results", args=("--repeats", "2"),
          timing="14 eight-rank trainer runs timed on this host: every "
                 "figure is a measured or predicted time, so only which configuration ran in "
                 "which role, how often, is compared",
          ignore=HELDOUT_TIMES,
          # the expert- and context-parallel configurations (docs/validation.md, issue #18)
          extras=(Extra("modern", "run", ("--modern", "--repeats", "2"),
                        (("heldout.csv", "results/modern.csv"),), out_flag="--results"),),
          render="experiments.heldout_accuracy.render:values",
          records={"results/heldout_replicate.csv":
                   "a second run of the committed one's command (run.py --repeats 2 --out DIR, "
                   "then --reuse --results) on commit 09cab13, 2026-12-06 04:49-05:08 UTC, "
                   "the same quiet host: the spread between whole runs",
                   "results/heldout_fast_host.csv":
                   "make results STUDY=heldout_accuracy NO_EXTRAS=1 on a fresh clone of d78948a, "
                   "2026-12-06 18:43-18:49 UTC, the host quiet after a restart and its "
                   "iterations several times faster than the committed run's: the study on "
                   "another host speed",
                   "results/modern_fast_host.csv":
                   "make results STUDY=heldout_accuracy EXTRA=modern on a fresh clone of "
                   "aae620e, 2026-12-06 18:51-18:56 UTC, on the same restarted, faster host as "
                   "heldout_fast_host.csv",
                   "results/heldout_shared_host.csv":
                   "the committed result of a6b3b9c (git show "
                   "a6b3b9c:experiments/heldout_accuracy/results/heldout.csv), run on a host "
                   "shared with other sessions' load: the study under load"},
          docs=("README.md", "docs/validation.md", EXPERIMENTS_DOC)),
    Study("cc_heldout", ("cc_heldout.csv", "table.md", "cc_heldout.png"), sweeps=False,
          ci_args=("--tiny",),
          render="experiments.cc_heldout.render:values", docs=("README.md", "docs/recommend.md")),
    Study("dcqcn_fairness", ("seeds.csv", "pair.csv", "fairness.png"), ci_args=("--seeds", "2"),
          render="experiments.dcqcn_fairness.run:values",
          docs=("README.md", "docs/validation.md")),
    # results.csv: seeds 1-2 of --full; the extras are the README's other runs (held-out seeds,
    # reruns, seeds on an idle host, four co-tenants), the Kineto calibration and two_rank.py
    Study("diagnose", ("results.csv", "diagnosis.png"), results_subdir="", args=("--full", "--seeds", "1,2"),
          ci_args=("--tiny",),
          timing="8-rank trainer runs timed on this host (all of them: hours): the named ranks "
                 "and links and whether they are right are compared (at CI's size, dp8 clean "
                 "and x1.5, they are named reliably); slowdowns and loads are measurements",
          ignore=("slowdowns", "link_slowdowns", "load_1m", "other_cores"),
          extras=(*DIAGNOSE_SEEDS,
                  Extra("kineto", "kineto_heldout", ("--repeats", "1"),
                        (("kineto_heldout.json", "kineto_heldout.json"),), out_flag="--results"),
                  Extra("two_rank", "two_rank", ("--seeds", "1-8"),
                        (("two_rank.csv", "two_rank/two_rank.csv"),), score="right")),
          render="experiments.diagnose.render:values", docs=("README.md", EXPERIMENTS_DOC)),
)


def by_name() -> dict[str, Study]:
    return {s.name: s for s in STUDIES}


def get(name: str) -> Study:
    studies = by_name()
    if name not in studies:
        raise ValueError(f"no study {name!r}; registered: {', '.join(studies)} "
                         "(experiments/studies.py)")
    return studies[name]
