"""Shared fixtures. Area-specific fixtures live in the conftest.py of each test folder."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator: every random choice in a test draws from one of these."""
    return np.random.default_rng(12345)
