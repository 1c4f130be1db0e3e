"""``netsim simulate --level packet``: the packet engine's own flags and its run.

Shared flags (``--level --fabric --size --cc --seed --json``) live in ``tuner/cli/simulate.py``.
Example::

    netsim simulate --level packet --fabric fat-tree-k4 --traffic incast:8 --size 256KB \\
        --cc dcqcn --pfc on --json
"""

from __future__ import annotations

import argparse

import numpy as np

from tuner.cli._output import UsageError, format_table, print_json
from tuner.cli._settings import plan_for as settings_plan
from tuner.cli._settings import print_plan

DEFAULT_FABRIC = "fat-tree-k4"
DEFAULT_SIZE = "1MB"


def _add(parser, *names: str, **kw) -> None:
    """Add an option unless the other level already defined it (one meaning per name)."""
    container = getattr(parser, "_container", parser)
    if any(n in container._option_string_actions for n in names):
        return
    parser.add_argument(*names, **kw)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of the packet level."""
    g = p.add_argument_group("packet level (--level packet)")
    _add(g, "--traffic", default=None,
         help="incast:N | incast | permutation | alltoall | FILE (.json/.yaml flows); "
              "default permutation")
    _add(g, "--pfc", choices=["on", "off"], default=None, help="PFC on the RoCE class (default on)")
    _add(g, "--flap", action="append", default=[], metavar="LINK@T+D",
         help="link flap: LINK (directed link id, U->V such as tor0->agg2, or first-hop) "
              "down at T for D, e.g. first-hop@100us+2ms (repeatable)")
    _add(g, "--ib-timeout", type=int, default=None,
         help="verbs timeout / NCCL_IB_TIMEOUT: retransmit timer 4.096 us x 2^N (default 20)")
    _add(g, "--retry-cnt", type=int, default=None, help="NCCL_IB_RETRY_CNT, 0..7 (default 7)")
    _add(g, "--adaptive-retrans", action="store_true",
         help="NIC adaptive retransmission (adap_retrans): short early retries, same budget")
    _add(g, "--mtu", type=int, default=4096, help="RoCE MTU in bytes (payload per packet)")
    _add(g, "--qps", type=int, default=None,
         help="QPs per flow, NCCL_IB_QPS_PER_CONNECTION (default 1)")
    _add(g, "--ack-every", type=int, default=4, help="ACK coalescing: packets per ACK (default 4)")
    _add(g, "--buffer", default="32MB", help="shared buffer per switch (default 32MB)")
    _add(g, "--headroom", default=None, metavar="BYTES",
         help="PFC headroom per lossless ingress queue (default: what 802.1Qbb timing needs, "
              "2 x frame + 2 x cable bytes + peer response, per port)")
    _add(g, "--ecn-kmin", default=None, help="ECN Kmin on the RoCE egress queue (default 150KB)")
    _add(g, "--ecn-kmax", default=None, help="ECN Kmax (default 1500KB)")
    _add(g, "--max-time", default="10s", help="stop the simulated clock here (default 10s)")
    _add(g, "--cc-param", action="append", default=[], metavar="KEY=VALUE",
         help="congestion-control parameter, repeatable: a netsim.cc field name "
              "(rpg_time_reset_us=50) or the ConnectX firmware name nic_dcqcn.conf writes "
              "(rpg_time_reset=50; table netsim.cc.params.FIRMWARE_PARAMS)")
    _add(g, "--ecn-mark-at", choices=["dequeue", "enqueue"], default="dequeue",
         help="where switches mark ECN (default dequeue, as HPCC ns-3)")
    _add(g, "--ack-class", choices=["qp", "priority"], default="qp",
         help="ACK/NAK in the QP's traffic class (default, ConnectX) or strict priority")
    _add(g, "--pfc-pause-quanta", type=int, default=65535,
         help="pause time a PAUSE frame carries, in quanta of 512 bit times (default 65535)")
    _add(g, "--pfc-response-quanta", type=int, default=None,
         help="peer response delay in quanta (default: IEEE 802.3 value per port speed)")
    _add(g, "--pfc-watchdog", default=None, metavar="TIME",
         help="PFC watchdog: a port paused this long with data queued ignores PAUSE (off)")
    _add(g, "--link-detect", default="10ms", metavar="TIME",
         help="link-down detection before ECMP repair (default 10ms; 'off' = never)")
    _add(g, "--plot", default=None, metavar="DIR",
         help="write queue / per-flow rate time series (CSV and PNG) into DIR")


def _flows(args, fabric, size: int, rng):
    from netsim.scenario import traffic

    spec = args.traffic or "permutation"
    qps = args.qps or 1
    if spec == "permutation":
        return traffic.permutation(fabric, size, rng, qps=qps)
    if spec == "alltoall":
        return traffic.alltoall(fabric, size, rng, qps=qps)
    if spec == "incast" or spec.startswith("incast:"):
        n_txt = spec.partition(":")[2] or str(min(8, len(fabric.nics) - 1))
        try:
            n = int(n_txt)
        except ValueError:
            raise UsageError(f"--traffic {spec!r}: N of incast:N must be an integer") from None
        return traffic.incast(fabric, n, size, rng, qps=qps)
    if spec.endswith((".json", ".yaml", ".yml")):
        return traffic.load_flows(spec)
    raise UsageError(f"--traffic {spec!r}: use incast:N, permutation, alltoall or a .json/.yaml file")


def cc_params_from_args(args) -> dict:
    """``--cc-param`` pairs, firmware names (``rpg_time_reset``) renamed to engine fields."""
    from netsim.cc.params import PARAMS_BY_CC, engine_names, parse_cc_params

    cls = PARAMS_BY_CC.get(args.cc or "dcqcn")
    fields = cls.__dataclass_fields__ if cls is not None else ()
    return engine_names(parse_cc_params(args.cc_param or ()), fields)


def config_from_args(args, settings_knobs=None):
    """A :class:`PacketConfig` from the CLI flags (unset flags: the defaults in their help),
    with ``settings_knobs`` of ``--settings`` (``cc_params`` fields and ``ecn_pmax``) under them."""
    from netsim.packet import PacketConfig
    from topologies.units import parse_bytes, parse_duration_ps

    knobs = settings_knobs or {}
    cc_params = {**knobs.get("cc_params", {}), **cc_params_from_args(args)}
    return PacketConfig(
        mtu_bytes=args.mtu, cc=args.cc or "dcqcn", cc_params=cc_params,
        pfc=(args.pfc or "on") == "on", ib_timeout=_or(args.ib_timeout, 20),
        retry_cnt=_or(args.retry_cnt, 7),
        adaptive_retrans=args.adaptive_retrans, ack_every_packets=args.ack_every,
        buffer_bytes=parse_bytes(args.buffer),
        ecn_kmin_bytes=parse_bytes(_or(args.ecn_kmin, "150KB")),
        headroom_bytes=(None if getattr(args, "headroom", None) is None
                        else parse_bytes(args.headroom)),
        ecn_kmax_bytes=parse_bytes(_or(args.ecn_kmax, "1500KB")),
        ecn_pmax=knobs.get("ecn_pmax", PacketConfig.ecn_pmax),
        max_time_ps=parse_duration_ps(args.max_time),
        ecn_mark_at=getattr(args, "ecn_mark_at", "dequeue"),
        ack_class=getattr(args, "ack_class", "qp"),
        pfc_pause_quanta=getattr(args, "pfc_pause_quanta", 65535),
        pfc_response_quanta=getattr(args, "pfc_response_quanta", None),
        pfc_watchdog_ps=_duration_or_none(getattr(args, "pfc_watchdog", None)),
        link_detect_ps=_duration_or_none(getattr(args, "link_detect", "10ms")))


def _or(value, default):
    """A flag's value, or its default when it was not given."""
    return default if value is None else value


