"""Comm model on the flow engine: a batch of concurrent collectives shares the fabric.

Every call of a batch (all DP groups of the iteration, say) runs at once through
``netsim.collectives.run_concurrent``, so groups that cross the same ToR uplinks contend and
ECMP collisions cost what they cost. Groups inside one server use the analytic NVLink model
(the flow engine would give the same line-rate answer, slower). The flow engine moves bytes at
line rate; NCCL's protocol efficiency is applied on top, ``t / net_efficiency``, as in the
analytic model, so the two agree on an uncontended fabric.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from netsim.hardware import HardwareProfile
from netsim.workload.comm import AnalyticCommModel, CommBatch, Locality, group_scopes

OPS = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
       "broadcast": "broadcast", "all_to_all": "alltoall", "send": "sendrecv"}
NETWORK_KINDS = ("host", "tor-agg", "agg-core")


class FlowCommModel:
    """Price batches with the flow engine (max-min sharing by default)."""

    def __init__(self, fabric, hw: HardwareProfile, nccl=None, sharing: str = "maxmin",
                 seed: int = 0, overrides: dict | None = None) -> None:
        self.hw = hw
        self.analytic = AnalyticCommModel(hw, overrides)
        self.nccl, self.sharing, self.seed = nccl, sharing, seed
        self.fabric = _scaled(fabric, hw.network_scale)

    def batch_s(self, batch: CommBatch, loc: Locality) -> np.ndarray:
        out = np.asarray(self.analytic.batch_s(batch, loc), dtype=np.float64).copy()
        if self.fabric is None:  # infinite network: nothing to simulate
            return out
        groups = np.atleast_2d(batch.groups)
        sizes = batch.sizes()
        net = np.flatnonzero((group_scopes(groups, loc) > 0) & (sizes > 0))
        if net.size == 0:
            return out
        from netsim.collectives import CollectiveCall, run_concurrent

        calls = [CollectiveCall(OPS[batch.op], groups[i].tolist(), int(sizes[i])) for i in net]
        ends = run_concurrent(self.fabric, calls, self.nccl, self.sharing, seed=self.seed)
        out[net] = np.asarray(ends) / self.hw.net_efficiency
        return out


def _scaled(fabric, scale: float):
    """The fabric with its network links' capacity times ``scale`` (None when infinite)."""
    if math.isinf(scale):
        return None
    if scale == 1.0:
        return fabric
    out = copy.copy(fabric)
    cap = np.asarray(fabric.link_capacity_bps, dtype=np.float64).copy()
    net = np.isin(np.asarray(fabric.link_kind).astype(str), NETWORK_KINDS)
    cap[net] *= scale
    out.link_capacity_bps = cap.astype(np.asarray(fabric.link_capacity_bps).dtype)
    return out
