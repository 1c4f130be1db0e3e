"""Best fit: the fullest ToR set or pod that holds a job, whole sets and pods kept free, and
topo's ties decided toward packing (issue 26, placement judged over time)."""

from __future__ import annotations

import numpy as np

from tuner.bestfit import ServerDomains, best_fit_servers, packing_key

# 4 ToR sets of 8 servers, 2 pods: sets 0 and 1 in pod 0, sets 2 and 3 in pod 1
DOM = ServerDomains(tor_set=np.repeat(np.arange(4), 8), pod=np.repeat([0, 0, 1, 1], 8))
# free: 3 in set 0, 6 in set 1, all 8 of set 2, 5 in set 3 (pod 0: 9 free, pod 1: 13)
FREE = [5, 6, 7, 10, 11, 12, 13, 14, 15, *range(16, 24), 27, 28, 29, 30, 31]


def sets_of(servers):
    return [int(DOM.tor_set[s]) for s in servers]


def test_tightest_tor_set_that_holds_the_job():
    assert best_fit_servers(FREE, 4, DOM) == [27, 28, 29, 30]   # set 3 (5 free), not set 2
    assert best_fit_servers(FREE, 6, DOM) == list(range(10, 16))  # set 1, exactly full
    assert best_fit_servers(FREE, 2, DOM) == [5, 6]              # set 0 (3 free)


def test_fewest_sets_of_the_tightest_pod():
    # no set holds 10: pod 1 (13 free) does; all of set 2, the rest in set 3
    got = best_fit_servers(FREE, 10, DOM)
    assert sets_of(got) == [2] * 8 + [3] * 2


def test_whole_pods_largest_first_when_no_pod_holds_the_job():
    # 20: all of pod 1 (13), then 7 of pod 0: all of set 1 (6) and one of set 0
    got = best_fit_servers(FREE, 20, DOM)
    assert sorted(sets_of(got)) == [0] + [1] * 6 + [2] * 8 + [3] * 5
    assert len(set(got)) == 20 and set(got) <= set(FREE)


def test_packing_key_prefers_whole_free_sets_and_concentrated_free_servers():
    before = np.zeros(32, bool)
    before[FREE] = True

    def after(taken):
        m = before.copy()
        m[taken] = False
        return packing_key(m, DOM)

    # 4 servers from the whole set 2 break it; 4 from set 3 keep it whole
    assert after([27, 28, 29, 30]) < after([16, 17, 18, 19])
    # the same number of whole sets: taking from the fuller set leaves free servers together
    assert after([13, 14, 15]) > after([5, 6, 7])
    assert after(best_fit_servers(FREE, 2, DOM)) == min(
        after(list(c)) for c in ([5, 6], [10, 11], [16, 17], [27, 28]))


def test_nvlink_pairs_are_not_charged_for_busy_uplinks(small_clos_2to1):
    """Bytes between two GPUs of one server never reach a NIC: no hop weight, however busy
    the server's ToRs (before, the busy term counted every pair on different ToRs, and the
    GPUs of one server sit on different ToRs, one per rail: tensor-parallel rings of a job in
    a busy ToR set looked as costly as a ring across it)."""
    from tuner.placement import GpuLocality

    loc = GpuLocality.from_fabric(small_clos_2to1)
    busy = loc.with_busy(np.ones(loc.tor.max() + 1), np.ones(loc.pod.max() + 1))
    a, b = np.arange(8), np.roll(np.arange(8), -1)  # one server's ring
    assert (busy.hops(a, b) == 0).all()
    assert (busy.hops(np.array([0]), np.array([8 * 8]))[0] > loc.hops(np.array([0]),
                                                                      np.array([8 * 8]))[0])


def test_topo_fills_the_partly_used_set_and_keeps_whole_sets_free(small_clos_2to1):
    """A background ring across ToR sets 0 and 1 keeps their uplinks busy. A 4-server job
    fits in set 0's free half without touching an uplink, as fast as in an idle set; topo
    puts it there (as the scheduler's order does) and keeps the six whole sets free.
    Before, its tensor-parallel rings were charged for the busy uplinks, and topo broke a
    whole set (set 2) for a layout predicted no faster."""
    from netsim.workload import JobSpec
    from tuner.background import BackgroundJob
    from tuner.placement import compare_strategies

    f = small_clos_2to1
    bg_job = JobSpec(model="gpt3-1.3b", tp=8, pp=1, dp=8, global_batch=64)
    on = np.array([8 * s + i for s in range(4, 12) for i in range(8)])
    bg = [BackgroundJob("b", bg_job, on)]
    free = [s for s in range(64) if not 4 <= s < 12]
    job = JobSpec(model="gpt3-1.3b", tp=8, pp=1, dp=4, global_batch=32)
    res = compare_strategies(f, job, free, seed=0, search_iterations=100, background=bg,
                             strategies=("topo", "linear"))
    servers = sorted({int(g) // 8 for g in res["topo"].gpu_of_rank})
    assert servers == [0, 1, 2, 3], res["topo"].extra["candidate"]
    assert res["topo"].iteration_s <= res["linear"].iteration_s
