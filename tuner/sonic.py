"""SONiC ``config_db.json`` fragment of one switch role, complete enough to load.

Tables and keys follow SONiC's YANG models (sonic-buildimage
``src/sonic-yang-models/yang-models/``, read at commit 086b03bd70f9; the schema derived from
them is test data: ``tests/data/sonic/config_db_schema.json``). Every per-port table is keyed
by one port, as the YANG lists are (``PORT_QOS_MAP|Ethernet0``, ``BUFFER_PG|Ethernet0|3``):
SONiC's loaders also split comma-joined keys, its YANG validation does not.

Port names: the fabric model numbers a switch's ports but does not know the switch's names,
so ``EthernetN`` is the model's port N. Rename to the switch's ``PORT`` table names where they
differ (on many SONiC platforms port N is ``Ethernet{4N}``); the fragment's port keys refer to
the ``PORT`` table already on the switch, which it does not carry.

Buffers, traditional model (SONiC ``DEVICE_METADATA.buffer_model`` default): the pools share
the simulator's switch buffer (``netsim.packet.config.PacketConfig.buffer_bytes``, 32 MiB, the
HPCC ns-3 ``BUFFER_SIZE``), not a vendor's: replace it with the ASIC's shared buffer. The
lossless headroom of every port's priority group 3 is reserved out of the ingress pool.

PFC watchdog (``PFC_WD``): SONiC's ``pfcwd`` defaults (sonic-net/sonic-utilities
``pfcwd/main.py``: detection 200 ms, restoration 200 ms, poll 200 ms, action drop), within
the YANG ranges (detection 100..5000, restoration 100..60000, poll 100..1000 ms).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: The queues and priority groups besides the lossless one.
LOSSY_QUEUES = ("0-2", "4-6")
LOSSY_PG = "0"
#: SONiC pfcwd defaults (sonic-utilities pfcwd/main.py DEFAULT_*), milliseconds.
PFCWD_DETECTION_MS = 200
PFCWD_RESTORATION_MS = 200
PFCWD_POLL_MS = 200
PFCWD_ACTION = "drop"
#: Egress lossy profile reserve per queue: one 1518 B frame (SONiC's templates).
EGRESS_LOSSY_RESERVE_BYTES = 1518


def _identity(n: int = 8) -> dict[str, str]:
    return {str(i): str(i) for i in range(n)}


def port_name(port: int) -> str:
    """The model's port number as a SONiC port name (see the module note on renaming)."""
    return f"Ethernet{port}"


def profile_name(speed_gbps: float, cable_m: float) -> str:
    """SONiC's lossless profile name: ``pg_lossless_<speed Mb/s>_<cable>m_profile``."""
    return f"pg_lossless_{int(speed_gbps * 1000)}_{int(round(cable_m))}m_profile"


def _maps(priority: int, cnp_priority: int, dscp: int, cnp_dscp: int) -> dict[str, Any]:
    dscp_map = {str(d): "0" for d in range(64)}
    dscp_map[str(dscp)], dscp_map[str(cnp_dscp)] = str(priority), str(cnp_priority)
    tc_pg = {str(tc): LOSSY_PG for tc in range(8)}
    tc_pg[str(priority)] = str(priority)
    return {"DSCP_TO_TC_MAP": {"ROCE": dscp_map}, "TC_TO_QUEUE_MAP": {"ROCE": _identity()},
            "TC_TO_PRIORITY_GROUP_MAP": {"ROCE": tc_pg},
            "MAP_PFC_PRIORITY_TO_QUEUE": {"ROCE": _identity()}}


def _pools(buffer_bytes: int, headroom_total: int) -> dict[str, Any]:
    shared = buffer_bytes - headroom_total
    if shared <= 0:
        raise ValueError(f"switch buffer {buffer_bytes} B cannot hold the lossless headroom of "
                         f"its ports ({headroom_total} B)")
    return {
        "BUFFER_POOL": {
            "ingress_lossless_pool": {"type": "ingress", "mode": "dynamic", "size": str(shared)},
            "egress_lossless_pool": {"type": "egress", "mode": "static", "size": str(buffer_bytes)},
            "egress_lossy_pool": {"type": "egress", "mode": "dynamic", "size": str(shared)},
        },
        "BUFFER_PROFILE": {
            "ingress_lossy_profile": {"pool": "ingress_lossless_pool", "size": "0",
                                      "dynamic_th": "3"},
            "egress_lossless_profile": {"pool": "egress_lossless_pool", "size": "0",
                                        "static_th": str(buffer_bytes)},
            "egress_lossy_profile": {"pool": "egress_lossy_pool",
                                     "size": str(EGRESS_LOSSY_RESERVE_BYTES), "dynamic_th": "3"},
        },
    }


