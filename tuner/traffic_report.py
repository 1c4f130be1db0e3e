"""Which traffic kind dominates a job's network, and why (``netsim recommend``'s report).

Bytes per iteration per kind from :func:`tuner.placement.job_traffic` (the closed forms of
every kind: DP rings, PP sends, TP rings, CP KV rings, EP all-to-alls), counted on the
network only (pairs in different servers) under the chosen placement, with the closed form
that produced them.
"""

from __future__ import annotations

import numpy as np

WHY = {
    "dp": "gradient reduction: 2 (n-1)/n x the stage's gradient bytes per rank per iteration",
    "pp": "pipeline sends: one activation and one gradient of b s h / tp per micro-batch",
    "tp": "tensor-parallel rings: 4 all-reduces of b s h per layer per micro-batch",
    "cp": "ring attention: K and V chunks passed 3 times per layer per micro-batch",
    "ep": "expert all-to-all: dispatch + combine, forward + backward, of tokens x top-k x "
          "hidden (x capacity factor) per MoE layer per micro-batch",
}


def network_bytes(job, gpu_of_rank: np.ndarray, fabric) -> dict[str, float]:
    """Network (cross-server) bytes per iteration of every traffic kind."""
    from tuner.placement import GpuLocality, job_traffic

    loc = GpuLocality.from_fabric(fabric)
    t = job_traffic(job)
    a, b = gpu_of_rank[t.src], gpu_of_rank[t.dst]
    net = loc.server[a] != loc.server[b]
    return {str(k): float(t.bytes_[net & (t.kind == k)].sum()) for k in np.unique(t.kind)}


def dominant_summary(job, gpu_of_rank: np.ndarray, fabric) -> str:
    """One sentence: the dominant kind, its share of the network bytes, and its closed form."""
    per = network_bytes(job, gpu_of_rank, fabric)
    total = sum(per.values())
    if total <= 0:
        return "no network traffic: every group sits inside one server"
    kind = max(per, key=per.get)
    rest = ", ".join(f"{k} {v / 1e12:.3g} TB" for k, v in sorted(per.items()) if k != kind)
    return (f"{kind} ({per[kind] / total:.0%} of {total / 1e12:.3g} TB network bytes per "
            f"iteration; {rest}): {WHY.get(kind, kind)}")
