"""Max-min fair rates by progressive filling, vectorised over a sparse link/flow incidence.

The classic progressive filling raises every unfrozen flow's rate together and freezes the
flows of the first link that saturates, one link per round. Here a round freezes *every* link
that is a local bottleneck at once, which gives the same allocation in far fewer rounds:

    share_l = residual_l / (weight of unfrozen flows on l)
    m_f     = min over the links of flow f of share_l
    link l is a bottleneck now  iff  share_l <= min over unfrozen flows f on l of m_f

A bottleneck link's share cannot change before the filling level reaches it: none of its flows
crosses a link with a smaller share, and freezing a flow elsewhere at a rate below a link's share
only *raises* that link's share. So all its flows are frozen at ``share_l`` in the same round.
A round costs O(nnz) numpy work; the number of rounds is the number of distinct levels of the
bottleneck hierarchy (a handful on symmetric fabrics), not the number of flows.

Weights: flow f puts ``w_lf * r_f`` on link l. That is how a *group* of flows that must move in
lockstep (a NCCL ring channel: every connection runs at the pace of the slowest one) becomes one
commodity: its incidence on a link is the number of its member QPs that cross the link.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from netsim.flow.link_order import stable_order, unique_pairs
from netsim.flow.maxmin_fast import maxmin_rates_fast

_RTOL = 1e-9  # ties within this relative tolerance are the same filling level


@dataclass(frozen=True)
class Incidence:
    """Link/flow incidence in both orders, built once and reused by every rate computation.

    Attributes
    ----------
    num_links, num_flows : int
    e_flow, e_link : np.ndarray[int64]
        One entry per (flow, link) pair, sorted by flow (CSR order).
    e_weight : np.ndarray[float64]
        Load a unit rate of the flow puts on the link (1.0 for a plain flow).
    by_link : np.ndarray[int64]
        Permutation of the entries that sorts them by link (CSC order), stable: entry (flow)
        order within a link.
    e_count : np.ndarray[float64]
        QPs of the flow on the link (equals ``e_weight`` unless given: a lockstep group
        whose connections split over q QPs has weight 1/q and count 1 per QP).
    cache : dict
        Structures a sharing model derives from the paths once (e.g. the PFC model's groups).
    path_order : bool
        True when each flow's entries follow its path, first link first (``from_csr``): the
        PFC model needs the hop order.
    """

    num_links: int
    num_flows: int
    e_flow: np.ndarray
    e_link: np.ndarray
    e_weight: np.ndarray
    by_link: np.ndarray
    e_count: np.ndarray
    cache: dict = field(default_factory=dict, compare=False, repr=False)
    path_order: bool = False

    @classmethod
    def from_csr(cls, indptr: np.ndarray, links: np.ndarray, num_links: int,
                 weights: np.ndarray | None = None, counts: np.ndarray | None = None
                 ) -> Incidence:
        """Build from a CSR path list (``links[indptr[i]:indptr[i+1]]`` = links of flow i)."""
        indptr = np.asarray(indptr, dtype=np.int64)
        links = np.asarray(links, dtype=np.int64)
        num_flows = len(indptr) - 1
        e_flow = np.repeat(np.arange(num_flows, dtype=np.int64), np.diff(indptr))
        w = np.ones(len(links)) if weights is None else np.asarray(weights, dtype=np.float64)
        if len(links) and (links.min() < 0 or links.max() >= num_links):
            raise ValueError(f"link ids must lie in [0, {num_links}): got {links.min()}..{links.max()}")
        return replace(cls._build(num_links, num_flows, e_flow, links, w, counts), path_order=True)

    @classmethod
    def from_entries(cls, flow: np.ndarray, link: np.ndarray, weight: np.ndarray,
                     count: np.ndarray, num_flows: int, num_links: int) -> Incidence:
        """Build from unsorted (flow, link) entries, summing duplicates."""
        flow, link = np.asarray(flow, np.int64), np.asarray(link, np.int64)
        uniq, inv = _unique_pairs(flow, link, num_flows, num_links)
        w = np.bincount(inv, weights=weight, minlength=len(uniq))
        c = np.bincount(inv, weights=count, minlength=len(uniq))
        return cls._build(num_links, num_flows, uniq // num_links, uniq % num_links, w, c)

    @classmethod
    def from_matrix(cls, matrix) -> Incidence:
        """Build from a (links x flows) matrix, dense or scipy.sparse; entries are the weights."""
        coo = sp.coo_matrix(matrix)
        order = np.lexsort((coo.row, coo.col))
        return cls._build(coo.shape[0], coo.shape[1], coo.col[order].astype(np.int64),
                          coo.row[order].astype(np.int64), coo.data[order].astype(np.float64))

    @classmethod
    def _build(cls, num_links, num_flows, e_flow, e_link, e_weight, e_count=None) -> Incidence:
        if np.any(e_weight <= 0):
            raise ValueError("incidence weights must be positive: drop zero entries")
        by_link = stable_order(e_link, num_links)
        count = e_weight if e_count is None else np.asarray(e_count, np.float64)
        return cls(int(num_links), int(num_flows), e_flow, e_link, e_weight, by_link, count)

    def matrix(self) -> sp.csr_matrix:
        """The (links x flows) incidence as a scipy.sparse CSR matrix."""
        return sp.csr_matrix((self.e_weight, (self.e_link, self.e_flow)),
                             shape=(self.num_links, self.num_flows))


def _unique_pairs(flow: np.ndarray, link: np.ndarray, num_flows: int, num_links: int,
                  compiled: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(flow * num_links + link, return_inverse=True)``, ordered by two stable
    counting sorts (link, then flow: ``stable_order``) instead of a comparison sort of the keys,
    in one compiled call where it applies (``link_order.unique_pairs``). Sorted keys and their
    distinct values do not depend on how they were sorted, so both outputs are numpy's
    exactly."""
    got = unique_pairs(flow, link, num_flows, num_links) if compiled else None
    if got is not None:
        return got
    key = flow * num_links + link
    if len(key) == 0:
        return np.unique(key, return_inverse=True)
    by_link = stable_order(link, num_links)
    order = by_link[stable_order(flow[by_link], num_flows)]
    sorted_key = key[order]
    head = np.empty(len(key), bool)
    head[0] = True
    np.not_equal(sorted_key[1:], sorted_key[:-1], out=head[1:])
    inv = np.empty(len(key), np.int64)
    inv[order] = np.cumsum(head) - 1
    return sorted_key[head], inv


def _segment_min(keys: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Min of ``values`` per key (keys sorted, non-decreasing); ``inf`` for absent keys."""
    out = np.full(size, np.inf)
    if len(keys) == 0:
        return out
    head = np.empty(len(keys), bool)
    head[0] = True
    np.not_equal(keys[1:], keys[:-1], out=head[1:])
    starts = np.flatnonzero(head)
    out[keys[starts]] = np.minimum.reduceat(values, starts)
    return out


@dataclass(frozen=True)
class Slowest:
    """What a caller of ``maxmin_rates`` reads when it wants only each segment's slowest
    transfer (``FlowCommModel`` pricing a batch of sends: the slowest pair of each pipeline
    stage). Flow f's time at rate r is ``latency_s[f] + size_bytes[f] * (bits_per_byte[f] /
    r)`` (infinite at r = 0); a segment's time is the largest of its flows' and of its floor
    (``floor_s``: the slowest already known from elsewhere, -inf for none). Flows of segment
    -1 are not read.

    Given this rule the progressive filling stops as soon as no unfrozen flow can be the
    slowest of its segment: a flow's level (the tightest share on its path) only rises from
    round to round, so its time at its current level bounds its final time from above; once
    every such bound is below the segment's slowest frozen time (by the filling's relative
    tolerance, far above rounding), the segment's time is settled. Frozen flows get their
    exact rates; unfrozen ones their level, a lower bound, which can change no segment's time.
    ``segment_times`` of the returned rates is then, bit for bit, that of the full allocation.
    """

    segment: np.ndarray
    latency_s: np.ndarray
    size_bytes: np.ndarray
    bits_per_byte: np.ndarray
    floor_s: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.segment)
        for name in ("latency_s", "size_bytes", "bits_per_byte"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"Slowest.{name} has {len(getattr(self, name))} entries, "
                                 f"segment {n}: give one per flow")
        if n and (np.min(self.size_bytes) <= 0 or np.min(self.bits_per_byte) <= 0
                  or np.min(self.latency_s) < 0):
            raise ValueError("Slowest: sizes and bits per byte must be positive, latencies "
                             "not negative")
        if n and np.max(self.segment) >= len(self.floor_s):
            raise ValueError(f"Slowest.segment goes up to {np.max(self.segment)}: floor_s "
                             f"needs one entry per segment")

    def arrays(self) -> tuple:
        """The rule as the compiled kernel takes it (the floors copied: it raises them)."""
        return (np.ascontiguousarray(self.segment, np.int64),
                np.ascontiguousarray(self.latency_s, np.float64),
                np.ascontiguousarray(self.size_bytes, np.float64),
                np.ascontiguousarray(self.bits_per_byte, np.float64),
                np.array(self.floor_s, np.float64))

    def times(self, rate: np.ndarray) -> np.ndarray:
        """Each flow's time at ``rate``."""
        with np.errstate(divide="ignore", invalid="ignore"):
            x = np.where(rate > 0, self.bits_per_byte / rate, np.inf)
        return self.latency_s + self.size_bytes * x

    def segment_times(self, rate: np.ndarray) -> np.ndarray:
        """Each segment's time: its floor or its slowest flow's time at ``rate``."""
        out = np.array(self.floor_s, np.float64)
        sel = self.segment >= 0
        np.maximum.at(out, self.segment[sel], self.times(rate)[sel])
        return out


