"""FlowCommModel: the batched build equals ``run_concurrent`` call by call; rounds; caches; the
speed paths change no number."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import netsim.flow.csr_fast as csr_fast
import netsim.flow.link_order as link_order
import netsim.flow.maxmin as maxmin
import netsim.workload.flowcomm as flowcomm
from netsim.collectives import CollectiveCall, run_concurrent
from netsim.collectives.nccl import NcclConfig
from netsim.model.hardware import A100
from netsim.workload import CommBatch, fabric_locality
from netsim.workload.flowcomm import OPS, FlowCommModel, _rounds
from topologies import Clos3Spec, clos3

TINY = Clos3Spec(name="tiny-7to1", servers=8, switch_radix=8, port_speed_gbps=200,
                 tor_downlink_split=1, tor_down_up=(7, 1), servers_per_tor_group=4)


@pytest.fixture(scope="module")
def tiny():
    return clos3(TINY)


def _batches():
    perm = np.random.default_rng(7).permutation(64)
    return [
        ("all_reduce", np.array([[0, 32], [8, 40], [1, 9]]), [1e8, 1e8, 5e7]),
        ("send", np.array([[0, 32], [8, 40], [2, 50]]), [6e6, 6e6, 6e6]),
        ("all_gather", perm[:24].reshape(3, 8), [1e8, 2e8, 1e8]),  # PXN, several per server
        ("reduce_scatter", np.array([[0, 8, 16, 24, 32], [1, 9, 17, 25, 33]]), [3e8, 3e8]),
    ]


@pytest.mark.parametrize("op,groups,sizes", _batches(), ids=lambda x: x if isinstance(x, str)
                         else None)
def test_fluid_batch_equals_run_concurrent(tiny, op, groups, sizes):
    """Same connections, QPs, paths and bytes as ``simulate_calls``: identical end times once
    the payload scaling (wire / NCCL efficiency) is set to 1."""
    probe = FlowCommModel(tiny, A100)
    hw = A100.replace(net_efficiency=probe.sharing.wire_efficiency)
    model = FlowCommModel(tiny, hw, mode="fluid")
    mine = model._price(OPS[op], groups, np.asarray(sizes))
    calls = [CollectiveCall(OPS[op], g.tolist(), int(s)) for g, s in zip(groups, sizes,
                                                                        strict=True)]
    ref = np.asarray(run_concurrent(tiny, calls, model.nccl))
    assert np.array_equal(mine, ref)


def test_steady_equals_fluid_without_contention(tiny):
    """Rings under one ToR set share nothing: one allocation is the whole story."""
    groups = np.array([[0, 8, 16, 24], [1, 9, 17, 25]])  # servers 0-3, rails 0 and 1
    sizes = np.array([2e8, 2e8])
    fluid = FlowCommModel(tiny, A100, mode="fluid")._price("allreduce", groups, sizes)
    steady = FlowCommModel(tiny, A100, mode="steady")._price("allreduce", groups, sizes)
    assert np.allclose(fluid, steady, rtol=1e-9)


def test_uncontended_ring_is_the_alpha_beta_closed_form(tiny):
    """One ring over 4 servers of one ToR set: 2(n-1)/n S / (NIC x efficiency) + latencies."""
    loc = fabric_locality(tiny)
    n, size = 4, 4e8
    batch = CommBatch("all_reduce", "dp", np.array([[0, 8, 16, 24]]), size)
    t = FlowCommModel(tiny, A100).batch_s(batch, loc)
    closed = 8.4e-6 + 2 * (n - 1) * A100.net_latency_s + 2 * (n - 1) / n * size / (
        A100.nic_bps * A100.net_efficiency / 8)
    assert t[0] == pytest.approx(closed, rel=1e-9)


def test_send_batch_split_into_rounds_without_shared_gpus():
    pairs = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [4, 5]])
    rounds = _rounds(pairs)
    assert sorted(np.concatenate(rounds).tolist()) == list(range(5))
    for r in rounds:
        gpus = pairs[r].ravel()
        assert np.unique(gpus).size == gpus.size
    assert len(rounds) == 2


def test_rates_cached_across_sizes(tiny):
    """A steady allocation does not depend on the bytes: one run serves every size."""
    model = FlowCommModel(tiny, A100, mode="steady")
    groups = np.array([[0, 32], [8, 40]])
    a = model._price("allreduce", groups, np.array([1e8, 1e8]))
    b = model._price("allreduce", groups, np.array([2e8, 2e8]))
    assert model.runs == 1
    lat = model._build("allreduce", groups, np.array([1e8, 1e8])).latency_s
    assert np.allclose(b - lat, 2 * (a - lat), rtol=1e-12)


def test_infinite_network_prices_nothing(tiny):
    loc = fabric_locality(tiny)
    batch = CommBatch("all_reduce", "dp", np.array([[0, 32]]), 1e9)
    assert FlowCommModel(tiny, A100.infinite_network()).batch_s(batch, loc)[0] == 0.0


def test_bad_mode_refused(tiny):
    with pytest.raises(ValueError, match="mode"):
        FlowCommModel(tiny, A100, mode="exact")


def test_dropping_dominated_links_keeps_the_maxmin_allocation():
    """Links with the same commodities as a tighter link add no constraint: same rates."""
    from netsim.flow.maxmin import Incidence, maxmin_rates
    from netsim.workload.flowcomm import _drop_dominated

    rng = np.random.default_rng(3)
    nf, nl = 40, 30
    flow, link = [], []
    for f in range(nf):
        for lk in rng.choice(20, size=3, replace=False):
            flow.append(f)
            link.append(lk)
        flow += [f, f]  # a private "PCIe" link and a private "NIC" link per commodity
        link += [20 + f % 5, 25 + f % 5]
    inc = Incidence.from_entries(np.array(flow), np.array(link), np.ones(len(flow)),
                                 np.ones(len(flow)), nf, nl)
    cap = rng.uniform(1.0, 3.0, nl)
    cap[20:25] = cap[25:30] + 0.5  # links 20-24 carry what 25-29 carry, with more capacity
    pruned = _drop_dominated(inc, cap)
    assert len(pruned.e_link) == len(inc.e_link) - nf  # 5 links x 8 commodities
    assert not np.isin(pruned.e_link, np.arange(20, 25)).any()
    assert np.allclose(maxmin_rates(pruned, cap), maxmin_rates(inc, cap), rtol=1e-12)


@pytest.mark.parametrize("op,groups,sizes", _batches() + [
    ("all_to_all", np.random.default_rng(3).permutation(64)[:32].reshape(2, 16), [4e8, 2e8])],
    ids=lambda x: x if isinstance(x, str) else None)
def test_uncontended_model_bounds_every_call_at_any_qp_count(tiny, op, groups, sizes):
    """The no-contention model (the QP search's bound) is below the flow model call by call,
    whatever the QP count, mode or ECMP seed: on this 7:1 fabric the calls contend."""
    from netsim.collectives.nccl import NcclConfig
    from netsim.workload.flowcomm import UncontendedFlowCommModel

    loc = fabric_locality(tiny)
    batch = CommBatch(op, "dp", groups, np.asarray(sizes, float))
    bound = UncontendedFlowCommModel(tiny, A100).batch_s(batch, loc)
    worst = 1.0
    for qps in (1, 2, 4, 8):
        nccl = NcclConfig(qps_per_connection=qps, alpha_nvlink_us=A100.intra_latency_s * 1e6,
                          alpha_net_us=A100.net_latency_s * 1e6)
        for mode in ("fluid", "steady"):
            for seed in (0, 1):
                t = FlowCommModel(tiny, A100, nccl=nccl, mode=mode, seed=seed).batch_s(batch, loc)
                assert np.all(bound <= t * (1 + 1e-12)), (qps, mode, seed, bound, t)
                worst = min(worst, float(np.min(bound / t)))
    assert worst > 0.1  # not a vacuous bound


# The speed paths (compiled CSR concatenation, counting-sort pair merge, send rounds kept
# across models) change no number: every fast path forced on and all of them off price the same.
def _fast_batches():
    perm = np.random.default_rng(3).permutation(64)
    return [CommBatch("send", "pp", perm.reshape(32, 2), 6e6),
            CommBatch("send", "pp", np.c_[perm[:40], np.roll(perm[:40], 1)], 6e6),  # 2 rounds
            CommBatch("all_reduce", "dp", perm[:48].reshape(6, 8), 1e8)]


def _prices(fabric) -> list[np.ndarray]:
    loc = fabric_locality(fabric)
    out = []
    for q in (1, 4):
        for seed in (0, 1):
            model = flowcomm.FlowCommModel(fabric, A100, seed=seed, nccl=NcclConfig(
                qps_per_connection=q, alpha_nvlink_us=A100.intra_latency_s * 1e6,
                alpha_net_us=A100.net_latency_s * 1e6))
            out += [model.batch_s(b, loc) for b in _fast_batches()]
    return out


def test_fast_paths_price_every_batch_as_the_plain_path(tiny, monkeypatch):
    with monkeypatch.context() as m:  # every fast path taken, even on this small fabric
        m.setattr(csr_fast, "MIN_FLOWS", 1)
        m.setattr(link_order, "MIN_ENTRIES", 1)
        flowcomm._rounds_of.cache_clear()
        fast = _prices(tiny)
        assert flowcomm._rounds_of.cache_info().hits > 0
    monkeypatch.setattr(csr_fast, "available", lambda n: False)
    monkeypatch.setattr(maxmin, "_unique_pairs", lambda f, lk, nf, nl: np.unique(
        f * nl + lk, return_inverse=True))
    monkeypatch.setattr(flowcomm, "_rounds_of", flowcomm._rounds_of.__wrapped__)
    plain = _prices(tiny)
    assert all(np.array_equal(a, b) for a, b in zip(fast, plain, strict=True))
    # the comparison can see a path change: the ECMP seed moves some call's time
    per_seed = [np.concatenate(plain[i:i + 3]) for i in range(0, len(plain), 3)]
    assert not np.array_equal(per_seed[0], per_seed[1]) or not np.array_equal(
        per_seed[2], per_seed[3])


def test_rounds_are_kept_per_exact_groups():
    # same shape, other GPUs: their own rounds, never the first array's
    a = np.array([[0, 1], [1, 2], [3, 4]])
    b = np.array([[0, 1], [2, 3], [3, 4]])
    assert [r.tolist() for r in flowcomm._rounds(a)] == [[0, 2], [1]]
    assert [r.tolist() for r in flowcomm._rounds(b)] == [[0, 1], [2]]
    assert [r.tolist() for r in flowcomm._rounds(a.astype(np.int32))] == [[0, 2], [1]]
    assert not flowcomm._rounds(a)[0].flags.writeable  # shared: nobody may change it


# A batch read only per segment (``CommBatch.slowest_of``, as ``predict`` reads the slowest
# group of each stage) stops the allocation once each segment's slowest is settled: every
# segment's time is the full allocation's, bit for bit.
def _segment_max(t: np.ndarray, seg: np.ndarray) -> np.ndarray:
    out = np.full(seg.max() + 1, -np.inf)
    np.maximum.at(out, seg, t)
    return out


@pytest.mark.parametrize("background", [False, True])
def test_stopping_at_each_segments_slowest_keeps_every_segment_time(tiny, background):
    from tuner.background import SharedFabricCommModel

    loc = fabric_locality(tiny)
    perm = np.random.default_rng(11).permutation(64)
    pairs = np.c_[perm[:48], np.roll(perm[:48], 5)]  # sends over 2 rounds
    bg = [CommBatch("send", "pp", np.c_[perm[48:], np.roll(perm[48:], 1)], 4e6)]
    stopped = 0
    for q, seed, seg in itertools.product((1, 4), range(3), (np.arange(48) % 3, np.arange(48))):
        nccl = NcclConfig(qps_per_connection=q, alpha_nvlink_us=A100.intra_latency_s * 1e6,
                          alpha_net_us=A100.net_latency_s * 1e6)

        kw = dict(nccl=nccl, seed=seed, mode="steady")
        fast_m, plain_m = ((SharedFabricCommModel(tiny, A100, bg, **kw) if background
                            else FlowCommModel(tiny, A100, **kw)) for _ in range(2))
        plain_m.stop_at_slowest = False
        batch = CommBatch("send", "pp", pairs, np.where(seg == 1, 9e6, 6e6), slowest_of=seg)
        fast, plain = fast_m.batch_s(batch, loc), plain_m.batch_s(batch, loc)
        assert _segment_max(fast, seg).tobytes() == _segment_max(plain, seg).tobytes()
        assert np.all(fast <= _segment_max(plain, seg)[seg])
        stopped += not np.array_equal(fast, plain)
    assert stopped > 0  # the rule did stop some allocation early (else this tests nothing)


def test_joint_slowdown_stops_early_with_the_same_slowdowns(tiny):
    from netsim.workload.contention import joint_slowdown

    loc = fabric_locality(tiny)
    perm = np.random.default_rng(5).permutation(64)
    sizes = np.random.default_rng(6).choice([1e5, 1e6, 2e7], 32)  # the slowest: not the least rate
    batches = [CommBatch("all_to_all", "ep", perm[:32].reshape(4, 8), [2e6, 3e5, 2e6, 1e7]),
               CommBatch("send", "pp", np.c_[perm[32:], np.roll(perm[32:], 3)], sizes)]
    for q, seed in itertools.product((1, 4), range(3)):
        nccl = NcclConfig(qps_per_connection=q, alpha_nvlink_us=A100.intra_latency_s * 1e6,
                          alpha_net_us=A100.net_latency_s * 1e6)
        fast_m, plain_m = (FlowCommModel(tiny, A100, nccl=nccl, seed=seed) for _ in range(2))
        plain_m.stop_at_slowest = False
        fast, plain = joint_slowdown(fast_m, batches, loc), joint_slowdown(plain_m, batches, loc)
        assert fast == plain and set(fast) == {"ep", "pp"}


_HEAP_CHILD = """
import hashlib, sys
import numpy as np
import netsim.workload.flowcomm as fc
from netsim.flow import heap_tuning
from netsim.model.hardware import A100
from netsim.workload import CommBatch, fabric_locality
from topologies import Clos3Spec, clos3

fc.FlowCommModel.retain_heap = sys.argv[1] == "1"
fabric = clos3(Clos3Spec(name="t", servers=8, switch_radix=8, port_speed_gbps=200,
                         tor_downlink_split=1, tor_down_up=(7, 1), servers_per_tor_group=4))
perm = np.random.default_rng(3).permutation(64)
digest = hashlib.sha256()
for seed in (0, 1):
    model = fc.FlowCommModel(fabric, A100, seed=seed)
    for b in (CommBatch("send", "pp", perm.reshape(32, 2), 6e6, slowest_of=np.arange(32) % 4),
              CommBatch("all_reduce", "dp", perm[:48].reshape(6, 8), 1e8)):
        digest.update(model.batch_s(b, fabric_locality(fabric)).tobytes())
print(heap_tuning._level, digest.hexdigest())
"""


def test_the_heap_setting_changes_no_price():
    """``FlowCommModel.retain_heap`` (glibc mmaps no block) moves no bit: the same batches
    priced in a child process with the setting and in one without."""
    import subprocess
    import sys

    out = [subprocess.run([sys.executable, "-c", _HEAP_CHILD, flag], check=True,
                          capture_output=True, text=True).stdout.split() for flag in "01"]
    assert out[0][0] == "0" and out[1][0] in ("2", "0")  # "0" in the child: no glibc mallopt
    assert out[0][1] == out[1][1]
