"""The permutation's start-up, ours against the HPCC ns-3 reference (docs/validation.md, item 5).

Prints the largest data queue per 25 us of the leaf uplinks and spine downlinks of a ``perm16``
reference scenario (``netsim/validation/reference.py``), from our engine (seed 1) and, given a traced
ns-3 run, from the reference; and, from the ns-3 trace, when the first ECN-marked packet of a
flow reached its receiver's leaf against when the first ACK carrying a CNP reached the sender's
leaf (the CNP's way back).

    python benchmarks/perm16_timeline.py --write-ns3-inputs DIR      # then run ns-3 in DIR:
    (cd DIR && NS_GLOBAL_VALUE=RngRun=1 LD_LIBRARY_PATH=SIM/build SIM/build/scratch/third config.txt)
    python benchmarks/perm16_timeline.py --ns3-trace DIR/mix.tr
    python benchmarks/perm16_timeline.py --set ack_class=priority --set cnp_class=priority

``--set FIELD=VALUE`` overrides a PacketConfig field of the mapped scenario (e.g. the mapping
before ACKs and CNPs were put in the data class). About 20 s per run on an idle core.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import numpy as np

PORTS = ("s0->s4", "s1->s4", "s2->s4", "s3->s4", "s4->s0", "s4->s1", "s4->s2", "s4->s3")
#: ns-3 (node, ifindex) of PORTS: leaves are nodes 16-19 (uplink ifindex 5), the spine 20.
NS3_PORTS = ((16, 5), (17, 5), (18, 5), (19, 5), (20, 1), (20, 2), (20, 3), (20, 4))
BIN_NS = 25_000
TRACE = np.dtype({"names": ["time", "node", "intf", "qlen", "sip", "dip", "l3", "event", "ecn",
                            "flags"],
                  "formats": ["<u8", "<u2", "u1", "<u4", "<u4", "<u4", "u1", "u1", "u1", "<u2"],
                  "offsets": [0, 8, 10, 12, 16, 20, 26, 27, 28, 36], "itemsize": 56})
T0_NS = 2_000_000_000  # flows start at 2 s in the reference


def ours(name: str, until_us: float, overrides: dict) -> tuple[np.ndarray, dict]:
    from netsim.validation.reference import RefScenario, _engine_setup, run_engine

    sc = RefScenario.from_name(name)
    _, res = run_engine(sc, seed=1, sample_interval_ps=5_000_000, **overrides)
    fab = _engine_setup(sc)[1]
    ids = {f"{fab.nodes[int(s)]}->{fab.nodes[int(d)]}": i
           for i, (s, d) in enumerate(zip(fab.link_src, fab.link_dst, strict=True))}
    t, q = np.asarray(res.time_ns), np.asarray(res.queue_bytes)
    rows = [[int(q[(t >= a) & (t < a + BIN_NS), ids[p]].max(initial=0)) // 1000 for p in PORTS]
            for a in range(0, int(until_us * 1000), BIN_NS)]
    pauses = {f"{p.src}->{p.dst}": p.pfc_pauses_received for p in res.ports if p.pfc_pauses_received}
    return np.array(rows), pauses


def ns3(trace: Path, until_us: float) -> tuple[np.ndarray, np.ndarray]:
    raw = trace.read_bytes()
    n = int(np.frombuffer(raw[:4], "<u4")[0])
    body = raw[4 + 11 * n + 4:]
    rec = np.frombuffer(body[: len(body) // 56 * 56], TRACE)
    t = rec["time"].astype(np.int64) - T0_NS
    data = (rec["l3"] == 0x11) & (rec["event"] == 1)
    rows = []
    for a in range(0, int(until_us * 1000), BIN_NS):
        m = data & (t >= a) & (t < a + BIN_NS)
        rows.append([int(rec["qlen"][m & (rec["node"] == nd) & (rec["intf"] == i)].max(initial=0))
                     // 1000 for nd, i in NS3_PORTS])
    return np.array(rows), rec


def cnp_delay(rec: np.ndarray, host: int, dst_leaf: int, dst_intf: int) -> tuple[float, float]:
    """(first marked packet of *host* leaving the receiver's leaf, first CNP reaching its leaf 0
    downlink), us from the start."""
    t = rec["time"].astype(np.int64) - T0_NS
    src, dst = (rec["sip"] >> 8) & 0xFFFF, (rec["dip"] >> 8) & 0xFFFF
    marked = ((rec["node"] == dst_leaf) & (rec["intf"] == dst_intf) & (rec["l3"] == 0x11)
              & (rec["event"] == 2) & (src == host) & (rec["ecn"] == 3))
    cnp = ((rec["node"] == 16) & (rec["intf"] == host + 1) & (rec["event"] == 2) & (dst == host)
           & (rec["l3"] == 0xFC) & (rec["flags"] & 1 == 1))  # qbbHeader FLAG_CNP = bit 0
    def first(m):
        return float(t[m].min()) / 1000 if m.any() else float("nan")

    return first(marked), first(cnp)


def _table(title: str, rows: np.ndarray) -> None:
    print(f"{title} (largest data queue per {BIN_NS // 1000} us, KB)")
    print("t_us   " + " ".join(f"{p:>7s}" for p in PORTS))
    for k, r in enumerate(rows):
        print(f"{k * BIN_NS / 1000:5.0f}  " + " ".join(f"{v:7d}" for v in r))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="perm16-100g-short-paper")
    ap.add_argument("--until-us", type=float, default=400.0)
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    ap.add_argument("--ns3-trace", type=Path, default=None, help="mix.tr of a traced ns-3 run")
    ap.add_argument("--write-ns3-inputs", type=Path, default=None, metavar="DIR")
    a = ap.parse_args(argv)
    if a.write_ns3_inputs:
        from netsim.validation.reference import RefScenario, ns3_inputs

        cfg = ns3_inputs(RefScenario.from_name(a.scenario), a.write_ns3_inputs)
        (a.write_ns3_inputs / "trace.txt").write_text("5\n16 17 18 19 20\n")
        cfg.write_text(cfg.read_text().replace("ENABLE_TRACE 0", "ENABLE_TRACE 1"))
        print(f"wrote {cfg}")
        return 0
    overrides = {k: ast.literal_eval(v) if v[:1].isdigit() else v
                 for k, v in (s.split("=", 1) for s in a.set)}
    rows, pauses = ours(a.scenario, a.until_us, overrides)
    _table(f"ours {a.scenario} seed 1 {overrides or ''}", rows)
    print(f"ours PAUSE frames received per port (whole run): {pauses}")
    if a.ns3_trace:
        ref, rec = ns3(a.ns3_trace, a.until_us)
        _table(f"HPCC ns-3 {a.ns3_trace}", ref)
        for host, leaf, intf in ((0, 17, 2), (2, 18, 3)):  # h0 -> h5 (leaf 1), h2 -> h10 (leaf 2)
            m, c = cnp_delay(rec, host, leaf, intf)
            print(f"ns-3 h{host}: first marked packet at the receiver's leaf {m:.1f} us, "
                  f"first CNP back at the sender's leaf {c:.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
