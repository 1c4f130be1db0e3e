"""Rates of greedy flows (no end-to-end congestion control) on a lossless PFC fabric.

This is the fluid equilibrium of the packet engine's switches with CC ``none`` (FIFO egress
queues, one PFC ingress counter per ingress port, one XOFF threshold per switch), derived from
three facts:

1. **Little's law in a FIFO.** Every flow through a congested FIFO egress ``e`` sees the same
   queueing delay ``D_e``, so its throughput there is proportional to its bytes in the queue.
2. **Equal ingress thresholds.** A paused ingress port ``i`` holds ``T`` bytes (the XOFF
   threshold, the same for every ingress port of the switch), spread over the congested egresses
   it feeds: ``q_ie = phi_ie T``, ``sum_e phi_ie = 1``. With (1), at egress ``e`` the paused
   ingress ports share the capacity in proportion to ``phi_ie``: *port-fair* max-min, not
   flow-fair, where ``phi_ie = 1`` (a port feeding one congested egress). A port that feeds two
   congested egresses gets half the weight at each (``phi_ie ~ x_ie D_e``).
3. **Head-of-line blocking.** A PAUSE stops the whole upstream port, so every flow arriving on
   ``i`` is slowed by the same factor ``s_i`` (the FIFO upstream keeps the arrival mix):
   ``s_i = min over the egresses e fed by i of (allocation of i at e) / (arrival of i at e)``.
   Flows of ``i`` bound for an uncongested egress are the victims.

The rates are the fixed point of a sweep along the paths (links in topological order of the
routing DAG, ``level``): at each link, groups (ingress port, egress link) share the egress by
weighted water-filling (weights ``phi``), each ingress port is scaled by ``s_i``, and flows keep
their proportions inside a group (FIFO). Back-pressure: a paused link's capacity, seen by the
switch upstream, becomes what the switch downstream admits from it (the upstream egress is
paused, its queue fills and pauses *its* ingress ports port-fairly). The first link of a path
(the sender NIC) is shared per flow (the NIC's QP scheduler is round robin). The sweep is
repeated, with a damped and shrinking step (Mann iteration: a map that would cycle settles),
until no rate changes by more than 1e-7 (relative) between sweeps, or for at most
``max_sweeps``; on a 128-flow permutation the rates after 100 sweeps differ from those after
200 by under 1e-4.

Everything is numpy over the (flow, link) entries; the loops are over path levels (about 6 on a
clos3 fabric), over the HOL fixed point inside one level, and over outer sweeps, never over
flows. Limits: ``phi`` assumes one threshold per switch and ignores its dynamic dependence on
free buffer; a PFC deadlock (cyclic buffer dependency) is not modelled (up-down routing has
none).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netsim.flow.maxmin import Incidence

_TOL = 1e-7  # relative change of the rates (between sweeps) at which the fixed point stops


@dataclass(frozen=True)
class _Plan:
    """What the sweep needs about the paths, computed once per :class:`Incidence`."""

    level: np.ndarray        # per link: position in the routing DAG (0 = first links)
    nlevels: int
    e_group: np.ndarray      # per entry: group (ingress port, egress link)
    g_link: np.ndarray       # per group: egress link
    g_ing: np.ndarray        # per group: ingress port (a link id, or num_links + flow)
    g_level: np.ndarray      # per group: level of its egress link
    first_link: np.ndarray   # per flow: the first link of its path (-1: no link)
    num_ports: int


def plan(inc: Incidence) -> _Plan:
    """Groups and link levels of an incidence built from ordered paths (``from_csr``)."""
    cached = inc.cache.get("pfc_plan")
    if cached is not None:
        return cached
    nl, nf = inc.num_links, inc.num_flows
    if not inc.path_order:
        raise ValueError("pfc sharing needs the incidence in path order (Incidence.from_csr): "
                         "use simulate_flows / simulate_paths, not lockstep collective groups")
    if np.any(inc.e_weight != 1.0):
        raise ValueError("pfc sharing needs unit incidence weights (one entry per QP and link)")
    same = np.r_[False, inc.e_flow[1:] == inc.e_flow[:-1]]
    prev = np.where(same, np.r_[-1, inc.e_link[:-1]], -1)
    level = np.zeros(nl, np.int64)
    has = prev >= 0
    for _ in range(nl + 1):  # longest path in the link-succession DAG
        new = level.copy()
        np.maximum.at(new, inc.e_link[has], level[prev[has]] + 1)
        if np.array_equal(new, level):
            break
        level = new
    else:
        raise ValueError("paths form a cycle of links (routing loop): pfc sharing needs a DAG")
    ing = np.where(has, prev, nl + inc.e_flow)
    key = ing * nl + inc.e_link
    uniq, e_group = np.unique(key, return_inverse=True)
    g_link = uniq % nl
    first = np.full(nf, -1, np.int64)
    starts = np.flatnonzero(~same)
    first[inc.e_flow[starts]] = inc.e_link[starts]
    out = _Plan(level, int(level.max(initial=0)) + 1, e_group.ravel(), g_link, uniq // nl,
                level[g_link], first, nl + nf)
    inc.cache["pfc_plan"] = out
    return out


def waterfill(g_link: np.ndarray, demand: np.ndarray, weight: np.ndarray, cap: np.ndarray
              ) -> np.ndarray:
    """Weighted water level of every link: ``sum_g min(demand_g, weight_g x level) = cap``.

    ``inf`` where the demands fit (the link is not saturated). Groups are given by their link.
    """
    nl = len(cap)
    d = np.minimum(demand, cap[g_link])
    tot = np.bincount(g_link, weights=d, minlength=nl)
    lam = np.full(nl, np.inf)
    sat = tot > cap * (1 + 1e-12)
    sel = np.flatnonzero(sat[g_link] & (weight > 0))
    if len(sel) == 0:
        return lam
    gl, ds, ws = g_link[sel], d[sel], weight[sel]
    t = ds / ws
    order = np.lexsort((t, gl))
    gl, ds, ws, t = gl[order], ds[order], ws[order], t[order]
    seg = np.flatnonzero(np.r_[True, gl[1:] != gl[:-1]])
    seg_of = np.cumsum(np.r_[True, gl[1:] != gl[:-1]]) - 1
    cum_d = np.cumsum(ds)
    d_before = cum_d - ds - (cum_d[seg] - ds[seg])[seg_of]
    cum_w = np.cumsum(ws)
    w_tot = np.add.reduceat(ws, seg)
    w_from = w_tot[seg_of] - (cum_w - ws - (cum_w[seg] - ws[seg])[seg_of])
    reached = d_before + t * w_from >= cap[gl] * (1 - 1e-12)
    # the first breakpoint of each link at which the filled volume reaches the capacity
    k = np.flatnonzero(reached)
    links, idx = np.unique(gl[k], return_index=True)
    k = k[idx]
    lam[links] = (cap[links] - d_before[k]) / w_from[k]
    return lam


def pfc_rates(inc: Incidence, capacity: np.ndarray, active: np.ndarray | None = None,
              max_sweeps: int = 100) -> np.ndarray:
    """Rate of every flow under lossless FIFO switches with PFC (module docstring).

    Parameters
    ----------
    inc : Incidence
        Built from ordered paths (``Incidence.from_csr``), unit weights.
    capacity : np.ndarray[float]
        Per-link capacity; the rates come out in the same unit.
    active : np.ndarray[bool], optional
        Flows that take part (the others get 0).

    Returns
    -------
    np.ndarray[float64]
    """
    p = plan(inc)
    nl, nf = inc.num_links, inc.num_flows
    cap = np.asarray(capacity, np.float64)
    on = np.ones(nf, bool) if active is None else np.asarray(active, bool)
    on &= p.first_link >= 0
    ent = on[inc.e_flow]
    by_level = [np.flatnonzero(ent & (p.level[inc.e_link] == lv)) for lv in range(p.nlevels)]
    phi = np.ones(len(p.g_link))
    cap_eff = cap.copy()
    rate = np.zeros(nf)
    for k in range(max_sweeps):
        # damping step: 1/2 at first, shrinking so that a cycling map settles (Mann iteration)
        step = 0.5 / (1.0 + k / 20.0)
        a, lam, s_g, pot, arrive = _sweep(inc, p, cap, cap_eff, phi, on, by_level)
        cap_next = cap.copy()
        links = np.flatnonzero(np.isfinite(pot[:nl]))
        cap_next[links] = np.minimum(cap[links], pot[links] * arrive[links])
        phi = phi + step * (_update_phi(p, a, inc, s_g, lam, cap, phi, on) - phi)
        change = np.max(np.abs(a - rate) / np.maximum(a, 1e-300), initial=0.0)
        rate = a
        cap_eff = cap_eff + step * (cap_next - cap_eff)
        if change < _TOL and np.allclose(cap_eff, cap_next, rtol=_TOL, atol=0):
            break
    return np.where(on, rate, 0.0)


def _sweep(inc, p, cap, cap_eff, phi, on, by_level):
    """One pass along the levels; returns rates, link levels, group scales, port potentials."""
    nl = inc.num_links
    a = np.where(on & (p.first_link >= 0), cap[np.maximum(p.first_link, 0)], 0.0)
    lam = np.full(nl, np.inf)
    s_g = np.ones(len(p.g_link))
    pot = np.full(p.num_ports, np.inf)
    arrive = np.zeros(p.num_ports)
    for ent in by_level:
        if len(ent) == 0:
            continue
        grp, flows = p.e_group[ent], inc.e_flow[ent]
        ug, gi = np.unique(grp, return_inverse=True)
        dem = np.bincount(gi, weights=a[flows], minlength=len(ug))
        ug, dem = ug[dem > 0], dem[dem > 0]
        ing, glk, w = p.g_ing[ug], p.g_link[ug], phi[ug]
        s, lev = _hol(ing, glk, dem, w, cap_eff, p.num_ports)
        lam[glk] = lev[glk]
        s_g[ug] = s[ing]
        ratio = np.where(np.isfinite(lev[glk]), w * lev[glk] / dem, np.inf)
        np.minimum.at(pot, ing, ratio)
        np.add.at(arrive, ing, dem)
        a[flows] *= s[p.g_ing[grp]]  # one entry per flow and level: no duplicate index
    return a, lam, s_g, pot, arrive


def _hol(ing, glk, dem, w, cap, num_ports, iters: int = 200):
    """HOL scale of every ingress port and the water level of every egress.

    A port's scale is the min over its groups of allocation / arrival. The level of an egress
    is computed with each group's arrival scaled by what the port's *other* egresses impose
    (a group that is throttled elsewhere leaves room here), so the iteration is a fixed point
    of the whole set, not of one egress at a time.
    """
    ratio = np.ones(len(ing))
    for _ in range(iters):
        lev = waterfill(glk, dem * _min_of_others(ing, ratio, num_ports), w, cap)
        new = np.minimum(1.0, np.where(np.isfinite(lev[glk]), w * lev[glk] / dem, np.inf))
        if np.allclose(new, ratio, rtol=1e-13, atol=0):
            break
        ratio = new
    s = np.ones(num_ports)
    np.minimum.at(s, ing, new)
    return s, lev


def _min_of_others(key: np.ndarray, value: np.ndarray, size: int) -> np.ndarray:
    """For every element, the min of ``value`` over the *other* elements with its key (1 if none)."""
    order = np.lexsort((value, key))
    k, v = key[order], value[order]
    first = np.r_[True, k[1:] != k[:-1]]
    seg = np.flatnonzero(first)
    m1 = np.ones(size)
    m1[k[seg]] = v[seg]
    m2 = np.ones(size)
    second = seg + 1
    has2 = (second < len(k))
    has2[has2] = k[second[has2]] == k[seg[has2]]
    m2[k[seg[has2]]] = v[second[has2]]
    out_sorted = np.where(first, m2[k], m1[k])
    out = np.empty_like(out_sorted)
    out[order] = out_sorted
    return np.minimum(out, 1.0)


def _update_phi(p, a, inc, s_g, lam, cap, phi, on):
    """Share of each ingress port's paused bytes at each congested egress (Little's law)."""
    x = np.bincount(p.e_group, weights=a[inc.e_flow] * on[inc.e_flow], minlength=len(p.g_link))
    congested = np.isfinite(lam[p.g_link]) & (x > 0)
    big_phi = np.bincount(p.g_link, weights=np.where(congested, phi, 0.0), minlength=len(cap))
    raw = np.where(congested, x * big_phi[p.g_link] / cap[p.g_link], 0.0)
    norm = np.bincount(p.g_ing, weights=raw, minlength=p.num_ports)
    return np.where(congested, raw / np.maximum(norm[p.g_ing], 1e-300), phi)
