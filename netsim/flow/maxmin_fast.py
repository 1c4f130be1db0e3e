"""Compiled progressive filling: the rounds of ``maxmin_rates``, bit for bit, in one pass
per step instead of a dozen numpy temporaries.

``netsim.flow.maxmin.maxmin_rates`` runs each round of its parallel progressive filling as
numpy operations over every unfrozen entry of the incidence. The kernel here (numba) runs the
same rounds, with the same operations on the same operands in the same order, so the rates
are bitwise equal:

* a link's load is the sum of its unfrozen entries' weights in entry (flow) order, as
  ``np.bincount`` sums the compacted entries. When every weight is a multiple of 1/64 and
  their total is small (QP counts: ``_exact_sums``), every partial sum is exact in any order,
  and the kernel keeps the load by subtracting the weights of the flows that freeze;
* a round's residual decrement of a link is summed over the entries of the flows it froze,
  in entry order, from 0.0, then subtracted (as ``residual -= np.bincount(...)``);
* levels and ``link_min`` are minima, which do not depend on the order;
* the entries of frozen flows are skipped, and dropped once they are a quarter of the
  array (which entries a round visits changes no value).

``tests/netsim/flow/test_maxmin_fast.py`` compares the two on random incidences (ties,
zero and infinite capacities, flows crossing no link, ceilings, inactive flows) byte for byte.

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
            w = np.ascontiguousarray(inc.e_weight, np.float64)
            got = (True, f_ptr, np.ascontiguousarray(inc.e_link, np.int64), w,
                   _exact_sums(w))
        inc.cache[_KEY] = got
    return got if got[0] else None


def _exact_sums(w: np.ndarray) -> bool:
    """True when every partial sum of the weights is exact in float64, in any order: all
    are multiples of 1/64 (QP counts, 1/q shares for q a power of two up to 64) and their
    total is below 2**47. A link's load may then be kept by subtracting the weights of the
    flows that freeze instead of summed anew: the same number."""
    scaled = w * 64.0
    return bool(np.all(scaled == np.floor(scaled)) and scaled.sum() < 2.0 ** 53)


def maxmin_rates_fast(inc, capacity: np.ndarray, unfrozen: np.ndarray, ceiling: np.ndarray,
                      tol: float) -> np.ndarray | None:
    """Rates of ``maxmin_rates`` (inputs already checked there), or None when the kernel
    cannot run this incidence."""
    if njit is None:
        return None
    s = _structure(inc)
    if s is None:
        return None
    _, f_ptr, e_link, e_weight, exact = s
    rate, ok = _fill(f_ptr, e_link, e_weight, np.ascontiguousarray(capacity, np.float64),
                     np.ascontiguousarray(unfrozen, np.bool_),
                     np.ascontiguousarray(ceiling, np.float64), float(tol), exact)
    if not ok:
        raise RuntimeError("progressive filling made no progress")  # pragma: no cover
    return rate


def _fill_py(f_ptr, e_link, e_weight, capacity, unfrozen, ceiling, tol, exact_load):
    """The kernel (compiled by numba below; see the module docstring)."""
    nf, nl = len(f_ptr) - 1, len(capacity)
    inf = np.inf
    rate = np.zeros(nf)
    residual = capacity.copy()
    load = np.zeros(nl)
    share = np.empty(nl)
    lmin = np.empty(nl)
    bottleneck = np.empty(nl, np.bool_)
    delta = np.zeros(nl)
    # the unfrozen flows that cross links, with their entries, in flow order
    ff = np.empty(nf, np.int64)
    fp = np.empty(nf + 1, np.int64)
    m = np.empty(nf)
    alive = np.ones(nf, np.bool_)
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
            load[e_link[e]] += e_weight[e]
            k += 1
        ff[n] = f
        n += 1
        fp[n] = k
    live_entries = k
    while live_entries > 0:
        for l in range(nl):
            share[l] = max(residual[l], 0.0) / load[l] if load[l] > 0 else inf
            lmin[l] = inf
        for i in range(n):
            if not alive[i]:
                continue
            v = inf
            for e in range(fp[i], fp[i + 1]):
                v = min(v, share[el[e]])
            v = min(v, ceiling[ff[i]])
            m[i] = v
            for e in range(fp[i], fp[i + 1]):
                lmin[el[e]] = min(lmin[el[e]], v)
        for l in range(nl):
            bottleneck[l] = load[l] > 0 and share[l] <= lmin[l] * tol
        # freeze (bottleneck link or ceiling) or set free (unbounded), in flow order
        frozen = False
        for i in range(n):
            if not alive[i]:
                continue
            f, v, a, b = ff[i], m[i], fp[i], fp[i + 1]
            if not np.isfinite(v):
                rate[f] = inf
            else:
                hit = np.isfinite(ceiling[f]) and ceiling[f] <= v * tol
                if not hit:
                    for e in range(a, b):
                        if bottleneck[el[e]]:
                            hit = True
                            break
                if not hit:
                    continue
                rate[f] = v
                for e in range(a, b):
                    delta[el[e]] += ew[e] * v
            alive[i] = False
            frozen = True
            live_entries -= b - a
            if exact_load:
                for e in range(a, b):
                    load[el[e]] -= ew[e]
        if not frozen:
            return rate, False
        for l in range(nl):
            residual[l] -= delta[l]
            delta[l] = 0.0
        if live_entries * 4 < k * 3:  # drop the entries of frozen flows
            n, k = _compact(n, ff, fp, m, alive, el, ew)
        if not exact_load:  # the load summed over the live entries in entry order
            load[:] = 0.0
            for i in range(n):
                if alive[i]:
                    for e in range(fp[i], fp[i + 1]):
                        load[el[e]] += ew[e]
    return rate, True


def _compact_py(n, ff, fp, m, alive, el, ew):
    """Keep the live flows' entries (in order); return the new flow and entry counts."""
    n2, k2 = 0, 0
    for i in range(n):
        if not alive[i]:
            continue
        for e in range(fp[i], fp[i + 1]):
            el[k2] = el[e]
            ew[k2] = ew[e]
            k2 += 1
        ff[n2] = ff[i]
        alive[n2] = True
        n2 += 1
        fp[n2] = k2
    return n2, k2


if njit is not None:
    _compact = njit(cache=True, nogil=True)(_compact_py)
    _fill = njit(cache=True, nogil=True)(_fill_py)
else:  # pragma: no cover
    _compact, _fill = _compact_py, _fill_py
