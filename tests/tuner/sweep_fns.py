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


def dies(x: int, die_on: int | None = None, exit_code: int = 3, once_marker: str = "") -> dict:
    """``{"y": x}``; the process ends (``os._exit(exit_code)``) on ``x == die_on``, only the
    first time when ``once_marker`` names a file (created before dying)."""
    import os

    if x == die_on:
        if not once_marker or not os.path.exists(once_marker):
            if once_marker:
                open(once_marker, "w").close()
            os._exit(exit_code)
    return {"y": x}


def pid(x: int) -> dict:
    """The process that ran the point."""
    import os

    return {"pid": os.getpid()}
