"""Cross-check the flow engine against the packet engine on the same flows and the same paths.

For each scenario the packet engine runs first; the flow engine then runs on the QP paths the
packet engine chose (``FlowStats.paths``), so the comparison isolates the bandwidth-sharing
model from ECMP luck. Per-flow throughput is ``bytes / FCT`` in both engines.

Three comparisons:

* CC ``none`` against the ``maxmin`` and ``pfc`` sharing models (``--size`` flows, the five
  scenarios and a head-of-line victim, :func:`pfc_scenarios`);
* DCQCN with two parameter sets (``firmware``: ConnectX defaults; ``paper``: the DCQCN paper's
  timers as in HPCC's ns-3 ``dcqcn_paper`` preset, ``DcqcnParams.preset``) against the
  ``dcqcn`` model, on ``--size`` flows and on ``--long-size`` flows (long enough for the rate
  increase stages to converge). The model's one parameter, the efficiency of a contended link,
  is fitted per parameter set and flow size on the *mean* per-flow throughput only
  (:func:`fit_dcqcn_efficiency`), so the per-flow errors are not tuned.

Run ``python -m netsim.flow.crosscheck [--size 20MB] [--long-size 200MB] [--json]`` for the
table recorded in ``docs/validation.md`` ("Flow engine vs packet engine").
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass

import numpy as np

from netsim.flow.engine import simulate_paths
from netsim.flow.sharing import SharingModel
from netsim.scenario.traffic import Flow, permutation


@dataclass(frozen=True)
class Scenario:
    name: str
    fabric: str
    flows: tuple
    note: str


def scenarios(size: int, seed: int = 7) -> list[Scenario]:
    """The cross-check scenarios (16- and 64-host fabrics)."""
    from topologies import load_fabric

    ls = load_fabric("leaf-spine-64")
    ft = load_fabric("fat-tree-k4")
    n = ls.nics
    rng = np.random.default_rng(seed)
    return [
        Scenario("incast-4, one leaf", "leaf-spine-64",
                 tuple(Flow(n[i], n[0], size) for i in range(1, 5)),
                 "one bottleneck, every flow on its own ingress port"),
        Scenario("incast-7, one leaf", "leaf-spine-64",
                 tuple(Flow(n[i], n[0], size) for i in range(1, 8)),
                 "one bottleneck, every flow on its own ingress port"),
        Scenario("two bottlenecks", "leaf-spine-64",
                 (Flow(n[1], n[0], size), Flow(n[2], n[0], size), Flow(n[2], n[3], size),
                  Flow(n[4], n[3], size)),
                 "sender NIC shared by two flows, two receivers"),
        Scenario("cross-leaf incast-4", "leaf-spine-64",
                 tuple(Flow(n[8 * i], n[1], size) for i in range(1, 5)),
                 "senders on 4 other leaves: flows may merge on one spine downlink"),
        Scenario("permutation", "fat-tree-k4", tuple(permutation(ft, size, rng)),
                 "ECMP collisions; flows merge from shared ingress ports"),
    ]


DCQCN_PRESETS = ("firmware", "paper")


def dcqcn_params(preset: str, fabric) -> dict:
    """``cc_params`` of a DCQCN preset (``DcqcnParams.preset``) at the fabric's NIC line rate."""
    from netsim.cc.params import DcqcnParams

    if preset == "firmware":
        return {}
    line = int(np.asarray(fabric.link_capacity_bps)[np.asarray(fabric.link_kind) == "host"].max())
    return DcqcnParams.preset(preset, line_rate_bps=line).to_dict()


def pfc_scenarios(size: int, seed: int = 7) -> list[Scenario]:
    """The CC ``none`` scenarios: :func:`scenarios` plus a head-of-line victim."""
    from topologies import load_fabric

    n = load_fabric("leaf-spine-64").nics
    hol = Scenario("HOL victim", "leaf-spine-64",
                   tuple(Flow(n[i], n[0], size) for i in (1, 2, 3)) + (Flow(n[1], n[5], size),),
                   "NIC 1 also sends to an idle receiver: paused with its port")
    return scenarios(size, seed) + [hol]


def run_packet(scn: Scenario, cc: str, seed: int = 0, preset: str = "firmware"):
    """The packet engine's run of a scenario: (fabric, PacketResult).

    ``preset`` picks the DCQCN parameters (:data:`DCQCN_PRESETS`) when ``cc`` is ``dcqcn``.
    """
    from netsim.packet import PacketConfig, simulate_packets
    from topologies import load_fabric

    fabric = load_fabric(scn.fabric)
    params = dcqcn_params(preset, fabric) if cc == "dcqcn" else {}
    cfg = PacketConfig(cc=cc, cc_params=params)
    return fabric, simulate_packets(fabric, list(scn.flows), cfg, seed=seed)


