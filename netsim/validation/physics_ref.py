"""Issue 17's DCQCN physics criteria measured on the HPCC ns-3 reference.

The physics tests (``tests/netsim/packet/test_cc_physics.py``) ask of n long flows into one
port: aggregate >= 0.9 of line rate and Jain >= 0.95 over the second half of the period all
flows are active, the bottleneck queue mostly between Kmin and Kmax. Where our engine misses,
the same scenarios run here on the independent simulator (``netsim/validation/reference.py`` writes
its inputs) with per-packet tracing of the bottleneck port switched on, so the same three
figures can be taken from its packets:

* :func:`ns3_physics_inputs` writes a scenario's ns-3 inputs with ``ENABLE_TRACE 1`` and the
  bottleneck switch in ``trace.txt``;
* :func:`read_trace` reads ns-3's binary ``mix.tr`` (``TraceFormat`` of
  ``simulation/src/point-to-point/model/trace-format.h``: 56-byte records after a
  ``SimSetting`` header) and keeps the data packets' enqueue/dequeue events of one port;
* :func:`criteria` turns those events into the figures; :func:`engine_criteria` takes the same
  figures from a :class:`~netsim.packet.result.PacketResult`.

``python -m netsim.validation.physics_ref inputs DIR`` / ``summarize OUT --runs LABEL=DIR`` drive it; the
commands and the results are in ``tests/data/hpcc-ns3/README.md`` ("Physics runs").
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np

from netsim.validation.reference import (
    NS3_HEADER_BYTES,
    NS3_START_S,
    RefScenario,
    ecn_for,
    ns3_cli,
    ns3_inputs,
    run_cli,
    topology,
    write_json_gz,
)

#: Scenarios of the physics matrix run on the reference (long = 100 MB per flow).
PHYSICS_SCENARIOS = tuple(
    f"incast{n}-{r}g-long-{p}" for p in ("nic-default", "paper") for r in (100, 400)
    for n in (2, 8, 16)) + ("trunk2-400g-long-nic-default", "trunk2-400g-long-paper")

#: ``TraceFormat`` as gcc lays it out on x86-64 (offsets checked with offsetof; size 56).
TRACE_DTYPE = np.dtype({
    "names": ["time", "node", "intf", "qidx", "qlen", "sip", "dip", "size", "l3", "event",
              "sport", "seq", "payload"],
    "formats": ["<u8", "<u2", "u1", "u1", "<u4", "<u4", "<u4", "<u2", "u1", "u1", "<u2", "<u4",
                "<u2"],
    "offsets": [0, 8, 10, 11, 12, 16, 20, 24, 26, 27, 32, 36, 50],
    "itemsize": 56})
ENQU, DEQU = 1, 2  # trace-format.h enum Event
UDP = 0x11  # data packets (RoCEv2 over UDP in the reference)


def bottleneck(name: str) -> tuple[int, int, int]:
    """(switch node, ns-3 ifindex, far-end node) of the scenario's congested port."""
    topo = topology(RefScenario.from_name(name).shape)
    sink = topo.flows[0][1]
    sw = next(b for a, b in topo.cables if a == sink)  # the receiver's switch (incast)
    if RefScenario.from_name(name).shape == "trunk2":
        sw, far = topo.hosts, topo.hosts + 1  # s0 -> s1
    else:
        far = sink
    k = 0
    for a, b in topo.cables:
        if sw in (a, b):
            k += 1
            if far in (a, b):
                return sw, k, far
    raise ValueError(f"{name}: no bottleneck port found")


def ns3_physics_inputs(name: str, out_dir: Path) -> Path:
    """:func:`~netsim.validation.reference.ns3_inputs` of *name* with the bottleneck switch traced."""
    cfg = ns3_inputs(RefScenario.from_name(name), out_dir)
    sw, _, _ = bottleneck(name)
    (out_dir / "trace.txt").write_text(f"1\n{sw}\n")
    text = cfg.read_text().replace("ENABLE_TRACE 0", "ENABLE_TRACE 1")
    cfg.write_text(text)
    return cfg


