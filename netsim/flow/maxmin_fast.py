"""Compiled progressive filling: the rounds of ``maxmin_rates``, bit for bit, touching per
round only what the previous round's freezes reach.

``netsim.flow.maxmin.maxmin_rates`` works on every unfrozen entry of the incidence every
round. Here the same rounds run in compiled code (numba), but a round after the first only
revisits what the flows it froze can have changed:

* the links those flows cross (``T``): their load and residual, hence their share;
* the unfrozen flows on ``T`` (``D``): their level ``m_f`` (the tightest share on the path,
  or the ceiling);
* the links of the flows whose level changed, and ``T`` (``C``): their ``link_min``.

A link outside ``C`` keeps its share and its ``link_min``, so its bottleneck test keeps its
last answer, which was "no" (a link that was a bottleneck has frozen all its flows and
carries no load). A flow outside ``D`` keeps its level, so its ceiling test keeps its "no".

Every number is computed by the same operations on the same operands in the same order as
the plain loop, so the rates are bitwise equal:

* a link's load is summed over its unfrozen entries in entry (flow) order, as
  ``np.bincount`` sums the compacted entries;
* a round's residual decrement of a link is summed over the entries of the flows it froze,
  in entry order, from 0.0, then subtracted (as ``residual -= np.bincount(...)``);
* levels and ``link_min`` are minima, which do not depend on the order.

``tests/netsim/flow/test_maxmin_fast.py`` compares the two on random incidences (ties,
zero and infinite capacities, ceilings, inactive flows) with ``np.array_equal``.

numba is optional: without it (or for an incidence whose entries are not sorted by flow)
``maxmin_rates`` runs the plain loop, with the same results.
"""

from __future__ import annotations

import numpy as np

try:  # pragma: no cover - exercised where numba is installed
    from numba import njit
except ImportError:  # pragma: no cover
    njit = None

_KEY = "maxmin_fast"


def available() -> bool:
    """True when the compiled kernel can run (numba is importable)."""
    return njit is not None


def _structure(inc):
    """Flow-major and link-major views of the entries (cached on the incidence), or None
    when the entries are not sorted by flow (the plain loop then runs)."""
    got = inc.cache.get(_KEY)
    if got is None:
        ef = np.ascontiguousarray(inc.e_flow, np.int64)
        if ef.size and np.any(ef[1:] < ef[:-1]):
            got = (False,)
        else:
            f_ptr = np.zeros(inc.num_flows + 1, np.int64)
            np.cumsum(np.bincount(ef, minlength=inc.num_flows), out=f_ptr[1:])
            got = (True, f_ptr, np.ascontiguousarray(inc.e_link, np.int64),
                   np.ascontiguousarray(inc.e_weight, np.float64))
        inc.cache[_KEY] = got
    return got if got[0] else None


def maxmin_rates_fast(inc, capacity: np.ndarray, unfrozen: np.ndarray, ceiling: np.ndarray,
                      tol: float) -> np.ndarray | None:
    """Rates of ``maxmin_rates`` (inputs already checked there), or None when the kernel
    cannot run this incidence."""
    if njit is None:
        return None
    s = _structure(inc)
    if s is None:
        return None
    _, f_ptr, e_link, e_weight = s
    rate, ok = _fill(f_ptr, e_link, e_weight, np.ascontiguousarray(capacity, np.float64),
                     np.ascontiguousarray(unfrozen, np.bool_),
                     np.ascontiguousarray(ceiling, np.float64), float(tol))
    if not ok:
        raise RuntimeError("progressive filling made no progress")  # pragma: no cover
    return rate


def _fill_py(f_ptr, e_link, e_weight, capacity, unfrozen, ceiling, tol):
    """The kernel (compiled by numba below; see the module docstring)."""
    nf, nl = len(f_ptr) - 1, len(capacity)
    inf = np.inf
    rate = np.zeros(nf)
    residual = capacity.copy()
    load = np.empty(nl)
    share = np.empty(nl)
    lmin = np.empty(nl)
    bottleneck = np.empty(nl, np.bool_)
    delta = np.zeros(nl)
    m = np.empty(nf)
    # the unfrozen flows that cross links, with their entries, in flow order
    ff = np.empty(nf, np.int64)
    fp = np.empty(nf + 1, np.int64)
    el = np.empty(len(e_link), np.int64)
    ew = np.empty(len(e_link))
    n, k = 0, 0
    fp[0] = 0
    for f in range(nf):
        if not unfrozen[f]:
            continue
        if f_ptr[f + 1] == f_ptr[f]:  # no link: its ceiling, or unbounded (round 1)
            rate[f] = ceiling[f] if np.isfinite(ceiling[f]) else inf
            continue
        for e in range(f_ptr[f], f_ptr[f + 1]):
            el[k] = e_link[e]
            ew[k] = e_weight[e]
            k += 1
        ff[n] = f
        n += 1
        fp[n] = k
    while n > 0:
        load[:] = 0.0
        for e in range(k):
            load[el[e]] += ew[e]
        for l in range(nl):
            share[l] = max(residual[l], 0.0) / load[l] if load[l] > 0 else inf
            lmin[l] = inf
        for i in range(n):
            v = inf
            for e in range(fp[i], fp[i + 1]):
                v = min(v, share[el[e]])
            v = min(v, ceiling[ff[i]])
            m[i] = v
            for e in range(fp[i], fp[i + 1]):
                lmin[el[e]] = min(lmin[el[e]], v)
        for l in range(nl):
            bottleneck[l] = load[l] > 0 and share[l] <= lmin[l] * tol
        # freeze (bottleneck link or ceiling), set free (unbounded) or keep, in flow order
        n2, k2, frozen = 0, 0, False
        for i in range(n):
            f, v, a, b = ff[i], m[i], fp[i], fp[i + 1]
            if not np.isfinite(v):
                rate[f] = inf
                frozen = True
                continue
            hit = np.isfinite(ceiling[f]) and ceiling[f] <= v * tol
            if not hit:
                for e in range(a, b):
                    if bottleneck[el[e]]:
                        hit = True
                        break
            if hit:
                rate[f] = v
                frozen = True
                for e in range(a, b):
                    delta[el[e]] += ew[e] * v
                continue
            for e in range(a, b):
                el[k2] = el[e]
                ew[k2] = ew[e]
                k2 += 1
            ff[n2] = f
            n2 += 1
            fp[n2] = k2
        if not frozen:
            return rate, False
        for l in range(nl):
            residual[l] -= delta[l]
            delta[l] = 0.0
        n, k = n2, k2
    return rate, True


_fill = njit(cache=True, nogil=True)(_fill_py) if njit is not None else _fill_py
