"""ECMP collisions with split (2 x 200G) and unsplit (400G) ToR downlinks: the study's points.

Every function here computes one point of a sweep (``sweeps``) and returns a JSON-able
dict, so ``netsim sweep`` can run it from a spec (``command: experiments.ecmp_split.study:...``).

Fabrics (:func:`fabric`): the MegaScale three-tier CLOS of 64 x 400G switches, 1:1 per tier,

``split``
    each ToR downlink split into 2 x 200G, 200G NICs, 64 servers per ToR group (the preset
    ``megascale``; MegaScale NSDI'24 section 3.6);
``nosplit``
    400G NIC ports on unsplit 400G downlinks, 32 servers per ToR group. PCIe is raised to
    512 Gb/s (Gen5) so that the 400G NIC, not the host bus, is the server's limit.

Traffic patterns (:func:`collision_point`), every GPU of the fabric taking part once:

``dp_ring``
    eight rail-aligned rings (local GPU r of every server, r = 0..7) over all servers in
    one seeded random order, as data-parallel rings of jobs a fragmented scheduler spread out;
    a ring moves at its slowest edge.
``pairs``
    one connection per NIC to a random NIC of the same rail (a permutation): the slowdown
    distribution of single connections.
``alltoall``
    every ordered pair of ``alltoall_servers`` random servers on each rail, one connection
    per pair (an MoE-style all-to-all).

The slowdown of a ring or connection is its max-min rate on a non-blocking switch fabric over
its rate on the real one (``tuner.collision.collision_slowdown``, the flow engine's first
allocation with every connection active).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

FABRICS = ("split", "nosplit")
PATTERNS = ("dp_ring", "pairs", "alltoall")
HASHING = ("per_switch", "polarized")
PLACEMENTS = ("contiguous", "scattered")


@functools.lru_cache(maxsize=8)
def fabric(kind: str, servers: int):
    """The ``split`` or ``nosplit`` fabric of ``servers`` 8-GPU servers (cached per process)."""
    from topologies import Clos3Spec, clos3

    if kind == "split":
        spec = Clos3Spec(name=f"split-{servers}", servers=servers)
    elif kind == "nosplit":
        spec = Clos3Spec(name=f"nosplit-{servers}", servers=servers, nic_speed_gbps=400.0,
                         tor_downlink_split=1, servers_per_tor_group=32, pcie_gbps=512.0)
    else:
        raise ValueError(f"fabric {kind!r}: choose one of {', '.join(FABRICS)}")
    return clos3(spec)


def fabric_summary(kind: str, servers: int) -> dict:
    """Tier sizes of a study fabric (ports per tier, ToR groups, pods)."""
    from topologies import Clos3Spec

    f = fabric(kind, servers)
    derived = Clos3Spec(servers=servers, **({} if kind == "split" else dict(
        nic_speed_gbps=400.0, tor_downlink_split=1, servers_per_tor_group=32))).derive()
    return {"fabric": kind, "servers": servers, "gpus": len(f.gpus), **derived}


def _paths(f, seed: int, hashing: str):
    from netsim.flow.paths import FabricPaths
    from topologies.routing import Router

    if hashing not in HASHING:
        raise ValueError(f"hashing {hashing!r}: choose one of {', '.join(HASHING)}")
    return FabricPaths(f, Router(f, seed=seed, polarized=hashing == "polarized"))


def groups_of(pattern: str, servers: int, gpus_per_server: int, rng: np.random.Generator,
              alltoall_servers: int = 32) -> tuple[np.ndarray, int]:
    """GPU groups of ``pattern`` (rings, or 2-member pairs) and NCCL channels per peer."""
    rails = np.arange(gpus_per_server)
    if pattern == "dp_ring":
        order = rng.permutation(servers)
        return order[None, :] * gpus_per_server + rails[:, None], 2
    if pattern == "pairs":
        dst = rng.permutation(servers)
        src = np.arange(servers)
        keep = src != dst
        s, d = src[keep], dst[keep]
        pairs = [np.stack([s * gpus_per_server + r, d * gpus_per_server + r], 1) for r in rails]
        return np.concatenate(pairs), 1
    if pattern == "alltoall":
        chosen = rng.choice(servers, size=min(alltoall_servers, servers), replace=False)
        a, b = np.meshgrid(chosen, chosen, indexing="ij")
        off = a != b
        s, d = a[off], b[off]
        pairs = [np.stack([s * gpus_per_server + r, d * gpus_per_server + r], 1) for r in rails]
        return np.concatenate(pairs), 1
    raise ValueError(f"pattern {pattern!r}: choose one of {', '.join(PATTERNS)}")


def collision_point(fabric: str, servers: int, pattern: str, qps: int, hashing: str,
                    seed: int, alltoall_servers: int = 32) -> dict:
    """Collision slowdown distribution of one pattern on one fabric (a sweep point)."""
    from tuner.collision import collision_slowdown

    f = globals()["fabric"](fabric, servers)
    gps = len(f.gpus) // servers
    rng = np.random.default_rng(seed)
    groups, channels = groups_of(pattern, servers, gps, rng, alltoall_servers)
    s = collision_slowdown(f, groups, qps=qps, channels_per_peer=channels, seed=seed,
                           paths=_paths(f, seed, hashing))
    per = np.asarray(s.per_group, dtype=np.float64)
    q = np.quantile(per, [0.5, 0.9, 0.99])
    return {"groups": int(per.size), "connections": int(s.flows), "mean": float(per.mean()),
            "p50": float(q[0]), "p90": float(q[1]), "p99": float(q[2]), "max": float(per.max()),
            "collided_fraction": float((per > 1.0 + 1e-9).mean()),
            "hot_link_kind": (s.hot_link or {}).get("kind"),
            "hot_link_over": (s.hot_link or {}).get("over"),
            "slowdowns": np.round(per, 4).tolist()}


def job_placement(servers: int, gpus_per_server: int, placement: str, seed: int) -> list[int]:
    """GPU of every rank: servers in order (``contiguous``) or in a seeded random order."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement {placement!r}: choose one of {', '.join(PLACEMENTS)}")
    order = np.arange(servers)
    if placement == "scattered":
        order = np.random.default_rng(seed).permutation(servers)
    return (order[:, None] * gpus_per_server + np.arange(gpus_per_server)).ravel().tolist()


