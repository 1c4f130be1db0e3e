"""Link-flap schedules: a physical link goes down at ``down_ps`` for ``duration_ps``.

A flap takes down both directions of a cable (MegaScale section 6.3: an interface goes down and
comes back, usually within seconds; packets in flight are dropped).

Text form (the CLI's ``--flap``): ``LINK@T+D``, e.g. ``12@1ms+300us``: LINK is a directed link
id (its cable is flapped), ``U->V`` (two node names joined by ``->``; ``U~V`` also works) or
``first-hop`` (the host link of the first flow, resolved by the caller); T and D are durations
(``5s``, ``300us``).
"""

from __future__ import annotations

from dataclasses import dataclass

from topologies.units import parse_duration_ps


@dataclass(frozen=True)
class LinkFlap:
    """Both directions of the cable of directed link ``link_id`` are down in [down_ps, down_ps + duration_ps)."""

    link_id: int
    down_ps: int
    duration_ps: int

    def __post_init__(self) -> None:
        if self.link_id < 0:
            raise ValueError(f"LinkFlap.link_id must be >= 0, got {self.link_id}")
        if self.down_ps < 0 or self.duration_ps <= 0:
            raise ValueError(f"LinkFlap needs down_ps >= 0 and duration_ps > 0, got "
                             f"{self.down_ps}, {self.duration_ps}")

    @property
    def up_ps(self) -> int:
        return self.down_ps + self.duration_ps


def parse_flap(text: str, fabric=None, first_hop: int | None = None) -> LinkFlap:
    """Parse ``LINK@T+D`` into a :class:`LinkFlap` (see the module docstring).

    Parameters
    ----------
    text : the flap spec.
    fabric : needed for the ``U~V`` form (``fabric.link_id(u, v)``) and to check the id range.
    first_hop : link id the caller resolves ``first-hop`` to.
    """
    if "@" not in text or "+" not in text.split("@", 1)[1]:
        raise ValueError(f"cannot parse flap {text!r}: use LINK@T+D, e.g. 12@1ms+300us")
    link_txt, when = text.split("@", 1)
    t_txt, d_txt = when.split("+", 1)
    link_txt = link_txt.strip()
    if link_txt == "first-hop":
        if first_hop is None:
            raise ValueError("flap link 'first-hop' needs flows to resolve it")
        link = int(first_hop)
    elif "~" in link_txt or "->" in link_txt:
        if fabric is None:
            raise ValueError(f"flap link {link_txt!r}: U->V needs a fabric")
        from topologies.links import parse_link

        link = parse_link(fabric, link_txt, "flap link")
    else:
        try:
            link = int(link_txt)
        except ValueError:
            raise ValueError(f"flap link {link_txt!r}: give a link id, U->V (e.g. tor0->agg0) or first-hop") from None
    if fabric is not None and not 0 <= link < int(fabric.num_links):
        raise ValueError(f"flap link id {link} out of range 0..{int(fabric.num_links) - 1}")
    return LinkFlap(link, parse_duration_ps(t_txt), parse_duration_ps(d_txt))
