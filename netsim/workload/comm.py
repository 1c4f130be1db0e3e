"""Communication cost of the collectives of one iteration: scopes and pluggable comm models.

A *scope* says where a group's traffic runs: ``server`` (all members in one server, NVLink),
``tor`` (across servers, every member's NIC under one ToR), ``cross_tor`` (through the agg or
core tier). A comm model turns a batch of concurrent calls (same op, same size, many groups,
as all DP groups of an iteration run at once) into one time per call.

``AnalyticCommModel`` is the alpha-beta closed form of nccl-tests: ``t = a + S f(op, n) / B``
with the bus-bandwidth factor ``f`` = 2(n-1)/n for all-reduce, (n-1)/n for all-gather,
reduce-scatter and all-to-all, 1 for broadcast and send (nccl-tests ``doc/PERFORMANCE.md``,
``shared/reference/nccl-roce.md`` section 2.1) and a latency of NCCL's Ring/Simple base
latency plus one hardware latency per ring step (section 2.2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from netsim.model.hardware import HardwareProfile

SCOPES = ("server", "tor", "cross_tor")
NCCL_BASE_LATENCY_S = 8.4e-6  # NCCL baseLat Ring/Simple (nccl-roce.md section 2.2)


def bus_factor(op: str, n: int) -> float:
    """nccl-tests bus-bandwidth factor: busbw = algbw x factor."""
    if n <= 1:
        return 0.0
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if op in ("broadcast", "reduce", "send", "recv"):
        return 1.0
    raise ValueError(f"unknown collective op {op!r}")


def ring_steps(op: str, n: int) -> int:
    """Sequential steps of NCCL's ring algorithm (latency count)."""
    if n <= 1:
        return 0
    if op == "all_reduce":
        return 2 * (n - 1)
    if op in ("send", "recv", "all_to_all"):
        return 1  # NCCL's all-to-all is one group of concurrent sends/receives to every peer
    return n - 1


@dataclass(frozen=True, slots=True)
class Locality:
    """Where each GPU of a fabric sits: arrays indexed by GPU position."""

    server: np.ndarray
    """Server ordinal of each GPU."""
    tor: np.ndarray
    """ToR ordinal the GPU's NIC attaches to."""
    nic_bps: np.ndarray
    """Line rate of the GPU's NIC uplink, bit/s."""

    @property
    def num_gpus(self) -> int:
        return int(self.server.size)


