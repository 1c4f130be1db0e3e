"""Naming links on the command line: ``12`` (a directed link id), ``tor0->agg2`` (the link from
``tor0`` to ``agg2``; ``tor0~agg2`` is the older spelling), and comma lists of them.

Every flag that names a link (``--fail-links`` of ``simulate --level flow`` and
``collective-bench``, the ``LINK`` of ``simulate --level packet --flap``) reads it here, so
the same names work everywhere. A cable fails in both directions, so either direction names it.
"""

from __future__ import annotations

import numpy as np

from inputspec import is_decimal

#: Link kinds routing can steer around; PCIe and NVLink hops inside a server have no detour.
NETWORK_KINDS = ("host", "tor-agg", "agg-core")


def link_name(fabric, lid: int) -> str:
    """``u->v`` of directed link ``lid``."""
    return f"{fabric.nodes[int(fabric.link_src[lid])]}->{fabric.nodes[int(fabric.link_dst[lid])]}"


def _example(fabric) -> str:
    kinds = np.asarray(fabric.link_kind)
    hit = np.flatnonzero(kinds == "tor-agg")
    return link_name(fabric, int(hit[0])) if hit.size else "tor0->agg0"


def parse_link(fabric, text: str, flag: str = "link") -> int:
    """Directed link id of ``text``: an id, ``U->V`` or ``U~V``; ``ValueError`` naming it."""
    t = str(text).strip()
    for sep in ("->", "~"):
        if sep in t:
            u, v = (s.strip() for s in t.split(sep, 1))
            try:
                return int(fabric.link_id(u, v))
            except (KeyError, IndexError):
                raise ValueError(f"{flag} {t!r}: no link from {u!r} to {v!r} in fabric "
                                 f"{fabric.name} (e.g. {_example(fabric)})") from None
    if is_decimal(t):
        lid = int(t)
        if lid < fabric.num_links:
            return lid
        raise ValueError(f"{flag} {t!r}: link ids of fabric {fabric.name} are 0.."
                         f"{fabric.num_links - 1}")
    raise ValueError(f"{flag} {t!r}: give a link id or U->V, e.g. {_example(fabric)}")


def parse_failed_links(fabric, text: str | None, flag: str = "--fail-links") -> tuple[int, ...]:
    """Comma list of network links that are down; a link inside a server is refused, since
    no route can avoid it (failing it would silently change nothing)."""
    if not text:
        return ()
    out = []
    for tok in str(text).split(","):
        if not tok.strip():
            continue
        lid = parse_link(fabric, tok, flag)
        kind = str(fabric.link_kind[lid])
        if kind not in NETWORK_KINDS:
            raise ValueError(f"{flag} {tok.strip()!r}: link {lid} ({link_name(fabric, lid)}) is "
                             f"a {kind} link inside a server, which no route can avoid; fail a "
                             f"network link ({', '.join(NETWORK_KINDS)}), e.g. "
                             f"{_example(fabric)}")
        out.append(lid)
    return tuple(out)
