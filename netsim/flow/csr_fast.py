"""Compiled concatenation of per-flow path pieces (``netsim.flow.paths.concat_csr``).

``concat_csr`` joins CSR path lists over the same flows: flow i's path is piece 0 of flow i,
then piece 1, and so on. Its numpy form scatters every piece through two repeated index arrays
(flow of each entry, position within the flow), four passes over the entries per piece; a
network path at 12,288 GPUs with 4 QPs per connection has five pieces (PXN hops, PCIe, the
switch route, PCIe) and millions of entries. The kernel here walks the flows once and copies
each piece's links in place: the same output array, element for element
(``tests/netsim/flow/test_csr_fast.py`` compares both forms). Without numba the numpy form runs.
"""

from __future__ import annotations

import numpy as np

try:  # pragma: no cover - exercised where numba is installed
    from numba import njit
except ImportError:  # pragma: no cover
    njit = None

#: Below this many flows the numpy form is as cheap (no call overhead of the kernel).
MIN_FLOWS = 4096


def available(num_flows: int) -> bool:
    """True when the kernel is compiled and worth its call for ``num_flows`` flows."""
    return njit is not None and num_flows >= MIN_FLOWS


def concat(parts: list[tuple[np.ndarray, np.ndarray]], indptr: np.ndarray) -> np.ndarray:
    """Links of the concatenated paths, given the output ``indptr`` (lengths summed)."""
    ips = np.stack([np.asarray(p[0], np.int64) for p in parts])
    base = np.zeros(len(parts), np.int64)
    np.cumsum([len(p[1]) for p in parts[:-1]], out=base[1:])
    links = np.concatenate([np.asarray(p[1], np.int64) for p in parts])
    return _concat(ips, base, links, np.asarray(indptr, np.int64))


def _concat_py(ips, base, links, indptr):
    out = np.empty(indptr[-1], np.int64)
    for i in range(indptr.size - 1):
        pos = indptr[i]
        for p in range(ips.shape[0]):
            lo, hi = base[p] + ips[p, i], base[p] + ips[p, i + 1]
            for j in range(lo, hi):
                out[pos] = links[j]
                pos += 1
    return out


if njit is not None:
    try:
        _concat = njit(cache=True, nogil=True)(_concat_py)
    except RuntimeError:  # pragma: no cover - no writable cache location
        _concat = njit(nogil=True)(_concat_py)