def _duration_or_none(text):
    """A duration flag, or None for absent / 'off'."""
    from topologies.units import parse_duration_ps

    if text is None or str(text).strip().lower() in ("off", "none"):
        return None
    return parse_duration_ps(text)


def run(args: argparse.Namespace) -> int:
    from netsim.packet import simulate_packets
    from netsim.packet.build import check_packet_size
    from netsim.packet.build_mode import engine_build
    from netsim.packet.plots import write_series
    from netsim.scenario.faults import parse_flap
    from topologies import load_fabric
    from topologies.files import resolve_spec
    from topologies.routing import Router
    from topologies.units import parse_bytes

    name = args.fabric or DEFAULT_FABRIC
    check_packet_size(resolve_spec(name), f"--fabric {name}")
    fabric = load_fabric(name)
    size = parse_bytes(args.size or DEFAULT_SIZE)
    rng = np.random.default_rng(args.seed)
    plan = settings_plan(args, "packet", set(cc_params_from_args(args)))
    flows = _flows(args, fabric, size, rng)
    config = config_from_args(args, plan.knobs if plan else None)
    router = Router(fabric, seed=args.seed)
    first_hop = None
    if flows:
        from netsim.packet.build import _endpoint_nic, _udp_sport

        src = _endpoint_nic(fabric, flows[0].src)
        path = router.path(src, _endpoint_nic(fabric, flows[0].dst), _udp_sport(0x100))
        first_hop = int(path[0])
    flaps = [parse_flap(f, fabric, first_hop=first_hop) for f in args.flap]
    res = simulate_packets(fabric, flows, config, seed=args.seed, router=router, flaps=flaps)
    doc = res.to_json()
    doc["fabric"] = fabric.name
    import sys

    if args.json:  # lossless-class sizing (netsim.packet.headroom); the table prints them too
        for w in res.warnings:
            print(f"warning: {w.message}", file=sys.stderr)
    doc["engine_build"] = engine_build()  # "compiled" (Cython) or "python"
    warning = res.stuck_warning()
    if warning:
        print(warning, file=sys.stderr)
    if args.plot:
        doc["plots"] = [str(p) for p in write_series(res, args.plot)]
    if plan:
        doc["settings_applied"] = plan.to_json(args.settings)
    if args.json:
        print_json(doc)
    else:
        _print_table(res, fabric.name, doc.get("plots"))
        if plan:
            print_plan(plan, args.settings)
    return 0


