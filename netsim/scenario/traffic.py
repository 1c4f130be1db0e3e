"""Traffic for every engine: the :class:`Flow` record, generators and a flow-file loader.

A flow moves ``size_bytes`` from ``src`` to ``dst`` (NIC or GPU node names of a fabric) from
``start_ps`` on, over ``qps`` RC queue pairs (NCCL_IB_QPS_PER_CONNECTION; bytes are split evenly
over them, each QP has its own UDP source port and so its own ECMP path).

Generators draw every random choice from the ``numpy.random.Generator`` passed in.
Flow files (``.json`` / ``.yaml``) hold ``{"flows": [{"src", "dst", "bytes", "start_ns", "qps"}]}``
or a bare list of such objects; ``size`` (``"2MB"``) may replace ``bytes``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from inputspec import InputError, from_dict, read_data, rule
from inputspec.core import construct, nonempty_list
from topologies.units import ns_to_ps, parse_bytes


@dataclass(frozen=True)
class Flow:
    """One transfer between two endpoints.

    Parameters
    ----------
    src, dst : node names (NICs, or GPUs: they send through their rail NIC).
    size_bytes : payload bytes.
    start_ps : start time in integer picoseconds.
    qps : number of queue pairs the bytes are spread over.
    """

    src: str
    dst: str
    size_bytes: int
    start_ps: int = 0
    qps: int = 1

    def __post_init__(self) -> None:
        if self.src == self.dst:
            raise ValueError(f"Flow.src and Flow.dst are the same node {self.src!r}: pick two endpoints")
        if int(self.size_bytes) <= 0:
            raise ValueError(f"Flow.size_bytes must be > 0, got {self.size_bytes!r}")
        if int(self.start_ps) < 0:
            raise ValueError(f"Flow.start_ps must be >= 0, got {self.start_ps!r}")
        if not 1 <= int(self.qps) <= 128:
            raise ValueError(f"Flow.qps must be in 1..128 (NCCL_IB_MAX_QPS), got {self.qps!r}")


def _hosts(fabric, hosts: Sequence[str] | None) -> list[str]:
    names = list(hosts) if hosts is not None else list(fabric.nics)
    if len(names) < 2:
        raise ValueError(f"traffic needs at least 2 hosts, the fabric has {len(names)}")
    return names


def permutation(fabric, size: int, rng: np.random.Generator, *, hosts: Sequence[str] | None = None,
                start_ps: int = 0, qps: int = 1) -> list[Flow]:
    """Every host sends ``size`` bytes to one other host; every host receives exactly once.

    A random derangement (no host sends to itself), drawn from *rng*.
    """
    names = _hosts(fabric, hosts)
    n = len(names)
    # Sattolo's algorithm: a uniformly random single cycle is a derangement.
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        j = int(rng.integers(0, i))
        perm[i], perm[j] = perm[j], perm[i]
    return [Flow(names[i], names[perm[i]], int(size), start_ps, qps) for i in range(n)]


def incast(fabric, n: int, size: int, rng: np.random.Generator, *,
           hosts: Sequence[str] | None = None, start_ps: int = 0, qps: int = 1) -> list[Flow]:
    """``n`` senders, drawn at random, each send ``size`` bytes to one random receiver."""
    names = _hosts(fabric, hosts)
    if not 1 <= n < len(names):
        raise ValueError(f"incast n must be in 1..{len(names) - 1} for {len(names)} hosts, got {n}")
    pick = rng.permutation(len(names))[: n + 1]
    dst = names[int(pick[0])]
    return [Flow(names[int(i)], dst, int(size), start_ps, qps) for i in pick[1:]]


def alltoall(fabric, size: int, rng: np.random.Generator | None = None, *,
             hosts: Sequence[str] | None = None, start_ps: int = 0, qps: int = 1) -> list[Flow]:
    """Every host sends ``size`` bytes to every other host (``n (n - 1)`` flows).

    Order is deterministic; *rng* is accepted for a uniform signature and unused.
    """
    names = _hosts(fabric, hosts)
    return [Flow(a, b, int(size), start_ps, qps) for a in names for b in names if a != b]


#: Largest flow a file may hold (1 PiB): far above any collective, far below int64 picoseconds.
MAX_FLOW_BYTES = 2**50


@dataclass(frozen=True)
class FlowRecord:
    """One entry of a flow file (the schema ``inputspec`` checks): ``bytes`` (an integer or a
    size such as ``"2MB"``) or ``size``; ``start_ns`` or ``start_ps``; ``qps`` in 1..128."""

    src: str
    dst: str
    bytes: int | str | None = rule(None, min=1, example=2097152)
    size: int | str | None = rule(None, min=1, example="2MB")
    start_ns: float = rule(0.0, min=0, max=1e15, example=0.0)
    start_ps: int | None = rule(None, min=0, example=0)
    qps: int = rule(1, min=1, max=128, example=4)


def _flow_from_record(rec: Any, i: int, source: str = "flow file") -> Flow:
    r = from_dict(FlowRecord, rec, source, prefix=f"flows[{i}]")
    if r.bytes is None and r.size is None:
        raise InputError(source, f"flows[{i}]", problem="missing key 'bytes' (or 'size', e.g. "
                         "bytes: 2097152 or size: 2MB)")
    raw = r.bytes if r.bytes is not None else r.size
    key = "bytes" if r.bytes is not None else "size"
    try:
        size = parse_bytes(raw)
    except (ValueError, TypeError, OverflowError):
        size = -1
    if not 1 <= size <= MAX_FLOW_BYTES:
        raise InputError(source, f"flows[{i}].{key}", raw, "a byte count from 1 to 2^50 or a "
                         "size with a unit", "2MB")
    start_ps = r.start_ps if r.start_ps is not None else ns_to_ps(r.start_ns)
    return construct(Flow, dict(src=r.src, dst=r.dst, size_bytes=size, start_ps=start_ps,
                                qps=r.qps), source, f"flows[{i}]")


def load_flows(path: str | Path) -> list[Flow]:
    """Read flows from a ``.json`` or ``.yaml`` file (schema in the module docstring)."""
    path = Path(path)
    source = f"flow file {path}"
    if path.suffix.lower() not in (".yaml", ".yml", ".json"):
        raise InputError(source, problem="use a .json or .yaml file")
    data = read_data(path, "flow")
    data = nonempty_list(data, "flows", source,
                         "one top-level key 'flows' (a list of {src, dst, bytes})",
                         "a non-empty list of {src, dst, bytes}",
                         [{"src": "gpu0", "dst": "gpu8", "bytes": 2097152}])
    return [_flow_from_record(rec, i, source) for i, rec in enumerate(data)]


def flows_to_records(flows: Sequence[Flow]) -> list[dict]:
    """The inverse of :func:`load_flows` (for writing a flow file)."""
    return [{"src": f.src, "dst": f.dst, "bytes": f.size_bytes, "start_ns": f.start_ps / 1000,
             "qps": f.qps} for f in flows]
