"""Placement study: what topology-aware placement is worth on a shared, fragmented fabric.

    python -m experiments.placement.run [--full | --tiny] [-o DIR] [--workers N]

Two parts, each on a 1:1 fabric and its 2:1 oversubscribed variant (ToRs with half as much
uplink as host capacity):

1. **One job into a busy cluster.** Three times, the fabric is filled to ``OCCUPANCY`` with
   jobs from the seeded generator (``tuner.cluster.generate_jobs``) in the scheduler's order,
   then a random half of the running jobs end. That leaves the free servers, and the later
   jobs, scattered over the ToR sets (the fragmentation a cluster ends up in). A GPT job of N GPUs is placed on the free servers by
   each policy exactly as ``netsim place --background`` does (``compare_strategies``: topo is
   scored with the running jobs' traffic sharing the fabric), and its iteration time is
   compared with the same job alone on the idle fabric in the scheduler's order.
2. **Scheduler replay.** ``netsim cluster simulate``: a stream of jobs under each policy.

The two parts are the sweep specs ``placement.yaml`` (one point per fabric and job size) and
``replay.yaml`` (one point per fabric), run through :mod:`sweeps` into ``DIR/placement`` and
``DIR/replay``: resumable, on Dask (``--workers``, ``--scheduler``). Default (small, minutes
on 2 cores): 2,048-GPU fabrics, jobs of 512 and 1,024 GPUs, a 30-job replay. ``--full``
(``*_full.yaml``): the 12,288-GPU megascale fabric and its 2:1 variant, jobs of 512 to 6,144
GPUs into the busy cluster and the 12,288-GPU job on the idle fabric with a striped free list
(one server per ToR set in turn), a 100-job replay. ``--tiny`` (``*_tiny.yaml``; also
``NETSIM_NOTEBOOK_SMALL=1``): the notebooks' and CI's size.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments._output import parse_study_args, write_csv
from experiments._sweeps import ok_rows, run_spec_files, study_parser
from topologies import Clos3Spec, clos3

HERE = Path(__file__).resolve().parent
SPECS = ("placement", "replay")

OCCUPANCY = 0.6
POLICIES = ("linear", "random", "topo")


@dataclass(frozen=True)
class Setup:
    """Sizes of the fabrics of one run (the sweep specs hold the rest)."""

    servers: int
    servers_per_tor_group: int
    sizes: tuple[int, ...]
    replay_jobs: int
    search_iterations: int



def fabrics(setup: Setup) -> dict[str, object]:
    """The 1:1 megascale layout at ``setup.servers`` servers and its 2:1 variant (48-port
    switches: 32 down ports split in 64 host ports of 200G, 16 uplinks of 400G at the ToR).
    The ratio holds with a full ToR set (64 servers); ``tuner.placement.tor_oversubscription``
    checks it."""
    base = dict(servers=setup.servers, servers_per_tor_group=setup.servers_per_tor_group)
    out = {"1:1": clos3(Clos3Spec(name=f"megascale-{setup.servers * 8}", **base)),
            "2:1": clos3(Clos3Spec(name=f"megascale-{setup.servers * 8}-2to1", switch_radix=48,
                                   tor_down_up=(2, 1), **base))}
    from tuner.placement import tor_oversubscription

    for ratio, fabric in out.items():
        got = tor_oversubscription(fabric)
        if abs(got - float(ratio.split(":")[0])) > 1e-9:
            raise ValueError(f"{fabric.name}: ToRs are {got:g}:1, not {ratio}")
    return out


def busy_cluster(fabric, seed: int, rounds: int = 3):
    """Background jobs and the free servers (scheduler order) of a fragmented cluster: ``rounds``
    times, generator jobs fill the free servers in the scheduler's order up to ``OCCUPANCY``,
    then a random half of the running jobs end. Jobs of later rounds land in the holes, so the
    background itself is spread over ToR sets, as in a cluster that has run for a while."""
    from tuner.background import BackgroundJob
    from tuner.cluster import generate_jobs
    from tuner.placement import place

    gps = int(fabric.gpus_per_server)
    free = list(range(len(fabric.servers)))
    running: list = []
    stream = iter(generate_jobs(10_000, len(fabric.gpus), seed))
    rng = np.random.default_rng(seed)
    for _ in range(rounds):
        for cj in stream:
            if len(free) * gps - cj.job.world < (1 - OCCUPANCY) * len(fabric.gpus):
                break
            p = place(fabric, cj.job, "linear", free)
            running.append(BackgroundJob(cj.name, cj.job, p.gpu_of_rank))
            used = set((p.gpu_of_rank // gps).tolist())
            free = [s for s in free if s not in used]
        keep = np.sort(rng.choice(len(running), size=len(running) // 2, replace=False))
        running = [running[i] for i in keep]
        held = {int(g) // gps for b in running for g in b.gpu_of_rank.tolist()}
        free = [s for s in range(len(fabric.servers)) if s not in held]
    return running, free


def one_job(fabric, ratio: str, gpus: int, seed: int, iterations: int) -> list[dict]:
    """Rows of part 1 for one fabric and job size."""
    from netsim.model.hardware import get_hardware
    from netsim.workload import predict
    from netsim.workload.flowcomm import FlowCommModel
    from tuner.cluster import job_for_size
    from tuner.placement import compare_strategies

    job = job_for_size(gpus)
    hw = get_hardware(job.gpu)
    alone = predict(job, fabric, hw, comm_model=FlowCommModel(fabric, hw, seed=seed)).iteration_s
    if gpus * 2 > len(fabric.gpus):  # no room for background: idle fabric, striped free list
        per = fabric.spec.servers_per_tor_group
        background = []
        free = [s for i in range(per) for s in range(i, len(fabric.servers), per)]
    else:
        background, free = busy_cluster(fabric, seed)
    res = compare_strategies(fabric, job, free, seed=seed, search_iterations=iterations,
                             background=background)
    return [{"fabric": fabric.name, "oversubscription": ratio, "gpus": gpus, "policy": k,
             "background_jobs": len(background), "free_servers": len(free),
             "iteration_s": p.iteration_s, "alone_s": alone, "slowdown": p.iteration_s / alone,
             "cross_tor_GB": p.cross_tor_bytes / 1e9, "cross_pod_GB": p.cross_pod_bytes / 1e9}
            for k, p in res.items()]


def replay(fabric, ratio: str, n: int, seed: int, iterations: int) -> list[dict]:
    """Rows of part 2 for one fabric."""
    from tuner.cluster import generate_jobs, simulate

    res = simulate(fabric, generate_jobs(n, len(fabric.gpus), seed), POLICIES, seed=seed,
                   search_iterations=iterations)
    rows = []
    for k, r in res.items():
        m = r.to_json()
        rows.append({"fabric": fabric.name, "oversubscription": ratio, "jobs": n, "policy": k,
                     "mean_slowdown": m["mean_slowdown"], "p95_slowdown": m["p95_slowdown"],
                     "mean_jct_s": m["mean_jct_s"], "cross_tor_TB": m["cross_tor_bytes"] / 1e12,
                     "cross_pod_TB": m["cross_pod_bytes"] / 1e12,
                     "mean_fragmentation": m["mean_fragmentation"]})
    return rows


def run_sweeps(out: Path, size: str | None = None, workers: int | None = 0,
               scheduler: str | None = None, seed: int | None = None,
               sizes: list[int] | None = None, replay_jobs: int | None = None,
               ratios: list[str] | None = None, progress: bool = False
               ) -> tuple[list[dict], list[dict]]:
    """Both parts through the sweep runner (``size``: None, ``full`` or ``tiny``; the other
    arguments override the specs'); returns (one-job rows, replay rows)."""
    grids = {"placement": {"gpus": sizes} if sizes is not None else {},
             "replay": {}}
    extra = {"placement": {}, "replay": {"jobs": replay_jobs} if replay_jobs else {}}
    for name in SPECS:
        if ratios:
            grids[name]["ratio"] = ratios
        if seed is not None:
            extra[name]["seed"] = seed
    skip = {"placement": sizes == [], "replay": replay_jobs == 0}
    rows = {}
    for name in SPECS:
        res = [] if skip[name] else run_spec_files(
            HERE, [name], out, size == "full", workers, scheduler, progress,
            size=size if size != "full" else None, extra_args=extra[name],
            grid=grids[name])[name]
        rows[name] = [row for r in ok_rows(res, "placement") for row in r["rows"]]
    return rows["placement"], rows["replay"]


def figure(jobs: list[dict], streams: list[dict], path: Path) -> Path:
    """Slowdown of the placed job per size and policy (left), replay mean slowdown (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2 if streams else 1, figsize=(11 if streams else 6, 4),
                             squeeze=False)
    a = axes[0][0]
    for ratio, style in (("1:1", "-"), ("2:1", "--")):
        for k, color in zip(POLICIES, ("C0", "C1", "C2"), strict=True):
            rows = [r for r in jobs if r["oversubscription"] == ratio and r["policy"] == k]
            if rows:
                a.plot([r["gpus"] for r in rows], [r["slowdown"] for r in rows], style,
                       color=color, marker="o", label=f"{k} ({ratio})")
    a.set_xscale("log", base=2)
    a.set_xlabel("job size (GPUs)")
    a.set_ylabel("iteration time / alone on the idle fabric")
    a.legend(fontsize=8)
    if streams:
        b = axes[0][1]
        labels = [f"{r['policy']}\n{r['oversubscription']}" for r in streams]
        b.bar(range(len(streams)), [r["mean_slowdown"] for r in streams],
              color=[("C0", "C1", "C2")[POLICIES.index(r["policy"])] for r in streams])
        b.set_xticks(range(len(streams)), labels, fontsize=8)
        b.set_ylabel("replay: mean slowdown over jobs")
        b.set_ylim(bottom=min(1.0, min(r["mean_slowdown"] for r in streams)) * 0.98)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    p = study_parser(__doc__, "megascale sizes (long)", out_default=HERE / "results")
    p.add_argument("--tiny", action="store_true", help="the notebooks' and CI's size")
    p.add_argument("--seed", type=int, default=None, help="instead of the specs' (0)")
    p.add_argument("--sizes", default=None,
                   help="comma list of job sizes (GPUs) of part 1 instead of the spec's")
    p.add_argument("--replay-jobs", type=int, default=None,
                   help="jobs of the replay instead of the spec's (0: no replay)")
    p.add_argument("--ratios", default=None, help="fabrics to run: 1:1, 2:1 or both")
    args = parse_study_args(p, argv)
    tiny = args.tiny or bool(os.environ.get("NETSIM_NOTEBOOK_SMALL"))
    sizes = None if args.sizes is None else [
        int(x) for x in args.sizes.split(",") if x.strip() not in ("", "0")]
    jobs, streams = run_sweeps(
        args.out, "full" if args.full else ("tiny" if tiny else None), args.workers,
        args.scheduler, args.seed, sizes, args.replay_jobs,
        args.ratios.split(",") if args.ratios else None, progress=True)
    if jobs:
        write_csv(args.out / "placement.csv", jobs)
        figure(jobs, streams, args.out / "placement.png")
    if streams:
        write_csv(args.out / "replay.csv", streams)
    for name in ("placement.csv", "replay.csv", "placement.png"):
        if (args.out / name).exists():
            print(f"wrote {args.out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
