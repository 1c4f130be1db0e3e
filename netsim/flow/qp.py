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
    """splitmix64 finaliser (Steele et al. 2014): a cheap, well-spread 64-bit hash."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def connection_qpn(src: np.ndarray, dst: np.ndarray, channel: np.ndarray, qp: np.ndarray,
                   seed: int = 0) -> np.ndarray:
    """24-bit QP number of each connection's QP (deterministic in all arguments)."""
    with np.errstate(over="ignore"):
        h = _mix(np.uint64(seed & 0xFFFFFFFF) + np.uint64(0x9E3779B97F4A7C15))
        for part in (src, dst, channel, qp):
            h = _mix(h ^ np.asarray(part).astype(np.uint64))
    qpn = (h & np.uint64(0xFFFFFF)).astype(np.int64)
    return np.maximum(qpn, 2)  # QPs 0 and 1 are reserved in InfiniBand


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
