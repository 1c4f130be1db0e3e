"""Issue 28: the htsim-matched settings of ``benchmarks/bench_htsim.py`` and its rendered table."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "benchmarks"


def _load(name: str):
    if str(BENCH) not in sys.path:  # the benchmark modules import each other by name
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def child():
    return _load("_htsim_child")


def test_matched_thresholds_are_htsims_comparisons(child):
    """htsim pauses at ``bytes > 15 x MTU`` and resumes at ``bytes < 12 x MTU`` on its ingress
    byte count; this engine pauses at ``bytes > xoff`` and resumes at ``bytes + offset <=
    xoff``. For every ingress content of data packets and ACKs the two must agree."""
    cfg = child.matched_config()
    mtu, data, ack = cfg.mtu_bytes, cfg.wire_bytes, cfg.ctrl_bytes
    assert (data, ack) == (mtu + 64, 64)  # RocePacket: payload + ACKSIZE; ACK = ACKSIZE
    high, low = child.HTSIM_PFC_HIGH_PKTS * mtu, child.HTSIM_PFC_LOW_PKTS * mtu
    for pkts in range(0, 20):
        for acks in range(0, 800):
            b = pkts * data + acks * ack
            assert (b > cfg.pfc_xoff_bytes) == (b > high)
            assert (b + cfg.pfc_xon_offset_bytes <= cfg.pfc_xoff_bytes) == (b < low), (pkts, acks)


def test_matched_config_is_lossless_without_ecn(child):
    cfg = child.matched_config()
    assert cfg.ack_every_packets == 1 and cfg.cc == "none" and cfg.pfc and not cfg.ecn
    assert cfg.buffer_bytes >= 2**40 and cfg.headroom_bytes >= 2**30
    assert cfg.pfc_response_quanta == 0 and cfg.pfc_deadlock_ps is None


def test_performance_md_table_is_the_rendered_csv():
    report = _load("_htsim_report")
    rows, meta = report.read_csv(report.CSV_DEFAULT)
    text = (ROOT / "docs" / "performance.md").read_text()
    section = text.split(report.BEGIN, 1)[1].split(report.END, 1)[0].strip()
    assert section == report.render(report.summarise(rows), meta)
    # every contender ran every size, all flows finished, and the -q 15 check held
    assert {r["contender"] for r in rows} == {"htsim -q 1000", "htsim -q 15", "engine matched",
                                              "engine default", "engine start-up"}
    sims = [r for r in rows if r["contender"] != "engine start-up"]
    assert all(r["flows_done"] == r["hosts"] for r in sims)
    assert all(r["q15_same"] in (True, "True") for r in rows if r["contender"] == "htsim -q 15")
    # the start-up rows carry CPU and memory only: no rate, no ratio to htsim's
    for s in report.summarise(rows):
        if s["contender"] == "engine start-up":
            assert s["rate_median"] is None and s["ratio_min"] is None and s["rss_ratio"] > 0


def test_startup_child_stops_before_simulating(child):
    row = child.run(4, 2_000_000, "startup", 0)
    assert row["data_pkts"] == row["events"] == row["flows_done"] == 0
    assert row["makespan_us"] is None and row["maxrss_mib"] > 0