def flow_run(fabric, pk, model: SharingModel):
    """The flow engine's :class:`FlowResult` on the packet engine's flows and QP paths."""
    paths = [p for fs in pk.flows for p in fs.paths]
    qp_flow = [i for i, fs in enumerate(pk.flows) for _ in fs.paths]
    return simulate_paths(fabric, paths, [fs.bytes for fs in pk.flows],
                          [round(fs.start_ns * 1000) for fs in pk.flows], qp_flow, model=model)


def flow_side(fabric, pk, model: SharingModel) -> np.ndarray:
    """Per-flow throughput (Gb/s) of the flow engine on the packet engine's QP paths."""
    return flow_run(fabric, pk, model).throughput_bps / 1e9


def compare(scn: Scenario, cc: str, model: SharingModel, seed: int = 0, packet=None) -> dict:
    """Run one scenario in both engines; per-flow throughputs and relative errors."""
    fabric, pk = packet if packet is not None else run_packet(scn, cc, seed)
    p_thr = np.array([fs.throughput_gbps or 0.0 for fs in pk.flows])
    f_thr = flow_side(fabric, pk, model)
    err = f_thr / np.maximum(p_thr, 1e-12) - 1
    return {"scenario": scn.name, "fabric": scn.fabric, "cc": cc, "model": model.name,
            "size_bytes": int(pk.flows[0].bytes),
            "packet_gbps": p_thr.round(2).tolist(), "flow_gbps": f_thr.round(2).tolist(),
            "max_abs_err": float(np.abs(err).max()), "mean_abs_err": float(np.abs(err).mean()),
            "mean_ratio": float(f_thr.mean() / p_thr.mean()),
            "packet_spread": float(p_thr.max() / max(p_thr.min(), 1e-12)), "note": scn.note}


def bottleneck_groups(fabric, pk) -> list[list[int]]:
    """Flows the ``dcqcn`` and ``maxmin`` models cannot tell apart: those sharing a bottleneck.

    A flow's bottleneck is the link of its paths with the smallest capacity per flow crossing it
    (ties: the lowest link id); flows with the same bottleneck form a group, a flow alone on its
    bottleneck is not in any. Groups in order of their first flow.
    """
    cap = np.asarray(fabric.link_capacity_bps, np.float64)
    links = [sorted({link for p in fs.paths for link in p}) for fs in pk.flows]
    count = np.bincount([link for ls in links for link in ls], minlength=len(cap))
    by_link: dict[int, list[int]] = {}
    for i, ls in enumerate(links):
        b = min(ls, key=lambda link: (cap[link] / count[link], link))
        by_link.setdefault(b, []).append(i)
    return sorted((g for g in by_link.values() if len(g) > 1), key=lambda g: g[0])


CONVERGED_AFTER_NS = 4_000_000  # warm-up left out of the converged window (docs/validation.md)


def converged_window(pk, after_ns: float = CONVERGED_AFTER_NS) -> tuple[float, float]:
    """(start, end) ns of the window where every flow runs: ``after_ns`` to the first FCT."""
    end = min(fs.start_ns + fs.fct_ns for fs in pk.flows if fs.fct_ns is not None)
    if end <= after_ns:
        raise ValueError(f"first flow done at {end:.0f} ns, before the warm-up of {after_ns} ns")
    return float(after_ns), float(end)


def window_gbps(pk, start_ns: float, end_ns: float) -> np.ndarray:
    """Per-flow delivered Gb/s between the two samples of the time series nearest the window."""
    t = np.asarray(pk.time_ns, np.float64)
    i0, i1 = np.searchsorted(t, start_ns), np.searchsorted(t, end_ns, side="right") - 1
    if i1 <= i0:
        raise ValueError(f"no two samples between {start_ns:.0f} and {end_ns:.0f} ns")
    moved = pk.flow_delivered_bytes[i1] - pk.flow_delivered_bytes[i0]
    return moved * 8 / (t[i1] - t[i0])


def jain(x: np.ndarray) -> float:
    """Jain's fairness index of the rates ``x``: 1 when equal, 1/n when one flow has all."""
    x = np.asarray(x, np.float64)
    return float(x.sum() ** 2 / (len(x) * (x ** 2).sum()))


