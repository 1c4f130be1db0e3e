"""CSV and PNG time series of a packet run: queue length of the busiest ports, per-flow rate."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from netsim.packet.result import PacketResult


def busiest_ports(res: PacketResult, n: int = 8) -> list[int]:
    """Link ids of the *n* ports with the largest sampled queue."""
    if res.queue_bytes.size == 0:
        return []
    peak = res.queue_bytes.max(axis=0)
    order = [int(i) for i in np.argsort(-peak, kind="stable") if peak[i] > 0]
    return order[:n]


def write_series(res: PacketResult, out_dir: str | Path, top_ports: int = 8,
                 max_flows: int = 16) -> list[Path]:
    """Write ``queues.csv``, ``flow_rates.csv`` and their PNG plots into *out_dir*.

    Returns the paths written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ports = busiest_ports(res, top_ports)
    t = res.time_ns
    written = []
    qpath = out / "queues.csv"
    with qpath.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["time_ns"] + [f"link{lid}_bytes" for lid in ports])
        for i in range(len(t)):
            w.writerow([f"{t[i]:.3f}"] + [int(res.queue_bytes[i, lid]) for lid in ports])
    written.append(qpath)
    rates = res.flow_rates_gbps()
    nflows = min(max_flows, rates.shape[1])
    rpath = out / "flow_rates.csv"
    with rpath.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["time_ns"] + [f"flow{i}_gbps" for i in range(nflows)])
        for i in range(rates.shape[0]):
            w.writerow([f"{t[i + 1]:.3f}"] + [f"{rates[i, j]:.3f}" for j in range(nflows)])
    written.append(rpath)
    written += _plot(res, out, ports, rates, nflows)
    return written


def _plot(res, out: Path, ports, rates, nflows) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t_us = res.time_ns / 1000
    paths = []
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for lid in ports:
        ax.plot(t_us, res.queue_bytes[:, lid] / 1000, label=f"link {lid}")
    ax.set_xlabel("time (us)")
    ax.set_ylabel("egress queue (kB)")
    ax.set_title(f"busiest queues, cc={res.cc}, pfc={'on' if res.pfc else 'off'}")
    if ports:
        ax.legend(fontsize=7)
    fig.tight_layout()
    paths.append(out / "queues.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for j in range(nflows):
        ax.plot(t_us[1:], rates[:, j], lw=0.8)
    ax.set_xlabel("time (us)")
    ax.set_ylabel("delivery rate (Gb/s)")
    ax.set_title(f"per-flow rate (first {nflows} flows)")
    fig.tight_layout()
    paths.append(out / "flow_rates.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths
