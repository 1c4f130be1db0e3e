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

import time

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
                      tol: float, slowest=None) -> np.ndarray | None:
    """Rates of ``maxmin_rates`` (inputs already checked there), or None when the kernel
    cannot run this incidence. From the second allocation of an incidence on the same
    capacities and ceilings on, the rounds are re-run from the last one's trace
    (``_Trace``), for as long as that is faster than the kernel (the rates are the same
    either way). With a stop rule (``slowest``: ``netsim.flow.maxmin.Slowest``) the kernel
    runs until the rule is settled, without a trace."""
    if njit is None:
        return None
    s = _structure(inc)
    if s is None:
        return None
    if slowest is not None:
        return _kernel(inc, s, capacity, unfrozen, ceiling, tol, slowest)
    key = (capacity.tobytes(), ceiling.tobytes())
    st = inc.cache.get(_Trace.KEY)
    if st is None or st["key"] != key:  # first allocation on these capacities
        st = inc.cache[_Trace.KEY] = {"key": key, "trace": None, "rows": _Trace.ROWS,
                                      "kernel_s": None, "slow": 0}
    if st["kernel_s"] is not None and st["slow"] < _Trace.SLOW:
        rate = _Trace.resolve(inc, s, st, unfrozen, ceiling, tol)
        if rate is not None:
            return rate
    t0 = time.thread_time()
    rate = _kernel(inc, s, capacity, unfrozen, ceiling, tol)
    st["kernel_s"] = time.thread_time() - t0
    return rate


def _kernel(inc, s, capacity, unfrozen, ceiling, tol, slowest=None) -> np.ndarray:
    _, f_ptr, e_link, e_weight, exact = s
    l_ptr, l_flow = _by_link(inc)
    rule = _NO_RULE if slowest is None else slowest.arrays()
    rate, status, _ = _fill(f_ptr, e_link, e_weight, l_ptr, l_flow,
                            np.ascontiguousarray(capacity, np.float64),
                            np.ascontiguousarray(unfrozen, np.bool_),
                            np.ascontiguousarray(ceiling, np.float64), float(tol), exact, False,
                            *_NO_TRACE, *rule)
    if status:
        raise RuntimeError("progressive filling made no progress")  # pragma: no cover
    return rate


_NO_TRACE = (np.zeros((1, 1)), np.zeros((1, 1)), np.zeros((1, 1)), np.zeros((1, 1)),
             np.zeros((1, 1), np.bool_), np.zeros(1, np.int64), np.zeros(1, np.int64))
_NO_RULE = (np.zeros(0, np.int64), np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0))


class _Trace:
    """The last run's rounds on one incidence: per round the state at its start (loads,
    residuals, levels, link minima, bottleneck flags, unfrozen count), and per flow its
    freeze round and rate. A re-run (``_resolve``) follows the rounds of the last run,
    recomputing only what the flows that joined or left can have changed, and comparing each
    recomputed number with the last run's bit for bit: where they agree the rest of the
    round is the same computation on the same operands, so it is taken as it was. Every
    recomputed number is computed as ``maxmin_rates`` computes it (loads and residual
    decrements summed over the link's entries in entry order, minima), so the rates are the
    plain loop's, bit for bit. Where a change reaches most of the allocation a re-run costs
    more than the kernel: after ``SLOW`` such re-runs in a row the incidence goes back to the
    kernel (a choice of speed only)."""

    ROWS = 64
    SLOW = 3
    MAX_BYTES = 256 << 20
    KEY = "maxmin_trace"

    def __init__(self, inc, capacity, rows: int) -> None:
        nf, nl = inc.num_flows, inc.num_links
        self.rows = rows
        self.act = np.zeros(nf, np.bool_)
        self.rho = np.full(nf, -1, np.int64)
        self.rate = np.zeros(nf)
        self.load = np.zeros((rows + 1, nl))
        self.res = np.empty((rows + 1, nl))
        self.res[0] = capacity
        self.m = np.empty((rows + 1, nf))
        self.bn = np.zeros((rows + 1, nl), np.bool_)
        self.lmin = np.full((rows + 1, nl), np.inf)
        self.nunf = np.zeros(rows + 1, np.int64)
        self.k = 0

    @staticmethod
    def nbytes(inc, rows: int) -> int:
        return (rows + 1) * (25 * inc.num_links + 8 * inc.num_flows)

    @classmethod
    def resolve(cls, inc, s, st: dict, unfrozen, ceiling, tol):
        """This allocation's rates from the trace (recorded by the kernel the first time),
        or None (the trace ran out of rows or memory: the kernel answers)."""
        tr = st["trace"]
        if tr is None:
            return _record(cls, inc, s, st, unfrozen, ceiling, tol)
        _, f_ptr, e_link, e_weight, _ = s
        l_ptr, l_flow = _by_link(inc)
        l_weight = _link_weights(inc)
        act = np.ascontiguousarray(unfrozen, np.bool_)
        t0 = time.thread_time()
        status, k = _resolve(f_ptr, e_link, e_weight, l_ptr, l_flow, l_weight,
                             np.ascontiguousarray(ceiling, np.float64), float(tol), act,
                             tr.act, tr.rho, tr.rate, tr.load, tr.res, tr.m, tr.lmin, tr.bn,
                             tr.nunf, tr.k, np.int64(1 << 62))
        st["slow"] = st["slow"] + 1 if time.thread_time() - t0 > st["kernel_s"] else 0
        if status != 0:  # the trace is spent: recorded anew, bigger, next time
            st["trace"] = None
            st["rows"] *= 2 if status == 2 else 1
            return None
        tr.act, tr.k = act.copy(), k
        if st["slow"] >= cls.SLOW:  # the kernel is faster here: it answers from now on
            st["trace"] = None
        return tr.rate.copy()


