"""Point functions for tests/tuner/test_sweep.py, importable by Dask worker processes."""

from __future__ import annotations

import time


def square(x: int, fail_on: int | None = None, sleep_s: float = 0.0, offset: int = 0) -> dict:
    """``{"y": x * x + offset}``; raises on ``x == fail_on``."""
    time.sleep(sleep_s)
    if fail_on is not None and x == fail_on:
        raise ValueError(f"point x={x} fails on purpose\nsecond line")
    return {"y": x * x + offset, "nested": {"x": x}}


def not_a_dict(x: int) -> int:
    return x
