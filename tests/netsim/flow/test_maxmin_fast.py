"""The compiled progressive filling (``netsim.flow.maxmin_fast``) gives the rates of the
plain numpy loop bit for bit: random incidences with ties, zero and infinite capacities,
flows crossing no link, ceilings and inactive flows."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.flow.maxmin import Incidence, maxmin_rates, maxmin_rates_plain

numba = pytest.importorskip("numba")


@pytest.fixture
def always_trace(monkeypatch):
    """Re-run from the trace however slow that is next to the kernel (the default goes back
    to the kernel after a few slower re-runs: a choice of speed only)."""
    from netsim.flow import maxmin_fast

    monkeypatch.setattr(maxmin_fast._Trace, "SLOW", 10**9)


def _random_case(seed: int):
    rng = np.random.default_rng(seed)
    nf, nl = int(rng.integers(1, 500)), int(rng.integers(1, 80))
    lengths = rng.integers(0 if seed % 5 == 0 else 1, 7, size=nf)  # some flows cross nothing
    paths = [rng.choice(nl, size=min(int(k), nl), replace=False) for k in lengths]
    indptr = np.r_[0, np.cumsum([len(p) for p in paths])]
    links = np.concatenate(paths).astype(np.int64) if indptr[-1] else np.empty(0, np.int64)
    weights = rng.choice([1.0, 2.0, 3.0, 0.5, 1 / 3], size=len(links)) if seed % 2 \
        else None  # integer weights and equal capacities give exact ties
    inc = Incidence.from_csr(indptr, links, nl, weights)
    cap = rng.choice([100.0, 100.0, 200.0, 0.1 * np.pi, 0.0], size=nl) if seed % 3 \
        else np.full(nl, 400.0)
    if seed % 4 == 0:
        cap[rng.integers(nl, size=2)] = np.inf
    active = rng.random(nf) < 0.7 if seed % 3 == 1 else None
    ceiling = None
    if seed % 4 == 1:
        ceiling = np.where(rng.random(nf) < 0.3, 60.0 * rng.random(nf), np.inf)
        ceiling[rng.integers(nf)] = 0.0
    return inc, cap, active, ceiling


@pytest.mark.parametrize("seed", range(40))
def test_compiled_filling_is_bit_identical(seed):
    inc, cap, active, ceiling = _random_case(seed)
    fast = maxmin_rates(inc, cap, active, ceiling)
    plain = maxmin_rates_plain(inc, cap, active, ceiling)
    assert inc.cache["maxmin_fast"][0]  # the kernel ran (entries sorted by flow)
    assert fast.tobytes() == plain.tobytes()


@pytest.mark.parametrize("seed", range(4))
def test_compiled_filling_on_lockstep_rings(seed):
    """Large commodities (ring channels over 10 to 40 of 300 links, 1 to 3 QPs per link) on
    two capacities: many tied levels and many rounds, as in the scheduler replay."""
    rng = np.random.default_rng(100 + seed)
    nf, nl = 3000, 300
    paths = [rng.choice(nl, size=int(rng.integers(10, 41)), replace=False) for _ in range(nf)]
    indptr = np.r_[0, np.cumsum([len(p) for p in paths])]
    links = np.concatenate(paths)
    inc = Incidence.from_csr(indptr, links, nl, rng.integers(1, 4, len(links)).astype(float))
    cap = rng.choice([200e9, 400e9], size=nl)
    active = rng.random(nf) < 0.95
    assert maxmin_rates(inc, cap, active).tobytes() == \
        maxmin_rates_plain(inc, cap, active).tobytes()


def test_unsorted_entries_take_the_plain_loop():
    inc = Incidence._build(3, 2, np.array([1, 0]), np.array([0, 1]), np.array([1.0, 1.0]))
    cap = np.array([1.0, 2.0, 3.0])
    assert maxmin_rates(inc, cap).tobytes() == maxmin_rates_plain(inc, cap).tobytes()
    assert not inc.cache["maxmin_fast"][0]


def _sequence(rng, nf: int, steps: int):
    """Active sets as a fluid run makes them: a few flows leave or join at each step, now
    and then many at once, and once every flow or none."""
    act = rng.random(nf) < 0.8
    out = [act.copy()]
    for step in range(steps):
        act = act.copy()
        if step == steps // 2:
            act[:] = True
        elif step == steps // 3:
            act[:] = False
        elif step % 7 == 6:
            act ^= rng.random(nf) < 0.3
        else:
            act[rng.integers(nf, size=int(rng.integers(1, 4)))] ^= True
        out.append(act)
    return out


@pytest.mark.parametrize("seed", range(48))
def test_reruns_from_the_trace_are_bit_identical(seed, always_trace):
    """Successive allocations on one incidence (the trace path from the second on) give the
    plain loop's rates for every active set: ties, zero and infinite capacities, flows on
    no link, ceilings."""
    inc, cap, _, ceiling = _random_case(seed)
    rng = np.random.default_rng(1000 + seed)
    for act in _sequence(rng, inc.num_flows, 30):
        fast = maxmin_rates(inc, cap, act, ceiling)
        assert fast.tobytes() == maxmin_rates_plain(inc, cap, act, ceiling).tobytes()
    assert inc.cache["maxmin_trace"]["trace"] is not None  # the trace was used


def test_trace_on_lockstep_rings_and_out_of_rows(monkeypatch, always_trace):
    """Many rounds: a trace of 2 rows runs out, the kernel answers and a bigger one is
    built; the rates stay the plain loop's."""
    from netsim.flow import maxmin_fast

    monkeypatch.setattr(maxmin_fast._Trace, "ROWS", 2)
    rng = np.random.default_rng(7)
    nf, nl = 1500, 200
    paths = [rng.choice(nl, size=int(rng.integers(5, 30)), replace=False) for _ in range(nf)]
    inc = Incidence.from_csr(np.r_[0, np.cumsum([len(p) for p in paths])],
                             np.concatenate(paths), nl,
                             rng.integers(1, 4, sum(len(p) for p in paths)).astype(float))
    cap = rng.choice([200e9, 400e9], size=nl)
    rows = []
    for act in _sequence(rng, nf, 12):
        assert maxmin_rates(inc, cap, act).tobytes() == \
            maxmin_rates_plain(inc, cap, act).tobytes()
        rows.append(inc.cache["maxmin_trace"]["rows"])
    assert rows[-1] > 2


def test_new_capacities_start_a_new_trace(always_trace):
    inc, cap, act, _ = _random_case(3)
    for c in (cap, cap * 2, cap * 2, cap):
        assert maxmin_rates(inc, c, act).tobytes() == maxmin_rates_plain(inc, c, act).tobytes()


def test_slow_reruns_go_back_to_the_kernel(monkeypatch):
    """A re-run slower than the kernel three times in a row: the kernel answers from then
    on, with the same rates."""
    from netsim.flow import maxmin_fast

    ticks = iter([i * i for i in range(10**4)])  # each timed call longer than the last
    monkeypatch.setattr(maxmin_fast.time, "thread_time", ticks.__next__)
    inc, cap, _, _ = _random_case(11)
    rng = np.random.default_rng(5)
    seen = []
    for act in _sequence(rng, inc.num_flows, 10):
        assert maxmin_rates(inc, cap, act).tobytes() == maxmin_rates_plain(inc, cap, act).tobytes()
        seen.append(inc.cache["maxmin_trace"]["slow"])
    assert max(seen) >= maxmin_fast._Trace.SLOW and inc.cache["maxmin_trace"]["trace"] is None