def drop_trace(inc) -> None:
    """Forget the incidence's trace (its memory: a run of allocations on it is over)."""
    inc.cache.pop(_Trace.KEY, None)


def _record(cls, inc, s, st: dict, unfrozen, ceiling, tol):
    """Run the kernel writing its rounds into a new trace (more rows until they suffice)."""
    _, f_ptr, e_link, e_weight, exact = s
    act = np.ascontiguousarray(unfrozen, np.bool_)
    capacity = np.frombuffer(st["key"][0], np.float64).copy()
    while cls.nbytes(inc, st["rows"]) <= cls.MAX_BYTES:
        tr = cls(inc, capacity, st["rows"])
        l_ptr, l_flow = _by_link(inc)
        rate, status, k = _fill(f_ptr, e_link, e_weight, l_ptr, l_flow, capacity, act.copy(),
                                np.ascontiguousarray(ceiling, np.float64), float(tol), exact,
                                True, tr.load, tr.res, tr.m, tr.lmin, tr.bn, tr.nunf, tr.rho,
                                *_NO_RULE)
        if status == 1:
            raise RuntimeError("progressive filling made no progress")  # pragma: no cover
        if status == 0:
            tr.act, tr.k, tr.rate = act.copy(), k, rate
            st["trace"] = tr
            return rate.copy()
        st["rows"] *= 2
    st["slow"] = cls.SLOW  # too big to keep: the kernel answers
    return None


def _by_link(inc):
    """Entries in link order (``inc.by_link``: entry order within a link): row pointers and
    flows."""
    got = inc.cache.get("maxmin_by_link")
    if got is None:
        l_ptr = np.zeros(inc.num_links + 1, np.int64)
        np.cumsum(np.bincount(inc.e_link, minlength=inc.num_links), out=l_ptr[1:])
        got = (l_ptr, np.ascontiguousarray(inc.e_flow[inc.by_link], np.int64))
        inc.cache["maxmin_by_link"] = got
    return got


def _link_weights(inc) -> np.ndarray:
    """The entries' weights in link order (only the trace re-solve reads them, so the kernel
    does not pay for the gather)."""
    got = inc.cache.get("maxmin_link_weight")
    if got is None:
        got = np.ascontiguousarray(inc.e_weight[inc.by_link], np.float64)
        inc.cache["maxmin_link_weight"] = got
    return got


