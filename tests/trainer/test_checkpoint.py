"""Checkpoints (issue #30 item 4): verified by size and SHA-256 before `torch.load`
(`weights_only=True`); a failed save (a file-size limit) leaves the last complete checkpoint as
`latest` and is one line naming the path; a repeated save replaces files whole."""

from __future__ import annotations

import random
import resource
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from trainer import checkpoint  # noqa: E402
from trainer.config import TrainConfig, preset  # noqa: E402

LAYOUT = {"tp": 1, "pp": 1, "dp": 1, "order": "tp-dp-pp", "micro_batches": 1, "global_batch": 1}


def state(n: int = 50_000) -> dict:
    """What `Trainer.save` passes: optimizer/parameter tensors, the layout, the config."""
    return {"dp": {"master": torch.arange(n, dtype=torch.float32)}, "layout": LAYOUT,
            "config": TrainConfig(model=preset("tiny")).to_dict()}


def saved(root, step: int = 2):
    path = checkpoint.save(root, 0, step, state())
    checkpoint.mark_latest(root, step)
    return path


def test_a_checkpoint_round_trips_with_its_manifest(tmp_path):
    torch.manual_seed(7)
    random.seed(7)
    path = saved(tmp_path)
    want_torch, want_py = torch.rand(3), random.random()
    got = checkpoint.load(tmp_path, 0, LAYOUT)
    assert torch.equal(got["dp"]["master"], state()["dp"]["master"]) and got["step"] == 2
    assert torch.equal(torch.rand(3), want_torch) and random.random() == want_py  # RNG restored
    assert checkpoint.manifest_path(path).exists()
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, path.name + ".json"]


def refused(root, capsys=None) -> str:
    with pytest.raises(ValueError) as info:
        checkpoint.load(root, 0, LAYOUT)
    msg = str(info.value)
    assert "\n" not in msg and len(msg) < 400, msg
    return msg


def test_a_truncated_checkpoint_is_refused_before_loading(tmp_path):
    path = saved(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    msg = refused(tmp_path)
    assert str(path) in msg and "truncated" in msg, msg


def test_a_garbage_checkpoint_of_the_right_size_is_refused(tmp_path):
    path = saved(tmp_path)
    path.write_bytes(b"\x80" * path.stat().st_size)
    msg = refused(tmp_path)
    assert str(path) in msg and "SHA-256" in msg, msg


def test_garbage_without_a_manifest_is_one_line(tmp_path):
    """A checkpoint from before the manifests: weights_only load, its error one line."""
    path = saved(tmp_path)
    checkpoint.manifest_path(path).unlink()
    path.write_bytes(b"PK\x03\x04 not a zip archive" * 100)
    msg = refused(tmp_path)
    assert str(path) in msg and "not readable" in msg, msg


def test_a_garbage_latest_marker_names_the_marker(tmp_path):
    saved(tmp_path)
    (tmp_path / "latest").write_text("²\n")
    msg = refused(tmp_path)
    assert str(tmp_path / "latest") in msg, msg


CHILD = textwrap.dedent("""
    import resource, sys
    import torch
    from trainer import checkpoint
    from trainer.config import TrainConfig, preset
    root = sys.argv[1]
    st = {"dp": {"master": torch.arange(50_000, dtype=torch.float32)}, "layout": {},
          "config": TrainConfig(model=preset("tiny")).to_dict()}
    checkpoint.save(root, 0, 2, st)
    checkpoint.mark_latest(root, 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, resource.RLIM_INFINITY))
    for step in (4, 2):  # a new step, then the same step again: both fail to write
        try:
            checkpoint.save(root, 0, step, st)
            checkpoint.mark_latest(root, step)
            print("saved", step)
        except OSError as exc:
            print("error:", exc)
""")


def test_a_failed_save_keeps_the_last_checkpoint_latest(tmp_path, subprocess_env):
    """Under a 64 KiB file-size limit (the 200 kB checkpoint cannot be written)."""
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True,
                          text=True, env=subprocess_env)
    errors = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(errors) == 2, (proc.stdout, proc.stderr)
    for line, step in zip(errors, (4, 2), strict=True):
        assert line.startswith(f"error: checkpoint {tmp_path}/step-{step:06d}/rank-00000.pt: "
                               "not saved"), line
        assert "stays 'latest'" in line and len(line) < 400, line
    assert checkpoint.latest_step(tmp_path) == 2
    got = checkpoint.load(tmp_path, 0, {})  # the step-2 files are whole: size and hash agree
    assert got["step"] == 2 and got["dp"]["master"].numel() == 50_000
    leftovers = [p.name for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


def test_the_trainer_save_under_a_file_size_limit_is_one_line(tmp_path, subprocess_env):
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (16 * 1024, resource.RLIM_INFINITY))

    proc = subprocess.run([sys.executable, "-m", "trainer", "--steps", "1", "--save",
                           str(tmp_path / "ckpt"), "--json"], capture_output=True, text=True,
                          env=subprocess_env, preexec_fn=limit)
    err = proc.stderr.strip()
    assert proc.returncode == 2 and len(err.splitlines()) == 1, err
    assert f"checkpoint {tmp_path}/ckpt/step-000001/rank-00000.pt: not saved" in err, err
    assert not (tmp_path / "ckpt" / "latest").exists()
