"""DCQCN against the HPCC ns-3 simulator (tests/data/hpcc-ns3): data, mapping, comparison.

The default run checks the stored reference, the parameter mapping and one small scenario;
the slow test runs every long-flow scenario and asserts the issue's targets (per-flow FCT
within 10%, aggregate throughput within 5%, queue median and p99 within 25%). The scenarios
listed in :data:`REFERENCE_ARTEFACT` differ because of the reference's model, with the
evidence in docs/validation.md; for them the same targets are asserted with the reference's
pacing emulated (``emulate_ns3_pacing``), which shows the rest of the model agrees, and
against the reference re-paced (``results-repaced.json.gz``). Our side of the long-flow
comparison is the median of engine seeds 1-3 (``ENGINE_SEEDS``).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from netsim.validation import reference as ref

# the stored reference runs live beside this test, not in the installed package
ref.DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "hpcc-ns3"

UPSTREAM = "9f4be2a9ead8a90e8bf732c66bd758c00e58e5be"


@pytest.fixture(scope="module")
def refs() -> dict:
    return ref.load_reference()


def test_reference_data_is_complete(refs) -> None:
    assert sorted(refs) == sorted(s.name for s in ref.all_scenarios())
    for name, recs in refs.items():
        sc = ref.RefScenario.from_name(name)
        assert [r["rng_run"] for r in recs] == (list(ref.NS3_RUNS) if sc.long else [1]), name
        topo = ref.topology(sc.shape)
        for rec in recs:
            got = {(f["src"], f["dst"]) for f in rec["flows"]}
            assert got == set(topo.flows), name  # every flow finished inside the run
            assert all(f["bytes"] == sc.flow_bytes and f["fct_ns"] > 0 for f in rec["flows"])
            m = ref.ns3_metrics(sc, rec)
            line = sc.rate_gbps * len({d for _, d in topo.flows})  # receivers' line rate
            assert 0 < m.aggregate_gbps <= line * 1.001, name
            assert m.queue_p50_bytes <= m.queue_p99_bytes


def test_band_distance() -> None:
    assert ref._band_err(5.0, [4.0, 6.0]) == 0.0
    assert ref._band_err(3.0, [4.0, 6.0]) == pytest.approx(-0.25)
    assert ref._band_err(7.2, [4.0, 6.0]) == pytest.approx(0.2)
    assert ref._band_err(1.0, [2.0, 3.0], floor=10.0) == pytest.approx(-0.1)


def test_upstream_commit_recorded() -> None:
    import gzip
    import json

    doc = json.loads(gzip.decompress((ref.DATA_DIR / "results.json.gz").read_bytes()))
    assert doc["upstream_commit"] == UPSTREAM
    assert UPSTREAM in (ref.DATA_DIR / "README.md").read_text()


def test_committed_inputs_are_what_the_module_writes(tmp_path) -> None:
    for sc in ref.all_scenarios():
        ref.ns3_inputs(sc, tmp_path / sc.name)
        for f in ("config.txt", "topology.txt", "flow.txt", "trace.txt"):
            assert (tmp_path / sc.name / f).read_text() == \
                (ref.DATA_DIR / "inputs" / sc.name / f).read_text(), (sc.name, f)


@pytest.mark.parametrize("name", ["incast8-400g-long-nic-default", "perm16-100g-short-paper"])
def test_ns3_names_map_to_our_parameters(name) -> None:
    from netsim.cc.params import DcqcnParams

    sc = ref.RefScenario.from_name(name)
    ns3 = ref.ns3_params(sc)
    p = DcqcnParams.from_dict(ref.dcqcn_params_for(sc))
    assert p.g == pytest.approx(float(ns3["EWMA_GAIN"]))
    assert p.rpg_time_reset_us == float(ns3["RP_TIMER"])
    assert p.dce_tcp_rtt_us == float(ns3["ALPHA_RESUME_INTERVAL"])
    assert p.rate_reduce_monitor_period_us == float(ns3["RATE_DECREASE_INTERVAL"])
    assert p.rpg_threshold == int(ns3["FAST_RECOVERY_TIMES"])
    assert p.rpg_ai_rate_mbps == ref._rate_mbps(ns3["RATE_AI"])
    assert p.rpg_hai_rate_mbps == ref._rate_mbps(ns3["RATE_HAI"])
    assert p.rpg_min_rate_mbps == ref._rate_mbps(ns3["MIN_RATE"])
    assert p.byte_reset_bytes == 0  # the reference has no byte counter
    kmin, kmax, pmax = ref.ecn_for(sc)
    assert (kmin, kmax) == (int(ns3["KMIN_MAP"].split()[2]) * 1000, int(ns3["KMAX_MAP"].split()[2]) * 1000)


def test_median_of_engine_seeds() -> None:
    sc = ref.RefScenario.from_name("incast2-400g-long-nic-default")
    runs = [ref.RefMetrics([3.0, 1.0], 297.0, "s0->h0", 3e3, 5e5, 0),
            ref.RefMetrics([2.0, 2.5], 362.0, "s0->h0", 9e3, 2e5, 2),
            ref.RefMetrics([1.5, 2.2], 363.0, "s1->h0", 6e3, 3e5, 1)]
    m = ref.median_metrics(sc, runs)
    assert m.fct_ns == [1.5, 2.5]  # exchangeable flows: sorted, then element-wise
    assert (m.aggregate_gbps, m.queue_p50_bytes, m.queue_p99_bytes, m.pauses) == (362.0, 6e3, 3e5, 1)
    assert m.hot_port == "s0->h0" and len(m.extra["runs"]) == 3
    assert ref.median_metrics(sc, runs[:1]) is runs[0]


def test_one_small_scenario_meets_the_targets(refs) -> None:
    # The long scenarios are compared with a band of four ns-3 runs; this short one has a single
    # ns-3 run, so our side is the median-throughput run of three engine seeds (one seed's
    # arbitration and ECN draws move the aggregate by +-3%).
    runs = sorted((ref.compare_scenario("incast2-100g-short-paper", refs, seed=s)
                   for s in (1, 2, 3)), key=lambda c: c.ours.aggregate_gbps)
    c = runs[1]
    print(ref.markdown_table(runs))
    assert c.ours.hot_port == c.ref.hot_port == "s0->h0"
    assert all(c.within_targets.values()), c.row()


#: Long scenarios whose difference is the reference's DCQCN pacing (docs/validation.md):
#: with ConnectX's rpg_min_rate 1 Mb/s a QP cut to the floor keeps its 33 ms departure slot in
#: ns-3 (rdma-hw.cc never calls ChangeRate for DCQCN), so its rates collapse and ours do not.
REFERENCE_ARTEFACT = ("incast8-100g-long-nic-default", "incast8-400g-long-nic-default",
                      "perm16-100g-long-nic-default", "perm16-400g-long-nic-default")
#: Long scenarios that miss a target for a reason not established (docs/validation.md, "Open
#: differences"): expected to fail until explained or fixed (strict: a pass is reported).
OPEN = {
    "perm16-100g-long-paper": "open: one flow's FCT -12% (aggregate, queue median and p99 and "
                              "PAUSE frames, 256 vs 181-280, within the targets since ACKs and "
                              "CNPs queue with the data as in the reference: item 5)",
    "perm16-400g-long-paper": "open: one flow's FCT +25% (aggregate -1.7%, queue p99 and PAUSE "
                              "frames, 1623 vs 982-2192, within the targets: item 5)",
}
LONG = sorted(s.name for s in ref.all_scenarios() if s.long and s.name not in REFERENCE_ARTEFACT)


@pytest.mark.slow
@pytest.mark.parametrize("name", LONG)
def test_long_flows_match_the_reference(name, refs, request) -> None:
    if name in OPEN:
        request.applymarker(pytest.mark.xfail(strict=True, reason=OPEN[name]))
    c = ref.compare_scenario(name, refs, seeds=ref.ENGINE_SEEDS)
    print(ref.markdown_table([c]))
    assert not any(math.isnan(x) for x in c.ours.fct_ns)
    assert all(c.within_targets.values()), (c.row(), c.within_targets)


@pytest.mark.slow
@pytest.mark.parametrize("name", REFERENCE_ARTEFACT)
def test_the_reference_pacing_explains_its_collapse(name, refs) -> None:
    """With the reference's pacing emulated, ours meets every target, or its aggregate
    throughput moves at least halfway from where it was to the reference's band."""
    plain = ref.compare_scenario(name, refs)
    emu = ref.compare_scenario(name, refs, emulate_ns3_pacing=True)
    lo, hi = plain.ref_range("aggregate_gbps")
    print(ref.markdown_table([plain, emu]))

    def gap(gbps: float) -> float:
        return max(lo - gbps, gbps - hi, 0.0)

    if all(emu.within_targets.values()):
        return
    assert plain.ours.aggregate_gbps > hi  # the reference lost throughput ours keeps
    assert gap(emu.ours.aggregate_gbps) <= 0.5 * gap(plain.ours.aggregate_gbps)