def iteration_point(fabric: str, servers: int, placement: str, qps: int, hashing: str,
                    seed: int, model: str = "gpt3-175b", tp: int = 8, pp: int = 8) -> dict:
    """Predicted iteration of a 3D-parallel job on the whole fabric, with and without ECMP
    collisions (``tuner.collision.FlowCommModel`` over the analytic comm model)."""
    from netsim.model.hardware import get_hardware
    from netsim.workload import AnalyticCommModel, JobSpec, predict
    from tuner.collision import FlowCommModel

    f = globals()["fabric"](fabric, servers)
    gps = len(f.gpus) // servers
    hw = get_hardware("a100")  # the NIC bandwidth comes from the fabric (200G or 400G ports)
    job = JobSpec.from_dict({"model": model, "gpus": servers * gps, "tp": tp, "pp": pp,
                             "dp": servers * gps // (tp * pp)})
    place = job_placement(servers, gps, placement, seed)
    base = AnalyticCommModel(hw)
    ideal = predict(job, f, hw, placement=place, comm_model=base).to_json()
    real = predict(job, f, hw, placement=place, comm_model=FlowCommModel(
        f, base, qps=qps, seed=seed, paths=_paths(f, seed, hashing))).to_json()
    return {"gpus": job.world, "dp": job.dp, "iteration_s": real["iteration_s"],
            "iteration_nonblocking_s": ideal["iteration_s"],
            "ecmp_cost": real["iteration_s"] / ideal["iteration_s"] - 1.0,
            "dp_comm_s": real["comm_s"]["dp"], "dp_comm_nonblocking_s": ideal["comm_s"]["dp"],
            "mfu": real["mfu"]}


@dataclasses.dataclass(frozen=True)
class BinsForm:
    """Closed form of one tier: ``n`` equal connections hashed uniformly onto ``m`` links that
    each carry ``c`` connections at full rate. A connection's slowdown is ``max(1, L / c)``
    with ``L = 1 + Binomial(n - 1, 1 / m)`` the load of its link."""

    n: int
    m: int
    c: float

    def mean_slowdown(self) -> float:
        from scipy.stats import binom

        k = np.arange(self.n)
        p = binom.pmf(k, self.n - 1, 1.0 / self.m)
        return float((p * np.maximum(1.0, (1 + k) / self.c)).sum())
