"""Fixtures of the trace-reading tests: running a plain torch job script of this folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _run_job(script: str, out: Path, *args: str) -> Path:
    """Run ``script`` (a job of this folder) writing its traces to ``out``; returns ``out``."""
    cmd = [sys.executable, str(HERE / script), str(out), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def run_job():
    return _run_job
