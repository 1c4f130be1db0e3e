"""Best-fit choice of servers for a job, and how packed a cluster's free servers stay.

A scheduler that hands each job the first free servers (``linear``) or the quietest ones
scatters the free servers over ToR sets and pods as jobs come and go; a later job that needs
a whole ToR set, or a pod, then finds none and spreads its rings over busy uplinks. Best fit
(as in a buddy or bin-packing allocator) puts each job in the fullest domain that holds it:

* the tightest ToR set with enough free servers (the fuller pod, then the scheduler's order,
  breaking ties);
* else the tightest pod, with the job over as few of its ToR sets as possible: whole sets,
  largest first, until the rest fits in one set, which is again the tightest;
* else whole pods, largest first, until the rest fits in one pod, placed by the same rule.

``packing_key`` ranks the free servers a placement leaves: more wholly free pods, then more
wholly free ToR sets, then free servers concentrated in fewer sets and pods (a larger sum of
squared free counts). Best fit keeps that key as low as one job's choice can.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ServerDomains:
    """ToR set and pod of every server (arrays indexed by server position)."""

    tor_set: np.ndarray
    pod: np.ndarray

    @classmethod
    def from_locality(cls, loc) -> ServerDomains:
        """From a ``tuner.placement.GpuLocality``: a server's first GPU's ToR names its ToR set
        (every server of a set has its rail-``i`` NIC on the set's ``i``-th ToR)."""
        servers = int(loc.server.max()) + 1
        first = np.searchsorted(loc.server, np.arange(servers))  # GPUs numbered by server
        return cls(np.asarray(loc.tor[first], np.int64), np.asarray(loc.pod[first], np.int64))

    def levels(self) -> tuple[np.ndarray, np.ndarray]:
        """Domain labels from the finest level (ToR set) to the coarsest (pod)."""
        return self.tor_set, self.pod


def best_fit_servers(free: list[int], need: int, dom: ServerDomains) -> list[int]:
    """``need`` of the ``free`` servers (scheduler's order) by best fit (module docstring),
    in the scheduler's order."""
    if need > len(free):
        raise ValueError(f"{need} servers needed, {len(free)} free")
    srv = np.asarray(free, np.int64)
    picked = _fit(np.arange(len(srv)), need, [lvl[srv] for lvl in dom.levels()])
    return srv[np.sort(np.asarray(picked, np.int64))].tolist()


def _fit(idx: np.ndarray, need: int, levels: list[np.ndarray]) -> list[int]:
    """Positions (into the free list) of ``need`` of ``idx``: the tightest domain of the
    finest level that holds them all, else of the next level, else whole domains of the
    coarsest level (``_spill``)."""
    for depth, lab in enumerate(levels):
        d = _tightest(idx, need, levels[depth:])
        if d is None:
            continue
        inside = idx[lab[idx] == d]
        return inside[:need].tolist() if depth == 0 else _spill(inside, need, levels[:depth])
    return _spill(idx, need, levels)


def _tightest(idx: np.ndarray, need: int, levels: list[np.ndarray]):
    """Label of the domain of ``levels[0]`` with the fewest free servers (at least ``need``);
    ties go to the fuller domain of each coarser level, then to the scheduler's order."""
    lab = levels[0][idx]
    best, best_key = None, None
    for d in np.unique(lab):
        inside = idx[lab == d]
        if inside.size < need:
            continue
        coarser = tuple(int(np.count_nonzero(up[idx] == up[inside[0]])) for up in levels[1:])
        key = (inside.size, *coarser, int(inside[0]))
        if best_key is None or key < best_key:
            best, best_key = d, key
    return best


def _spill(idx: np.ndarray, need: int, levels: list[np.ndarray]) -> list[int]:
    """``need`` of ``idx`` where no domain of ``levels[-1]`` holds them all: whole domains,
    the largest first, until the rest fits in one; the rest by ``_fit``."""
    out: list[int] = []
    left = idx
    while need > 0:
        ids, counts = np.unique(levels[-1][left], return_counts=True)
        if counts.max() >= need:
            return out + _fit(left, need, levels)
        big = ids[np.argmax(counts)]  # the first of the largest (labels ascending)
        whole = left[levels[-1][left] == big]
        out += whole.tolist()
        need -= whole.size
        left = left[levels[-1][left] != big]
    return out


def packing_key(free_after: np.ndarray, dom: ServerDomains) -> tuple[int, int, int, int]:
    """Lower is more packed: (minus) wholly free pods, wholly free ToR sets, the sum of
    squared free counts per ToR set and per pod, for the free-server mask ``free_after``."""
    free_after = np.asarray(free_after, bool)
    out = []
    for lab in (dom.pod, dom.tor_set):
        total = np.bincount(lab)
        free = np.bincount(lab, weights=free_after, minlength=total.size)
        out.append(-int(np.count_nonzero((free == total) & (total > 0))))
    for lab in (dom.tor_set, dom.pod):
        free = np.bincount(lab, weights=free_after).astype(np.int64)
        out.append(-int((free * free).sum()))
    return tuple(out)
