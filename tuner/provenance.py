"""Where each switch and NIC value of a recommendation comes from, said truthfully, and the
PFC watchdog recommendation with its reasons.

Kinds of origin: a vendor default (named per switch OS, since they differ), the suite's
choice, or a simulator's value. Sources:

* ECN on the RoCE class. NVIDIA Cumulus Linux 5.14 ``nv set qos roce`` (lossless): min
  threshold 150,000 B, max 1,500,000 B, probability 100 (``nv show qos roce``; CumulusNetworks/
  docs ``content/cumulus-linux-514/.../RDMA-over-Converged-Ethernet-RoCE.md``). SONiC's
  lossless WRED profile ``AZURE_LOSSLESS``: green min 1,048,576 B, max 2,097,152 B, drop/mark
  probability 5 % (sonic-buildimage ``files/build_templates/qos_config.j2``, commit
  086b03bd70f9). Pmax 0.2 is the HPCC ns-3 simulator's value (``PMAX_MAP``; nccl-roce.md 5.2),
  no switch OS's default; the DCQCN paper used 1 %.
* DCQCN NIC parameters: ConnectX firmware defaults (``mlxconfig q`` dump, NVIDIA DOCA DCQCN
  parameters; nccl-roce.md 5.1).
* PFC watchdog: SONiC ``pfcwd`` defaults detection 200 ms, restoration 200 ms, poll 200 ms,
  action drop (sonic-net/sonic-utilities ``pfcwd/main.py``), off unless started; Cumulus
  Linux 5.14: off per interface until ``nv set interface <if> qos pfc-watchdog``, polling
  interval 100 ms, robustness 3 (QoS guide, "PFC Watchdog").
"""

from __future__ import annotations

from tuner.render import Setting

#: Vendor ECN defaults on the lossless class, per switch OS: (Kmin B, Kmax B, probability %).
CUMULUS_ROCE_ECN = (150_000, 1_500_000, 100)
SONIC_AZURE_LOSSLESS_ECN = (1_048_576, 2_097_152, 5)
#: The HPCC ns-3 simulator's marking probability at Kmax (netsim.cc.params.EcnParams.pmax).
HPCC_PMAX = 0.2
#: Cumulus Linux 5.14 PFC watchdog defaults.
CUMULUS_PFCWD_POLL_MS = 100
CUMULUS_PFCWD_ROBUSTNESS = 3
CUMULUS_RELEASE = "5.14"

#: Origin of each value the search leaves at its starting point (search parameter name).
KEPT = {
    "ecn_kmin_bytes": (f"Cumulus {CUMULUS_RELEASE} RoCE default kept (150,000 B; SONiC's "
                       "AZURE_LOSSLESS WRED default is 1,048,576 B: on SONiC this is our "
                       "choice)"),
    "ecn_kmax_ratio": (f"Cumulus {CUMULUS_RELEASE} RoCE default kept (1,500,000 B; SONiC's "
                       "AZURE_LOSSLESS: 2,097,152 B: on SONiC this is our choice)"),
    "ecn_pmax": ("simulator's value kept: 0.2 is the HPCC ns-3 simulator's PMAX, not a switch "
                 f"default (Cumulus {CUMULUS_RELEASE} RoCE: probability 100; SONiC "
                 "AZURE_LOSSLESS: 5%)"),
}
NIC_KEPT = "ConnectX firmware default kept"


def kept_label(key: str) -> str:
    """What a value the search did not move is: its origin, per switch OS where they differ."""
    return KEPT.get(key, NIC_KEPT)


def watchdog_setting(retry_window_s: float, slowest_port_bps: float,
                     detection_ms: int, restoration_ms: int, poll_ms: int) -> Setting:
    """The PFC watchdog row of the report: values, reasons, and the arithmetic behind them."""
    pause_max_us = 65535 * 512 / slowest_port_bps * 1e6     # one PAUSE frame's longest stop
    if restoration_ms / 1000 >= retry_window_s:
        raise ValueError(f"PFC watchdog restoration {restoration_ms} ms would outlast NCCL's "
                         f"retry window {retry_window_s:.2f} s")
    return Setting(
        "PFC watchdog", "switch",
        "off (SONiC: until pfcwd start; Cumulus: per interface)",
        f"on every port, action drop, detection {detection_ms} ms, restoration "
        f"{restoration_ms} ms, poll {poll_ms} ms (Cumulus {CUMULUS_RELEASE}: poll "
        f"{CUMULUS_PFCWD_POLL_MS} ms x robustness {CUMULUS_PFCWD_ROBUSTNESS})",
        f"SONiC pfcwd defaults (sonic-utilities pfcwd/main.py) and Cumulus {CUMULUS_RELEASE}'s: "
        f"a lossless queue paused for {detection_ms} ms is a PFC storm or deadlock, not "
        f"congestion (one PAUSE frame stops a port at most {pause_max_us:.0f} us at the "
        f"slowest port); the drop period ({restoration_ms} ms) is shorter than NCCL's retry "
        f"window ({retry_window_s:.2f} s), so QPs on the port recover by retransmission",
        "a stuck lossless queue drains after the detection time instead of never; nothing "
        "changes on a fabric whose pauses are transient")
