"""Shared fixtures. Area-specific fixtures live in the conftest.py of each test folder."""

from __future__ import annotations

import csv
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

# Child processes (torch.multiprocessing spawn, Dask's worker processes) unpickle functions
# defined in test modules by their module name ``tests.<area>.<module>``. The suite runs against
# the installed package from inside tests/, so the folder that holds ``tests`` is not on a
# child's path: put a folder holding only a ``tests`` link to this directory on PYTHONPATH (not
# the repository root, whose source packages would shadow the installed ones).
_SHIM = Path(tempfile.mkdtemp(prefix="netsim-tests-path-"))
(_SHIM / "tests").symlink_to(Path(__file__).resolve().parent, target_is_directory=True)
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(_SHIM), os.environ.get("PYTHONPATH")) if p)
sys.path.append(str(_SHIM))  # multiprocessing's spawn hands children the parent's sys.path


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator: every random choice in a test draws from one of these."""
    return np.random.default_rng(12345)



def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--durations-csv", metavar="FILE", default=None,
                     help="write each test's tier, outcome, wall time (setup + call + "
                          "teardown) and the load average at its start to FILE")


def pytest_itemcollected(item: pytest.Item) -> None:
    # a study-tier test is a slow test: the default run (`not slow`) never runs it
    if item.get_closest_marker("study") and not item.get_closest_marker("slow"):
        item.add_marker(pytest.mark.slow)


def tier(item: pytest.Item) -> str:
    """``default``, ``ci-slow`` or ``study`` (docs/contributing.md, "Test tiers")."""
    if item.get_closest_marker("study"):
        return "study"
    return "ci-slow" if item.get_closest_marker("slow") else "default"


_RUNS: dict[str, dict] = {}  # nodeid -> tier, outcome, wall_s, load_1min: --durations-csv rows


def pytest_runtest_setup(item: pytest.Item) -> None:
    _RUNS[item.nodeid] = {"test": item.nodeid, "tier": tier(item), "outcome": "passed",
                          "wall_s": 0.0, "load_1min": round(os.getloadavg()[0], 2)}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    row = _RUNS.get(report.nodeid)
    if row is None:
        return
    row["wall_s"] = round(row["wall_s"] + report.duration, 3)
    if report.outcome != "passed" and row["outcome"] == "passed":
        row["outcome"] = report.outcome


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("--durations-csv")
    if not path or not _RUNS:
        return
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["test", "tier", "outcome", "wall_s", "load_1min"])
        w.writeheader()
        w.writerows(_RUNS.values())
