"""``netsim simulate --level flow``: the flow-level engine's own flags and its run.

Two modes: ``--collective OP`` simulates one NCCL-style collective (nccl-tests' time, algbw,
busbw, the hottest links and ECMP collision statistics); without it, a traffic pattern
(``--traffic permutation|incast|alltoall`` or ``--flows FILE``) runs through
``netsim.flow.simulate_flows``. Shared flags (``--fabric --size --cc --seed --json``) come from
``tuner/cli/simulate.py``.
"""

from __future__ import annotations

import argparse

import numpy as np

from inputspec import is_decimal
from tuner.cli._output import UsageError, format_table, print_json
from tuner.cli._settings import plan_for as settings_plan
from tuner.cli._settings import print_plan

DEFAULT_FABRIC = "megascale"


def _add(parser: argparse.ArgumentParser, *names: str, **kw) -> None:
    """Add an option unless another level already defined it (shared names keep one meaning)."""
    if any(n in parser._option_string_actions for n in names):
        return
    parser.add_argument(*names, **kw)


def add_nccl_arguments(p: argparse.ArgumentParser) -> None:
    """NCCL knobs shared with ``netsim collective-bench``."""
    _add(p, "--ranks", default=None,
         help="ranks of the collective: a count N (the first N GPUs) or a comma list of GPU "
              "names/positions (default: every GPU)")
    _add(p, "--channels", type=int, default=None, help="NCCL channels (default 16)")
    _add(p, "--qps", type=int, default=None,
         help="QPs per connection, NCCL_IB_QPS_PER_CONNECTION (default 1)")
    _add(p, "--algo", default=None, choices=["ring", "tree", "hierarchical"],
         help="all-reduce algorithm (default ring)")
    _add(p, "--proto", default=None, choices=["simple", "ll128", "ll"],
         help="NCCL protocol: per-step latency and payload efficiency (default simple)")
    _add(p, "--no-pxn", action="store_true", help="disable PXN rail-aligned sends")
    _add(p, "--flow-model", default=None, choices=["maxmin", "dcqcn", "pfc"],
         help="bandwidth sharing model (default: from --cc: none -> maxmin, dcqcn -> dcqcn); "
              "pfc = per-ingress-port sharing with head-of-line blocking, as a lossless fabric "
              "without end-to-end CC shares (traffic and flow files only; slower)")
    _add(p, "--alltoall-mode", default="auto", choices=["auto", "exact", "load"],
         help="all-to-all engine: exact flow run, or load mode (QPs routed in bulk, time from "
              "the busiest link; docs/flow-engine.md); auto = load above 2,048 ranks")
    _add(p, "--fail-links", default=None,
         help="comma list of network links that are down, by id or name (tor0->agg2; "
              "either direction names the cable); flows re-hash onto survivors")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of the flow level (``netsim simulate --level flow``)."""
    group = p.add_argument_group("flow level (--level flow)")
    _add(group, "--collective", default=None,
         help="simulate a collective: allreduce, allgather, reducescatter, broadcast, "
              "alltoall, sendrecv")
    _add(group, "--traffic", default=None, choices=["permutation", "incast", "alltoall"],
         help="without --collective: traffic pattern between NICs (default permutation)")
    _add(group, "--flows", default=None, help="without --collective: a .json/.yaml flow file")
    _add(group, "--incast-senders", type=int, default=8, help="senders of --traffic incast")
    _add(group, "--top", type=int, default=5, help="hottest links to print")
    add_nccl_arguments(group)


def nccl_from_args(args: argparse.Namespace):
    """NcclConfig from the CLI flags (unset flags keep NCCL's defaults)."""
    from netsim.collectives.nccl import NcclConfig

    kw = {}
    if getattr(args, "channels", None) is not None:
        kw["channels"] = args.channels
    if getattr(args, "qps", None) is not None:
        kw["qps_per_connection"] = args.qps
    if getattr(args, "algo", None):
        kw["algo"] = args.algo
    if getattr(args, "proto", None):
        kw["proto"] = args.proto
    if getattr(args, "no_pxn", False):
        kw["pxn"] = False
    return NcclConfig(**kw)


def model_from_args(args: argparse.Namespace) -> str:
    """Sharing model: --flow-model, else from --cc."""
    if getattr(args, "flow_model", None):
        return args.flow_model
    cc = getattr(args, "cc", None) or "none"
    if cc == "none":
        return "maxmin"
    if cc == "dcqcn":
        return "dcqcn"
    raise UsageError(f"--cc {cc} has no flow-level model: use --cc none or --cc dcqcn "
                     "(or --level packet)")


def ranks_from_args(text, fabric):
    """--ranks: None (all GPUs), a count, or a comma list of GPU names or positions."""
    if text is None:
        return len(fabric.gpus)
    text = str(text).strip()
    if is_decimal(text):
        return int(text)
    items = [t.strip() for t in text.split(",") if t.strip()]
    if all(is_decimal(t) for t in items):
        return [int(t) for t in items]
    return items


def failed_from_args(text, fabric=None) -> tuple[int, ...]:
    """``--fail-links``: ids or names (``tor0->agg2``) of network links, comma separated."""
    if not text:
        return ()
    if fabric is not None:
        from topologies.links import parse_failed_links

        return parse_failed_links(fabric, text)
    try:
        return tuple(int(t) for t in str(text).split(",") if t.strip())
    except ValueError:
        raise UsageError(f"--fail-links {text!r}: give comma-separated link ids") from None


def run(args: argparse.Namespace) -> int:
    from topologies import load_fabric
    from topologies.units import parse_bytes

    fabric = load_fabric(args.fabric or DEFAULT_FABRIC)
    model = model_from_args(args)
    failed = failed_from_args(getattr(args, "fail_links", None), fabric)
    plan = settings_plan(args, "flow")  # fills --qps from nccl.env unless given
    if getattr(args, "collective", None):
        doc = _run_collective(args, fabric, model, failed, parse_bytes(args.size or "1GiB"))
    else:
        doc = _run_traffic(args, fabric, model, failed, parse_bytes(args.size or "2MB"))
    if plan:
        doc["settings_applied"] = plan.to_json(args.settings)
    if args.json:
        print_json(doc)
    elif plan:
        print_plan(plan, args.settings)
    return 0


LOAD_MODE_ABOVE_RANKS = 2048  # exact and load mode agree there (tests/netsim/collectives)


def _run_collective(args, fabric, model, failed, size) -> dict:
    from netsim.collectives import alltoall_load, run_collective

    if model == "pfc":
        raise UsageError("--flow-model pfc needs per-QP paths: use it with --traffic or "
                         "--flows, not --collective")
    ranks = ranks_from_args(args.ranks, fabric)
    n = ranks if isinstance(ranks, int) else len(ranks)
    mode = getattr(args, "alltoall_mode", "auto")
    engine = "exact"
    if args.collective == "alltoall" and (
            mode == "load" or (mode == "auto" and n > LOAD_MODE_ABOVE_RANKS)):
        engine = "load"
        res = alltoall_load(fabric, ranks, size, nccl_from_args(args), model=model,
                            seed=args.seed, failed_links=failed)
    else:
        res = run_collective(fabric, args.collective, ranks, size, nccl_from_args(args),
                             model=model, seed=args.seed, failed_links=failed)
    doc = {"fabric": fabric.name, "engine": engine, **res.to_json()}
    doc["hottest_links"] = doc.get("hottest_links", [])[: args.top]
    if args.json:
        return doc
    print(f"{res.op} ({res.algo}/{res.proto}) of {size} B over {res.ranks} ranks on "
          f"{res.servers} servers of {fabric.name}, model {res.model}")
    print(format_table(["time_s", "algbw_GBps", "busbw_GBps", "channels", "qps/conn", "QPs"],
                       [[res.time_s, res.algbw_GBps, res.busbw_GBps, res.channels,
                         res.qps_per_connection, res.qps]], floatfmt=".6g"))
    _print_links(doc)
    return doc


def _run_traffic(args, fabric, model, failed, size) -> dict:
    from netsim.flow import simulate_flows
    from netsim.scenario import traffic

    rng = np.random.default_rng(args.seed)
    qps = getattr(args, "qps", None) or 1
    if getattr(args, "flows", None):
        flows = traffic.load_flows(args.flows)
    elif (args.traffic or "permutation") == "permutation":
        flows = traffic.permutation(fabric, size, rng, qps=qps)
    elif args.traffic == "incast":
        flows = traffic.incast(fabric, args.incast_senders, size, rng, qps=qps)
    else:
        flows = traffic.alltoall(fabric, size, rng, qps=qps)
    res = simulate_flows(fabric, flows, model=model, seed=args.seed, failed_links=failed)
    doc = {"fabric": fabric.name, **res.to_json()}
    doc["hottest_links"] = doc["hottest_links"][: args.top]
    if args.json:
        return doc
    print(f"{doc['flows']} flows ({doc['qps']} QPs) on {fabric.name}, model {res.model}")
    print(format_table(["makespan_s", "mean_Gbps", "min_Gbps", "events"],
                       [[doc["makespan_s"], doc["mean_throughput_Gbps"],
                         doc["min_throughput_Gbps"], doc["events"]]], floatfmt=".6g"))
    _print_links(doc)
    return doc


def _print_links(doc: dict) -> None:
    e = doc.get("ecmp", {})
    if e:
        print(f"ECMP: {e['fabric_links_used']} fabric links used, max {e['max_qps_per_link']} QPs "
              f"on one, {100 * e['colliding_qp_fraction']:.1f}% of QPs collide, "
              f"max/mean load {e['max_over_mean_load']:.2f}")
    if doc.get("hottest_links"):
        print(format_table(["hottest link", "kind", "utilization", "QPs"],
                           [[f"{h['src']} -> {h['dst']}", h["kind"], h["utilization"], h["qps"]]
                            for h in doc["hottest_links"]]))