def maxmin_rates(inc: Incidence, capacity: np.ndarray, active: np.ndarray | None = None,
                 max_rate: np.ndarray | None = None, slowest: Slowest | None = None
                 ) -> np.ndarray:
    """Max-min fair rate of every flow (progressive filling, parallel bottleneck rounds).

    Parameters
    ----------
    inc : Incidence
        Link/flow incidence with weights.
    capacity : np.ndarray[float]
        Capacity of each link (any rate unit; the result is in the same unit).
    active : np.ndarray[bool], optional
        Flows that take part; inactive flows get rate 0 and use no capacity.
    max_rate : np.ndarray[float], optional
        Per-flow rate ceiling (a demand); ``inf`` for none.
    slowest : Slowest, optional
        Only each segment's slowest time will be read: stop once it is settled (see
        :class:`Slowest`; the rates of flows that cannot be a segment's slowest are then
        lower bounds).

    Returns
    -------
    np.ndarray[float64]
        Rate of each flow. A flow that crosses no link and has no ceiling gets ``inf``.
    """
    capacity, unfrozen, ceiling = _checked(inc, capacity, active, max_rate)
    _check_rule(inc, slowest)
    rate = maxmin_rates_fast(inc, capacity, unfrozen, ceiling, 1 + _RTOL, slowest)
    return _filling(inc, capacity, unfrozen, ceiling, slowest) if rate is None else rate