def _port_rows(port: str, priority: int, cnp_priority: int, profile: str,
               cable_m: float) -> dict[str, dict[str, Any]]:
    """Every per-port row of one port, table -> {key: row}."""
    return {
        "PORT_QOS_MAP": {port: {"dscp_to_tc_map": "ROCE", "tc_to_queue_map": "ROCE",
                                "tc_to_pg_map": "ROCE", "pfc_to_queue_map": "ROCE",
                                "pfc_enable": str(priority), "pfcwd_sw_enable": str(priority)}},
        "QUEUE": {f"{port}|{priority}": {"scheduler": "roce_dwrr",
                                         "wred_profile": "ROCE_LOSSLESS"},
                  f"{port}|{cnp_priority}": {"scheduler": "cnp_strict"},
                  f"{port}|0": {"scheduler": "default_dwrr"}},
        "BUFFER_PG": {f"{port}|{LOSSY_PG}": {"profile": "ingress_lossy_profile"},
                      f"{port}|{priority}": {"profile": profile}},
        "BUFFER_QUEUE": {f"{port}|{priority}": {"profile": "egress_lossless_profile"},
                         **{f"{port}|{q}": {"profile": "egress_lossy_profile"}
                            for q in LOSSY_QUEUES}},
        "PFC_WD": {port: {"action": PFCWD_ACTION, "detection_time": str(PFCWD_DETECTION_MS),
                          "restoration_time": str(PFCWD_RESTORATION_MS)}},
        "CABLE_LENGTH": {"AZURE": {port: f"{int(round(cable_m))}m"}},
    }


def fragment(classes: Sequence, ecn: Mapping[str, Any], priority: int, cnp_priority: int,
             dscp: int, cnp_dscp: int, buffer_bytes: int, mtu_bytes: int) -> dict[str, Any]:
    """config_db tables for one switch role; *classes* are its ``deploy.PortClass`` rows
    (ports of one kind and speed, with the tier's cable and the headroom)."""
    prob = max(1, min(100, round(100 * float(ecn["pmax"]))))
    xon = 2 * mtu_bytes
    doc: dict[str, Any] = {
        **_maps(priority, cnp_priority, dscp, cnp_dscp),
        "WRED_PROFILE": {"ROCE_LOSSLESS": {
            "ecn": "ecn_all", "wred_green_enable": "true",
            "green_min_threshold": str(int(ecn["kmin_bytes"])),
            "green_max_threshold": str(int(ecn["kmax_bytes"])),
            "green_drop_probability": str(prob)}},
        "SCHEDULER": {"roce_dwrr": {"type": "DWRR", "weight": "50"},
                      "cnp_strict": {"type": "STRICT"},
                      "default_dwrr": {"type": "DWRR", "weight": "50"}},
    }
    headroom_total = sum((xon + c.headroom_bytes) * len(c.ports) for c in classes)
    pools = _pools(buffer_bytes, headroom_total)
    doc["BUFFER_POOL"], doc["BUFFER_PROFILE"] = pools["BUFFER_POOL"], pools["BUFFER_PROFILE"]
    tables = ("PORT_QOS_MAP", "QUEUE", "BUFFER_PG", "BUFFER_QUEUE", "PFC_WD")
    for t in tables:
        doc[t] = {}
    doc["PFC_WD"]["GLOBAL"] = {"POLL_INTERVAL": str(PFCWD_POLL_MS)}
    doc["CABLE_LENGTH"] = {"AZURE": {}}
    for c in sorted(classes, key=lambda c: c.ports):
        profile = profile_name(c.speed_gbps, c.cable_m)
        doc["BUFFER_PROFILE"][profile] = {"pool": "ingress_lossless_pool", "xon": str(xon),
                                          "xoff": str(c.headroom_bytes),
                                          "size": str(xon + c.headroom_bytes),
                                          "dynamic_th": "-3"}
        for p in c.ports:
            rows = _port_rows(port_name(p), priority, cnp_priority, profile, c.cable_m)
            for t in tables:
                doc[t].update(rows[t])
            doc["CABLE_LENGTH"]["AZURE"].update(rows["CABLE_LENGTH"]["AZURE"])
    return doc
