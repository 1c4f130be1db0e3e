"""The congestion-control interface the packet engine codes against, and its factory.

One :class:`CongestionControl` instance per QP, on the sender (the DCQCN reaction point). The
engine tells it what happens (``on_send``, ``on_ack``, ``on_cnp``, ``on_timeout``) and reads two
plain attributes before each packet:

``rate_bps``
    pacing rate, never above the line rate (the engine spaces packets at this rate);
``cwnd_bytes``
    bytes allowed in flight (sent, not yet acknowledged), or ``None`` for rate-only algorithms.
    When it is below one packet the engine keeps one packet in flight at most, paced at
    ``rate_bps`` (Swift's sub-packet windows).

The receiver (notification point) decides with a :class:`CnpGenerator` whether an ECN-marked
packet triggers a CNP. The switch (congestion point) marks with
:meth:`netsim.cc.params.EcnParams.mark_probability`.

Timers use the engine's :class:`Clock`: ``call_at(t_ps, fn)`` is one-shot and cannot be
cancelled, so algorithms cancel by ignoring stale callbacks (a generation counter), and keep
timers off while nothing can change (a QP at line rate schedules nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, Protocol, runtime_checkable

CC_NAMES = ("none", "dcqcn", "swift", "hybrid")


@runtime_checkable
class Clock(Protocol):
    """The engine's simulated clock: current time and one-shot callbacks."""

    now_ps: int  # current simulated time

    def call_at(self, t_ps: int, fn: Callable[[], None]) -> None:
        """Run ``fn()`` once when simulated time reaches ``t_ps`` (``t_ps >= now_ps``)."""
        ...


@runtime_checkable
class CongestionControl(Protocol):
    """Per-QP congestion control at the sender (reaction point)."""

    name: str
    rate_bps: float  # current pacing rate (<= line rate)
    cwnd_bytes: float | None  # window limit, or None for rate-only algorithms

    def on_send(self, nbytes: int) -> None:
        """Called after each data packet of ``nbytes`` (on the wire) is sent."""
        ...

    def on_ack(self, acked_bytes: int, rtt_ps: int | None, ecn_echo: bool) -> None:
        """An ACK newly acknowledging ``acked_bytes``; ``rtt_ps`` measured on it, if any."""
        ...

    def on_cnp(self) -> None:
        """A CNP arrived for this QP."""
        ...

    def on_timeout(self) -> None:
        """The QP's retransmit timer fired."""
        ...

    # Optional: ``on_nack()`` (a NACK arrived: the responder saw a gap). The engine calls it
    # when the algorithm defines it (Swift and the hybrid cut by max_mdf, once per RTT).


def make_cc(name: str, *, line_rate_bps: int, base_rtt_ps: int, clock: Clock,
            params: Mapping[str, Any] | None = None) -> CongestionControl:
    """Create the congestion control of one QP.

    Parameters
    ----------
    name : str
        ``none`` (line rate), ``dcqcn``, ``swift`` or ``hybrid``.
    line_rate_bps : int
        The sender NIC's line rate in bit/s; ``rate_bps`` never exceeds it.
    base_rtt_ps : int
        Unloaded round-trip time of the QP's path in ps (Swift and the hybrid set their delay
        target above it; DCQCN ignores it).
    clock : Clock
        The engine's clock (``now_ps`` and ``call_at``).
    params : mapping, optional
        Algorithm parameters by field name of :class:`~netsim.cc.params.DcqcnParams`,
        :class:`~netsim.cc.params.SwiftParams` or :class:`~netsim.cc.params.HybridParams`
        (or an instance of that class). Unknown keys raise ``ValueError``. For DCQCN the key
        ``preset`` (``firmware``, ``hpcc``, ``paper``: :meth:`DcqcnParams.preset`) starts from
        a published parameter set that the other keys then override.

    Returns
    -------
    CongestionControl

    Raises
    ------
    ValueError
        On an unknown name, a non-positive rate or RTT, or bad parameters.

    Examples
    --------
    >>> class C:
    ...     now_ps = 0
    ...     def call_at(self, t_ps, fn): pass
    >>> cc = make_cc("dcqcn", line_rate_bps=400_000_000_000, base_rtt_ps=5_000_000, clock=C())
    >>> cc.name, cc.rate_bps, cc.cwnd_bytes
    ('dcqcn', 400000000000.0, None)
    """
    from netsim.cc.params import params_for

    if name not in CC_NAMES:
        raise ValueError(f"unknown congestion control {name!r}: use one of {', '.join(CC_NAMES)}")
    if not line_rate_bps or line_rate_bps <= 0:
        raise ValueError(f"line_rate_bps must be > 0 bit/s, got {line_rate_bps!r}")
    if base_rtt_ps is None or int(base_rtt_ps) <= 0:
        raise ValueError(f"base_rtt_ps must be > 0 ps, got {base_rtt_ps!r}")
    p = params_for(name, _expand_preset(name, params, line_rate_bps))
    return _REGISTRY[name].build(line_rate_bps, int(base_rtt_ps), clock, p)