def _fill_py(f_ptr, e_link, e_weight, l_ptr, l_flow, capacity, unfrozen, ceiling, tol,
             exact_load, rec, t_load, t_res, t_m, t_lmin, t_bn, t_nunf, rho,
             seg, s_lat, s_size, s_bpb, slowest):
    """The kernel (compiled by numba below; see the module docstring). With ``rec``, each
    round's state is written to the trace rows (``_Trace``) and each flow's freeze round to
    ``rho``. Returns (rates, status, rounds): status 0 done, 1 no progress, 2 out of rows.

    A round's frozen flows are found from the bottleneck links' entries (``l_ptr``,
    ``l_flow``: the entries in link order) and from the flows whose level is their ceiling or
    unbounded (noted while the levels are computed), then frozen in flow order: the flows
    and the order of a scan of every live flow, at the cost of the frozen ones only (each
    link is a bottleneck in one round at most: all its live flows freeze there).

    With a stop rule (``seg`` not empty: ``netsim.flow.maxmin.Slowest``), ``slowest`` holds
    each segment's slowest time so far (its floor to start with) and the rounds stop once no
    live flow can be any segment's slowest (``_settled``); the live flows then keep their
    level as their rate, a lower bound."""
    nf, nl = len(f_ptr) - 1, len(capacity)
    ruled = len(seg) > 0
    inf = np.inf
    rate = np.zeros(nf)
    residual = capacity.copy()
    load = np.zeros(nl)
    share = np.empty(nl)
    lmin = np.empty(nl)
    bottleneck = np.empty(nl, np.bool_)
    delta = np.zeros(nl)
    bl = np.empty(nl, np.int64)  # this round's bottleneck links
    # the unfrozen flows that cross links, with their entries, in flow order
    ff = np.empty(nf, np.int64)
    fp = np.empty(nf + 1, np.int64)
    m = np.empty(nf)
    alive = np.ones(nf, np.bool_)
    pos = np.full(nf, -1, np.int64)  # a flow's index in ff (-1: not listed, or dropped)
    cand = np.empty(nf, np.int64)  # this round's frozen flows (indices into ff)
    stamp = np.zeros(nf, np.int64)  # round + 1 when listed in cand
    el = np.empty(len(e_link), np.int64)
    ew = np.empty(len(e_link))
    n, k, linkless = 0, 0, 0
    fp[0] = 0
    for f in range(nf):
        if not unfrozen[f]:
            continue
        if f_ptr[f + 1] == f_ptr[f]:  # no link: its ceiling, or unbounded (round 1)
            rate[f] = ceiling[f] if np.isfinite(ceiling[f]) else inf
            linkless += 1
            if ruled:
                _fold(f, rate[f], seg, s_lat, s_size, s_bpb, slowest)
            if rec:
                rho[f] = 0
                t_m[0, f] = min(inf, ceiling[f])
            continue
        for e in range(f_ptr[f], f_ptr[f + 1]):
            el[k] = e_link[e]
            ew[k] = e_weight[e]
            load[e_link[e]] += e_weight[e]
            k += 1
        ff[n] = f
        pos[f] = n
        n += 1
        fp[n] = k
    live_entries = k
    rnd, alive_n = 0, n
    if rec and live_entries == 0 and linkless > 0:  # one round frees or caps them all
        if t_load.shape[0] < 3:
            return rate, 2, 0
        t_load[0, :] = load
        t_res[0, :] = residual
        t_lmin[0, :] = inf
        t_bn[0, :] = False
        t_nunf[0] = linkless
        rnd = 1
    while live_entries > 0:
        if rec and rnd + 2 > t_load.shape[0]:
            return rate, 2, rnd
        tag = rnd + 1
        nc = 0
        for ln in range(nl):
            share[ln] = max(residual[ln], 0.0) / load[ln] if load[ln] > 0 else inf
            lmin[ln] = inf
        for i in range(n):
            if not alive[i]:
                continue
            v = inf
            for e in range(fp[i], fp[i + 1]):
                v = min(v, share[el[e]])
            c = ceiling[ff[i]]
            v = min(v, c)
            m[i] = v
            for e in range(fp[i], fp[i + 1]):
                lmin[el[e]] = min(lmin[el[e]], v)
            # unbounded, or at its own ceiling: frozen this round whatever its links
            if not np.isfinite(v) or (np.isfinite(c) and c <= v * tol):
                stamp[i] = tag
                cand[nc] = i
                nc += 1
        nb = 0
        for ln in range(nl):
            b = load[ln] > 0 and share[ln] <= lmin[ln] * tol
            bottleneck[ln] = b
            if b:
                bl[nb] = ln
                nb += 1
        if rec:
            t_load[rnd, :] = load
            t_res[rnd, :] = residual
            t_lmin[rnd, :] = lmin
            t_bn[rnd, :] = bottleneck
            t_nunf[rnd] = alive_n + (linkless if rnd == 0 else 0)
            for i in range(n):
                if alive[i]:
                    t_m[rnd, ff[i]] = m[i]
        for j in range(nb):  # every live flow of a bottleneck link freezes
            ln = bl[j]
            for e in range(l_ptr[ln], l_ptr[ln + 1]):
                i = pos[l_flow[e]]
                if i >= 0 and alive[i] and stamp[i] != tag:
                    stamp[i] = tag
                    cand[nc] = i
                    nc += 1
        if nc == 0:
            return rate, 1, rnd
        chosen = np.sort(cand[:nc])  # flow order, as a scan of the live flows meets them
        for j in range(nc):
            i = chosen[j]
            f, v, a, b = ff[i], m[i], fp[i], fp[i + 1]
            if not np.isfinite(v):
                rate[f] = inf
            else:
                rate[f] = v
                for e in range(a, b):
                    delta[el[e]] += ew[e] * v
            alive[i] = False
            alive_n -= 1
            if ruled:
                _fold(f, rate[f], seg, s_lat, s_size, s_bpb, slowest)
            if rec:
                rho[f] = rnd
            live_entries -= b - a
            if exact_load:
                for e in range(a, b):
                    load[el[e]] -= ew[e]
        for ln in range(nl):
            residual[ln] -= delta[ln]
            delta[ln] = 0.0
        if ruled and _settled(n, alive, ff, m, tol, seg, s_lat, s_size, s_bpb, slowest):
            for i in range(n):
                if alive[i]:
                    rate[ff[i]] = m[i]
            return rate, 0, rnd + 1
        if live_entries * 4 < k * 3:  # drop the entries of frozen flows
            n, k = _compact(n, ff, fp, m, alive, el, ew, pos)
        if not exact_load:  # the load summed over the live entries in entry order
            load[:] = 0.0
            for i in range(n):
                if alive[i]:
                    for e in range(fp[i], fp[i + 1]):
                        load[el[e]] += ew[e]
        rnd += 1
    if rec:  # the final row
        t_load[rnd, :] = 0.0
        t_res[rnd, :] = residual
        t_lmin[rnd, :] = inf
        t_bn[rnd, :] = False
        t_nunf[rnd] = 0
    return rate, 0, rnd


