"""A fingerprint of everything a packet simulation reports, and the scenarios that check the
engine's speed shortcuts against its plain path ("no result may depend on a speed setting").

:func:`result_digest` hashes every flow's FCT, completion, retransmissions and delivered bytes,
the drop / pause / ECN / CNP / NACK / timeout counters, every port's counters and the sampled
queue and progress series. Two runs with the same digest reported the same thing. The event
count is left out (the shortcuts exist to change it).

:data:`SCENARIOS` are small runs that exercise PFC (pauses, refresh, headroom), ECN marking at
dequeue and enqueue, DCQCN (CNPs in their own class or queued with the data), Swift, hybrid, drops and go-back-N retransmission on a lossy
fabric, link flaps with ECMP repair, per-hop control packets and ACKs in a strict-priority
class. ``python -m netsim.packet.digest [--fast-path-off]`` prints one digest per scenario.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys

import numpy as np

from netsim.packet.build import simulate_packets
from netsim.packet.config import PacketConfig
from netsim.packet.testbeds import ShortestPathRouter, star
from netsim.scenario.faults import LinkFlap
from netsim.scenario.traffic import Flow, permutation
from topologies import FatTreeSpec, fat_tree

_BUF = 1_000_000  # a small shared buffer: PFC acts (XOFF near 125 KB per ingress)


def result_digest(res, qmax: bool = True) -> str:
    """SHA-256 of the reported results of *res* (a PacketResult), events excluded.

    ``qmax=False`` leaves out the ports' ``max_queue_bytes`` (to compare with revisions before
    the idle-port fast path recorded it, up to bbc916d)."""
    doc = res.to_json(ports=True)
    doc.pop("events", None)
    doc.pop("wall_s", None)
    if not qmax:
        for p in doc.get("ports", []):
            p.pop("max_queue_bytes", None)
    doc["series"] = [np.asarray(res.time_ns).tolist(), np.asarray(res.queue_bytes).tolist(),
                     np.asarray(res.flow_delivered_bytes).tolist()]
    blob = json.dumps(doc, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _incast(n=12, size=800_000):
    fab = star(n + 1, host_gbps=400, latency_ns=1000)
    return fab, [Flow(f"h{i + 1}", "h0", size) for i in range(n)], ShortestPathRouter(fab)


def _fat_tree(size=1_000_000, seed=3):
    fab = fat_tree(FatTreeSpec(k=4, link_speed_gbps=100, link_latency_ns=500))
    return fab, permutation(fab, size, np.random.default_rng(seed)), None


def _mixed():
    """An incast plus a permutation on a k=4 fat tree: congestion at the edge and in the core."""
    fab, flows, _ = _fat_tree(600_000)
    hot = fab.nics[0]
    flows = flows + [Flow(n, hot, 400_000) for n in fab.nics[5:13]]
    return fab, flows, None


def _k8():
    fab = fat_tree(FatTreeSpec(k=8, link_speed_gbps=400, link_latency_ns=1000))
    return fab, permutation(fab, 300_000, np.random.default_rng(2)), None


def _flap_case():
    fab, flows, _ = _fat_tree(400_000, seed=5)
    probe = simulate_packets(fab, flows[:1], PacketConfig(), seed=1)
    path = probe.flows[0].paths[0]
    return fab, flows, [LinkFlap(path[2], down_ps=3_000_000, duration_ps=40_000_000)]


#: name -> (fabric/flows/router builder, PacketConfig fields, flaps?)
SCENARIOS = {
    "incast-pfc-none": (_incast, {"buffer_bytes": _BUF}),
    "incast-pfc-dcqcn": (_incast, {"cc": "dcqcn", "buffer_bytes": _BUF}),
    "incast-dcqcn-enqueue-ecn": (_incast, {"cc": "dcqcn", "ecn_mark_at": "enqueue",
                                           "buffer_bytes": _BUF}),
    "incast-swift": (_incast, {"cc": "swift", "buffer_bytes": _BUF}),
    "incast-hybrid-perhop": (_incast, {"cc": "hybrid", "ctrl_per_hop": True,
                                       "buffer_bytes": _BUF}),
    "incast-static-xoff-refresh": (_incast, {"pfc_xoff_bytes": 60_000, "pfc_pause_quanta": 1000,
                                             "buffer_bytes": _BUF}),
    "incast-lossy-retransmit": (_incast, {"pfc": False, "buffer_bytes": 400_000,
                                          "ib_timeout": 8}),
    "incast-lossy-adaptive": (_incast, {"pfc": False, "buffer_bytes": 400_000,
                                        "adaptive_retrans": True, "ib_timeout": 8}),
    "fattree-dcqcn": (_fat_tree, {"cc": "dcqcn", "buffer_bytes": 2 * _BUF}),
    "fattree-priority-acks": (_fat_tree, {"cc": "dcqcn", "ack_class": "priority",
                                          "buffer_bytes": _BUF}),
    "mixed-dcqcn-pfc": (_mixed, {"cc": "dcqcn", "buffer_bytes": _BUF}),
    "mixed-dcqcn-cnp-in-qp-class": (_mixed, {"cc": "dcqcn", "cnp_class": "qp",
                                             "buffer_bytes": _BUF}),
    "mixed-swift-watchdog": (_mixed, {"cc": "swift", "buffer_bytes": _BUF,
                                      "pfc_watchdog_ps": 10_000_000}),
    "k8-perm-dcqcn": (_k8, {"cc": "dcqcn"}),
    "k8-perm-none-smallbuf": (_k8, {"cc": "none", "buffer_bytes": 480_000}),
    "flap-repair-dcqcn": (_flap_case, {"cc": "dcqcn", "ib_timeout": 10,
                                       "link_detect_ps": 5_000_000}),
}


def run_scenario(name: str, seed: int = 1, **overrides):
    """The PacketResult of scenario *name* with config *overrides* (e.g. ``fast_path=False``)."""
    build, fields = SCENARIOS[name]
    built = build()
    if name.startswith("flap"):
        fab, flows, flaps = built
        router = None
    else:
        (fab, flows, router), flaps = built, ()
    cfg = PacketConfig(**{**fields, **overrides})
    return simulate_packets(fab, flows, cfg, seed=seed, router=router, flaps=flaps)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="digest of every shortcut-check scenario")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="PacketConfig override (python literal), e.g. fast_path=False")
    ap.add_argument("--only", default=None, help="comma-separated scenario names")
    ap.add_argument("--no-qmax", action="store_true",
                    help="leave the ports' max_queue_bytes out of the digest")
    args = ap.parse_args(argv)
    import ast

    overrides = {}
    for kv in args.set:
        k, v = kv.split("=", 1)
        overrides[k] = ast.literal_eval(v)
    names = args.only.split(",") if args.only else list(SCENARIOS)
    for name in names:
        res = run_scenario(name, **overrides)
        print(f"{name:28s} {result_digest(res, qmax=not args.no_qmax)} events={res.events} "
              f"pauses={res.pfc_pauses} marks={res.ecn_marks} drops={res.drops} "
              f"timeouts={res.timeouts} stuck={res.stuck} {res.pfc_counters}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
