"""Packet-level discrete-event RoCEv2 engine (simpy heap, integer picoseconds).

``simulate_packets(fabric, flows, config, seed) -> PacketResult``; see ``docs/packet-engine.md``.
"""

import netsim.packet.build_mode  # noqa: F401 (first: NETSIM_PURE_PYTHON picks the build)
from netsim.packet.build import simulate_packets
from netsim.packet.config import PacketConfig
from netsim.packet.result import FlowStats, PacketResult, PortStats

__all__ = ["simulate_packets", "PacketConfig", "PacketResult", "FlowStats", "PortStats"]