def _term(f, r, s_lat, s_size, s_bpb):
    """Flow *f*'s time at rate *r*, as ``FlowCommModel`` computes a transfer's (latency plus
    size times seconds per byte; infinite at rate 0)."""
    x = s_bpb[f] / r if r > 0 else np.inf
    return s_lat[f] + s_size[f] * x


def _fold(f, r, seg, s_lat, s_size, s_bpb, slowest):
    """A frozen flow's time joins its segment's slowest."""
    s = seg[f]
    if s >= 0:
        slowest[s] = max(slowest[s], _term(f, r, s_lat, s_size, s_bpb))


def _settled(n, alive, ff, m, tol, seg, s_lat, s_size, s_bpb, slowest):
    """No live flow can be its segment's slowest: its time at its level (an upper bound of its
    final time: levels only rise) is, with the tolerance's margin, below the segment's slowest
    frozen time."""
    for i in range(n):
        if alive[i]:
            f = ff[i]
            s = seg[f]
            if s >= 0 and _term(f, m[i], s_lat, s_size, s_bpb) * tol > slowest[s]:
                return False
    return True


def _first_round_py(indptr, links, weights, capacity, tol, seg, s_lat, s_size, s_bpb,
                    slowest):
    """Round 1 of ``_fill_py`` on a CSR path list (every flow active, no ceiling), and the
    stop rule after it. Returns (settled, rates): settled, every flow's rate is its level of
    round 1 (the frozen ones' exact rates, the live ones' lower bounds), as ``_fill_py``
    returns them when its rule is settled after round 1; else the caller runs the filling."""
    nf, nl = len(indptr) - 1, len(capacity)
    inf = np.inf
    load = np.zeros(nl)
    for e in range(len(links)):  # entry order = flow order, as the kernel sums
        load[links[e]] += weights[e]
    share = np.empty(nl)
    lmin = np.full(nl, inf)
    for ln in range(nl):
        share[ln] = max(capacity[ln], 0.0) / load[ln] if load[ln] > 0 else inf
    m = np.empty(nf)
    for f in range(nf):
        v = inf
        for e in range(indptr[f], indptr[f + 1]):
            v = min(v, share[links[e]])
        m[f] = v
        for e in range(indptr[f], indptr[f + 1]):
            lmin[links[e]] = min(lmin[links[e]], v)
    bottleneck = np.empty(nl, np.bool_)
    for ln in range(nl):
        bottleneck[ln] = load[ln] > 0 and share[ln] <= lmin[ln] * tol
    live = np.zeros(nf, np.bool_)
    for f in range(nf):
        frozen = not np.isfinite(m[f])
        if not frozen:
            for e in range(indptr[f], indptr[f + 1]):
                if bottleneck[links[e]]:
                    frozen = True
                    break
        if frozen:
            _fold(f, m[f], seg, s_lat, s_size, s_bpb, slowest)
        else:
            live[f] = True
    for f in range(nf):
        s = seg[f]
        if live[f] and s >= 0 and _term(f, m[f], s_lat, s_size, s_bpb) * tol > slowest[s]:
            return False, m
    return True, m


def first_round_rates(indptr, links, weights, capacity, tol: float, slowest):
    """``maxmin_rates(Incidence.from_csr(indptr, links, ..., weights), capacity,
    slowest=slowest)`` where its stop rule is settled after the first round (the same rates,
    bit for bit), without building the incidence; None where it is not (or without numba):
    the caller builds it and runs the filling."""
    if njit is None:
        return None
    settled, rate = _first_round(np.ascontiguousarray(indptr, np.int64),
                                 np.ascontiguousarray(links, np.int64),
                                 np.ascontiguousarray(weights, np.float64),
                                 np.ascontiguousarray(capacity, np.float64), float(tol),
                                 *slowest.arrays())
    return rate if settled else None


def _compact_py(n, ff, fp, m, alive, el, ew, pos):
    """Keep the live flows' entries (in order); return the new flow and entry counts.
    ``pos`` follows: a kept flow's new index, -1 for a dropped one."""
    n2, k2 = 0, 0
    for i in range(n):
        if not alive[i]:
            pos[ff[i]] = -1
            continue
        for e in range(fp[i], fp[i + 1]):
            el[k2] = el[e]
            ew[k2] = ew[e]
            k2 += 1
        ff[n2] = ff[i]
        pos[ff[i]] = n2
        alive[n2] = True
        n2 += 1
        fp[n2] = k2
    return n2, k2





