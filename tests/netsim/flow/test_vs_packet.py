"""Cross-check with the packet engine on 16- and 64-host fabrics (same flows, same QP paths).

Slow: the packet engine moves every 4 KiB packet. The full table (including the cases the flow
models do not capture) is in docs/validation.md, produced by ``python -m netsim.flow.crosscheck``.
The bound is the issue's: per-flow throughput of long flows within 10% of the packet engine.
"""

from __future__ import annotations

import pytest

from netsim.flow.crosscheck import (
    compare,
    fit_dcqcn_efficiency,
    group_compare,
    pfc_scenarios,
    run_packet,
    scenarios,
)
from netsim.flow.sharing import SharingModel

pytestmark = pytest.mark.slow

SIZE = 20_000_000   # 1.6 ms at 100 Gb/s: enough for CC none (PFC settles in microseconds)
LONG = 200_000_000  # 16 ms at 100 Gb/s: enough for NIC-default DCQCN to converge
PER_FLOW = 0.10
ALL = ["incast-4, one leaf", "incast-7, one leaf", "two bottlenecks", "cross-leaf incast-4",
       "permutation"]


@pytest.fixture(scope="module")
def none_runs():
    return {s.name: (s, run_packet(s, "none")) for s in pfc_scenarios(SIZE)}


@pytest.mark.parametrize("name", ALL + ["HOL victim"])
def test_pfc_model_matches_cc_none_per_flow(none_runs, name):
    # port-fair FIFO sharing under PFC, with HOL blocking: every flow within 10%
    scn, pk = none_runs[name]
    row = compare(scn, "none", SharingModel("pfc"), packet=pk)
    assert row["max_abs_err"] < PER_FLOW, row


@pytest.mark.parametrize("name", ["incast-4, one leaf", "incast-7, one leaf",
                                  "cross-leaf incast-4"])
def test_maxmin_matches_cc_none_where_ingress_ports_are_distinct(none_runs, name):
    scn, pk = none_runs[name]
    assert compare(scn, "none", SharingModel("maxmin"), packet=pk)["max_abs_err"] < PER_FLOW


@pytest.mark.parametrize("name", ["two bottlenecks", "permutation", "HOL victim"])
def test_maxmin_misses_flows_merged_through_one_ingress_port(none_runs, name):
    # flow-fair max-min vs port-fair PFC: 1/2 vs 2/3 of a link (two bottlenecks), 1/3 vs 1/2
    # (two flows of one port against one of another), 2/3 vs 1/3 (the HOL victim): far outside
    # 10%
    scn, pk = none_runs[name]
    assert compare(scn, "none", SharingModel("maxmin"), packet=pk)["max_abs_err"] > 0.2


@pytest.mark.parametrize("name", ["incast-4, one leaf", "two bottlenecks"])
def test_dcqcn_model_matches_nic_default_dcqcn_per_flow_on_long_flows(name):
    # the model's default efficiency is the fit over all five scenarios at this size
    scn = {s.name: s for s in scenarios(LONG)}[name]
    row = compare(scn, "dcqcn", SharingModel("dcqcn"), packet=run_packet(scn, "dcqcn"))
    assert row["max_abs_err"] < PER_FLOW, row
    assert abs(row["mean_ratio"] - 1) < 0.05, row


@pytest.fixture(scope="module")
def long_permutation():
    scn = {s.name: s for s in scenarios(LONG)}["permutation"]
    return group_compare(scn, SharingModel("dcqcn"), run_packet(scn, "dcqcn"))


def test_dcqcn_model_matches_nic_default_dcqcn_per_bottleneck_on_the_long_permutation(
        long_permutation):
    # per flow the permutation is out of reach of any equal-share model (next test,
    # docs/validation.md "unfair pairs"): the claim is every bottleneck group's mean, over
    # whole flows and over the window where every flow runs, and the mean over all flows
    row = long_permutation
    assert row["groups"], row
    assert row["group_err"] < 0.05, row
    assert row["window_group_err"] < 0.05, row
    assert abs(row["mean_ratio"] - 1) < 0.05, row


def test_permutation_per_flow_miss_is_persistent_dcqcn_unfairness(long_permutation):
    # the packet engine keeps two flows of one bottleneck apart by more than the per-flow bound
    # allows an equal-share model, in both halves of the converged window. When this fails,
    # DCQCN evens such pairs out: assert the permutation per flow again (PER_FLOW)
    row = long_permutation
    assert row["max_abs_err"] > PER_FLOW, row
    assert min(row["half_floors"]) > PER_FLOW, row


def test_dcqcn_model_matches_paper_dcqcn_per_flow_on_long_incasts():
    # with the DCQCN paper's timers (no byte counter) 200 MB incasts converge; the two-bottleneck
    # and permutation cases do not (docs/validation.md), so they are not asserted here
    scns = [s for s in scenarios(LONG) if s.name in ("incast-4, one leaf", "incast-7, one leaf")]
    runs = [run_packet(s, "dcqcn", preset="paper") for s in scns]
    model = SharingModel("dcqcn", dcqcn_efficiency=fit_dcqcn_efficiency(runs))
    for scn, run in zip(scns, runs, strict=True):
        row = compare(scn, "dcqcn", model, packet=run)
        assert row["max_abs_err"] < PER_FLOW, row


@pytest.mark.study
@pytest.mark.parametrize("seed", range(1, 6))
def test_long_permutation_groups_hold_and_pairs_stay_unfair_on_other_seeds(seed):
    # docs/validation.md's seed table: each seed draws other ECMP collisions and other winners;
    # the group means hold in the converged window, the per-flow spread stays beyond the bound
    scn = {s.name: s for s in scenarios(LONG)}["permutation"]
    row = group_compare(scn, SharingModel("dcqcn"), run_packet(scn, "dcqcn", seed))
    assert row["window_group_err"] < 0.05, row
    assert min(row["half_floors"]) > PER_FLOW, row
