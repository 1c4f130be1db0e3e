"""The registry of studies: what ``make results`` regenerates and what the CI comparison reruns.

One :class:`Study` per study under ``experiments/NAME/``. Its ``run.py`` takes ``-o DIR`` (and,
on the sweep runner, ``--workers``); ``outputs`` are the files of a run that are committed in
``experiments/NAME/results/``. ``ci_args`` make the run small enough for CI; its CSVs are
committed in ``results/ci/`` (``ci_args=None``: the default run is the CI size and
``results/`` is compared). ``render`` (``module:function``, ``function(results_dir) ->
{marker: text}``) fills the marked numbers of ``docs`` from those results
(:mod:`experiments.render`).

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
    #: why neither ``make results`` nor CI reruns the study ("" = they do); it then runs only
    #: when named (``make results STUDY=NAME``) and CI checks only its rendered numbers
    manual: str = ""
    #: the module under the study's package that writes the results (``run`` by default)
    entry: str = "run"
    #: the flag of that module that names the output folder
    out_flag: str = "-o"
    #: arguments of every run (before the CI-size ones)
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

    def argv(self, out: Path, ci: bool = False, workers: int | None = None) -> list[str]:
        """The command line of ``run.py`` into ``out`` (at the CI size when ``ci``)."""
        argv = [self.out_flag, str(out), *self.args]
        if ci and self.ci_args:
            argv += list(self.ci_args)
        if workers is not None and self.sweeps:
            argv += ["--workers", str(workers)]
        return argv


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
          ci_args=("--tiny",), render="experiments.scale_mfu.render:values"),
    Study("placement", ("placement.csv", "replay.csv", "placement.png"), ci_args=("--tiny",),
          render="experiments.placement.render:values"),
    Study("settings_check", ("compare.csv", "compare.md"),
          render="experiments.settings_check.render:values", docs=("docs/recommend.md",)),
    Study("published", ("published.csv", "published.png"), sweeps=False,
          render="experiments.published.render:values",
          docs=("README.md", "docs/validation.md", EXPERIMENTS_DOC)),
    Study("heldout_accuracy", ("heldout.csv", "calibration.json", "heldout.png"),
          sweeps=False, out_flag="--results", args=("--repeats", "2"),
          manual="real 8-rank trainer runs timed on a shared host (minutes each; README)",
          render="experiments.heldout_accuracy.render:values",
          docs=("README.md", EXPERIMENTS_DOC)),
    Study("cc_heldout", ("cc_heldout.csv", "table.md", "cc_heldout.png"), sweeps=False,
          manual="three netsim recommend runs with their CC search (packet engine, paired "
                 "seeds): not timed on this host, so not yet in CI",
          render="experiments.cc_heldout.render:values", docs=("README.md", "docs/recommend.md")),
    Study("dcqcn_fairness", ("seeds.csv", "pair.csv"), ci_args=("--seeds", "2"),
          render="experiments.dcqcn_fairness.run:values", docs=("docs/validation.md",)),
    # results.csv: seeds 1-2 of --full; kineto_heldout.json (rendered) is the printout of
    # python -m experiments.diagnose.kineto_heldout --json, kept beside it
    Study("diagnose", ("results.csv",), results_subdir="", args=("--full", "--seeds", "1,2"),
          manual="real multi-process trainer runs timed on a shared host (hours; README)",
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
