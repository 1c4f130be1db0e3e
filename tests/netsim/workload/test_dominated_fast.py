"""dominated_links: the compiled passes give the numpy form's (member, rep) pairs exactly."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.flow.maxmin import Incidence
from netsim.workload import dominated_fast
from netsim.workload.flowcomm import dominated_links

pytestmark = pytest.mark.skipif(not dominated_fast.available(), reason="needs numba")


def _incidence(rng, nf=300, nl=60, twins=12):
    """Random commodities over links, plus ``twins`` links copying another link's entries
    (some with a different weight or one commodity more: near misses the check must refuse)."""
    flow, link, weight = [], [], []
    for f in range(nf):
        for lk in rng.choice(nl - twins, size=3, replace=False):
            w = float(rng.choice([1.0, 0.5, 0.125, 1 / 3]))
            flow.append(f), link.append(int(lk)), weight.append(w)
            if lk < twins:  # link nl - twins + lk mirrors link lk
                miss = lk % 4 == 3 and f % 7 == 0
                flow.append(f), link.append(nl - twins + int(lk))
                weight.append(w * (2.0 if miss else 1.0))
    return Incidence.from_entries(np.array(flow), np.array(link), np.array(weight),
                                  np.ones(len(flow)), nf, nl)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compiled_passes_equal_the_numpy_form(seed):
    rng = np.random.default_rng(seed)
    inc = _incidence(rng)
    cap = rng.choice([1.0, 2.0, 3.0], inc.num_links)
    fast = dominated_links(inc, cap)
    plain = dominated_links(inc, cap, compiled=False)
    assert all(np.array_equal(a, b) for a, b in zip(fast, plain, strict=True))
    assert 0 < len(fast[0]) < 12  # some twins kept, the near misses refused


def test_signatures_and_counts_match_per_link():
    rng = np.random.default_rng(4)
    inc = _incidence(rng)
    from netsim.workload.flowcomm import _signatures

    count, sig = dominated_fast.signatures(inc.e_link, inc.e_flow, inc.e_weight, inc.num_links)
    ref_count, ref_sig = _signatures(inc)
    assert np.array_equal(count, ref_count) and np.array_equal(sig, ref_sig)
