"""Retransmission under link flaps: the study's sweep points (closed form and packet engine).

Every function returns a JSON-able dict, one point of a ``sweeps`` grid over
``NCCL_IB_TIMEOUT`` x ``NCCL_IB_RETRY_CNT`` x flap length x adaptive retransmission.

:func:`closed_form_point`
    ``tuner.retransmit.RetransmitSetting``: the packet lost as the flap begins is resent at the
    retry times; the QP survives when one of them leaves after the link is back; the stall is
    the time of that retransmission; a dead link is reported after ``T x (retry_cnt + 1)``.
:func:`packet_point`
    ``netsim.packet.simulate_packets`` on a dumbbell (``flows`` senders on one switch, as many
    receivers on the other, one cable between them) whose cable flaps while every flow is
    sending. Each flow is one QP; the job survives a flap when every QP does (NCCL aborts the
    communicator on the first completion error). The stall of a QP is its completion time
    minus its completion time without the flap.
"""

from __future__ import annotations

import functools

import numpy as np

T_DOWN_PS = 20_000_000          # the flap starts 20 us into the transfer
FLOW_BYTES = 1_000_000          # per QP: 80 us at 100G, so every QP is sending at T_DOWN_PS
HOST_GBPS, CORE_GBPS = 100.0, 400.0
PS_PER_S = 10**12


def closed_form_point(timeout: int, retry_cnt: int, flap_s: float, adaptive: bool) -> dict:
    """Survival, stall and detection time of one setting for one flap (closed form)."""
    from tuner.retransmit import RetransmitSetting

    s = RetransmitSetting(int(timeout), int(retry_cnt), bool(adaptive))
    stall = float(s.stall_s(np.array([float(flap_s)]))[0])
    survives = bool(np.isfinite(stall))
    return {"qp_survives": survives, "stall_s": stall if survives else None,
            "survivable_flap_s": s.survivable_flap_s, "detection_s": s.failure_detection_s,
            "timeout_s": s.timeout_s}


def _fabric(flows: int):
    from netsim.packet.testbeds import dumbbell

    return dumbbell(flows, flows, host_gbps=HOST_GBPS, core_gbps=CORE_GBPS, latency_ns=1000)


def _router(fab, seed: int):
    from netsim.packet.testbeds import ShortestPathRouter

    return ShortestPathRouter(fab, seed=seed)


def _flows(flows: int):
    from netsim.scenario.traffic import Flow

    return [Flow(f"l{i}", f"r{i}", FLOW_BYTES) for i in range(flows)]


def _config(timeout: int, retry_cnt: int, adaptive: bool, horizon_ps: int):
    from netsim.packet import PacketConfig

    # the time series is not used: one sample per 10 ms keeps long flaps cheap
    return PacketConfig(ib_timeout=int(timeout), retry_cnt=int(retry_cnt),
                        adaptive_retrans=bool(adaptive), max_time_ps=int(horizon_ps),
                        sample_interval_ps=10**10)


@functools.lru_cache(maxsize=4)
def _clean_fct_ns(flows: int, seed: int) -> tuple[float, ...]:
    """Completion time of every flow without a flap (no loss: the timers never fire)."""
    from netsim.packet import simulate_packets

    fab = _fabric(flows)
    res = simulate_packets(fab, _flows(flows), _config(20, 7, False, 10**10), seed,
                           router=_router(fab, seed))
    return tuple(float(f.completion_ns) for f in res.flows)


def packet_point(timeout: int, retry_cnt: int, flap_s: float, adaptive: bool, flows: int = 4,
                 seed: int = 0) -> dict:
    """The same question as :func:`closed_form_point`, answered by the packet engine."""
    from netsim.packet import PacketConfig, simulate_packets
    from netsim.scenario.faults import LinkFlap

    fab = _fabric(flows)
    flap_ps = int(round(float(flap_s) * PS_PER_S))
    rto_ps = PacketConfig(ib_timeout=int(timeout)).rto_ps
    horizon = T_DOWN_PS + flap_ps + (int(retry_cnt) + 2) * rto_ps + 10**9
    cfg = _config(timeout, retry_cnt, adaptive, horizon)
    res = simulate_packets(fab, _flows(flows), cfg, seed, router=_router(fab, seed),
                           flaps=[LinkFlap(fab.link_id("s0", "s1"), T_DOWN_PS, flap_ps)])
    clean = _clean_fct_ns(flows, seed)
    ok = [not f.failed and f.completion_ns is not None for f in res.flows]
    stalls = [(f.completion_ns - c) * 1e-9 for f, c, o in zip(res.flows, clean, ok, strict=True)
              if o]
    failed = not all(ok)
    return {"qps": flows, "qp_survival": float(np.mean(ok)), "job_survives": not failed,
            "stall_s": max(stalls) if not failed else None,
            "stall_min_s": min(stalls) if stalls else None,
            # the run ends at the last QP error: flap start to error = detection
            "detection_s": (res.sim_time_ns * 1e3 - T_DOWN_PS) / PS_PER_S if failed else None,
            "timeouts": int(res.timeouts), "events": int(res.events)}


def job_survival(survivable_flap_s: float, median_s: float, p99_s: float, flaps: int) -> float:
    """P(a job survives ``flaps`` independent flaps) with lognormal flap lengths
    (``tuner.retransmit.FlapModel``): ``P(D < window) ** flaps``."""
    from tuner.retransmit import FlapModel

    model = FlapModel("lognormal", {"median": median_s, "p99": p99_s}, count=flaps)
    return model.survival_closed_form(survivable_flap_s) ** flaps