# ------------------------------------------------------------------------------ re-solves

def _same(a, b):
    """Bitwise equality of two floats (0.0 and -0.0 differ; no NaN arises here)."""
    return a == b and (a != 0.0 or np.signbit(a) == np.signbit(b))


def _mark_each(items, lo, hi, mark, k, out, n):
    """Append each of ``items[lo:hi]`` (links or flows) not yet marked in round *k* to
    ``out[n:]``; the new n."""
    for i in range(lo, hi):
        x = items[i]
        if mark[x] != k:
            mark[x] = k
            out[n] = x
            n += 1
    return n


def _mark_flow_links(f, f_ptr, e_link, mark, k, out, n):
    """Append each link of flow *f* not yet marked in round *k* to ``out[n:]``; the new n."""
    return _mark_each(e_link, f_ptr[f], f_ptr[f + 1], mark, k, out, n)


def _mark_active(items, lo, hi, act, rho, mark, k, out, n):
    """Append each flow of ``items[lo:hi]`` that is active in round *k* (``act`` and
    ``rho >= k``) and not yet marked in it to ``out[n:]``; the new n."""
    for i in range(lo, hi):
        g = items[i]
        if mark[g] != k and act[g] and rho[g] >= k:
            mark[g] = k
            out[n] = g
            n += 1
    return n


def _share(res, load):
    """A link's fair share: its residual (not below 0) over its load; infinite unloaded."""
    return max(res, 0.0) / load if load > 0 else np.inf


def _took_part(old_live, act0, rho0, f, k):
    """Flow *f* was unfrozen in round *k* of the last run."""
    return old_live and act0[f] and rho0[f] >= k


def _status_changes(nf, act, act0, rho, rate, big, sd, sd_mark):
    """List the flows that join or leave in ``sd`` (marked in ``sd_mark``): a joining one
    is unfrozen for now, a leaving one gets rate 0. Returns how many."""
    nsd = 0
    for f in range(nf):
        if act[f] != act0[f]:
            sd_mark[f] = True
            sd[nsd] = f
            nsd += 1
            if act[f]:
                rho[f] = big
            else:
                rho[f] = -1
                rate[f] = 0.0
    return nsd


def _first_dirty(sd, nsd, f_ptr, e_link, l_ptr, l_flow, l_weight, act, t_load, t_res, mark_l,
                 dl, nload, nres):
    """Round 0's dirty links: those of the flows that join or leave whose load changed
    (listed in ``dl`` with their new load and residual). Returns how many."""
    ndl = 0
    for i in range(nsd):
        ndl = _mark_flow_links(sd[i], f_ptr, e_link, mark_l, 0, dl, ndl)
    kept = 0
    for i in range(ndl):
        ln = dl[i]
        s = 0.0
        for q in range(l_ptr[ln], l_ptr[ln + 1]):
            if act[l_flow[q]]:
                s += l_weight[q]
        if _same(s, t_load[0, ln]):
            mark_l[ln] = -1
            continue
        nload[ln] = s
        nres[ln] = t_res[0, ln]
        dl[kept] = ln
        kept += 1
    return kept


def _extend_rows(ready, k, final0, t_load, t_res, t_bn, t_lmin, t_nunf):
    """Rows up to k + 1 past the last run's end hold its final state; the new ``ready``."""
    while ready <= k + 1:
        t_load[ready, :] = 0.0
        t_res[ready, :] = final0
        t_bn[ready, :] = False
        t_lmin[ready, :] = np.inf
        t_nunf[ready] = 0
        ready += 1
    return ready


def _new_levels(k, old_live, nd, df, f_ptr, e_link, mark_l, nshare, t_load, t_res, ceiling,
                newm, act0, rho0, t_m, md, mark_db, db):
    """The levels of the flows ``df[:nd]`` in round *k*; those that moved (or did not take
    part in the last run's round) go to ``md``, their links to ``db``. Returns (nmd, ndb)."""
    nmd, ndb = 0, 0
    for i in range(nd):
        f = df[i]
        v = np.inf
        for e in range(f_ptr[f], f_ptr[f + 1]):
            ln = e_link[e]
            if mark_l[ln] == k:
                v = min(v, nshare[ln])
            else:
                v = min(v, _share(t_res[k, ln], t_load[k, ln]))
        v = min(v, ceiling[f])
        newm[f] = v
        if not (_took_part(old_live, act0, rho0, f, k) and _same(v, t_m[k, f])):
            md[nmd] = f
            nmd += 1
            ndb = _mark_flow_links(f, f_ptr, e_link, mark_db, k, db, ndb)
    return nmd, ndb


