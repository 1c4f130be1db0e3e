"""Checkpoint save and resume: one file per rank, so any layout saves in parallel.

``DIR/step-000004/rank-00003.pt`` holds rank 3's stage parameters (through the DP buckets'
flat ``master`` vectors), its optimizer state (the shard it owns), the step, the RNG states
and the config it was written with; ``DIR/latest`` names the newest complete step (written by
rank 0 after every rank has saved). Data is a function of (seed, step), so restoring the step
restores the data stream: a resumed run continues bit for bit.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import torch

LAYOUT_KEYS = ("tp", "pp", "dp", "order", "micro_batches", "global_batch")


def step_dir(root: str | Path, step: int) -> Path:
    return Path(root) / f"step-{step:06d}"


def save(root: str | Path, rank: int, step: int, state: dict[str, Any]) -> Path:
    """Write this rank's checkpoint of ``step``; returns the file."""
    path = step_dir(root, step) / f"rank-{rank:05d}.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = dict(state, step=step, rng={"torch": torch.get_rng_state(),
                                          "python": random.getstate()})
    if torch.cuda.is_available():
        payload["rng"]["cuda"] = torch.cuda.get_rng_state_all()
    tmp = path.with_suffix(".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)
    return path


def mark_latest(root: str | Path, step: int) -> None:
    """Record ``step`` as the newest complete checkpoint (call after a barrier)."""
    Path(root, "latest").write_text(f"{step}\n")


def latest_step(root: str | Path) -> int:
    marker = Path(root) / "latest"
    if not marker.is_file():
        raise ValueError(f"{root}: no checkpoint found (missing 'latest'); save one with --save {root}")
    return int(marker.read_text().strip())


def load(root: str | Path, rank: int, layout: dict[str, Any]) -> dict[str, Any]:
    """Read this rank's newest checkpoint and restore the RNG states.

    Raises ValueError when the checkpoint was written by a different layout.
    """
    step = latest_step(root)
    path = step_dir(root, step) / f"rank-{rank:05d}.pt"
    if not path.is_file():
        raise ValueError(f"{path} is missing: resume with the world size the checkpoint was saved with")
    state = torch.load(path, map_location="cpu", weights_only=False)
    saved = state.get("layout", {})
    diff = {k: (saved.get(k), layout.get(k)) for k in LAYOUT_KEYS if saved.get(k) != layout.get(k)}
    if diff:
        raise ValueError(f"checkpoint layout differs (saved, now): {diff}; resume with the same layout")
    torch.set_rng_state(state["rng"]["torch"])
    random.setstate(state["rng"]["python"])
    if "cuda" in state["rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    return state
