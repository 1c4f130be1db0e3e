"""Start a gloo/NCCL world without torchrun: for tests, the self-check and the benchmark.

:func:`spawn` starts ``nprocs`` processes (torch.multiprocessing, spawn context) that meet
through a file store; each sets one intra-op thread (8 processes share few cores), joins the
process group and calls ``fn(rank, world_size, *args)``. :func:`init_from_env` joins the world torchrun describes
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or a world of one when there is none.
:func:`die_with_parent` ends a worker with its launcher: torchrun starts each worker in a
session of its own, so a SIGKILL to the launcher's process group would leave them training.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable

import torch
import torch.distributed as dist


def free_port() -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(poll_s: float = 1.0) -> None:
    """Have the kernel SIGKILL this process when its parent (the launcher) dies
    (``prctl(PR_SET_PDEATHSIG)``, Linux), and as a fallback elsewhere or when that fails, a
    daemon thread that ends it once its parent process id changes (it was re-parented)."""
    parent = os.getppid()
    if sys.platform.startswith("linux") and _pdeathsig(signal.SIGKILL):
        if os.getppid() != parent:  # the parent died before the request: no signal will come
            os.kill(os.getpid(), signal.SIGKILL)
        return
    threading.Thread(target=_watch_parent, args=(parent, poll_s), daemon=True,
                     name="trainer-parent-watchdog").start()


def _pdeathsig(sig: int) -> bool:
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int, poll_s: float) -> None:
    while os.getppid() == parent:
        time.sleep(poll_s)
    os.kill(os.getpid(), signal.SIGKILL)


def default_backend(device: str = "auto") -> str:
    """nccl when the run uses CUDA, else gloo."""
    use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    return "nccl" if use_cuda else "gloo"


def _worker(rank: int, fn: Callable, world_size: int, init: str, backend: str, args: tuple) -> None:
    die_with_parent()
    torch.set_num_threads(1)
    os.environ.setdefault("LOCAL_RANK", str(rank))
    if backend == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world_size)
    try:
        fn(rank, world_size, *args)
    finally:
        dist.destroy_process_group()


def spawn(fn: Callable, nprocs: int, args: tuple = (), backend: str = "gloo") -> None:
    """Run ``fn(rank, world_size, *args)`` in ``nprocs`` fresh processes; raise if one fails."""
    import tempfile

    import torch.multiprocessing as mp

    # a file rendezvous: no port to race for with other jobs on a shared machine
    with tempfile.TemporaryDirectory(prefix="trainer-rdzv-") as tmp:
        init = f"file://{os.path.join(tmp, 'store')}"
        mp.start_processes(_worker, args=(fn, nprocs, init, backend, args), nprocs=nprocs,
                           join=True, start_method="spawn")


def init_from_env(backend: str, rank_override: int | None = None) -> tuple[int, int]:
    """Join the torchrun world (or a world of one); returns (rank, world_size). A launcher's
    worker first arranges to end with the launcher (:func:`die_with_parent`)."""
    if "WORLD_SIZE" not in os.environ:  # a world of one needs no rendezvous at all
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
        return 0, 1
    die_with_parent()
    if rank_override is not None:
        os.environ["RANK"] = str(rank_override)  # placement: this process is that trainer rank
    dist.init_process_group(backend)
    return dist.get_rank(), dist.get_world_size()
