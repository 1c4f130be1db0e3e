"""Link-down ECMP repair (issue 17 item 6): switches drop a down member from their ECMP groups
after ``link_detect_ps`` and restore it on link-up; a QP survives when a live path exists."""

from __future__ import annotations

import pytest

from netsim.packet import PacketConfig, simulate_packets
from netsim.scenario.faults import LinkFlap
from netsim.scenario.traffic import Flow
from topologies import load_fabric
from topologies.routing import Router

MS = 10**9  # ps


def _flow_and_path():
    fab = load_fabric("fat-tree-k4")
    router = Router(fab, seed=0)
    src, dst = fab.nics[0], fab.nics[-1]  # different pods: 6 links, ECMP at ToR, agg and core
    return fab, router, Flow(src, dst, 2_000_000)


def _run(fab, router, flow, flap, **cfg):
    # ib_timeout 10: 4.2 ms timer, budget 8 x 4.2 ms = 34 ms, far shorter than the 1 s flap.
    config = PacketConfig(ib_timeout=10, retry_cnt=7, **cfg)
    return simulate_packets(fab, [flow], config, seed=0, router=router, flaps=[flap])


def _first_path(res):
    return res.flows[0].paths[0]


def test_qp_survives_a_fabric_link_down_when_a_live_path_exists():
    fab, router, flow = _flow_and_path()
    probe = simulate_packets(fab, [flow], PacketConfig(), seed=0, router=router)
    path = _first_path(probe)
    flap = LinkFlap(path[2], down_ps=20_000_000, duration_ps=1000 * MS)  # agg -> core, 1 s
    stuck = _run(fab, router, flow, flap, link_detect_ps=None)
    assert stuck.flows[0].failed  # without repair the QP exhausts its retries
    repaired = _run(fab, router, flow, flap)  # default detection delay (10 ms)
    f = repaired.flows[0]
    assert not f.failed and f.delivered_bytes == flow.size_bytes
    assert f.fct_ns < 50 * MS / 1000 * 1000  # well inside the flap
    assert f.timeouts >= 1  # it waited for detection, then retransmitted on the new path


def test_host_link_down_has_no_alternative():
    fab, router, flow = _flow_and_path()
    probe = simulate_packets(fab, [flow], PacketConfig(), seed=0, router=router)
    flap = LinkFlap(_first_path(probe)[0], down_ps=20_000_000, duration_ps=1000 * MS)
    res = _run(fab, router, flow, flap)
    assert res.flows[0].failed  # single-path hop: only the retry budget helps


@pytest.mark.parametrize("detect_ms", [1, 10])
def test_routes_return_after_link_up(detect_ms):
    fab, router, flow = _flow_and_path()
    probe = simulate_packets(fab, [flow], PacketConfig(), seed=0, router=router)
    path = _first_path(probe)
    big = Flow(flow.src, flow.dst, 200_000_000)  # long enough to outlive the flap
    flap = LinkFlap(path[2], down_ps=100_000, duration_ps=3 * detect_ms * MS)
    res = simulate_packets(fab, [big], PacketConfig(link_detect_ps=detect_ms * MS), seed=0,
                           router=router, flaps=[flap])
    assert not res.flows[0].failed
    tx = {p.link_id: p.tx_bytes for p in res.ports}
    # 100 us before the flap is 1.25 MB at 100G: most of the 200 MB crossed the original
    # member again after it came back (restore), the rest took another one meanwhile.
    assert tx[path[2]] > 0.5 * big.size_bytes
    # ACKs do not occupy ports (ctrl_per_hop off), so bytes off the path are the detour
    detour = [lid for lid, v in tx.items() if v > 0 and lid not in path]
    assert detour  # meanwhile other ECMP members carried the flow