def _link_min(k, ndb, db, nmd, md, old_live, act, rho, act0, rho0, f_ptr, e_link, l_ptr,
              l_flow, newm, mark_f, t_m, t_lmin, mark_r, cur):
    """``link_min`` in round *k* of the links ``db[:ndb]`` into ``cur``: the last run's, with
    the moved flows' (``md``) new levels; rescanned where a moved flow may have held it."""
    for i in range(ndb):
        cur[db[i]] = t_lmin[k, db[i]]
    for i in range(nmd):
        g = md[i]
        was = _took_part(old_live, act0, rho0, g, k)
        now = act[g] and rho[g] >= k
        for e in range(f_ptr[g], f_ptr[g + 1]):
            ln = e_link[e]
            if was and t_m[k, g] == t_lmin[k, ln]:
                mark_r[ln] = k
            if now:
                cur[ln] = min(cur[ln], newm[g])
    for i in range(ndb):
        ln = db[i]
        if mark_r[ln] == k:
            v = np.inf
            for q in range(l_ptr[ln], l_ptr[ln + 1]):
                g = l_flow[q]
                if act[g] and rho[g] >= k:
                    v = min(v, newm[g] if mark_f[g] == k else t_m[k, g])
            cur[ln] = v


def _bottlenecks(k, tol, ndb, db, cur, mark_l, nload, nshare, t_load, t_res, t_bn, nbn,
                 l_ptr, l_flow, act, rho, mark_h, hd):
    """The bottleneck tests of the links ``db[:ndb]`` in round *k* (into ``nbn``); the flows
    of a link whose test changed go to ``hd``. Returns how many."""
    nh = 0
    for i in range(ndb):
        ln = db[i]
        if mark_l[ln] == k:
            ld, sh = nload[ln], nshare[ln]
        else:
            ld = t_load[k, ln]
            sh = _share(t_res[k, ln], ld)
        b = ld > 0 and sh <= cur[ln] * tol
        nbn[ln] = b
        if b != t_bn[k, ln]:
            nh = _mark_active(l_flow, l_ptr[ln], l_ptr[ln + 1], act, rho, mark_h, k, hd, nh)
    return nh


def _freezes(f, v, k, tol, ceiling, f_ptr, e_link, mark_db, nbn, t_bn):
    """Flow *f* at level *v* freezes (or is set free) in round *k*: unbounded, at its
    ceiling, or on a bottleneck link (this run's test where it was redone)."""
    if not np.isfinite(v) or (np.isfinite(ceiling[f]) and ceiling[f] <= v * tol):
        return True
    for e in range(f_ptr[f], f_ptr[f + 1]):
        ln = e_link[e]
        if mark_db[ln] == k:
            if nbn[ln]:
                return True
        elif t_bn[k, ln]:
            return True
    return False


def _decide(k, tol, big, nh, hd, newm, mark_f, t_m, ceiling, f_ptr, e_link, mark_db, nbn,
            t_bn, rho, rate, sd, sd_mark, nsd, mark_n, nxt_dl):
    """The decisions of the flows ``hd[:nh]`` in round *k* (the others keep the last run's);
    a flow whose decision changed joins ``sd`` and its links ``nxt_dl``. Returns (nn, nsd)."""
    nn = 0
    for i in range(nh):
        f = hd[i]
        v = newm[f] if mark_f[f] == k else t_m[k, f]
        r = np.inf if not np.isfinite(v) else v
        if _freezes(f, v, k, tol, ceiling, f_ptr, e_link, mark_db, nbn, t_bn):
            if rho[f] == k and _same(rate[f], r):
                continue
            rho[f] = k
            rate[f] = r
        elif rho[f] == k:
            rho[f] = big
        else:
            continue
        if not sd_mark[f]:
            sd_mark[f] = True
            sd[nsd] = f
            nsd += 1
        nn = _mark_flow_links(f, f_ptr, e_link, mark_n, k, nxt_dl, nn)  # next state may differ
    return nn, nsd


def _next_unfrozen(k, k_old, nsd, sd, act, rho, act0, rho0, t_nunf, f_ptr, e_link, mark_n,
                   nxt_dl, nn):
    """The unfrozen count of round k + 1; the links of flows whose status then differs from
    the last run's go to ``nxt_dl``. Returns (count, nn)."""
    nunf_next = t_nunf[k + 1]
    for i in range(nsd):
        f = sd[i]
        a = act[f] and rho[f] >= k + 1
        b = act0[f] and rho0[f] >= k + 1 and k + 1 < k_old
        if a != b:
            nunf_next += (1 if a else 0) - (1 if b else 0)
            nn = _mark_flow_links(f, f_ptr, e_link, mark_n, k, nxt_dl, nn)
    return nunf_next, nn


