"""Choose ``NCCL_IB_TIMEOUT`` / ``NCCL_IB_RETRY_CNT`` from a model of link flaps.

Model (InfiniBand transport, as NCCL sets it on every QP; ../shared/reference/nccl-roce.md
sections 1.4, 2 and 5.3):

* the local ACK timeout is ``T = 4.096 us x 2^NCCL_IB_TIMEOUT`` (NCCL default 20: ~4.3 s);
* a packet lost at time 0 (the flap starts) is retransmitted at ``T, 2T, ..., retry_cnt x T``;
  if the ACK of the last retransmission does not come within ``T`` the QP goes to error
  (IBV_WC_RETRY_EXC_ERR), so a real failure is detected after
  ``failure_detection = T x (retry_cnt + 1)`` (NCCL's docs round this to ``T x retry_cnt``:
  ~30 s for 20/7);
* a flap of length ``D`` is survived when a retransmission leaves after the link is back:
  ``D < survivable = T x retry_cnt`` (the worst case: the lost packet was sent as the flap began);
* the stall of a survived flap is the time of the first retransmission after ``D``;
* with the NIC's adaptive retransmission (``adap_retrans``, MegaScale section 3.6) the early
  retries fire on a doubling ladder from 4 us up to ``T`` (the QP's ack timeout caps it), so a
  short flap recovers sooner; the total budget stays ``T x (retry_cnt + 1)``.

A flap that is not survived costs a job restart (``restart_s``, an operator-supplied
assumption; default 600 s).

Multipath links: when a fabric link (switch to switch) goes down, switches drop it from their
ECMP groups once the link-down is detected (``LINK_DETECT_S``, the packet engine's
``link_detect_ps``) and the retransmission takes a live member, so a QP crossing it sees an
outage of ``min(flap, detection)``. A host link (NIC to ToR) has no alternative: the QP sees the
whole flap. The recommendation must survive both, so the host links set the window; the
report gives the fabric-link figures too (``evaluate(..., multipath=True)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import norm

from topologies.units import PS_PER_S, parse_duration_ps, ps_to_s

#: IB local ACK timeout unit: 4.096 us = 4,096,000 ps (IBTA spec; NCCL env.rst).
IB_TIMEOUT_UNIT_PS = 4_096_000
#: NCCL defaults since 2.23 (src/transport/net_ib/connect.cc): timeout 20, retry count 7.
NCCL_DEFAULT_TIMEOUT = 20
NCCL_DEFAULT_RETRY_CNT = 7
#: adap_retrans base timeout (ROCE_ACCL adp_retx_base_timeout_min = 0xFA0 = 4 us).
ADAPTIVE_BASE_PS = 4_000_000
MAX_TIMEOUT = 31      # 0 and >= 32 mean infinite
#: Link-down detection before ECMP repair, seconds (netsim.packet.config.LINK_DETECT_PS).
LINK_DETECT_S = 0.010
MAX_RETRY_CNT = 7     # 3-bit field


def ib_timeout_ps(timeout: int) -> int:
    """Local ACK timeout of ``NCCL_IB_TIMEOUT=timeout`` in picoseconds: 4.096 us x 2^timeout."""
    if not 1 <= timeout <= MAX_TIMEOUT:
        raise ValueError(f"NCCL_IB_TIMEOUT={timeout} is outside 1..31 (0 or >=32 is infinite)")
    return IB_TIMEOUT_UNIT_PS << timeout


def retry_times_ps(timeout: int, retry_cnt: int, adaptive: bool = False) -> np.ndarray:
    """Times (from the lost send) at which the NIC retransmits, in picoseconds."""
    if not 0 <= retry_cnt <= MAX_RETRY_CNT:
        raise ValueError(f"NCCL_IB_RETRY_CNT={retry_cnt} is outside 0..7")
    t_ps = ib_timeout_ps(timeout)
    if not adaptive:
        return np.arange(1, retry_cnt + 1, dtype=np.int64) * t_ps
    budget = t_ps * retry_cnt  # the last send must still leave T before the error
    times, now, step = [], 0, min(ADAPTIVE_BASE_PS, t_ps)
    while now + step <= budget:
        now += step
        times.append(now)
        step = min(step * 2, t_ps)
    return np.asarray(times, dtype=np.int64)


@dataclass(frozen=True)
class RetransmitSetting:
    """One (timeout, retry count) pair and the times that follow from it."""

    timeout: int
    retry_cnt: int
    adaptive: bool = False

    @property
    def timeout_s(self) -> float:
        return ps_to_s(ib_timeout_ps(self.timeout))

    @property
    def survivable_flap_s(self) -> float:
        """Longest flap survived: the last retransmission leaves as the link comes back."""
        return ps_to_s(ib_timeout_ps(self.timeout) * self.retry_cnt)

    @property
    def failure_detection_s(self) -> float:
        """Time from a real failure to the QP error NCCL reports: T x (retry_cnt + 1)."""
        return ps_to_s(ib_timeout_ps(self.timeout) * (self.retry_cnt + 1))

    def stall_s(self, flap_s: np.ndarray) -> np.ndarray:
        """Stall from the flap start to the first retransmission after it; inf if not survived."""
        times = retry_times_ps(self.timeout, self.retry_cnt, self.adaptive) / PS_PER_S
        d = np.asarray(flap_s, dtype=float)
        k = np.searchsorted(times, d, side="left")   # first retry at or after the link is up
        out = np.full(d.shape, np.inf)
        ok = k < len(times)
        out[ok] = times[k[ok]]
        return out


@dataclass(frozen=True)
class FlapModel:
    """Distribution of flap durations (seconds) and how many flaps the job sees.

    ``kind``: "max" (uniform on (0, max]: only the bound is known), "lognormal" (from median
    and p99) or "list" (empirical durations).
    """

    kind: str
    params: dict[str, float] = field(default_factory=dict)
    durations_s: tuple[float, ...] = ()
    count: int = 1

    @property
    def design_flap_s(self) -> float:
        """The flap the recommendation must outlast: the max, or the 99.9th percentile."""
        if self.kind == "max":
            return self.params["max"]
        if self.kind == "list":
            return max(self.durations_s)
        return float(self.quantile(np.array([self.params.get("coverage", 0.999)]))[0])

    def quantile(self, q: np.ndarray) -> np.ndarray:
        if self.kind == "max":
            return q * self.params["max"]
        if self.kind == "list":
            return np.quantile(np.asarray(self.durations_s), q, method="inverted_cdf")
        mu, sigma = self._mu_sigma()
        return np.exp(mu + sigma * norm.ppf(q))

    def _mu_sigma(self) -> tuple[float, float]:
        mu = math.log(self.params["median"])
        sigma = (math.log(self.params["p99"]) - mu) / norm.ppf(0.99)
        return mu, sigma

    def survival_closed_form(self, window_s: float) -> float:
        """P(D < window) in closed form (lognormal CDF, uniform CDF, empirical fraction)."""
        if self.kind == "max":
            return min(1.0, window_s / self.params["max"])
        if self.kind == "list":
            return float(np.mean(np.asarray(self.durations_s) < window_s))
        mu, sigma = self._mu_sigma()
        return float(norm.cdf((math.log(window_s) - mu) / sigma))

    def grid(self, n: int = 4000) -> np.ndarray:
        """Deterministic quantile grid (midpoint rule) standing for the distribution."""
        if self.kind == "list":
            return np.asarray(self.durations_s, dtype=float)
        return self.quantile((np.arange(n) + 0.5) / n)


def parse_flaps(text: str) -> FlapModel:
    """Parse ``--flaps``: ``max=5s``, ``lognormal:median=1s,p99=6s[,count=N]`` or ``1s,2s,5s``.

    Every form takes an optional ``count=N`` (flaps the job sees; default 1).
    """
    try:
        return _parse_flaps(text.strip())
    except ValueError as exc:
        if "--flaps" in str(exc):
            raise
        raise ValueError(f"--flaps {text!r}: {exc}") from None


def _parse_flaps(text: str) -> FlapModel:
    kind, _, rest = text.partition(":") if ":" in text else ("", "", text)
    items = [s.strip() for s in rest.split(",") if s.strip()]
    kv = dict(s.split("=", 1) for s in items if "=" in s)
    plain = [s for s in items if "=" not in s]
    count = int(kv.pop("count", 1))
    if count < 1:
        raise ValueError(f"--flaps count={count}: must be >= 1")
    sec = {k: ps_to_s(parse_duration_ps(v)) for k, v in kv.items() if k != "coverage"}
    if kind in ("", "max") and "max" in sec and not plain:
        return FlapModel("max", {"max": _positive(sec["max"], "max")}, count=count)
    if kind == "lognormal":
        if not {"median", "p99"} <= set(sec):
            raise ValueError("--flaps lognormal needs median= and p99=, e.g. "
                             "lognormal:median=1s,p99=6s")
        if sec["p99"] <= sec["median"]:
            raise ValueError("--flaps lognormal: p99 must be larger than median")
        params = {"median": _positive(sec["median"], "median"), "p99": sec["p99"]}
        if "coverage" in kv:
            params["coverage"] = float(kv["coverage"])
        return FlapModel("lognormal", params, count=count)
    if kind in ("", "list") and plain and not sec:
        d = tuple(_positive(ps_to_s(parse_duration_ps(s)), "duration") for s in plain)
        return FlapModel("list", durations_s=d, count=count)
    raise ValueError(f"cannot parse --flaps {text!r}: use max=5s, "
                     "lognormal:median=1s,p99=6s or a list such as 0.5s,2s,5s")


def _positive(x: float, name: str) -> float:
    if not x > 0:
        raise ValueError(f"--flaps {name} must be positive, got {x}")
    return x


@dataclass(frozen=True)
class RetransmitReport:
    """Survival and stall of the job under one setting and one flap model."""

    setting: RetransmitSetting
    survival_per_flap: float
    job_survival: float
    expected_stall_s: float      # per flap, failures counted at restart_s


def outage_s(flap_s, multipath: bool = False, detect_s: float = LINK_DETECT_S) -> np.ndarray:
    """The outage a QP sees from a flap: all of it on a single-path hop, at most the
    link-down detection time on a multipath link (ECMP repair moves it to a live member).

    >>> outage_s([0.001, 5.0], multipath=True).tolist(), outage_s([5.0]).tolist()
    ([0.001, 0.01], [5.0])
    """
    d = np.asarray(flap_s, dtype=float)
    return np.minimum(d, detect_s) if multipath else d


def evaluate(setting: RetransmitSetting, flaps: FlapModel, restart_s: float = 600.0,
             grid_n: int = 4000, multipath: bool = False,
             detect_s: float = LINK_DETECT_S) -> RetransmitReport:
    """Survival probability and expected stall of ``setting`` under ``flaps`` (on a
    multipath link the outage is capped by the link-down detection, :func:`outage_s`)."""
    d = outage_s(flaps.grid(grid_n), multipath, detect_s)
    stall = setting.stall_s(d)
    survived = np.isfinite(stall)
    p = float(survived.mean())
    expected = float(np.where(survived, stall, restart_s).mean())
    return RetransmitReport(setting, p, p ** flaps.count, expected)


@dataclass(frozen=True)
class RetransmitRecommendation:
    """The chosen setting, the defaults, and why."""

    default: RetransmitReport
    recommended: RetransmitReport
    design_flap_s: float
    margin: float
    reason: str
    fabric: RetransmitReport | None = None  # the recommended setting on multipath links

    def env(self) -> dict[str, str]:
        s = self.recommended.setting
        return {"NCCL_IB_TIMEOUT": str(s.timeout), "NCCL_IB_RETRY_CNT": str(s.retry_cnt)}


def recommend_retransmit(flaps: FlapModel, margin: float = 1.5, adaptive: bool = False,
                         restart_s: float = 600.0,
                         detect_s: float = LINK_DETECT_S) -> RetransmitRecommendation:
    """Pick the (timeout, retry_cnt) whose survivable window covers ``margin x`` the design
    flap with the shortest real-failure detection time; ties go to more retries (smaller T,
    so the first retransmission after the link is back comes sooner).

    Parameters
    ----------
    flaps
        Flap model (see :func:`parse_flaps`).
    margin
        Required ratio survivable window / design flap (> 1).
    adaptive
        Model the NIC's adaptive retransmission ladder.
    restart_s
        Cost of a failed flap (a job restart) in the expected stall.
    detect_s
        Link-down detection before ECMP repair on multipath links (reported in ``fabric``).
    """
    if margin < 1.0:
        raise ValueError(f"margin={margin} must be >= 1 so the window outlasts the flaps")
    need_s = flaps.design_flap_s * margin
    best: RetransmitSetting | None = None
    for timeout in range(1, MAX_TIMEOUT + 1):
        for cnt in range(MAX_RETRY_CNT, 0, -1):
            s = RetransmitSetting(timeout, cnt, adaptive)
            if s.survivable_flap_s <= need_s:
                continue
            if best is None or s.failure_detection_s < best.failure_detection_s:
                best = s
    if best is None:
        raise ValueError(f"no NCCL_IB_TIMEOUT/RETRY_CNT survives {need_s:.3g} s flaps")
    default = RetransmitSetting(NCCL_DEFAULT_TIMEOUT, NCCL_DEFAULT_RETRY_CNT, adaptive)
    rec_r, def_r = (evaluate(s, flaps, restart_s) for s in (best, default))
    fabric = evaluate(best, flaps, restart_s, multipath=True, detect_s=detect_s)
    reason = (f"retry window {best.survivable_flap_s:.2f} s > {margin:g} x design flap "
              f"{flaps.design_flap_s:.2f} s on single-path host links (NIC-ToR); a dead link is "
              f"reported after {best.failure_detection_s:.2f} s (defaults 20/7: "
              f"{default.survivable_flap_s:.1f} s window, {default.failure_detection_s:.1f} s "
              f"detection). On multipath fabric links ECMP repair after {detect_s * 1e3:g} ms "
              f"caps the outage a QP sees, so they need only "
              f"{min(flaps.design_flap_s, detect_s) * margin:.3g} s: the host links set the window")
    return RetransmitRecommendation(def_r, rec_r, flaps.design_flap_s, margin, reason, fabric)

