"""Checkpoint save and resume: one file per rank, so any layout saves in parallel.

``DIR/step-000004/rank-00003.pt`` holds rank 3's stage parameters (through the DP buckets'
flat ``master`` vectors), its optimizer state (the shard it owns), the step, the RNG states
and the config it was written with; ``rank-00003.pt.json`` beside it its size and SHA-256,
which :func:`load` checks before ``torch.load`` (``weights_only=True``) reads a byte of it.
``DIR/latest`` names the newest complete step (written by rank 0 after every rank has saved).
Data is a function of (seed, step), so restoring the step restores the data stream: a resumed
run continues bit for bit.

Every file is written to a temporary sibling, flushed to disk (fsync) and renamed into place,
``latest`` last: a save that fails (a full disk, a file-size limit, a kill) leaves the last
complete checkpoint as ``latest`` and is one error naming the path. A save repeated over the
same step replaces each file whole; a kill between a rank's data file and its manifest leaves
a pair that :func:`load` refuses (hash differs) rather than reads.
Checkpoints from before the manifests load without the check (``weights_only`` still holds).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

import torch

LAYOUT_KEYS = ("tp", "pp", "dp", "order", "micro_batches", "global_batch")


def step_dir(root: str | Path, step: int) -> Path:
    return Path(root) / f"step-{step:06d}"


def save(root: str | Path, rank: int, step: int, state: dict[str, Any]) -> Path:
    """Write this rank's checkpoint of ``step`` and its manifest; returns the file."""
    path = step_dir(root, step) / f"rank-{rank:05d}.pt"
    payload = dict(state, step=step, rng={"torch": torch.get_rng_state(),
                                          "python": random.getstate()})
    if torch.cuda.is_available():
        payload["rng"]["cuda"] = torch.cuda.get_rng_state_all()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(path, lambda fh: torch.save(payload, fh))
        manifest = {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
        _write_atomic(manifest_path(path), lambda fh: fh.write(json.dumps(manifest).encode()))
    except (OSError, RuntimeError) as exc:
        raise OSError(f"checkpoint {path}: not saved ({_reason(exc)}); the last complete "
                      f"checkpoint in {root} stays 'latest'") from None
    return path


def _reason(exc: BaseException) -> str:
    """The first line of an error, bounded (torch's write errors run to pages)."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text[:200]


def _write_atomic(path: Path, write) -> None:
    """``write(fh)`` into a temporary sibling, fsync, rename over ``path``, fsync the folder;
    the temporary file is removed when anything fails."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def manifest_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def mark_latest(root: str | Path, step: int) -> None:
    """Record ``step`` as the newest complete checkpoint (call after a barrier), atomically."""
    marker = Path(root) / "latest"
    try:
        _write_atomic(marker, lambda fh: fh.write(f"{step}\n".encode()))
    except OSError as exc:
        raise OSError(f"checkpoint marker {marker}: not written ({_reason(exc)}); 'latest' "
                      "still names the previous complete checkpoint") from None


def latest_step(root: str | Path) -> int:
    from inputspec import InputError, check_value, read_text
    from inputspec.core import Rule

    marker = Path(root) / "latest"
    if not marker.is_file():
        raise ValueError(f"{root}: no checkpoint found (missing 'latest'); save one with --save {root}")
    text = read_text(marker, "checkpoint marker", max_bytes=64).strip()
    if not (text.isascii() and text.isdigit()):
        raise InputError(f"checkpoint marker {marker}", None, text, "a step number written "
                         "by --save", 4)
    return check_value(int(text), int, f"checkpoint marker {marker}", "step", Rule(min=0))


def verify(path: Path) -> None:
    """Raise ValueError unless ``path`` has the size and SHA-256 its manifest recorded
    (a checkpoint without a manifest, written before them, passes)."""
    from inputspec import check_value, read_data
    from inputspec.core import Rule

    man = manifest_path(path)
    if not man.exists():
        return
    data = read_data(man, "checkpoint manifest", max_bytes=4096, default_format="json")
    where = f"checkpoint manifest {man}"
    if not isinstance(data, dict):
        raise ValueError(f"{where}: not a JSON object with bytes and sha256")
    size = check_value(data.get("bytes"), int, where, "bytes", Rule(min=0))
    digest = check_value(data.get("sha256"), str, where, "sha256")
    if not path.is_file():
        raise ValueError(f"checkpoint {path}: not a regular file")
    if path.stat().st_size != size:
        raise ValueError(f"checkpoint {path}: {path.stat().st_size:,} bytes, {size:,} when "
                         "saved: truncated or overwritten; resume from an earlier step")
    if file_sha256(path) != digest:
        raise ValueError(f"checkpoint {path}: SHA-256 differs from the one recorded at save: "
                         "corrupt; resume from an earlier step")


def load(root: str | Path, rank: int, layout: dict[str, Any]) -> dict[str, Any]:
    """Read this rank's newest checkpoint and restore the RNG states.

    Raises ValueError when the checkpoint was written by a different layout.
    """
    step = latest_step(root)
    path = step_dir(root, step) / f"rank-{rank:05d}.pt"
    if not path.is_file():
        raise ValueError(f"{path} is missing: resume with the world size the checkpoint was saved with")
    verify(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch's unpickler: many types, one meaning
        raise ValueError(f"checkpoint {path}: not readable ({_reason(exc)})") from None
    if not isinstance(state, dict) or not {"rng", "step", "dp"} <= set(state):
        raise ValueError(f"checkpoint {path}: not a trainer checkpoint (no rng, step, dp)")
    saved = state.get("layout", {})
    diff = {k: (saved.get(k), layout.get(k)) for k in LAYOUT_KEYS if saved.get(k) != layout.get(k)}
    if diff:
        raise ValueError(f"checkpoint layout differs (saved, now): {diff}; resume with the same layout")
    torch.set_rng_state(state["rng"]["torch"])
    random.setstate(state["rng"]["python"])
    if "cuda" in state["rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    return state