def _next_state(k, nn, nxt_dl, l_ptr, l_flow, l_weight, act, rho, rate, mark_l, nres, t_res,
                t_load, nxt_load, nxt_res):
    """Load and residual at round k + 1 of the links ``nxt_dl[:nn]``; those that differ from
    the last run's stay listed (first in ``nxt_dl``). Returns how many."""
    kept = 0
    for i in range(nn):
        ln = nxt_dl[i]
        s = 0.0
        d = 0.0
        for q in range(l_ptr[ln], l_ptr[ln + 1]):
            g = l_flow[q]
            if act[g]:
                if rho[g] >= k + 1:
                    s += l_weight[q]
                elif rho[g] == k and np.isfinite(rate[g]):
                    d += l_weight[q] * rate[g]
        res = (nres[ln] if mark_l[ln] == k else t_res[k, ln]) - d
        if _same(s, t_load[k + 1, ln]) and _same(res, t_res[k + 1, ln]):
            continue
        nxt_load[ln] = s
        nxt_res[ln] = res
        nxt_dl[kept] = ln
        kept += 1
    return kept


def _commit_round(k, nunf, ndl, dl, nload, nres, nd, df, newm, ndb, db, nbn, cur, t_load,
                  t_res, t_m, t_bn, t_lmin, t_nunf):
    """Round *k*'s recomputed numbers go into its trace row: it becomes this run's."""
    for i in range(ndl):
        ln = dl[i]
        t_load[k, ln] = nload[ln]
        t_res[k, ln] = nres[ln]
    for i in range(nd):
        t_m[k, df[i]] = newm[df[i]]
    for i in range(ndb):
        t_bn[k, db[i]] = nbn[db[i]]
        t_lmin[k, db[i]] = cur[db[i]]
    t_nunf[k] = nunf


def _advance(k, kept, nxt_dl, dl, mark_l, nload, nres, nxt_load, nxt_res):
    """Round k + 1's dirty links are the ones ``_next_state`` kept."""
    for i in range(kept):
        ln = nxt_dl[i]
        dl[i] = ln
        mark_l[ln] = k + 1
        nload[ln] = nxt_load[ln]
        nres[ln] = nxt_res[ln]


def _final_row(k, ndl, dl, nload, nres, t_load, t_res, t_bn, t_lmin, t_nunf):
    """Row *k* is the final state: no flow left, no bottleneck, no level."""
    t_bn[k, :] = False
    t_lmin[k, :] = np.inf
    for i in range(ndl):
        ln = dl[i]
        t_load[k, ln] = nload[ln]
        t_res[k, ln] = nres[ln]
    t_nunf[k] = 0


