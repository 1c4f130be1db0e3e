"""One run of this engine for ``bench_htsim.py``, in its own process (interpreter start, imports,
fabric build and run are all in the CPU time the parent reads from ``os.wait4``).

``python benchmarks/_htsim_child.py K SIZE_BYTES SETTINGS SEED`` with ``PYTHONPATH`` = the tree
to measure; SETTINGS is ``matched`` (htsim_roce's model, :func:`matched_config`), ``default``
(this engine's defaults with CC none) or ``startup`` (no simulation: the cost before it). Prints one JSON line: data packets, events, flows done,
makespan and mean completion (start to the last ACK at the sender, htsim's "finished at"), the
build that ran and the file it came from.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from netsim.packet import PacketConfig, simulate_packets
from netsim.packet import engine as _engine
from netsim.packet.build_mode import engine_build
from netsim.scenario.traffic import permutation
from topologies import FatTreeSpec, fat_tree

#: htsim_roce's PFC thresholds in data packets (main_roce.cpp ``high_pfc = 15, low_pfc = 12``,
#: in units of ``Packet::data_packet_size()`` = the MTU, per lossless input queue).
HTSIM_PFC_HIGH_PKTS, HTSIM_PFC_LOW_PKTS = 15, 12
MTU_BYTES = 4096


def matched_config() -> PacketConfig:
    """This engine set up as htsim_roce (Broadcom/csg-htsim 841d9e7, ``-queue_type
    lossless_input``, no CC), each setting from htsim's source:

    * ``ack_every_packets=1``: ``RoceSink`` acks every data packet.
    * ``header_bytes=64, wire_gap_bytes=0, ctrl_bytes=64``: a data packet is MTU + 64 B on the
      wire (``RocePacket::ACKSIZE`` added to the payload), an ACK 64 B, no preamble/IFG.
    * ``pfc_xoff_bytes`` / ``pfc_xon_offset_bytes``: PAUSE when an ingress queue holds more than
      15 x MTU bytes (``LosslessInputQueue::receivePacket``: ``_queuesize > _high_threshold``),
      RESUME when it holds fewer than 12 x MTU (``completedService``: ``< _low_threshold``);
      this engine resumes at ``bytes + offset <= xoff``, so the offset is 3 x MTU + 1.
    * ``buffer_bytes``, ``headroom_bytes`` unbounded (2**40, 2**30): htsim's switch has no
      shared buffer, and its lossless queues never drop (over their size they print).
    * ``ecn=False``: htsim's ``LosslessOutputQueue`` is built with ECN off.
    * ``pfc_response_quanta=0``: htsim's PAUSE acts one wire latency after it is sent.
    * ``pfc_deadlock_ps=None``: htsim has no PFC deadlock detector.
    """
    return PacketConfig(
        cc="none", pfc=True, ecn=False, ack_every_packets=1, header_bytes=64, wire_gap_bytes=0,
        ctrl_bytes=64, pfc_xoff_bytes=HTSIM_PFC_HIGH_PKTS * MTU_BYTES,
        pfc_xon_offset_bytes=(HTSIM_PFC_HIGH_PKTS - HTSIM_PFC_LOW_PKTS) * MTU_BYTES + 1,
        buffer_bytes=2**40, headroom_bytes=2**30, pfc_response_quanta=0, pfc_deadlock_ps=None,
        mtu_bytes=MTU_BYTES)


def run(k: int, size_bytes: int, settings: str, seed: int) -> dict:
    """Build the 400G, 1 us fat-tree of radix *k*, run the permutation, summarise. With
    *settings* ``startup``, stop before simulating: what every run pays first (interpreter,
    imports, fabric, permutation)."""
    fabric = fat_tree(FatTreeSpec(k=k, link_speed_gbps=400, link_latency_ns=1000))
    flows = permutation(fabric, size_bytes, np.random.default_rng(seed))
    if settings == "startup":
        return {"data_pkts": 0, "events": 0, "flows_done": 0, "makespan_us": None,
                "mean_fct_us": None, "pfc_pauses": None, "pfc_refreshes": None,
                "build": engine_build(), "engine_file": _engine.__file__,
                "maxrss_mib": peak_rss_mib()}
    cfg = matched_config() if settings == "matched" else PacketConfig(cc="none", pfc=True)
    res = simulate_packets(fabric, flows, cfg, seed=seed)
    done = [f.completion_ns for f in res.flows if f.completion_ns is not None]
    return {"data_pkts": res.data_packets, "events": res.events, "flows_done": len(done),
            "makespan_us": max(done) / 1000 if done else None,
            "mean_fct_us": float(np.mean(done)) / 1000 if done else None,
            "pfc_pauses": res.pfc_pauses, "pfc_refreshes": res.pfc_counters.get("refreshes", 0),
            "build": engine_build(), "engine_file": _engine.__file__, "maxrss_mib": peak_rss_mib()}


def peak_rss_mib() -> float:
    """This process's peak resident memory (VmHWM: its own, not its parent's before exec)."""
    with open("/proc/self/status") as fh:
        kib = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    return kib / 1024


if __name__ == "__main__":
    k_arg, size_arg, settings_arg, seed_arg = sys.argv[1:5]
    print(json.dumps(run(int(k_arg), int(size_arg), settings_arg, int(seed_arg))))
