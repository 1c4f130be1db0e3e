"""The test tiers (docs/contributing.md, "Test tiers"): study tests are slow tests, CI runs the
default and ci-slow tiers, ``--durations-csv`` records what the tier report renders."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
STUDY_FILE = "netsim/flow/test_vs_packet.py"


def _pytest(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=TESTS, capture_output=True, text=True, timeout=300)


def test_study_tests_are_slow_tests_so_the_default_run_skips_them():
    study = _pytest("--collect-only", "-m", "study", STUDY_FILE)
    assert study.returncode == 0 and re.search(r"\b[1-9]\d* tests? collected", study.stdout), \
        study.stdout[-2000:]
    # exit status 5: nothing selected
    assert _pytest("--collect-only", "-m", "study and not slow", STUDY_FILE).returncode == 5


def test_durations_csv_has_one_row_per_test_with_its_tier(tmp_path):
    out = tmp_path / "d.csv"
    run = _pytest("--durations-csv", str(out), "netsim/flow/test_crosscheck_groups.py")
    assert run.returncode == 0, run.stdout[-2000:]
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3
    assert {r["tier"] for r in rows} == {"default"} and {r["outcome"] for r in rows} == {"passed"}
    assert all(float(r["wall_s"]) >= 0 for r in rows)


def test_ci_runs_the_default_then_the_ci_slow_tier_and_make_defines_both():
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index("tier default test ") < ci.index("tier ci-slow test-ci-slow ")
    make = (ROOT / "Makefile").read_text()
    assert re.search(r'^test-ci-slow:.*\n\t.*-m "slow and not study"$', make, re.M)
    assert re.search(r"^test-study:.*\n\t.*-m study$", make, re.M)
    assert re.search(r'^test:.*\n\t.*-m "not slow"$', make, re.M)


def test_tier_report_sums_per_tier_and_refuses_a_missing_file(tmp_path):
    rows = tmp_path / "r.csv"
    rows.write_text("test,tier,outcome,wall_s,load_1min\n"
                    "a,ci-slow,passed,60.0,1.0\nb,ci-slow,failed,30.0,3.0\nc,study,passed,6,2\n")
    run = subprocess.run([sys.executable, str(ROOT / ".ci" / "tiers.py"), str(rows)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "| ci-slow | 2 | 1 | 1.5 min | 1.0 to 3.0 |" in run.stdout
    assert "| study | 1 | 0 | 0.1 min | 2.0 to 2.0 |" in run.stdout
    bad = subprocess.run([sys.executable, str(ROOT / ".ci" / "tiers.py"), str(tmp_path / "no")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no such file" in bad.stderr
