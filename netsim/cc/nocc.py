"""``none``: no congestion control, every QP sends at its line rate (PFC alone protects it)."""

from __future__ import annotations

from netsim.cc.base import register


@register("none")
class LineRate:
    """Constant line-rate sender: ignores ACKs, CNPs and timeouts.

    Parameters
    ----------
    line_rate_bps : int
        The NIC's line rate in bit/s.

    Examples
    --------
    >>> cc = LineRate(400_000_000_000)
    >>> cc.on_cnp(); cc.rate_bps, cc.cwnd_bytes
    (400000000000.0, None)
    """

    __slots__ = ("rate_bps", "cwnd_bytes", "cnps")
    name = "none"

    @classmethod
    def build(cls, line_rate_bps: int, base_rtt_ps: int, clock, params) -> LineRate:
        """The registry's constructor (:func:`netsim.cc.base.make_cc`): rate only."""
        return cls(line_rate_bps)

    def __init__(self, line_rate_bps: int):
        self.rate_bps = float(line_rate_bps)
        self.cwnd_bytes = None
        self.cnps = 0  # CNPs received (and ignored), for reports

    def on_send(self, nbytes: int) -> None:
        pass

    def on_ack(self, acked_bytes: int, rtt_ps: int | None, ecn_echo: bool) -> None:
        pass

    def on_cnp(self) -> None:
        self.cnps += 1

    def on_timeout(self) -> None:
        pass
