"""PFC headroom sizing check (issue 17 follow-up): a lossless class whose headroom is below what
802.1Qbb timing needs, or a switch whose buffer cannot hold its ports' headroom, is named in the
result's ``warnings`` (and by ``netsim simulate``), with the bytes it needs."""

from __future__ import annotations

import json

from netsim.packet.config import PacketConfig, headroom_bytes_for
from netsim.packet.digest import run_scenario
from netsim.packet.headroom import check_headroom, needed_headroom_bytes
from netsim.packet.testbeds import star
from tuner.cli import main

FRAME = PacketConfig().wire_bytes


def test_needed_headroom_is_802_1qbb_timing():
    # 400G, 1 us cable: 2 frames + 2 x 50,000 B on the cable + 905 quanta x 64 B (IEEE 802.3)
    assert needed_headroom_bytes(400 * 10**9, 1_000_000, PacketConfig()) == \
        2 * FRAME + 2 * 50_000 + 905 * 64
    # the peer response the run uses (pfc_response_quanta) enters the need
    slow = PacketConfig(pfc_response_quanta=2000)
    assert needed_headroom_bytes(400 * 10**9, 1_000_000, slow) == 2 * FRAME + 2 * 50_000 + 2000 * 64
    assert headroom_bytes_for(400 * 10**9, 1_000_000, FRAME) == 2 * FRAME + 2 * 50_000 + 905 * 64


def test_the_lossless_incast_that_drops_warns_and_the_asked_buffer_drops_nothing():
    res = run_scenario("incast-pfc-none")  # 12:1 at 400G, 1 MB buffer: 13 ingress ports on s0
    assert res.drops > 0 and res.drops_by_reason["buffer"] == res.drops
    (w,) = res.warnings
    per_port = needed_headroom_bytes(400 * 10**9, 1_000_000, PacketConfig())
    assert (w.kind, w.where, w.ports, w.needed_bytes) == ("buffer", "s0", 13, 13 * per_port)
    assert "s0" in w.message and f"{13 * per_port:,} B" in w.message
    fixed = run_scenario("incast-pfc-none", buffer_bytes=w.needed_bytes)
    assert fixed.drops == 0 and fixed.warnings == [] and fixed.timeouts == 0


def test_headroom_below_the_need_is_named_by_port_class():
    fab = star(3, host_gbps=100, latency_ns=1000)
    need = needed_headroom_bytes(100 * 10**9, 1_000_000, PacketConfig())
    warns = check_headroom(fab, PacketConfig(headroom_bytes=need - 1))
    (w,) = [w for w in warns if w.kind == "headroom"]
    assert (w.ports, w.have_bytes, w.needed_bytes) == (3, need - 1, need)
    assert w.where == "host ports at 100G with 1000 ns cables" and f"{need:,} B" in w.message
    assert check_headroom(fab, PacketConfig(headroom_bytes=need)) == []
    assert check_headroom(fab, PacketConfig()) == []  # default: the need itself, 32 MB buffer
    assert check_headroom(fab, PacketConfig(headroom_bytes=1, pfc=False)) == []  # lossy: none


def test_simulate_prints_the_warning_and_its_json_key(capsys):
    argv = ["simulate", "--level", "packet", "--fabric", "fat-tree-k4", "--traffic", "incast:3",
            "--size", "20KB", "--cc", "none", "--headroom", "20KB"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "warning (headroom)" in out and "46,072 B" in out and "host ports at 100G" in out
    assert main(argv + ["--json"]) == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    kinds = {(w["kind"], w["where"]) for w in doc["warnings"]}
    assert ("headroom", "host ports at 100G with 500 ns cables") in kinds
    assert all(w["needed_bytes"] == 46_072 for w in doc["warnings"])
    assert "warning: PFC headroom" in cap.err


def test_recommend_sizes_headroom_by_the_same_need():
    from tuner.render import headroom_bytes

    # 200 m of fibre at 5 ns/m = 1 us: the switch profile gets exactly what the check asks for
    assert headroom_bytes(400 * 10**9, 200.0) == needed_headroom_bytes(400 * 10**9, 1_000_000,
                                                                       PacketConfig())
    need = needed_headroom_bytes(400 * 10**9, 1_000_000, PacketConfig())
    assert check_headroom(star(2, host_gbps=400, latency_ns=1000),
                          PacketConfig(headroom_bytes=headroom_bytes(400 * 10**9, 200.0))) == []
    assert need == 166_276
