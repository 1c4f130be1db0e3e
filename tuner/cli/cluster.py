"""``netsim cluster simulate``: replay jobs arriving and leaving a shared fabric under
placement policies (``tuner.cluster``).

Example::

    netsim cluster simulate --fabric megascale --jobs 100 --seed 0 --policy linear,random,topo
    netsim cluster simulate --fabric F.yaml --trace JOBS.csv --json --plot out/
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tuner.cli._output import add_command, add_json_flag, format_table, print_json

COLUMNS = ("mean_slowdown", "p95_slowdown", "mean_jct_s", "cross_tor_bytes", "cross_pod_bytes",
           "mean_fragmentation")


def register(sub) -> argparse.ArgumentParser:
    p = add_command(
        sub, "cluster",
        "replay jobs arriving and leaving a shared fabric under placement policies",
        "Jobs arrive (seeded generator or CSV trace) and are placed by each policy "
        "on the servers free at that moment, with the running jobs' traffic sharing the "
        "fabric (flow engine). Reports per policy the slowdown over running alone, job "
        "completion time, cross-ToR/pod bytes and fragmentation.")
    cmds = p.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    s = cmds.add_parser("simulate", help="replay a job stream under each policy")
    s.add_argument("--fabric", required=True, help="fabric preset or YAML/JSON file")
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--jobs", type=int, help="number of jobs from the seeded generator")
    src.add_argument("--trace", type=Path,
                     help="CSV: name,arrival_s,duration_s,gpus[,model,tp,pp,dp]")
    s.add_argument("--seed", type=int, default=0, help="seed of the generator and policies")
    s.add_argument("--load", type=float, default=None,
                   help="offered load of the generator (GPU-seconds over capacity; default 0.9)")
    s.add_argument("--policy", default="linear,random,topo",
                   help="comma list of linear, random, topo")
    s.add_argument("--iterations", type=int, default=300,
                   help="swap proposals of topo's local search per job")
    s.add_argument("--plot", type=Path, default=None, help="directory for PNG figures")
    from tuner.jobs import add_job_arguments

    add_job_arguments(s)  # a template of every job: predict's job flags, the stream sets the size
    add_json_flag(s)
    return p


def _check_trace_fits(jobs, fabric, path) -> None:
    """Refuse, naming the file, a trace job larger than the fabric."""
    from inputspec import InputError

    big = [j for j in jobs if j.job.world > len(fabric.gpus)]
    if big:
        j = big[0]
        raise InputError(f"trace file {path}", problem=f"job {j.name}: gpus {j.job.world} "
                         f"(tp x pp x dp): more GPUs than the fabric has ({fabric.name}: "
                         f"{len(fabric.gpus)})")


def _templated(jobs, args: argparse.Namespace):
    """The stream's jobs made of ``--job`` / the job flags when given (``with_template``)."""
    from tuner.cluster import with_template
    from tuner.jobs import job_dict_from_args, job_source

    template, flags = job_dict_from_args(args)
    if not template:
        return jobs
    return with_template(jobs, template, job_source(args.job) + (" with flags" if flags and
                                                                 args.job else ""))


def run(args: argparse.Namespace) -> int:
    from topologies import load_fabric
    from tuner import cluster

    policies = tuple(x.strip() for x in args.policy.split(",") if x.strip())
    fabric = load_fabric(args.fabric)
    if args.trace is not None:
        jobs = cluster.read_trace(args.trace)
        _check_trace_fits(jobs, fabric, args.trace)
    else:
        if args.jobs < 1:
            raise ValueError("--jobs must be >= 1")
        load = cluster.TARGET_LOAD if args.load is None else args.load
        if load <= 0:
            raise ValueError("--load must be > 0")
        jobs = cluster.generate_jobs(args.jobs, len(fabric.gpus), args.seed, load)
    jobs = _templated(jobs, args)
    t0 = time.perf_counter()

    def progress(policy: str, done: int, total: int) -> None:
        if done == total or done % 10 == 0:
            print(f"cluster: {policy:<6} {done:>4}/{total} jobs  {time.perf_counter() - t0:6.1f} s",
                  file=sys.stderr, flush=True)

    results = cluster.simulate(fabric, jobs, policies, seed=args.seed,
                               search_iterations=args.iterations, progress=progress)
    doc = {"fabric": fabric.name, "gpus": len(fabric.gpus), "jobs": len(jobs),
           "seed": args.seed, "policies": {k: v.to_json() for k, v in results.items()}}
    if args.plot is not None:
        doc["figures"] = [str(p) for p in plot(results, args.plot)]
    if args.json:
        print_json(doc)
        return 0
    rows = [[k] + [v[c] / 1e12 if c.endswith("bytes") else v[c] for c in COLUMNS]
            for k, v in doc["policies"].items()]
    heads = ["policy"] + [c.replace("bytes", "TB") for c in COLUMNS]
    print(f"{len(jobs)} jobs on {fabric.name} ({len(fabric.gpus)} GPUs), seed {args.seed}")
    print(format_table(heads, rows, floatfmt=".3f"))
    for f in doc.get("figures", []):
        print(f"wrote {f}")
    return 0


def plot(results: dict, out: Path) -> list[Path]:
    """Slowdown CDF and fragmentation over time per policy, PNG files in ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for name, res in results.items():
        slow = np.sort([j.slowdown for j in res.jobs])
        a.step(slow, np.arange(1, len(slow) + 1) / len(slow), where="post", label=name)
        t = np.array([x for x, _ in res.fragmentation]) / 3600
        b.step(t, [f for _, f in res.fragmentation], where="post", label=name)
    a.set_xlabel("slowdown (iteration shared / alone)")
    a.set_ylabel("fraction of jobs")
    b.set_xlabel("time (h)")
    b.set_ylabel("fragmentation (share of free servers in partly used ToR sets)")
    a.legend()
    b.legend()
    fig.tight_layout()
    path = out / "cluster.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return [path]
