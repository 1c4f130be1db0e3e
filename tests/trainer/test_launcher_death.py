"""Workers end with their launcher (issue #30 item 4): torchrun starts each worker in a session
of its own, so a SIGKILL to torchrun's process group used to leave them training. A real
launch: torchrun, 2 gloo ranks, the tiny model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

#: Hang guards of the polls below (not performance limits: a pass takes a few seconds).
START_GUARD_S, EXIT_GUARD_S = 300, 60


def children(pid: int) -> list[int]:
    """Process ids whose parent is ``pid`` (from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def training(trace_dir: Path, world: int) -> bool:
    files = [trace_dir / f"trace-rank{r}.jsonl" for r in range(world)]
    return all(f.exists() and '"type": "iteration"' in f.read_text() for f in files)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigkill_to_torchrun_process_group_ends_the_workers(tmp_path, subprocess_env):
    from trainer.launch import free_port

    trace = tmp_path / "trace"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()), "-m", "trainer",
           "--dp", "2", "--steps", "1000000", "--backend", "gloo", "--device", "cpu",
           "--trace-dir", str(trace)]
    launcher = subprocess.Popen(cmd, env=subprocess_env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + START_GUARD_S
        while not training(trace, 2):
            assert launcher.poll() is None and time.monotonic() < deadline, "did not start"
            time.sleep(0.2)
        workers = children(launcher.pid)
        assert len(workers) == 2 and all(os.getsid(w) == w for w in workers)  # own sessions
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()
        deadline = time.monotonic() + EXIT_GUARD_S
        while any(alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(w) for w in workers), "workers outlived their launcher"
    finally:
        for w in [*workers, launcher.pid]:
            if alive(w):
                os.kill(w, signal.SIGKILL)
