"""``netsim place``: topology-aware rank placement, compared with linear and random.

Example::

    netsim place --fabric megascale --job gpt3-175b -o placement.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tuner.cli._output import add_command, add_json_flag, format_table, print_json


def register(sub) -> argparse.ArgumentParser:
    from tuner.jobs import add_job_arguments
    from tuner.placement import STRATEGIES

    p = add_command(
        sub, "place",
        "map ranks to GPUs (topology-aware, linear, random) and compare them",
        "Place a 3D-parallel job's ranks on a fabric: TP inside a server, the "
        "heaviest groups under one ToR set then one pod, DP groups on one rail, then a local "
        "search. Prints cross-ToR and cross-pod bytes and the predicted iteration time (with "
        "ECMP collisions from the flow engine) of every strategy.")
    p.add_argument("--fabric", default="megascale", help="fabric preset or YAML/JSON file")
    add_job_arguments(p)
    p.add_argument("--free", default=None, type=Path,
                   help="file listing the free servers (names or positions) in scheduler order")
    p.add_argument("--strategy", choices=STRATEGIES, default="topo",
                   help="strategy written to -o (all are compared)")
    p.add_argument("--calibration", default=None, help="calibration.json from netsim calibrate")
    p.add_argument("--iterations", type=int, default=4000, help="local-search swap proposals")
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    p.add_argument("-o", "--output", type=Path, default=None, help="placement.json to write")
    p.add_argument("--background", default=None, type=Path,
                   help="RUNNING.yaml: jobs already on the fabric (their servers are taken, "
                   "their traffic shares it, topo avoids their busy uplinks)")
    add_json_flag(p)
    return p


def load_calibration(path):
    """A ``netsim.diagnose.calibration`` fit, or None."""
    if not path:
        return None
    from netsim.diagnose.calibration import load_calibration as load

    return load(path)


def run(args: argparse.Namespace) -> int:
    from topologies import load_fabric
    from tuner.jobs import job_from_args
    from tuner.outputs import check_output_file
    from tuner.placement import compare_strategies, read_free_servers, verdict
    from tuner.render import write_placement

    if args.output:
        check_output_file(args.output)  # an unwritable -o fails before the search
    fabric = load_fabric(args.fabric)
    job = job_from_args(args)
    free = read_free_servers(args.free, fabric) if args.free else None
    from tuner.cli._background import load as load_background

    background = load_background(args, fabric)
    results = compare_strategies(fabric, job, free, seed=args.seed,
                                 calibration=load_calibration(args.calibration),
                                 search_iterations=args.iterations, background=background)
    chosen = results[args.strategy]
    if args.output:
        write_placement(args.output, chosen.ranks(fabric),
                        {"strategy": args.strategy, "fabric": fabric.name, "job": job.to_dict(),
                         "predicted_iteration_s": chosen.iteration_s})
    doc = {"fabric": fabric.name, "world": job.world, "chosen": args.strategy,
           "output": str(args.output) if args.output else None,
           "strategies": {k: v.to_json() for k, v in results.items()},
           "verdict": verdict(results)}
    from tuner.placement import load_context

    doc["verdict"] += "; " + load_context(fabric, job, results["linear"].gpu_of_rank,
                                          background, args.seed)
    if background:
        doc["background"] = [b.name for b in background]
    if args.json:
        print_json(doc)
        return 0
    rows = [[k, v.cross_tor_bytes / 1e9, v.cross_pod_bytes / 1e9, v.iteration_s]
            for k, v in results.items()]
    print(format_table(["strategy", "cross_tor_GB", "cross_pod_GB", "iteration_s"], rows,
                       floatfmt=".4f"))
    print(doc["verdict"])
    if args.output:
        print(f"wrote {args.output} ({args.strategy})")
    return 0
