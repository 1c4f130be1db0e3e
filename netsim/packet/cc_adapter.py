"""Bridge to ``netsim.cc`` (congestion control, another module's job) with a built-in ``none``.

The engine calls :func:`make_cc` and :func:`make_cnp_generator`. When ``netsim.cc`` is installed
they come from there; otherwise ``none`` (line rate, no window) and a plain per-QP CNP pacer are
used so the engine runs on its own, and asking for dcqcn/swift/hybrid says what is missing.
"""

from __future__ import annotations


class LineRate:
    """CC ``none``: every QP sends at line rate, no window (RoCE without congestion control)."""

    name = "none"
    cwnd_bytes = None

    def __init__(self, line_rate_bps: int):
        self.rate_bps = float(line_rate_bps)

    def on_send(self, nbytes: int) -> None:
        pass

    def on_ack(self, acked_bytes: int, rtt_ps: int | None, ecn_echo: bool) -> None:
        pass

    def on_cnp(self) -> None:
        pass

    def on_timeout(self) -> None:
        pass


class SimpleCnpGenerator:
    """Notification point: at most one CNP per QP per ``min_interval_ps`` (ConnectX NP pacing)."""

    def __init__(self, min_interval_ps: int):
        self.min_interval_ps = int(min_interval_ps)
        self._last: dict = {}

    def should_send(self, qp_key, now_ps: int) -> bool:
        last = self._last.get(qp_key)
        if last is not None and now_ps - last < self.min_interval_ps:
            return False
        self._last[qp_key] = now_ps
        return True


def _cc_module():
    try:
        import netsim.cc as mod
    except ImportError:
        return None
    if hasattr(mod, "make_cc"):
        return mod
    try:
        import netsim.cc.base as base
    except ImportError:
        return None
    return base if hasattr(base, "make_cc") else None


def make_cc(name: str, *, line_rate_bps: int, base_rtt_ps: int, clock, params: dict | None = None):
    """One congestion-control instance for a QP (the interface of ``netsim/cc/base.py``)."""
    mod = _cc_module()
    if mod is not None:
        return mod.make_cc(name, line_rate_bps=int(line_rate_bps), base_rtt_ps=int(base_rtt_ps),
                           clock=clock, params=dict(params) if params else None)
    if name == "none":
        return LineRate(line_rate_bps)
    raise ValueError(f"cc {name!r} needs netsim.cc (not installed yet): use --cc none")


def make_cnp_generator(min_interval_ps: int):
    """The notification point's CNP pacer (``netsim.cc``'s ``CnpGenerator`` when present)."""
    mod = _cc_module()
    gen = getattr(mod, "CnpGenerator", None) if mod is not None else None
    if gen is None:
        try:
            from netsim.cc.base import CnpGenerator as gen
        except ImportError:
            gen = SimpleCnpGenerator
    return gen(int(min_interval_ps))
