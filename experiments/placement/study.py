"""Placement study: the sweep points (one job into a busy cluster; one scheduler replay).

Each returns ``{"rows": [...]}``, the rows of :func:`experiments.placement.run.one_job` or
:func:`~experiments.placement.run.replay` for one fabric (``ratio``: ``1:1`` or ``2:1``) of
``servers`` 8-GPU servers, so that ``sweeps`` can run, resume and distribute them.
"""

from __future__ import annotations


def fabric(ratio: str, servers: int, servers_per_tor_group: int):
    """The study's ``ratio`` fabric at a sweep spec's sizes (``run.fabrics``)."""
    from experiments.placement.run import Setup, fabrics

    return fabrics(Setup(int(servers), int(servers_per_tor_group), (), 0, 0))[ratio]


def one_job_point(ratio: str, gpus: int, servers: int, servers_per_tor_group: int, seed: int,
                  search_iterations: int) -> dict:
    """Part 1: a job of ``gpus`` GPUs placed by each policy into the busy cluster."""
    from experiments.placement.run import one_job

    fab = fabric(ratio, servers, servers_per_tor_group)
    return {"rows": one_job(fab, ratio, int(gpus), int(seed), int(search_iterations))}


def replay_point(ratio: str, jobs: int, servers: int, servers_per_tor_group: int, seed: int,
                 search_iterations: int) -> dict:
    """Part 2: ``jobs`` generated jobs replayed under each policy."""
    from experiments.placement.run import replay

    fab = fabric(ratio, servers, servers_per_tor_group)
    return {"rows": replay(fab, ratio, int(jobs), int(seed), int(search_iterations))}
