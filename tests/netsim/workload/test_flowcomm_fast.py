"""The flow model's speed paths (compiled CSR concatenation, counting-sort pair merge, send
rounds kept across models) change no number: batches priced with every fast path forced on
and with all of them off are equal, at several QP counts and ECMP seeds."""

from __future__ import annotations

import numpy as np
import pytest

import netsim.flow.csr_fast as csr_fast
import netsim.flow.link_order as link_order
import netsim.flow.maxmin as maxmin
import netsim.workload.flowcomm as flowcomm
from netsim.collectives.nccl import NcclConfig
from netsim.model.hardware import A100
from netsim.workload import CommBatch, fabric_locality
from topologies import Clos3Spec, clos3

TINY = Clos3Spec(name="tiny-7to1", servers=8, switch_radix=8, port_speed_gbps=200,
                 tor_downlink_split=1, tor_down_up=(7, 1), servers_per_tor_group=4)


@pytest.fixture(scope="module")
def tiny():
    return clos3(TINY)


def _batches():
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
            out += [model.batch_s(b, loc) for b in _batches()]
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
