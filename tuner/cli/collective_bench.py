"""``netsim collective-bench``: an nccl-tests-like size sweep on the flow-level engine.

Like ``all_reduce_perf -b 8 -e 1G -f 2`` (nccl-tests README): sizes from ``-b`` to ``-e``
multiplied by ``-f``; columns size, count, type, time (us), algbw and busbw (GB/s) with
nccl-tests' bus-bandwidth factors (``doc/PERFORMANCE.md``).
"""

from __future__ import annotations

import argparse

from tuner.cli._output import UsageError, add_command, add_json_flag, format_table, print_json
from tuner.cli.sim_flow import (
    DEFAULT_FABRIC,
    LOAD_MODE_ABOVE_RANKS,
    add_nccl_arguments,
    failed_from_args,
    model_from_args,
    nccl_from_args,
    ranks_from_args,
)

DTYPE_BYTES = {"float": 4, "half": 2, "bfloat16": 2, "double": 8, "int8": 1}


def register(sub) -> argparse.ArgumentParser:
    p = add_command(
        sub, "collective-bench",
        "nccl-tests-like size sweep of a collective on the flow-level engine",
        "Sweep message sizes of a collective on a simulated fabric and print "
        "time, algbw and busbw as nccl-tests does.")
    p.add_argument("--op", default="allreduce",
                   help="allreduce, allgather, reducescatter, broadcast, alltoall, sendrecv")
    p.add_argument("--fabric", default=None, help=f"preset or fabric file (default {DEFAULT_FABRIC})")
    p.add_argument("-b", "--minbytes", default="8M",
                   help="smallest size, read as nccl-tests reads it: K, M, G are powers of 1024 "
                   "(8M = 8MB = 8 MiB; default 8M)")
    p.add_argument("-e", "--maxbytes", default="1G", help="largest size (default 1G = 1 GiB)")
    p.add_argument("-f", "--stepfactor", type=float, default=2.0, help="size multiplier (2)")
    p.add_argument("--dtype", default="float", choices=sorted(DTYPE_BYTES),
                   help="element type for the count column (default float)")
    p.add_argument("--cc", default=None, choices=["none", "dcqcn"],
                   help="sharing model by congestion control (none -> maxmin)")
    p.add_argument("--seed", type=int, default=0, help="seed of QP numbers and ECMP hashing")
    add_nccl_arguments(p)
    add_json_flag(p)
    return p


def sizes(lo: int, hi: int, factor: float) -> list[int]:
    """nccl-tests' geometric size list from ``lo`` to ``hi`` (inclusive)."""
    if lo <= 0 or hi < lo:
        raise UsageError(f"-b {lo} / -e {hi}: need 0 < minbytes <= maxbytes")
    if factor <= 1:
        raise UsageError(f"-f {factor}: the step factor must be > 1")
    out, s = [], lo
    while s <= hi:
        out.append(int(s))
        s = s * factor
    return out


def run(args: argparse.Namespace) -> int:
    from netsim.collectives import CollectiveCall, alltoall_load, canonical_op, simulate_calls
    from topologies import load_fabric
    from topologies.units import parse_nccl_size

    fabric = load_fabric(args.fabric or DEFAULT_FABRIC)
    op = canonical_op(args.op)
    ranks = ranks_from_args(args.ranks, fabric)
    nccl = nccl_from_args(args)
    model = model_from_args(args)
    elem = DTYPE_BYTES[args.dtype]
    if model == "pfc":
        raise UsageError("--flow-model pfc needs per-QP paths: not available for collectives")
    n = ranks if isinstance(ranks, int) else len(ranks)
    load = op == "alltoall" and (args.alltoall_mode == "load" or (
        args.alltoall_mode == "auto" and n > LOAD_MODE_ABOVE_RANKS))
    failed = failed_from_args(args.fail_links, fabric)
    rows, results = [], []
    for size in sizes(parse_nccl_size(args.minbytes), parse_nccl_size(args.maxbytes),
                      args.stepfactor):
        # one run per size: the calls must not contend with each other
        if load:
            res = alltoall_load(fabric, ranks, size, nccl, model=model, seed=args.seed,
                                failed_links=failed)
        else:
            res = simulate_calls(fabric, [CollectiveCall(op, ranks, size)], nccl, model,
                                 seed=args.seed, failed_links=failed, with_links=False)[0]
        results.append({"size_bytes": size, "count": size // elem, "type": args.dtype,
                        "time_s": res.time_s, "algbw_GBps": res.algbw_GBps,
                        "busbw_GBps": res.busbw_GBps})
        rows.append([size, size // elem, args.dtype, res.time_s * 1e6, res.algbw_GBps,
                     res.busbw_GBps])
    doc = {"schema": "collective-bench/1", "fabric": fabric.name, "op": op,
           "ranks": res.ranks, "algo": res.algo, "proto": res.proto, "channels": nccl.channels,
           "qps_per_connection": nccl.qps_per_connection, "model": res.model, "results": results}
    if args.json:
        print_json(doc)
        return 0
    print(f"# {op} over {res.ranks} ranks on {fabric.name} ({res.algo}/{res.proto}, "
          f"{nccl.channels} channels, {nccl.qps_per_connection} QP/conn, model {res.model})")
    print(format_table(["size (B)", "count", "type", "time (us)", "algbw (GB/s)",
                        "busbw (GB/s)"], rows, floatfmt=".2f"))
    return 0