# ------------------------------------------------------- the re-paced reference (README, "Re-paced")
def _repaced() -> dict:
    return ref.load_reference(ref.DATA_DIR / "results-repaced.json.gz")


def test_repaced_reference_data_is_complete() -> None:
    runs = _repaced()
    assert sorted(runs) == sorted(REFERENCE_ARTEFACT)
    for name, recs in runs.items():
        assert [r["rng_run"] for r in recs] == [1, 2, 3, 4], name


#: Against the re-paced reference: misses measured with engine seeds 1-3 (docs/validation.md,
#: item 1), strict so an agreement shows up. None since ACKs and CNPs queue with the data at
#: the switches, as in the reference (item 5): the permutation rows meet every target.
REPACED_OPEN: dict[str, str] = {}


@pytest.mark.slow
@pytest.mark.parametrize("name", REFERENCE_ARTEFACT)
def test_long_flows_match_the_repaced_reference(name, request) -> None:
    """With its DCQCN rate changes re-pacing the waiting packet (as ours and a NIC's rate
    limiter do), the reference's collapse at NIC defaults goes and the targets apply."""
    if name in REPACED_OPEN:
        request.applymarker(pytest.mark.xfail(strict=True, reason=REPACED_OPEN[name]))
    c = ref.compare_scenario(name, _repaced(), seeds=ref.ENGINE_SEEDS)
    print(ref.markdown_table([c]))
    assert all(c.within_targets.values()), (c.row(), c.within_targets)
