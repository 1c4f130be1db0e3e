"""Results are outputs of commands (issue 29, item 1).

- Every marked number of a study's documents is what its renderer makes of the committed
  results (default tier: no study runs).
- The comparison of a rerun with the committed CSVs reports a moved cell and ignores timing
  columns (default tier).
- Every registered study rerun at its CI size reproduces its committed CI-size CSVs, and a
  deliberately moved result fails that comparison (slow tier: each rerun is a study run).
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from experiments import results, studies
from experiments.compare import compare_csv, compare_dirs
from experiments.render import render_text

SRC = Path(__file__).resolve().parents[2]  # the source tree: the package is installed
STUDIES = list(studies.STUDIES)
IDS = [s.name for s in STUDIES]


@pytest.mark.parametrize("study", STUDIES, ids=IDS)
def test_registered_study_has_its_committed_results(study) -> None:
    assert (study.folder(SRC) / "run.py").exists()
    missing = [o for o in study.outputs if not (study.results_dir(SRC) / o).exists()]
    missing += [f"ci/{c}" for c in study.csvs if not (study.ci_dir(SRC) / c).exists()]
    assert not missing, f"{study.name}: run python -m experiments.results --study {study.name}"


@pytest.mark.parametrize("study", [s for s in STUDIES if s.render], ids=[s.name for s in STUDIES
                                                                          if s.render])
def test_documents_hold_the_numbers_rendered_from_the_committed_results(study) -> None:
    values = results.rendered_values(study, study.results_dir(SRC))
    for path in study.doc_paths(SRC):
        text = path.read_text()
        assert render_text(text, values, prefix=f"{study.name}.") == text, (
            f"{path}: numbers differ from results/; run python -m experiments.results --render "
            f"--study {study.name}")


def _moved_copy(src: Path, dest: Path, column: str, factor: float) -> None:
    """``src`` copied to ``dest`` with the first numeric cell of ``column`` scaled."""
    with src.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    row = next(r for r in rows if r[column] not in ("", "None"))
    row[column] = repr(float(row[column]) * factor)
    with dest.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_comparison_reports_a_moved_cell_and_ignores_timing_columns(tmp_path) -> None:
    committed = SRC / "experiments" / "retransmit" / "results" / "crosscheck.csv"
    assert compare_csv(committed, committed) == []
    _moved_copy(committed, tmp_path / "crosscheck.csv", "packet_stall_s", 1.001)
    diffs = compare_csv(committed, tmp_path / "crosscheck.csv")
    assert len(diffs) == 1 and "column packet_stall_s" in diffs[0]
    assert compare_csv(committed, tmp_path / "crosscheck.csv", ignore=("packet_stall_s",)) == []
    assert compare_csv(committed, tmp_path / "crosscheck.csv", rtol={"packet_stall_s": 0.01}) == []
    assert compare_dirs(committed.parent, tmp_path / "none", ["crosscheck.csv"]) == [
        "crosscheck.csv: the rerun wrote no crosscheck.csv"]


def test_a_marker_left_without_a_value_is_an_error() -> None:
    text = "a <!-- x.a -->1<!-- /x.a --> and <!-- x.b -->2<!-- /x.b -->"
    assert render_text(text, {"x.a": "3", "x.b": "4"}, "x.") == (
        "a <!-- x.a -->3<!-- /x.a --> and <!-- x.b -->4<!-- /x.b -->")
    with pytest.raises(ValueError, match="x.b"):
        render_text(text, {"x.a": "3"}, "x.")


@pytest.mark.slow
@pytest.mark.parametrize("study", STUDIES, ids=IDS)
def test_ci_size_rerun_reproduces_the_committed_results(study, tmp_path) -> None:
    if study.manual:
        pytest.skip(f"{study.name}: {study.manual}")
    diffs = results.check(study, tmp_path / study.name, workers=0, root=SRC)
    assert not diffs, (f"{study.name} moved; regenerate with python -m experiments.results "
                       f"--fresh --study {study.name}:\n" + "\n".join(diffs))


@pytest.mark.slow
def test_a_change_that_moves_a_result_fails_the_comparison(tmp_path, monkeypatch) -> None:
    from experiments.retransmit import study as retransmit

    monkeypatch.setattr(retransmit, "T_DOWN_PS", retransmit.T_DOWN_PS + 5_000_000)
    retransmit._clean_fct_ns.cache_clear()
    diffs = results.check(studies.get("retransmit"), tmp_path / "moved", workers=0, root=SRC)
    assert any("packet_stall_s" in d for d in diffs), diffs
    shutil.rmtree(tmp_path / "moved")
