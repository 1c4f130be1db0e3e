"""Shared fixtures. Area-specific fixtures live in the conftest.py of each test folder."""

from __future__ import annotations

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