def _print_table(res, fabric_name: str, plots) -> None:
    from netsim.packet.build_mode import engine_build

    rows = []
    for i, f in enumerate(res.flows[:20]):
        rows.append([f"{i}: {f.src}->{f.dst}", f.bytes,
                     "-" if f.fct_ns is None else round(f.fct_ns / 1000, 3),
                     "-" if f.throughput_gbps is None else round(f.throughput_gbps, 2),
                     f.retransmits, f.timeouts, "FAILED" if f.failed else "ok"])
    print(format_table(["flow", "bytes", "fct_us", "gbps", "retx", "timeouts", "status"], rows))
    if len(res.flows) > 20:
        print(f"... {len(res.flows) - 20} more flows (use --json)")
    print()
    done = [f.fct_ns for f in res.flows if f.fct_ns is not None]
    summary = [
        ["fabric", fabric_name], ["cc / pfc", f"{res.cc} / {'on' if res.pfc else 'off'}"],
        ["flows done / failed", f"{len(done)} / {sum(f.failed for f in res.flows)}"],
        ["stuck", res.stuck],
        ["max fct (us)", f"{max(done) / 1000:.3f}" if done else "-"],
        ["drops", res.drops], ["pfc pauses", res.pfc_pauses], ["ecn marks", res.ecn_marks],
        ["cnps", res.cnps], ["timeouts", res.timeouts], ["hol victims", len(res.hol_victims)],
        ["deadlocks", len(res.deadlocks)], ["sim time (us)", f"{res.sim_time_ns / 1000:.3f}"],
        ["data packets / wall s", f"{res.data_packets / max(res.wall_s, 1e-9):,.0f}"],
        ["engine build", engine_build()],
    ]
    print(format_table(["metric", "value"], summary))
    for w in res.warnings:
        print(f"warning ({w.kind}): {w.message}")
    if plots:
        print("plots: " + ", ".join(plots))
