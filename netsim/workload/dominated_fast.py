"""Compiled passes of ``flowcomm.dominated_links``: link signatures and the entry-wise check.

``dominated_links`` finds links that carry exactly another link's commodities with the same
weights. Its numpy form gathers every entry into link order, hashes it, sums the hashes per
link with ``np.add.reduceat``, and compares candidate pairs entry by entry through repeated
index arrays: about a dozen passes over millions of entries at 12,288 GPUs with several QPs per
connection. The two kernels here do the per-entry work in one pass each and return the same
values: the signature is a sum modulo 2**64 (the order of the terms does not change it), and
the entry-wise comparison walks the same positions in the same link order.
``tests/netsim/workload/test_dominated_fast.py`` compares both forms. Without numba the numpy
form runs.
"""

from __future__ import annotations

import numpy as np

try:  # pragma: no cover - exercised where numba is installed
    from numba import njit
except ImportError:  # pragma: no cover
    njit = None

_GOLD = np.uint64(0x9E3779B97F4A7C15)
_MUL = np.uint64(0xBF58476D1CE4E5B9)
_SHIFT = np.uint64(31)


def available() -> bool:
    """True when the kernels are compiled (numba is importable)."""
    return njit is not None


def signatures(e_link, e_flow, e_weight, num_links: int) -> tuple[np.ndarray, np.ndarray]:
    """Entries per link and each link's signature (``dominated_links``' hash sum)."""
    return _signatures(np.ascontiguousarray(e_link, np.int64),
                       np.ascontiguousarray(e_flow, np.int64),
                       np.ascontiguousarray(e_weight, np.float64), int(num_links))


def same_entries(order, e_flow, e_weight, count, member, rep) -> np.ndarray:
    """Per candidate pair, whether ``member`` and ``rep`` hold the same (flow, weight) entries
    position by position in link order (``order``: entries sorted by link, stable)."""
    start = np.zeros(len(count), np.int64)
    np.cumsum(count[:-1], out=start[1:])
    return _same(np.ascontiguousarray(order, np.int64), np.ascontiguousarray(e_flow, np.int64),
                 np.ascontiguousarray(e_weight, np.float64), np.ascontiguousarray(count, np.int64),
                 start, np.ascontiguousarray(member, np.int64),
                 np.ascontiguousarray(rep, np.int64))


def _signatures_py(e_link, e_flow, e_weight, num_links):
    sig = np.zeros(num_links, np.uint64)
    count = np.zeros(num_links, np.int64)
    for i in range(e_link.size):
        m = (np.uint64(e_flow[i]) + _GOLD) * _MUL
        m ^= m >> _SHIFT
        m += np.uint64(e_weight[i] * 1e6)
        sig[e_link[i]] += m
        count[e_link[i]] += 1
    return count, sig


def _same_py(order, e_flow, e_weight, count, start, member, rep):
    ok = np.ones(member.size, np.bool_)
    for i in range(member.size):
        a0, b0 = start[member[i]], start[rep[i]]
        for k in range(count[member[i]]):
            ia, ib = order[a0 + k], order[b0 + k]
            if e_flow[ia] != e_flow[ib] or e_weight[ia] != e_weight[ib]:
                ok[i] = False
                break
    return ok


if njit is not None:
    def _jit(fn):
        try:
            return njit(cache=True, nogil=True)(fn)
        except RuntimeError:  # pragma: no cover - no writable cache location
            return njit(nogil=True)(fn)

    _signatures = _jit(_signatures_py)
    _same = _jit(_same_py)
