"""Run one benchmark case in a fresh Python process (own import time, clean peak RSS)."""

from __future__ import annotations

import json
import subprocess
import sys


def run_child(code: str, *args: str, **label) -> dict:
    """Run ``code`` with ``args`` in a child interpreter; its last stdout line is the JSON
    result. On failure: ``label`` plus ``error`` (the child's last stderr line)."""
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines() or [f"exit status {out.returncode}"]
        return {**label, "error": lines[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])