def group_compare(scn: Scenario, model: SharingModel, packet) -> dict:
    """:func:`compare` per bottleneck group, over whole flows and over the converged window.

    ``group_err`` (``window_group_err``): the worst error of a group's mean model throughput
    against its mean packet throughput (bytes / FCT; delivered rate in the converged window,
    model rates of the first active set). ``symmetric_floor``: the smallest per-flow error any
    model that gives a group's flows one rate can reach on the converged window, (max - min) /
    (max + min) of the group's packet rates, also for each half of the window (``half_floors``:
    an unfairness that persists shows in both halves).
    """
    fabric, pk = packet
    row = compare(scn, "dcqcn", model, packet=packet)
    fl = flow_run(fabric, pk, model)
    p_thr = np.array([fs.throughput_gbps or 0.0 for fs in pk.flows])
    f_thr, f_win = fl.throughput_bps / 1e9, fl.first_rate_bps / 1e9
    start, end = converged_window(pk)
    mid = (start + end) / 2
    p_win, halves = window_gbps(pk, start, end), (window_gbps(pk, start, mid),
                                                  window_gbps(pk, mid, end))
    groups = bottleneck_groups(fabric, pk)
    busy = p_win > 0
    return dict(row, groups=groups, window_ns=[start, end],
                half_floors=[_symmetric_floor(h, groups) for h in halves],
                group_err=max(abs(f_thr[g].mean() / p_thr[g].mean() - 1) for g in groups),
                window_group_err=max(abs(f_win[g].mean() / p_win[g].mean() - 1) for g in groups),
                window_max_abs_err=float(np.abs(f_win[busy] / p_win[busy] - 1).max()),
                symmetric_floor=_symmetric_floor(p_win, groups),
                min_group_jain=min(jain(p_win[g]) for g in groups),
                window_packet_gbps=p_win.round(2).tolist(), window_flow_gbps=f_win.round(2).tolist())


def _symmetric_floor(rates: np.ndarray, groups) -> float:
    """The worst group's (max - min) / (max + min): no one rate per group comes closer."""
    return max(float((rates[g].max() - rates[g].min()) / (rates[g].max() + rates[g].min()))
               for g in groups)


_ETA_GRID = np.linspace(0.70, 1.0, 31)


def fit_dcqcn_efficiency(runs, grid=_ETA_GRID) -> float:
    """The ``dcqcn_efficiency`` that best matches the packet engine's mean per-flow throughput.

    ``runs``: list of (fabric, PacketResult) with DCQCN. Least squares on the log of the ratio
    of mean per-flow throughputs (flow / packet) over the scenarios.
    """
    def loss(eta):
        tot = 0.0
        for fabric, pk in runs:
            p_thr = np.array([fs.throughput_gbps or 0.0 for fs in pk.flows])
            f_thr = flow_side(fabric, pk, SharingModel("dcqcn", dcqcn_efficiency=float(eta)))
            tot += np.log(f_thr.mean() / p_thr.mean()) ** 2
        return tot

    return float(min(grid, key=loss))


def dcqcn_rows(scns, preset: str, seed: int = 0) -> tuple[float, list[dict]]:
    """DCQCN packet runs of ``scns`` with ``preset``; the fitted efficiency and one row each."""
    runs = [run_packet(scn, "dcqcn", seed, preset) for scn in scns]
    eta = fit_dcqcn_efficiency(runs)
    model = SharingModel("dcqcn", dcqcn_efficiency=eta)
    rows = [dict(compare(scn, "dcqcn", model, packet=run), dcqcn_params=preset)
            for scn, run in zip(scns, runs, strict=True)]
    return eta, rows


def table(rows) -> str:
    """The markdown table of ``docs/validation.md``."""
    out = ["| scenario | size | packet CC | flow model | max err | mean err | mean ratio | "
           "packet max/min | packet Gb/s | flow Gb/s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cc = r["cc"] + (f" ({r['dcqcn_params']})" if "dcqcn_params" in r else "")
        out.append(f"| {r['scenario']} | {r['size_bytes'] / 1e6:.0f} MB | {cc} | {r['model']} | "
                   f"{100 * r['max_abs_err']:.1f}% | {100 * r['mean_abs_err']:.1f}% | "
                   f"{r['mean_ratio']:.3f} | {r['packet_spread']:.2f} | "
                   f"{', '.join(f'{x:.1f}' for x in r['packet_gbps'])} | "
                   f"{', '.join(f'{x:.1f}' for x in r['flow_gbps'])} |")
    return "\n".join(out)


def main(argv=None) -> int:
    from topologies.units import parse_bytes

    p = argparse.ArgumentParser(description="flow engine vs packet engine, per-flow throughput")
    p.add_argument("--size", default="20MB", help="flow size of every scenario")
    p.add_argument("--long-size", default="200MB",
                   help="flow size of the second, long-flow DCQCN comparison")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows, etas = [], {}
    for scn in pfc_scenarios(parse_bytes(args.size)):
        none = run_packet(scn, "none")
        rows += [compare(scn, "none", SharingModel(m), packet=none) for m in ("maxmin", "pfc")]
    for size in (args.size, args.long_size):
        for preset in DCQCN_PRESETS:
            eta, r = dcqcn_rows(scenarios(parse_bytes(size)), preset)
            etas[f"{preset} {size}"] = eta
            rows += r
    if args.json:
        print(json.dumps({"fitted_dcqcn_efficiency": etas, "rows": rows}, indent=2))
        return 0
    print("fitted dcqcn_efficiency (mean per-flow throughput): "
          + ", ".join(f"{k}: {v:.2f}" for k, v in etas.items())
          + f"; model default: {SharingModel('dcqcn').dcqcn_efficiency:.2f}\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