def _resolve_py(f_ptr, e_link, e_weight, l_ptr, l_flow, l_weight, ceiling, tol, act,
                act0, rho, rate, t_load, t_res, t_m, t_lmin, t_bn, t_nunf, k_old, big):
    """Re-run the rounds for the active set ``act`` from the trace of the last run (active
    set ``act0``), recomputing only what differs from it; the trace becomes this run's.
    Returns (status, rounds): 0 done, 1 no progress, 2 out of trace rows."""
    nf, nl = len(f_ptr) - 1, len(l_ptr) - 1
    kcap = t_load.shape[0] - 1
    rho0 = rho.copy()
    final0 = t_res[k_old].copy()
    ready = k_old + 1  # rows 0..k_old hold the last run; later rows start as its final state
    # flows whose status (taking part, freeze round) may differ from the last run's
    sd = np.empty(nf, np.int64)
    sd_mark = np.zeros(nf, np.bool_)
    nsd = _status_changes(nf, act, act0, rho, rate, big, sd, sd_mark)
    # scratch: per link, marks of the round it was listed dirty (mark_l), its bottleneck
    # recomputed (mark_db), its link_min rescanned (mark_r), listed for the next round
    # (mark_n); per flow, its level recomputed (mark_f), re-decided (mark_h)
    mark_l, mark_db = np.full(nl, -1, np.int64), np.full(nl, -1, np.int64)
    mark_r, mark_n = np.full(nl, -1, np.int64), np.full(nl, -1, np.int64)
    mark_f, mark_h = np.full(nf, -1, np.int64), np.full(nf, -1, np.int64)
    dl, nxt_dl, db = np.empty(nl, np.int64), np.empty(nl, np.int64), np.empty(nl, np.int64)
    md, df, hd = np.empty(nf, np.int64), np.empty(nf, np.int64), np.empty(nf, np.int64)
    cur, nload, nres, nshare = np.empty(nl), np.empty(nl), np.empty(nl), np.empty(nl)
    nxt_load, nxt_res, nbn, newm = np.empty(nl), np.empty(nl), np.empty(nl, np.bool_), np.empty(nf)
    ndl = _first_dirty(sd, nsd, f_ptr, e_link, l_ptr, l_flow, l_weight, act, t_load, t_res,
                       mark_l, dl, nload, nres)
    nunf = t_nunf[0]
    for i in range(nsd):
        nunf += (1 if act[sd[i]] else 0) - (1 if act0[sd[i]] else 0)
    k = 0
    while nunf != 0:
        if k + 1 >= kcap:
            return 2, k
        ready = _extend_rows(ready, k, final0, t_load, t_res, t_bn, t_lmin, t_nunf)
        old_live = k < k_old
        for i in range(ndl):  # 1. shares of the dirty links
            nshare[dl[i]] = _share(nres[dl[i]], nload[dl[i]])
        # 2. levels that may move: unfrozen flows on dirty links, flows whose status differs
        nd = 0
        for i in range(ndl):
            nd = _mark_active(l_flow, l_ptr[dl[i]], l_ptr[dl[i] + 1], act, rho, mark_f, k, df,
                              nd)
        nd = _mark_active(sd, 0, nsd, act, rho, mark_f, k, df, nd)
        nmd, ndb = _new_levels(k, old_live, nd, df, f_ptr, e_link, mark_l, nshare, t_load,
                               t_res, ceiling, newm, act0, rho0, t_m, md, mark_db, db)
        for i in range(nsd):  # flows that took part in the last run's round, not this one's
            f = sd[i]
            if _took_part(old_live, act0, rho0, f, k) and not (act[f] and rho[f] >= k):
                md[nmd] = f
                nmd += 1
                ndb = _mark_flow_links(f, f_ptr, e_link, mark_db, k, db, ndb)
        ndb = _mark_each(dl, 0, ndl, mark_db, k, db, ndb)
        # 3. bottleneck tests of those links
        _link_min(k, ndb, db, nmd, md, old_live, act, rho, act0, rho0, f_ptr, e_link, l_ptr,
                  l_flow, newm, mark_f, t_m, t_lmin, mark_r, cur)
        nh = _bottlenecks(k, tol, ndb, db, cur, mark_l, nload, nshare, t_load, t_res, t_bn,
                          nbn, l_ptr, l_flow, act, rho, mark_h, hd)
        nh = _mark_each(df, 0, nd, mark_h, k, hd, nh)
        # 4. decisions of those flows; the others keep the last run's
        nn, nsd = _decide(k, tol, big, nh, hd, newm, mark_f, t_m, ceiling, f_ptr, e_link,
                          mark_db, nbn, t_bn, rho, rate, sd, sd_mark, nsd, mark_n, nxt_dl)
        # 5. next round's unfrozen count; links of flows whose status then differs
        nunf_next, nn = _next_unfrozen(k, k_old, nsd, sd, act, rho, act0, rho0, t_nunf, f_ptr,
                                       e_link, mark_n, nxt_dl, nn)
        nn = _mark_each(dl, 0, ndl, mark_n, k, nxt_dl, nn)
        if nunf_next == nunf:
            return 1, k
        # 6. those links' load and residual at the next round
        kept = _next_state(k, nn, nxt_dl, l_ptr, l_flow, l_weight, act, rho, rate, mark_l,
                           nres, t_res, t_load, nxt_load, nxt_res)
        # 7. this round's row becomes this run's
        _commit_round(k, nunf, ndl, dl, nload, nres, nd, df, newm, ndb, db, nbn, cur, t_load,
                      t_res, t_m, t_bn, t_lmin, t_nunf)
        _advance(k, kept, nxt_dl, dl, mark_l, nload, nres, nxt_load, nxt_res)
        ndl = kept
        nunf = nunf_next
        k += 1
    _final_row(k, ndl, dl, nload, nres, t_load, t_res, t_bn, t_lmin, t_nunf)
    return 0, k


def _jit(fn, **kwargs):
    """Compiled, with the machine code cached on disk where numba finds a place for it."""
    try:
        return njit(cache=True, **kwargs)(fn)
    except RuntimeError:  # pragma: no cover - no writable cache location
        return njit(**kwargs)(fn)


if njit is not None:
    _compact = _jit(_compact_py, nogil=True)
    for _name in ("_term", "_fold", "_settled"):
        globals()[_name] = _jit(globals()[_name], inline="always")
    _fill = _jit(_fill_py, nogil=True)
    _first_round = _jit(_first_round_py, nogil=True)
    # the re-solve's helpers, inlined into it (numba IR inlining: one compiled function)
    for _name in ("_same", "_mark_each", "_mark_flow_links", "_mark_active", "_share",
                  "_took_part", "_status_changes", "_first_dirty", "_extend_rows",
                  "_new_levels", "_link_min", "_bottlenecks", "_freezes", "_decide",
                  "_next_unfrozen", "_next_state", "_commit_round", "_advance", "_final_row"):
        globals()[_name] = _jit(globals()[_name], inline="always")
    del _name
    _resolve = _jit(_resolve_py, nogil=True)
else:  # pragma: no cover
    _compact, _fill, _resolve = _compact_py, _fill_py, _resolve_py
    _first_round = _first_round_py
