"""The algorithms inside the packet engine: a 16:1 incast and a shared trunk (integration).

Relations that follow from each algorithm's design, checked against the engine's counters:
window algorithms bound the incast queue by their windows, the hybrid's tighter delay target
gives a shorter queue and fewer ECN marks than Swift's, and PFC is needed only without CC.
"""

from __future__ import annotations

import math

import pytest

from netsim.cc.base import CC_NAMES
from netsim.validation.study import packet_rows

packet = pytest.importorskip("netsim.packet")


@pytest.fixture(scope="module")
def rows():
    return {(r["case"], r["cc"]): r for r in packet_rows()}


def test_every_run_completes(rows):
    assert all(r["completed"] and r["timeouts"] == 0 for r in rows.values())


def test_window_algorithms_finish_the_incast_at_line_rate(rows):
    cfg = packet.PacketConfig()
    pkts = math.ceil(2_000_000 / cfg.mtu_bytes)
    wire = 2_000_000 + pkts * (cfg.wire_bytes - cfg.mtu_bytes)  # payload + per-packet overhead
    ideal_us = 16 * wire * 8 / 400e9 * 1e6  # the bottleneck is busy throughout
    for cc in ("swift", "hybrid"):
        assert rows[("incast", cc)]["fct_max_us"] <= 1.03 * ideal_us + 10  # + path latency
        assert rows[("incast", cc)]["fct_max_us"] >= ideal_us


def test_cc_changes_queues_pauses_and_marks(rows):
    none, dcqcn = rows[("incast", "none")], rows[("incast", "dcqcn")]
    swift, hybrid = rows[("incast", "swift")], rows[("incast", "hybrid")]
    assert none["pfc_pauses"] > 0 and none["cnps"] == 0
    # windows bound what can queue: far below line-rate senders held back only by PFC
    assert max(swift["queue_max_KB"], hybrid["queue_max_KB"]) < 0.25 * none["queue_max_KB"]
    assert swift["pfc_pauses"] < none["pfc_pauses"] and hybrid["pfc_pauses"] < none["pfc_pauses"]
    assert dcqcn["cnps"] > 0 and dcqcn["pfc_pauses"] < none["pfc_pauses"]
    assert dcqcn["queue_mean_KB"] < none["queue_mean_KB"]
    # shared trunk: the hybrid's target (2 us) sits below Swift's (5 us) and below ECN Kmin
    sw, hy = rows[("dumbbell", "swift")], rows[("dumbbell", "hybrid")]
    assert hy["queue_mean_KB"] < 0.7 * sw["queue_mean_KB"]
    assert hy["ecn_marks"] < 0.5 * sw["ecn_marks"]
    fcts = {cc: rows[("incast", cc)]["fct_mean_us"] for cc in CC_NAMES}
    assert len({round(v) for v in fcts.values()}) == len(CC_NAMES)  # four different outcomes
