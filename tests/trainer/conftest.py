"""Fixtures of the trainer tests: one 8-process self-check run shared by the whole folder."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(scope="session")
def selfcheck(tmp_path_factory):
    """{case: summary} of ``trainer.selfcheck`` (8 gloo processes, float64, 3 steps) and its dir."""
    from trainer.selfcheck import run_selfcheck

    out = tmp_path_factory.mktemp("selfcheck")
    return run_selfcheck(out, steps=3, dtype="float64"), out


@pytest.fixture(scope="session")
def assert_losses_match():
    """check(res, case, reference, rel_tol): the three losses of self-check ``case`` are within
    ``rel_tol`` (relative) of those of ``reference``, step by step."""

    def check(res: dict, case: str, reference: str, rel_tol: float) -> None:
        got, ref = res[case]["losses"], res[reference]["losses"]
        assert len(got) == len(ref) == 3
        for a, b in zip(got, ref, strict=True):
            assert abs(a - b) <= rel_tol * abs(b), (case, got, ref)

    return check


@pytest.fixture(scope="session")
def read_trace():
    """read_trace(dir, rank) -> list of records of ``trace-rank{rank}.jsonl``."""

    def read(directory: Path, rank: int) -> list[dict]:
        lines = (Path(directory) / f"trace-rank{rank}.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]

    return read


@pytest.fixture(scope="session")
def subprocess_env():
    """Environment for child processes that import this same ``trainer`` package."""
    import trainer

    env = dict(os.environ)
    root = str(Path(trainer.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    env.pop("TRAINER_DEBUG", None)
    return env


@pytest.fixture(scope="session")
def python() -> str:
    return sys.executable


@pytest.fixture(scope="session")
def selfcheck_modern(tmp_path_factory):
    """{case: summary} of ``trainer.selfcheck --suite modern`` (GQA, SwiGLU, MoE/ep, cp; 8 gloo
    processes, float64, 3 steps) and its dir."""
    from trainer.selfcheck import run_selfcheck

    out = tmp_path_factory.mktemp("selfcheck_modern")
    return run_selfcheck(out, steps=3, dtype="float64", suite="modern"), out
