"""NCCL settings that shape a collective's traffic: channels, QPs, algorithm, protocol, latencies.

Defaults and constants come from NCCL 2.30 (``docs/userguide/source/env.rst`` and
``src/graph/tuning.cc``), as collected in ``shared/reference/nccl-roce.md`` sections 2 and 2.2:

* ``NCCL_IB_QPS_PER_CONNECTION`` defaults to 1, ``NCCL_IB_SPLIT_DATA_ON_QPS`` to 0 (whole
  messages round-robin over the QPs of a connection) since NCCL 2.20.
* ``NCCL_BUFFSIZE`` 4 MiB with ``NCCL_STEPS`` = 8 slots: a Simple-protocol chunk is 512 KiB.
* Per-step hardware latencies (``hwLatencies``, microseconds, order LL / LL128 / Simple):
  NVLink Ring 0.6 / 1.9 / 3.4, Tree 0.6 / 1.25 / 4.0; NET Ring 2.7 / 4.0 / 14.0,
  Tree 5.0 / 8.5 / 14.0. Base latencies Ring 6.6 / 14.0 / 8.4, Tree 6.8 / 14.0 / 8.4.
* Protocol payload efficiency: LL carries 8 bytes of data per 16-byte line (50%), LL128 120 of
  every 128 bytes (``NCCL_LL128_LINESIZE``), Simple all of it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from topologies.units import MiB

ALGORITHMS = ("ring", "tree", "hierarchical", "direct")
PROTOCOLS = ("ll", "ll128", "simple")

# tuning.cc hwLatencies / baseLatencies, microseconds [algo][proto] (reference section 2.2)
_HW_LAT_NVLINK_US = {"ring": {"ll": 0.6, "ll128": 1.9, "simple": 3.4},
                     "tree": {"ll": 0.6, "ll128": 1.25, "simple": 4.0}}
_HW_LAT_NET_US = {"ring": {"ll": 2.7, "ll128": 4.0, "simple": 14.0},
                  "tree": {"ll": 5.0, "ll128": 8.5, "simple": 14.0}}
_BASE_LAT_US = {"ring": {"ll": 6.6, "ll128": 14.0, "simple": 8.4},
                "tree": {"ll": 6.8, "ll128": 14.0, "simple": 8.4}}
_PROTO_EFFICIENCY = {"ll": 0.5, "ll128": 120 / 128, "simple": 1.0}


@dataclass(frozen=True)
class NcclConfig:
    """The NCCL knobs the collective models honour.

    Attributes
    ----------
    channels : int
        Rings/trees run in parallel (``NCCL_MIN/MAX_NCHANNELS``, now ``NCCL_MIN/MAX_CTAS``).
        Channel ``c`` leaves a server through rail ``c mod (GPUs of the group in that server)``.
    qps_per_connection : int
        ``NCCL_IB_QPS_PER_CONNECTION``: QPs per network connection, each with its own RoCEv2
        UDP source port, hence its own ECMP path.
    split_data_on_qps : bool
        ``NCCL_IB_SPLIT_DATA_ON_QPS``: split every message over all QPs (True) or round-robin
        whole messages (False, the default). Either way a connection's bytes spread evenly over
        its QPs in the steady state; the flag only adds latency here (one work request per QP).
    algo : str
        ``ring``, ``tree`` (double binary tree), ``hierarchical`` (NVLink inside the server,
        rail-aligned rings across servers) or ``direct`` (all-to-all / send-recv style).
    proto : str
        ``simple``, ``ll128`` or ``ll``: sets the per-step latencies and the payload efficiency.
    chunk_bytes : int
        Pipelining unit of trees and broadcasts (``NCCL_BUFFSIZE / NCCL_STEPS``).
    alpha_nvlink_us, alpha_net_us, base_latency_us : float or None
        Per-step latency of an NVLink step and of a network step, and the fixed launch latency
        of one collective; ``None`` takes NCCL's tuning constants for ``algo`` and ``proto``.
    pxn : bool
        Rail-aligned sends through a peer GPU's NIC (``NCCL_PXN_DISABLE=0``, the default), with
        connections to one peer NIC shared (``NCCL_NET_SHARED_COMMS=1``).
    """

    channels: int = 16
    qps_per_connection: int = 1
    split_data_on_qps: bool = False
    algo: str = "ring"
    proto: str = "simple"
    chunk_bytes: int = 4 * MiB // 8
    alpha_nvlink_us: float | None = None
    alpha_net_us: float | None = None
    base_latency_us: float | None = None
    pxn: bool = True

    def __post_init__(self) -> None:
        if self.channels < 1 or self.channels > 64:
            raise ValueError(f"channels={self.channels}: NCCL allows 1..64 (MAXCHANNELS)")
        if self.qps_per_connection < 1 or self.qps_per_connection > 128:
            raise ValueError(f"qps_per_connection={self.qps_per_connection}: allowed 1..128 "
                             "(NCCL_IB_MAX_QPS)")
        if self.algo not in ALGORITHMS:
            raise ValueError(f"algo={self.algo!r}: choose one of {', '.join(ALGORITHMS)}")
        if self.proto not in PROTOCOLS:
            raise ValueError(f"proto={self.proto!r}: choose one of {', '.join(PROTOCOLS)}")
        if self.chunk_bytes < 1:
            raise ValueError(f"chunk_bytes={self.chunk_bytes}: must be at least 1")
        for name in ("alpha_nvlink_us", "alpha_net_us", "base_latency_us"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise ValueError(f"{name}={v}: latencies must be non-negative")

    def _table_algo(self) -> str:
        return "tree" if self.algo == "tree" else "ring"

    def _latency_s(self, override_us: float | None, table: dict) -> float:
        """``override_us`` (when set) or the table's value for this algorithm and protocol,
        in seconds."""
        us = override_us
        if us is None:
            us = table[self._table_algo()][self.proto]
        return us * 1e-6

    @property
    def alpha_nvlink_s(self) -> float:
        """Latency of one NVLink step, seconds."""
        return self._latency_s(self.alpha_nvlink_us, _HW_LAT_NVLINK_US)

    @property
    def alpha_net_s(self) -> float:
        """Latency of one network step, seconds (plus a work request per QP when splitting)."""
        return self._latency_s(self.alpha_net_us, _HW_LAT_NET_US)

    @property
    def base_latency_s(self) -> float:
        """Fixed latency of one collective call, seconds."""
        return self._latency_s(self.base_latency_us, _BASE_LAT_US)

    @property
    def proto_efficiency(self) -> float:
        """Fraction of wire bytes that are payload under the protocol."""
        return _PROTO_EFFICIENCY[self.proto]

    def with_(self, **changes) -> NcclConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    @classmethod
    def from_env(cls, env: dict[str, str], **base) -> NcclConfig:
        """Build from NCCL environment variables (``NCCL_IB_QPS_PER_CONNECTION`` and friends)."""
        kw = dict(base)
        if "NCCL_IB_QPS_PER_CONNECTION" in env:
            kw["qps_per_connection"] = int(env["NCCL_IB_QPS_PER_CONNECTION"])
        if "NCCL_IB_SPLIT_DATA_ON_QPS" in env:
            kw["split_data_on_qps"] = env["NCCL_IB_SPLIT_DATA_ON_QPS"] not in ("0", "")
        for var in ("NCCL_MAX_CTAS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_CTAS", "NCCL_MIN_NCHANNELS"):
            if var in env:
                kw["channels"] = int(env[var])
        if "NCCL_ALGO" in env:
            kw["algo"] = env["NCCL_ALGO"].split(",")[0].strip().lower()
        if "NCCL_PROTO" in env:
            kw["proto"] = env["NCCL_PROTO"].split(",")[0].strip().lower()
        if "NCCL_PXN_DISABLE" in env:
            kw["pxn"] = env["NCCL_PXN_DISABLE"] in ("0", "")
        return cls(**kw)