def maxmin_rates_plain(inc: Incidence, capacity: np.ndarray, active: np.ndarray | None = None,
                       max_rate: np.ndarray | None = None, slowest: Slowest | None = None
                       ) -> np.ndarray:
    """``maxmin_rates`` by the plain numpy loop, every round over every unfrozen entry (the
    reference the compiled kernel of ``netsim.flow.maxmin_fast`` is tested against: the
    same rates, bit for bit)."""
    _check_rule(inc, slowest)
    return _filling(inc, *_checked(inc, capacity, active, max_rate), slowest)


def maxmin_first_round(indptr: np.ndarray, links: np.ndarray, weights: np.ndarray,
                       capacity: np.ndarray, slowest: Slowest) -> np.ndarray | None:
    """``maxmin_rates(Incidence.from_csr(indptr, links, len(capacity), weights), capacity,
    slowest=slowest)`` when its stop rule is settled after the first round of the filling
    (the same rates, bit for bit), without building the incidence; None when it is not (or
    the compiled kernel is not available): build the incidence and call ``maxmin_rates``."""
    from netsim.flow.maxmin_fast import first_round_rates

    if len(slowest.segment) != len(indptr) - 1:
        raise ValueError(f"Slowest has {len(slowest.segment)} flows, the paths "
                         f"{len(indptr) - 1}: give one per flow")
    return first_round_rates(indptr, links, weights, capacity, 1 + _RTOL, slowest)


def _check_rule(inc: Incidence, slowest: Slowest | None) -> None:
    if slowest is not None and len(slowest.segment) != inc.num_flows:
        raise ValueError(f"Slowest has {len(slowest.segment)} flows, the incidence "
                         f"{inc.num_flows}: give one per flow")


