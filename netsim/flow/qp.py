"""Queue-pair numbers and RoCEv2 UDP source ports of connections, stable for a whole job.

NCCL creates a connection's QPs once, at communicator set-up, and keeps them: the UDP source
port a NIC derives from a QP (``qp_udp_sport``) and hence each QP's ECMP path never change, so
two long-lived QPs that hash onto one uplink keep colliding (``shared/reference/nccl-roce.md``
section 8.2). We give every (sender, receiver, channel, qp index) a QP number from a keyed hash
of those four numbers and the seed: the same connection gets the same QPs in every call.
"""

from __future__ import annotations

import numpy as np

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser (Steele et al. 2014): a cheap, well-spread 64-bit hash.

    Works in place on an array (callers pass a temporary of their own) and returns it."""
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
        return x


def connection_qpn(src: np.ndarray, dst: np.ndarray, channel: np.ndarray, qp: np.ndarray,
                   seed: int = 0) -> np.ndarray:
    """24-bit QP number of each connection's QP (deterministic in all arguments)."""
    return qpn_of_prefix(connection_prefix(src, dst, seed), channel, qp)


def connection_prefix(src: np.ndarray, dst: np.ndarray, seed: int = 0) -> np.ndarray:
    """The QP-number hash state after the seed, ``src`` and ``dst``: one per connection,
    shared by all its QPs (:func:`qpn_of_prefix` finishes it)."""
    with np.errstate(over="ignore"):
        h = _mix(np.uint64(seed & 0xFFFFFFFF) + np.uint64(0x9E3779B97F4A7C15))
        for part in (src, dst):
            h = _mix(h ^ np.asarray(part).astype(np.uint64))
    return h


def qpn_of_prefix(prefix: np.ndarray, channel: np.ndarray, qp: np.ndarray) -> np.ndarray:
    """:func:`connection_qpn` from a connection's :func:`connection_prefix`."""
    with np.errstate(over="ignore"):
        h = prefix
        for part in (channel, qp):
            h = _mix(h ^ np.asarray(part).astype(np.uint64))
    qpn = np.asarray(h & np.uint64(0xFFFFFF)).view(np.int64)  # a fresh array, under 2**24
    return np.maximum(qpn, 2, out=qpn if qpn.ndim else None)  # QPs 0 and 1 are reserved


def udp_sport(qpn: np.ndarray) -> np.ndarray:
    """RoCEv2 UDP source ports of QP numbers, through ``topologies.routing.qp_udp_sport``."""
    from topologies.routing import qp_udp_sport

    qpn = np.asarray(qpn, np.int64)
    try:
        out = np.asarray(qp_udp_sport(qpn))
        if out.shape == qpn.shape:
            return out.astype(np.uint16)
    except (TypeError, ValueError):
        pass
    return np.array([qp_udp_sport(int(q)) for q in qpn.tolist()], np.uint16)
