"""The stop rule of ``maxmin_rates`` (``Slowest``): stopping once each segment's slowest time
is settled gives every segment the time of the full allocation, bit for bit, on the compiled
kernel and on the plain numpy loop; and it does stop early where the slowest flows freeze
first."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.flow.maxmin import Incidence, Slowest, maxmin_rates, maxmin_rates_plain

from .test_maxmin_fast import _random_case


def _rule(inc, rng, segments: int, floors: bool) -> Slowest:
    nf = inc.num_flows
    seg = rng.integers(-1, segments, nf)
    floor = np.where(rng.random(segments) < 0.3, rng.random(segments) * 2.0, -np.inf) \
        if floors else np.full(segments, -np.inf)
    return Slowest(segment=seg, latency_s=rng.choice([0.0, 1e-6, 0.25], nf),
                   size_bytes=rng.choice([1.0, 3.0, 100.0], nf),
                   bits_per_byte=rng.choice([8.0, 8.2, 16.0], nf), floor_s=floor)


@pytest.mark.parametrize("plain", [False, True])
@pytest.mark.parametrize("seed", range(40))
def test_segment_times_match_the_full_allocation(seed, plain):
    inc, cap, active, ceiling = _random_case(seed)
    rng = np.random.default_rng(1000 + seed)
    rule = _rule(inc, rng, int(rng.integers(1, 6)), seed % 2 == 0)
    solve = maxmin_rates_plain if plain else maxmin_rates
    full = solve(inc, cap, active, ceiling)
    ruled = solve(inc, cap, active, ceiling, slowest=rule)
    assert rule.segment_times(ruled).tobytes() == rule.segment_times(full).tobytes()


@pytest.mark.parametrize("seed", range(40))
def test_compiled_and_plain_stop_alike(seed):
    pytest.importorskip("numba")
    inc, cap, active, ceiling = _random_case(seed)
    rule = _rule(inc, np.random.default_rng(2000 + seed), 3, True)
    fast = maxmin_rates(inc, cap, active, ceiling, slowest=rule)
    assert inc.cache["maxmin_fast"][0]  # the kernel ran
    assert fast.tobytes() == maxmin_rates_plain(inc, cap, active, ceiling,
                                                slowest=rule).tobytes()


def _ladder():
    """A chain: flow 0 crosses link 0, flow i links i - 1 and i, link i has capacity 10**i.
    One level per round (0.5, 0.5, 9.5, 90.5, ...): the slowest flows freeze in the first."""
    n = 6
    paths = [[0]] + [[i - 1, i] for i in range(1, n)]
    indptr = np.r_[0, np.cumsum([len(p) for p in paths])]
    inc = Incidence.from_csr(indptr, np.concatenate(paths), n)
    return inc, 10.0 ** np.arange(n)


@pytest.mark.parametrize("plain", [False, True])
def test_it_stops_once_the_slowest_is_frozen(plain):
    inc, cap = _ladder()
    n = inc.num_flows
    rule = Slowest(segment=np.zeros(n, np.int64), latency_s=np.zeros(n),
                   size_bytes=np.ones(n), bits_per_byte=np.full(n, 8.0),
                   floor_s=np.array([-np.inf]))
    solve = maxmin_rates_plain if plain else maxmin_rates
    full = solve(inc, cap)
    assert full.tolist() == [0.5, 0.5, 9.5, 90.5, 909.5, 9090.5]
    ruled = solve(inc, cap, slowest=rule)
    assert ruled[:2].tolist() == [0.5, 0.5]  # the slowest, exact
    assert np.all(ruled <= full)  # the others: lower bounds (levels)
    assert np.any(ruled < full)  # it did stop before the end
    assert rule.segment_times(ruled)[0] == 16.0


def test_a_floor_above_every_flow_settles_at_once():
    inc, cap = _ladder()
    n = inc.num_flows
    rule = Slowest(segment=np.zeros(n, np.int64), latency_s=np.zeros(n),
                   size_bytes=np.ones(n), bits_per_byte=np.full(n, 8.0),
                   floor_s=np.array([100.0]))
    assert Slowest.segment_times(rule, maxmin_rates(inc, cap, slowest=rule))[0] == 100.0


def test_bad_rules_are_refused():
    inc, cap = _ladder()
    n = inc.num_flows
    good = dict(segment=np.zeros(n, np.int64), latency_s=np.zeros(n), size_bytes=np.ones(n),
                bits_per_byte=np.ones(n), floor_s=np.array([-np.inf]))
    with pytest.raises(ValueError, match="floor_s"):
        Slowest(**{**good, "segment": np.full(n, 1)})
    with pytest.raises(ValueError, match="positive"):
        Slowest(**{**good, "size_bytes": np.zeros(n)})
    with pytest.raises(ValueError, match="latency_s"):
        Slowest(**{**good, "latency_s": np.zeros(n + 1)})
    with pytest.raises(ValueError, match="one per flow"):
        maxmin_rates(inc, cap, slowest=Slowest(**{k: v[:-1] if k != "floor_s" else v
                                                   for k, v in good.items()}))


def test_a_rule_settled_after_one_round_needs_no_incidence():
    """``maxmin_first_round`` on the CSR paths gives, where it answers, the rates of the kernel
    on their incidence with the same rule, bit for bit (every flow active, no ceiling); on
    these cases it both answers and declines."""
    pytest.importorskip("numba")
    from netsim.flow.maxmin import maxmin_first_round

    answered = []
    for seed in range(40):
        rng = np.random.default_rng(3000 + seed)
        nf, nl = int(rng.integers(1, 400)), int(rng.integers(1, 60))
        paths = [rng.choice(nl, size=min(int(k), nl), replace=False)
                 for k in rng.integers(0, 6, nf)]
        indptr = np.r_[0, np.cumsum([len(p) for p in paths])].astype(np.int64)
        links = np.concatenate(paths).astype(np.int64)
        weights = np.ones(len(links)) if seed % 2 else rng.choice([1.0, 0.5, 2.0], len(links))
        cap = rng.choice([100.0, 200.0, 0.1 * np.pi, 0.0], size=nl)
        segments = nf if seed % 4 == 1 else int(rng.integers(1, 4))  # one flow per segment
        rule = _rule(Incidence.from_csr(indptr, links, nl, weights), rng, segments,
                     seed % 3 == 0)
        quick = maxmin_first_round(indptr, links, weights, cap, rule)
        full = maxmin_rates(Incidence.from_csr(indptr, links, nl, weights), cap, slowest=rule)
        if quick is not None:
            assert quick.tobytes() == full.tobytes(), seed
        answered.append(quick is not None)
    assert any(answered) and not all(answered)
