"""What-if inputs of ``netsim predict``: stragglers (``--straggler RANK:FACTOR``) and degraded
links (``--degrade LINK:FACTOR``).

A straggler's compute runs FACTOR times slower (``predict(stragglers=...)``). A degraded link
carries 1/FACTOR of its capacity in both directions, e.g. ``--degrade leaf0->spine1:2`` for a
400G port trained down to 200G; LINK is ``u->v`` (node names of the fabric) or a directed
link id. FACTOR is a slowdown in both (>= 1), the unit ``netsim diagnose`` reports.
"""

from __future__ import annotations

import numpy as np

from inputspec import is_decimal


def _split(text: str, flag: str) -> tuple[str, float]:
    head, sep, tail = text.rpartition(":")
    try:
        factor = float(tail)
    except ValueError:
        factor = float("nan")
    if not sep or not head or not factor >= 1.0:
        raise ValueError(f"{flag} {text!r}: expected NAME:FACTOR with FACTOR >= 1 (a slowdown)")
    return head, factor


def parse_stragglers(items: list[str] | None) -> dict[int, float]:
    """``["3:1.1", "7:1.5"]`` -> {3: 1.1, 7: 1.5}."""
    out: dict[int, float] = {}
    for text in items or ():
        rank, factor = _split(text, "--straggler")
        try:
            out[int(rank)] = factor
        except ValueError:
            raise ValueError(f"--straggler {text!r}: RANK must be an integer") from None
    return out


def parse_degrades(items: list[str] | None) -> list[tuple[str, float]]:
    """``["tor0->agg2:2"]`` -> [("tor0->agg2", 2.0)]."""
    return [_split(text, "--degrade") for text in items or ()]


def degrade_links(fabric, degrades: list[tuple[str, float]]) -> list[int]:
    """Divide the capacity of each named physical link (both directions) by its factor, in
    place; returns the directed link ids changed."""
    changed = []
    for name, factor in degrades:
        link = _link_id(fabric, name)
        pair = np.array([link - link % 2, link - link % 2 + 1])  # a physical link's directions
        fabric.link_capacity_bps[pair] = (fabric.link_capacity_bps[pair] / factor).astype(
            fabric.link_capacity_bps.dtype)
        changed += pair.tolist()
    fabric._graph = None  # rebuilt from the arrays on next use
    return changed


def _link_id(fabric, name: str) -> int:
    if is_decimal(name):
        link = int(name)
        if not 0 <= link < fabric.num_links:
            raise ValueError(f"--degrade: link id {link} is outside 0..{fabric.num_links - 1}")
        return link
    u, arrow, v = name.partition("->")
    if not arrow:
        raise ValueError(f"--degrade {name!r}: name a link as u->v (node names) or a link id")
    try:
        return fabric.link_id(u.strip(), v.strip())
    except KeyError:
        raise ValueError(f"--degrade: fabric {fabric.name} has no link {name}") from None