def read_trace(path: Path, node: int, intf: int) -> np.ndarray:
    """Data-packet Enqu/Dequ records of port (*node*, *intf*) in an ns-3 ``mix.tr``."""
    raw = Path(path).read_bytes()
    n_ports = int(np.frombuffer(raw[:4], "<u4")[0])
    head = 4 + 11 * n_ports + 4  # SimSetting: count, (u16 node, u8 intf, u64 bps) each, u32 win
    body = raw[head:]
    rec = np.frombuffer(body[: len(body) // 56 * 56], TRACE_DTYPE)
    keep = ((rec["node"] == node) & (rec["intf"] == intf) & (rec["l3"] == UDP)
            & ((rec["event"] == ENQU) | (rec["event"] == DEQU)))
    return rec[keep]


def _window(start_ns: float, first_end_ns: float) -> tuple[float, float]:
    """Second half of the period all flows are active (as the engine's physics test)."""
    return start_ns + (first_end_ns - start_ns) / 2, first_end_ns


def criteria(rec: np.ndarray, fct_ns: list[float], rate_gbps: float, kmin: int, kmax: int,
             start_ns: float) -> dict:
    """The physics figures from one port's trace records.

    Aggregate: payload bytes dequeued in the window over (window x line rate x payload share
    of the wire, 4096 / (4096 + 48) in the reference); Jain over the flows' bytes in the
    window; ``queue_inside``: share of the window's time with Kmin <= queue <= Kmax (the queue
    after each event, held until the next event).
    """
    lo, hi = _window(start_ns, start_ns + min(fct_ns))
    t = rec["time"].astype(float)
    deq = (rec["event"] == DEQU) & (t >= lo) & (t < hi)
    srcs = sorted(set(int(s) for s in rec["sip"]))
    per = np.array([rec["payload"][deq & (rec["sip"] == s)].sum() for s in srcs], dtype=float)
    share = 4096 / (4096 + NS3_HEADER_BYTES)
    agg = per.sum() * 8 / ((hi - lo) * rate_gbps * share)
    jain = per.sum() ** 2 / (len(per) * (per ** 2).sum()) if per.any() else 0.0
    return {"aggregate": float(agg), "jain": float(jain),
            "queue_inside": _time_share(t, rec["qlen"].astype(float), lo, hi, kmin, kmax),
            "window_ns": [lo - start_ns, hi - start_ns], "flows": len(per)}


def _time_share(t: np.ndarray, q: np.ndarray, lo: float, hi: float, kmin: int, kmax: int) -> float:
    """Share of [lo, hi) during which the piecewise-constant queue *q(t)* is in [kmin, kmax]."""
    i = max(int(np.searchsorted(t, lo, side="right")) - 1, 0)
    j = int(np.searchsorted(t, hi, side="left"))
    tt = np.concatenate([[lo], t[i + 1:j], [hi]])
    qq = q[i:j] if j > i else q[i:i + 1]
    dt = np.diff(tt)
    inside = (qq >= kmin) & (qq <= kmax)
    return float((dt * inside[: len(dt)]).sum() / (hi - lo))


def engine_criteria(res, port_link: int, gbps: float, kmin: int, kmax: int,
                    goodput_share: float) -> dict:
    """The same figures from an engine result (per-flow rate samples and queue samples)."""
    first = min(f.fct_ns for f in res.flows if f.fct_ns is not None)
    idx = np.nonzero(res.time_ns[1:] <= first)[0]
    idx = idx[len(idx) // 2:]
    rates = res.flow_rates_gbps()[idx]
    mean = rates.mean(axis=0)
    q = res.queue_bytes[1:, port_link][idx]
    return {"aggregate": float(rates.sum(axis=1).mean() / (gbps * goodput_share)),
            "jain": float(mean.sum() ** 2 / (len(mean) * (mean ** 2).sum())),
            "queue_inside": float(np.mean((q >= kmin) & (q <= kmax)))}


def summarize_run(name: str, run_dir: Path) -> dict:
    """Figures of one ns-3 run directory (``fct.txt`` and ``mix.tr``)."""
    sc = RefScenario.from_name(name)
    node, intf, _ = bottleneck(name)
    start_ns = NS3_START_S * 1e9
    fct = [float(line.split()[6]) for line in (run_dir / "fct.txt").read_text().splitlines()]
    rec = read_trace(run_dir / "mix.tr", node, intf)
    kmin, kmax, _ = ecn_for(sc)
    out = criteria(rec, fct, sc.rate_gbps, kmin, kmax, start_ns)
    pauses = sum(1 for line in (run_dir / "pfc.txt").read_text().splitlines()
                 if line.split()[-1] == "1")  # type 1: a PAUSE received (as collect_ns3)
    out |= {"scenario": name, "fct_ms": [round(f / 1e6, 3) for f in sorted(fct)],
            "pfc_pauses": pauses,
            "series": _series(rec, start_ns, min(fct) + start_ns)}
    return out


def _series(rec: np.ndarray, start_ns: float, end_ns: float, bins: int = 200) -> dict:
    """A coarse time series (aggregate Gb/s and mean queue KB per bin) for figures/evidence."""
    t = rec["time"].astype(float)
    edges = np.linspace(start_ns, end_ns, bins + 1)
    deq = rec["event"] == DEQU
    b = np.histogram(t[deq], edges, weights=rec["payload"][deq].astype(float))[0]
    width = edges[1] - edges[0]
    qsum = np.histogram(t, edges, weights=rec["qlen"].astype(float))[0]
    qn = np.histogram(t, edges)[0]
    return {"bin_ns": width, "gbps": np.round(b * 8 / width, 2).tolist(),
            "queue_kb": np.round(np.where(qn > 0, qsum / np.maximum(qn, 1), 0) / 1e3, 1).tolist()}


def main(argv: list[str] | None = None) -> int:
    ap, sub = ns3_cli("python -m netsim.validation.physics_ref",
                      "Issue 17's physics criteria on the HPCC ns-3 reference.", "inputs",
                      "write traced ns-3 inputs of the physics scenarios")
    b = sub.add_parser("summarize", help="figures of ns-3 run directories DIR/<scenario>/run<N>")
    b.add_argument("out", type=Path)
    b.add_argument("--runs", action="append", required=True, metavar="LABEL=DIR",
                   help="a reference build's runs, e.g. plain=RUNS or repaced=RUNS2 (repeatable)")
    return run_cli(ap, argv, _dispatch)


def _dispatch(args) -> int:
    if args.cmd == "inputs":
        for name in args.scenario or PHYSICS_SCENARIOS:
            ns3_physics_inputs(name, args.out_dir / name)
            print(name)
        return 0
    runs = []
    for spec in args.runs:
        label, sep, where = spec.partition("=")
        if not sep:
            raise ValueError(f"--runs {spec!r}: give LABEL=DIR, e.g. plain=/tmp/runs")
        runs += _summarize_dir(label, Path(where))
    write_json_gz(args.out, {"runs": runs})
    return 0


def _summarize_dir(label: str, runs_dir: Path) -> list[dict]:
    out = []
    for d in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
        for r in sorted(d.glob("run*/mix.tr")):
            rec = summarize_run(d.name, r.parent) | {"rng_run": int(r.parent.name[3:]),
                                                     "reference": label}
            out.append(rec)
            print(f"{label} {d.name} {r.parent.name}: aggregate {rec['aggregate']:.3f} jain "
                  f"{rec['jain']:.3f} inside {rec['queue_inside']:.3f}", file=sys.stderr)
    return out


def load_physics(path: Path | None = None) -> list[dict]:
    """The committed reference figures (``tests/data/hpcc-ns3/physics.json.gz``)."""
    from netsim.validation.reference import DATA_DIR

    path = path or DATA_DIR / "physics.json.gz"
    return json.loads(gzip.decompress(Path(path).read_bytes()))["runs"]


if __name__ == "__main__":
    raise SystemExit(main())
