"""Entries of an incidence ordered by link: a counting sort in place of a comparison sort.

``Incidence`` keeps ``by_link = np.argsort(e_link, kind="stable")``. Link ids are small
integers (below ``num_links``), so the stable order is also that of a counting sort: count the
entries per link, take the running sum as each link's first slot, then place the entries in
input order. That is two passes over the entries instead of a merge sort (numpy's stable sort
of 64-bit keys), and the permutation is the same one (a stable order by key is unique).
``tests/netsim/flow/test_link_order.py`` compares the two. Without numba, numpy's sort runs.

:func:`unique_pairs` orders (flow, link) entries the same way, by link and then by flow, in
one compiled call, and numbers the distinct pairs as it walks them: ``np.unique`` of the pair
keys with ``return_inverse`` (``Incidence.from_entries`` sums duplicate entries with it).
"""

from __future__ import annotations

import numpy as np

try:  # pragma: no cover - exercised where numba is installed
    from numba import njit
except ImportError:  # pragma: no cover
    njit = None

#: Below this many entries numpy's sort is as cheap (no call overhead of the kernel).
MIN_ENTRIES = 4096


def stable_order(keys: np.ndarray, num_keys: int, compiled: bool = True) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` for integer keys in ``0 .. num_keys - 1`` (other keys:
    numpy's sort)."""
    keys = np.asarray(keys)
    if (not compiled or njit is None or keys.size < MIN_ENTRIES or keys.dtype.kind not in "iu"
            or int(keys.min()) < 0 or int(keys.max()) >= num_keys):
        return np.argsort(keys, kind="stable")
    return _counting(np.ascontiguousarray(keys, np.int64), int(num_keys))


def unique_pairs(flow: np.ndarray, link: np.ndarray, num_flows: int, num_links: int
                 ) -> tuple[np.ndarray, np.ndarray] | None:
    """``np.unique(flow * num_links + link, return_inverse=True)`` for flows in
    ``0 .. num_flows - 1`` and links in ``0 .. num_links - 1`` (both arrays of int64), the same
    two arrays; None where the kernel does not apply (no numba, or few entries): the caller
    sorts with numpy (also for ids out of those ranges)."""
    if njit is None or flow.size < MIN_ENTRIES:
        return None
    if (flow.min() < 0 or link.min() < 0 or flow.max() >= num_flows
            or link.max() >= num_links):
        return None
    return _pairs(np.ascontiguousarray(flow, np.int64), np.ascontiguousarray(link, np.int64),
                  int(num_flows), int(num_links))


def _pairs_py(flow, link, num_flows, num_links):
    """Counting sorts by link, then (stably) by flow; the distinct keys and each entry's."""
    by_link = _counting(link, num_links)
    start = _starts(flow, num_flows)
    order = np.empty(flow.size, np.int64)
    for e in by_link:
        order[start[flow[e]]] = e
        start[flow[e]] += 1
    keys = np.empty(flow.size, np.int64)
    inv = np.empty(flow.size, np.int64)
    u, prev = -1, -1
    for e in order:
        key = flow[e] * num_links + link[e]
        if key != prev:
            u += 1
            keys[u] = key
            prev = key
        inv[e] = u
    return keys[:u + 1].copy(), inv


def _starts(keys, num_keys):
    """Each key's first slot in the order by key (running sum of the entries per key)."""
    start = np.zeros(num_keys + 1, np.int64)
    for k in keys:
        start[k + 1] += 1
    for i in range(num_keys):
        start[i + 1] += start[i]
    return start


def _counting_py(keys, num_keys):
    start = _starts(keys, num_keys)
    out = np.empty(keys.size, np.int64)
    for i in range(keys.size):
        k = keys[i]
        out[start[k]] = i
        start[k] += 1
    return out


if njit is not None:
    try:
        _starts = njit(cache=True, nogil=True)(_starts)
        _counting = njit(cache=True, nogil=True)(_counting_py)
        _pairs = njit(cache=True, nogil=True)(_pairs_py)
    except RuntimeError:  # pragma: no cover - no writable cache location
        _starts = njit(nogil=True)(_starts)
        _counting = njit(nogil=True)(_counting_py)
        _pairs = njit(nogil=True)(_pairs_py)
