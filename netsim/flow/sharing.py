"""Bandwidth-sharing models of the flow engine: ideal max-min, and a DCQCN-aware correction.

``maxmin``
    Max-min fair progressive filling (:mod:`netsim.flow.maxmin`): what an ideal congestion
    control converges to, and what the packet engine gives with CC ``none`` on long flows
    (lossless PFC fabric, fair round-robin egress scheduling).

``dcqcn``
    Max-min on *derated* capacities. DCQCN (Zhu et al., SIGCOMM 2015) holds a congested queue
    around the ECN marking band by cutting rates on CNPs and recovering over the 300 us / byte
    counter timers (NIC defaults in ``shared/reference/nccl-roce.md`` 5.1); the rate sawtooth
    leaves a congested link slightly under-used, while an uncontended flow keeps line rate.
    We model that as a link efficiency ``eta`` applied to every link that carries two or more
    QPs and is saturated in the max-min solution, then fill again. We chose this calibrated
    correction over integrating the paper's fluid ODEs because the ODEs need microsecond steps
    (feedback delay, 55 us timers) and so cost the same order as packet simulation at scale,
    while the steady-state effect on long flows is one number per contended link that the
    packet engine measures directly. ``eta`` is fitted against the packet engine
    (``docs/validation.md``, "Flow engine vs packet engine") on long flows: the model describes
    DCQCN's steady state, which NIC-default DCQCN reaches within about 10 ms of a flow (20 MB
    flows at 100 Gb/s are too short: per flow they are 12-26% off, only their mean matches).

``pfc``
    Greedy flows (CC ``none``) on a lossless fabric: FIFO egress queues shared per ingress port
    under PFC, with head-of-line blocking and back-pressure (:mod:`netsim.flow.pfc`). What the
    packet engine gives with CC ``none`` where max-min does not: flows merging through one
    ingress port, one sender feeding two congested receivers, HOL victims. Needs ordered paths
    (``simulate_flows`` / ``simulate_paths``), not lockstep collective groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netsim.flow.maxmin import Incidence, Slowest, link_load, maxmin_first_round, maxmin_rates
from netsim.flow.pfc import pfc_rates

MODELS = ("maxmin", "dcqcn", "pfc")

# RoCEv2 goodput per wire byte with a 4096-byte path MTU: headers Eth 14 + IPv4 20 + UDP 8 +
# BTH 12 + ICRC 4 + FCS 4 = 62 bytes, plus preamble and inter-frame gap 20 bytes (the packet
# engine's PacketConfig defaults): 4096 / 4178 = 98.0%.
ROCE_PAYLOAD_FRACTION = 4096 / (4096 + 62 + 20)


@dataclass(frozen=True)
class SharingModel:
    """How concurrent flows share links.

    Attributes
    ----------
    name : str
        ``maxmin``, ``dcqcn`` or ``pfc``.
    dcqcn_efficiency : float
        Fraction of a contended link's capacity DCQCN flows obtain together (``dcqcn`` only).
    wire_efficiency : float
        Payload fraction of the line rate: RoCEv2 headers at MTU 4096 by default
        (``ROCE_PAYLOAD_FRACTION``); 1.0 reports rates as line rate.
    """

    name: str = "maxmin"
    # fitted by netsim.flow.crosscheck.fit_dcqcn_efficiency on its five scenarios with 200 MB
    # flows and NIC-default DCQCN (``python -m netsim.flow.crosscheck``, "firmware 200MB",
    # packet engine of 2026-12-03); see docs/validation.md
    dcqcn_efficiency: float = 0.95
    wire_efficiency: float = ROCE_PAYLOAD_FRACTION

    def __post_init__(self) -> None:
        if self.name not in MODELS:
            raise ValueError(f"model={self.name!r}: choose one of {', '.join(MODELS)}")
        if not 0 < self.dcqcn_efficiency <= 1:
            raise ValueError(f"dcqcn_efficiency={self.dcqcn_efficiency}: must be in (0, 1]")
        if not 0 < self.wire_efficiency <= 1:
            raise ValueError(f"wire_efficiency={self.wire_efficiency}: must be in (0, 1]")

    @property
    def stops_early(self) -> bool:
        """Whether ``rates`` honours a stop rule (``maxmin`` only: ``dcqcn`` derates links by
        the whole first allocation, ``pfc`` is another model)."""
        return self.name == "maxmin"

    def settled_rates(self, indptr: np.ndarray, links: np.ndarray, weights: np.ndarray,
                      capacity_bps: np.ndarray, slowest: Slowest) -> np.ndarray | None:
        """``rates`` of the CSR paths' incidence with the stop rule ``slowest``, where the
        rule is settled after the filling's first round, without building the incidence;
        None otherwise (and for models other than ``maxmin``)."""
        if not self.stops_early:
            return None
        cap = np.asarray(capacity_bps, np.float64) * self.wire_efficiency
        return maxmin_first_round(indptr, links, weights, cap, slowest)

    def rates(self, inc: Incidence, capacity_bps: np.ndarray,
              active: np.ndarray | None = None, slowest: Slowest | None = None
              ) -> np.ndarray:
        """Rate of every flow (bits/s of payload) for the active set. With ``slowest``
        (``maxmin`` only, see ``stops_early``; ignored otherwise), only each segment's
        slowest time is exact (``netsim.flow.maxmin.Slowest``)."""
        cap = np.asarray(capacity_bps, np.float64) * self.wire_efficiency
        if self.name == "pfc":
            return pfc_rates(inc, cap, active)
        rate = maxmin_rates(inc, cap, active, slowest=slowest if self.stops_early else None)
        if self.name == "maxmin":
            return rate
        return self._dcqcn(inc, cap, active, rate)

    def _dcqcn(self, inc, cap, active, rate):
        on = np.ones(inc.num_flows, bool) if active is None else np.asarray(active, bool)
        sel = on[inc.e_flow]
        qps = np.bincount(inc.e_link[sel], weights=inc.e_count[sel], minlength=inc.num_links)
        load = link_load(inc, np.where(on, rate, 0.0))
        contended = (qps >= 2) & (load >= cap * (1 - 1e-6))
        if not contended.any():
            return rate
        derated = np.where(contended, cap * self.dcqcn_efficiency, cap)
        return maxmin_rates(inc, derated, active)


def make_model(model: str | SharingModel | None) -> SharingModel:
    """Accept a model name, a :class:`SharingModel`, or None (max-min)."""
    if model is None:
        return SharingModel()
    if isinstance(model, SharingModel):
        return model
    if model == "none":  # the packet engine's CC name for "no congestion control"
        return SharingModel("maxmin")
    return SharingModel(str(model))