def _checked(inc: Incidence, capacity, active, max_rate):
    """Capacity (checked), the flows taking part (a copy) and the ceilings, as arrays."""
    nf, nl = inc.num_flows, inc.num_links
    capacity = np.asarray(capacity, dtype=np.float64)
    if capacity.shape != (nl,):
        raise ValueError(f"capacity has shape {capacity.shape}, expected ({nl},): one per link")
    if np.any(capacity < 0):
        raise ValueError("capacity must be non-negative")
    unfrozen = np.ones(nf, bool) if active is None else np.asarray(active, bool).copy()
    ceiling = np.full(nf, np.inf) if max_rate is None else np.asarray(max_rate, np.float64)
    return capacity, unfrozen, ceiling


def _filling(inc: Incidence, capacity: np.ndarray, unfrozen: np.ndarray,
             ceiling: np.ndarray, slowest: Slowest | None = None) -> np.ndarray:
    """Progressive filling in numpy, every round over every unfrozen entry (until the stop
    rule ``slowest`` is settled, if one is given)."""
    nf, nl = inc.num_flows, inc.num_links
    rate = np.zeros(nf)
    taking = unfrozen.copy()  # frozen flows are these less the unfrozen ones
    residual = capacity.copy()
    # the entries of unfrozen flows (flow order); each round drops those of the flows it
    # freezes (the same entries in the same order as masking the full arrays gives, so the
    # sums and the result are bit for bit those of the unshrunk loop)
    ef, el, ew = inc.e_flow, inc.e_link, inc.e_weight
    for _ in range(nf + 1):  # each round freezes at least one flow
        if not unfrozen.any():
            break
        keep = unfrozen[ef]
        if not keep.all():
            ef, el, ew = ef[keep], el[keep], ew[keep]
        load = np.bincount(el, weights=ew, minlength=nl)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(load > 0, np.maximum(residual, 0.0) / load, np.inf)
        # per-flow level: the tightest share on its path, or its own ceiling
        m_flow = np.minimum(_segment_min(ef, share[el], nf), ceiling)
        link_min = np.full(nl, np.inf)  # a minimum: the order of the entries cannot matter
        np.minimum.at(link_min, el, m_flow[ef])
        bottleneck = (load > 0) & (share <= link_min * (1 + _RTOL))
        # flows frozen this round: those on a bottleneck link, and those at their own ceiling
        hit = np.zeros(nf, bool)
        hit[ef[bottleneck[el]]] = True
        hit |= unfrozen & (ceiling <= m_flow * (1 + _RTOL)) & np.isfinite(ceiling)
        # a flow crossing no link at all and without a ceiling: unbounded
        free = unfrozen & ~np.isfinite(m_flow)
        rate[free] = np.inf
        unfrozen &= ~free
        hit &= unfrozen
        if not hit.any():
            if free.any():
                continue
            raise RuntimeError("progressive filling made no progress")  # pragma: no cover
        rate[hit] = m_flow[hit]
        sel = hit[ef]
        residual -= np.bincount(el[sel], weights=ew[sel] * rate[ef[sel]], minlength=nl)
        unfrozen &= ~hit
        if slowest is not None and _settled(slowest, taking & ~unfrozen, unfrozen, rate, m_flow):
            rate[unfrozen] = m_flow[unfrozen]
            break
    return rate


def _settled(rule: Slowest, frozen: np.ndarray, live: np.ndarray, rate: np.ndarray,
             level: np.ndarray) -> bool:
    """No live flow of a segment can be its slowest: its time at its level, with the
    filling's tolerance as margin, is at most the segment's slowest frozen time."""
    seg = rule.segment
    slow = np.array(rule.floor_s, np.float64)
    f = np.flatnonzero(frozen & (seg >= 0))
    np.maximum.at(slow, seg[f], rule.times(rate)[f])
    g = np.flatnonzero(live & (seg >= 0))
    return bool(np.all(rule.times(level)[g] * (1 + _RTOL) <= slow[seg[g]]))


def link_load(inc: Incidence, rate: np.ndarray) -> np.ndarray:
    """Load on every link (sum of weight x rate of the flows crossing it)."""
    r = np.where(np.isfinite(rate), rate, 0.0)
    return np.bincount(inc.e_link, weights=inc.e_weight * r[inc.e_flow], minlength=inc.num_links)
