"""The compiled max-min solver and its re-runs from a trace change no result of a replay:
the same replay with the plain numpy loop gives the same records, bit for bit."""

from __future__ import annotations

import hashlib
import json

import pytest

from tuner.cluster import generate_jobs, simulate

pytest.importorskip("numba")


def _digest(res) -> str:
    rows = {p: [[j.name, j.start_s, j.end_s, j.iteration_s_alone, j.iteration_s_shared,
                 j.cross_tor_bytes, j.cross_pod_bytes] for j in r.jobs] + [r.to_json()]
            for p, r in res.items()}
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def test_replay_digest_fast_equals_plain(small_clos_2to1, monkeypatch):
    """A scattered (random) replay on the 2:1 fabric: many fluid events, so most
    allocations are re-runs from a trace."""
    import netsim.flow.maxmin as mm
    import netsim.flow.maxmin_fast as mf

    reruns = []
    resolve = mf._resolve
    monkeypatch.setattr(mf, "_resolve", lambda *a: reruns.append(1) or resolve(*a))
    jobs = generate_jobs(8, len(small_clos_2to1.gpus), seed=5)
    fast = _digest(simulate(small_clos_2to1, jobs, ("random",), seed=5))
    assert len(reruns) > 50
    monkeypatch.setattr(mm, "maxmin_rates_fast", lambda *args: None)
    plain = _digest(simulate(small_clos_2to1, jobs, ("random",), seed=5))
    assert fast == plain