_REGISTRY: dict[str, Any] = {}


def register(name: str) -> Callable[[type], type]:
    """Class decorator: the algorithm ``name`` is built by ``cls.build(line_rate_bps,
    base_rtt_ps, clock, params)``. The algorithm modules register themselves when
    :mod:`netsim.cc` is imported; this module imports none of them."""
    if name not in CC_NAMES:
        raise ValueError(f"register({name!r}): add the name to CC_NAMES first")

    def deco(cls: type) -> type:
        _REGISTRY[name] = cls
        return cls
    return deco


def _expand_preset(name: str, params: Any, line_rate_bps: int) -> Any:
    """``{"preset": "hpcc", ...}`` for DCQCN: the preset's fields, then the other keys."""
    if name != "dcqcn" or not isinstance(params, Mapping) or "preset" not in params:
        return params
    from netsim.cc.params import DcqcnParams

    rest = {k: v for k, v in params.items() if k != "preset"}
    return {**DcqcnParams.preset(str(params["preset"]), line_rate_bps).to_dict(), **rest}


class CnpGenerator:
    """Notification point at the receiver: at most one CNP per QP per ``min_interval_ps``.

    The NIC sends a CNP for an ECN-marked packet unless it sent one for the same QP less than
    ``min_interval_ps`` ago (ConnectX ``min_time_between_cnps``, nccl-roce.md 5.1).

    Parameters
    ----------
    min_interval_ps : int
        Minimum spacing of CNPs of one QP, in ps (0 = a CNP for every marked packet).

    Examples
    --------
    >>> g = CnpGenerator(2_000_000)
    >>> [g.should_send("qp1", t) for t in (0, 1_000_000, 2_000_000)], g.sent, g.suppressed
    ([True, False, True], 2, 1)
    """

    __slots__ = ("min_interval_ps", "_last_ps", "sent", "suppressed")

    def __init__(self, min_interval_ps: int):
        if min_interval_ps is None or int(min_interval_ps) < 0:
            raise ValueError(f"min_interval_ps must be >= 0 ps, got {min_interval_ps!r}")
        self.min_interval_ps = int(min_interval_ps)
        self._last_ps: dict[Hashable, int] = {}
        self.sent = 0  # CNPs allowed
        self.suppressed = 0  # marked packets that found a CNP too recent

    @classmethod
    def for_cc(cls, name: str, params: Mapping[str, Any] | None = None) -> CnpGenerator:
        """The generator matching algorithm ``name``'s ``min_time_between_cnps_us``.

        ``none`` and ``swift`` ignore CNPs; they get the DCQCN default interval so that CNP
        counts stay comparable across algorithms.
        """
        from netsim.cc.params import DcqcnParams, params_for, us_ps

        # The CNP interval does not depend on the line rate a preset scales its steps by.
        params = _expand_preset(name, params, 25_000_000_000)
        p = params_for(name, params) if name in ("dcqcn", "hybrid") else DcqcnParams()
        return cls(us_ps(p.min_time_between_cnps_us) if p.min_time_between_cnps_us else 0)

    def should_send(self, qp_key: Hashable, now_ps: int) -> bool:
        """Whether a marked packet of ``qp_key`` arriving at ``now_ps`` triggers a CNP."""
        last = self._last_ps.get(qp_key)
        if last is not None and now_ps - last < self.min_interval_ps:
            self.suppressed += 1
            return False
        self._last_ps[qp_key] = now_ps
        self.sent += 1
        return True
