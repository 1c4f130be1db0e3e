"""Switch ports as the PFC headroom sees them: link kind, speed, and the cable length of the
tier from the fabric file (``host_cable_m``, ``tor_agg_cable_m``, ``agg_core_cable_m``;
leaf-spine: ``host_cable_m``, ``uplink_cable_m``), documented with their defaults in
``docs/fabrics.md``. Until issue #26 the cable length was the link latency over 5 ns/m (100 m
for 500 ns), though that latency is mostly switch latency.
"""

from __future__ import annotations

import numpy as np

#: Link kinds between a NIC or switch and a switch, in tier order.
SWITCH_LINK_KINDS = ("host", "tor-agg", "agg-core")


def cable_lengths_m(fabric) -> dict[str, float]:
    """Cable length per link kind, from the spec the fabric was built from."""
    spec = getattr(fabric, "spec", None)
    if spec is None or not hasattr(spec, "cable_m"):
        raise ValueError(f"fabric {getattr(fabric, 'name', '?')!r} has no spec with cable "
                         "lengths (host_cable_m, tor_agg_cable_m, agg_core_cable_m)")
    return spec.cable_m()


def headroom_ports(fabric) -> list[dict]:
    """PFC headroom per port class (link kind x speed, the tier's cable length)."""
    from tuner.render import headroom_bytes

    cables = cable_lengths_m(fabric)
    kinds = np.asarray(fabric.link_kind).astype(str)
    cap = np.asarray(fabric.link_capacity_bps)
    rows = []
    for kind in SWITCH_LINK_KINDS:
        sel = kinds == kind
        for c in sorted(set(cap[sel].tolist())):
            cable = cables[kind]
            rows.append({"link_kind": kind, "port_speed_gbps": c / 1e9, "cable_m": cable,
                         "headroom_bytes": headroom_bytes(int(c), cable)})
    return rows


def watchdog_row(fabric, env: dict):
    """The report's PFC watchdog row: SONiC's pfcwd values (``tuner.sonic``) checked against
    NCCL's retry window (``NCCL_IB_TIMEOUT`` x ``NCCL_IB_RETRY_CNT`` in *env*)."""
    from tuner import provenance, sonic
    from tuner.retransmit import RetransmitSetting

    window = RetransmitSetting(int(env["NCCL_IB_TIMEOUT"]),
                               int(env["NCCL_IB_RETRY_CNT"])).survivable_flap_s
    slowest = min(r["port_speed_gbps"] for r in headroom_ports(fabric)) * 1e9
    return provenance.watchdog_setting(window, slowest, sonic.PFCWD_DETECTION_MS,
                                       sonic.PFCWD_RESTORATION_MS, sonic.PFCWD_POLL_MS)