def synthetic_locality(num_gpus: int, hw: HardwareProfile, servers_per_tor: int = 64) -> Locality:
    """Rail-optimised layout without a fabric: rail r of ``servers_per_tor`` servers on ToR r.

    64 servers per ToR set is MegaScale's (``nccl-roce.md`` section 1.2).
    """
    gpu = np.arange(num_gpus, dtype=np.int64)
    server = gpu // hw.gpus_per_server
    rail = (gpu % hw.gpus_per_server) * hw.nics_per_server // hw.gpus_per_server
    tor = (server // servers_per_tor) * hw.nics_per_server + rail
    return Locality(server=server, tor=tor, nic_bps=np.full(num_gpus, float(hw.nic_bps)))


def fabric_locality(fabric) -> Locality:
    """Locality of a ``topologies.Fabric`` (its GPU -> NIC -> ToR wiring and NIC speeds)."""
    gpu_nic = np.asarray(fabric.gpu_nic_index, dtype=np.int64)
    server = np.asarray(fabric.nic_server_index, dtype=np.int64)[gpu_nic]
    tor = np.asarray(fabric.wiring.nic_tor, dtype=np.int64)[gpu_nic]
    up = np.asarray(fabric.wiring.nic_up_link, dtype=np.int64)[gpu_nic]
    nic_bps = np.asarray(fabric.link_capacity_bps, dtype=np.float64)[up]
    return Locality(server=server, tor=tor, nic_bps=nic_bps)


def group_scopes(groups: np.ndarray, loc: Locality) -> np.ndarray:
    """Scope index (into ``SCOPES``) of each group; ``groups`` is (n_groups, size) GPU ids."""
    srv, tor = loc.server[groups], loc.tor[groups]
    same_server = (srv == srv[:, :1]).all(axis=1)
    same_tor = (tor == tor[:, :1]).all(axis=1)
    return np.where(same_server, 0, np.where(same_tor, 1, 2))


@dataclass(frozen=True, slots=True)
class CommBatch:
    """Concurrent calls of one op: ``groups[i]`` are the GPUs of call i, of ``size_bytes``
    (one number for all calls, or one per call).

    ``slowest_of`` (optional, one segment number per call) says the caller reads only the
    largest time of each segment (``predict``: the slowest group of each stage). A model may
    then return, for the calls that are not their segment's slowest, any time up to that
    slowest: the flow engine stops its allocation once every segment's slowest is settled
    (``netsim.flow.maxmin.Slowest``). Each segment's largest time is the same either way."""

    op: str
    kind: str
    groups: np.ndarray
    size_bytes: float | np.ndarray
    slowest_of: np.ndarray | None = None

    def sizes(self) -> np.ndarray:
        """Per-call sizes, bytes."""
        return np.broadcast_to(np.asarray(self.size_bytes, dtype=np.float64),
                               (np.atleast_2d(self.groups).shape[0],))


class CommModel(Protocol):
    """Anything that prices a batch of concurrent collectives (seconds per call)."""

    def batch_s(self, batch: CommBatch, loc: Locality) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class AlphaBeta:
    """``t = alpha_s + bytes x factor / busbw_Bps`` for one (op, scope)."""

    alpha_s: float
    busbw_Bps: float

    def time_s(self, op: str, n: int, size_bytes):
        """Seconds for ``size_bytes`` (a number or an array); 0 for empty calls."""
        size = np.asarray(size_bytes, dtype=np.float64)
        if n <= 1:
            return np.zeros_like(size) if size.ndim else 0.0
        bw_term = 0.0 if math.isinf(self.busbw_Bps) else size * bus_factor(op, n) / self.busbw_Bps
        t = np.where(size > 0, self.alpha_s + bw_term, 0.0)
        return t if size.ndim else float(t)


@dataclass(frozen=True, slots=True)
class SendRing:
    """A ring of ``n - 1`` sequential sends priced by a fitted send (context parallelism's
    KV ring calibrated on the trainer's ``send`` records): an all-gather of ``S = n x block``
    bytes takes ``(n - 1) (alpha_s + block / busbw_Bps)``."""

    alpha_s: float
    busbw_Bps: float

    def time_s(self, op: str, n: int, size_bytes):
        """Seconds for an all-gather of ``size_bytes`` (a number or an array) over ``n``."""
        size = np.asarray(size_bytes, dtype=np.float64)
        if n <= 1:
            return np.zeros_like(size) if size.ndim else 0.0
        block = size / n
        bw = 0.0 if math.isinf(self.busbw_Bps) else block / self.busbw_Bps
        t = np.where(size > 0, (n - 1) * (self.alpha_s + bw), 0.0)
        return t if size.ndim else float(t)


class AnalyticCommModel:
    """Closed-form alpha-beta model from a hardware profile, optionally overridden per scope.

    Bandwidth: NVLink (per direction x ``nvlink_efficiency``) inside a server; the GPU's share
    of the server's NICs (x ``net_efficiency``) across servers, the slowest member's NIC
    setting the ring's pace. ``overrides[(op, scope)]`` (a calibration) replaces the formula.
    """

    def __init__(self, hw: HardwareProfile, overrides: dict | None = None) -> None:
        self.hw = hw
        self.overrides = dict(overrides or {})

    def alpha_beta(self, op: str, scope: str, n: int, nic_bps: float,
                   kind: str = "") -> AlphaBeta:
        """Parameters for ``op`` among ``n`` ranks in ``scope`` (``kind``: tp, cp, ep, pp,
        dp, embedding)."""
        get = self.overrides.get
        fit = get((op, scope, kind)) or get((op, scope)) or get(("*", scope))
        if fit is not None:
            return fit
        hw = self.hw
        if scope == "server":
            bw_bps, lat = hw.nvlink_bps * hw.nvlink_efficiency, hw.intra_latency_s
        else:
            share = nic_bps * hw.network_scale * hw.nics_per_server / hw.gpus_per_server
            bw_bps, lat = share * hw.net_efficiency, hw.net_latency_s
        base = NCCL_BASE_LATENCY_S if lat > 0 else 0.0
        return AlphaBeta(alpha_s=base + ring_steps(op, n) * lat, busbw_Bps=bw_bps / 8.0)

    def batch_s(self, batch: CommBatch, loc: Locality) -> np.ndarray:
        """Time of every call in ``batch`` (calls do not slow each other in this model)."""
        groups = np.atleast_2d(batch.groups)
        n = groups.shape[1]
        scopes = group_scopes(groups, loc)
        slow_nic = loc.nic_bps[groups].min(axis=1)
        sizes = batch.sizes()
        out = np.empty(groups.shape[0])
        for key in np.unique(np.stack([scopes, slow_nic], axis=1), axis=0):
            sel = (scopes == key[0]) & (slow_nic == key[1])
            ab = self.alpha_beta(batch.op, SCOPES[int(key[0])], n, float(key[1]), batch.kind)
            out[sel] = ab.time_s(batch.op, n, sizes[sel])
        return out


class RecordingCommModel:
    """Delegates to ``inner`` and records the ``(op, scope, kind)`` of every call it prices
    (``used``), so a prediction can say which collectives a calibration never saw."""

    def __init__(self, inner: CommModel) -> None:
        self.inner = inner
        self.used: set[tuple[str, str, str]] = set()

    def batch_s(self, batch: CommBatch, loc: Locality) -> np.ndarray:
        groups = np.atleast_2d(batch.groups)
        live = batch.sizes() > 0
        if groups.shape[1] > 1 and live.any():
            for s in np.unique(group_scopes(groups[live], loc)):
                self.used.add((batch.op, SCOPES[int(s)], batch.kind))
        return self.inner.batch_s(batch, loc)

    def __getattr__(self, name: str):
        if name == "inner":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)
