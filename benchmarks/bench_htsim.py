"""Side by side with htsim (Broadcom csg-htsim ``htsim_roce``): the same permutation of 2 MB
flows on the same 3-tier fat-tree (K^3/4 hosts, 400G, 1 us links, MTU 4096), alternating
runs of htsim, this engine and optionally a baseline revision, each in its own process.

Used by ``benchmarks/bench_packet.py --htsim BIN [--hosts 128,432,1024] [--baseline REF]``.
The figure is data packets per CPU second of the simulating process (its own user + system
time: steadier than wall time on a shared machine), the median over ``--reps`` rounds, and the
ratio of this engine to htsim. htsim's build and flags: ``../shared/reference/peer-bench.md``
(``-strat ecmp_host -paths 256 -linkspeed 400000 -mtu 4096``, its default 15-packet lossless
queues, no end-to-end congestion control: pass ``--cc none`` for the like-for-like run).
The traffic matrix is ours (``netsim.scenario.traffic.permutation`` with the seed), written in htsim's
connection-matrix format with host i = the fabric's i-th NIC. Where this tree's hot path is
compiled (``setup.py build_ext --inplace``), it also runs on its plain Python path
(``NETSIM_PURE_PYTHON=1``) as a third contender.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from netsim.scenario.traffic import permutation
from topologies import FatTreeSpec, fat_tree
from topologies.units import parse_bytes

_FINISHED = re.compile(r"finished at ([0-9.]+) total bytes (\d+)")

_CHILD = """
import json, sys, time
import numpy as np
from netsim.packet import PacketConfig, simulate_packets
try:
    from netsim.packet.build_mode import engine_build
except ImportError:  # a baseline revision from before the compiled build
    def engine_build():
        return "python"
from netsim.scenario.traffic import permutation
from topologies import FatTreeSpec, fat_tree
k, gbps, lat, size, cc, seed = (int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]),
                                int(sys.argv[4]), sys.argv[5], int(sys.argv[6]))
fabric = fat_tree(FatTreeSpec(k=k, link_speed_gbps=gbps, link_latency_ns=lat))
flows = permutation(fabric, size, np.random.default_rng(seed))
c0, w0 = time.process_time(), time.perf_counter()
res = simulate_packets(fabric, flows, PacketConfig(cc=cc, pfc=True), seed=seed)
cpu, wall = time.process_time() - c0, time.perf_counter() - w0
fcts = [f.fct_ns for f in res.flows if f.fct_ns is not None]
print(json.dumps({"pkts": res.data_packets, "events": res.events, "cpu_s": cpu, "wall_s": wall,
                  "done": len(fcts), "last_fct_us": max(fcts) / 1000 if fcts else None,
                  "build": engine_build()}))
"""


def k_for_hosts(hosts: int) -> int:
    """Fat-tree radix with K^3/4 = *hosts*."""
    k = round((4 * hosts) ** (1 / 3))
    if k ** 3 // 4 != hosts or k % 2:
        raise ValueError(f"--hosts {hosts}: not K^3/4 for an even K (128, 432, 1024, ...)")
    return k


def write_matrix(path: Path, fabric, flows) -> None:
    """The flows as an htsim connection matrix (``src->dst id I start 0 size B``)."""
    idx = {name: i for i, name in enumerate(fabric.nics)}
    lines = [f"Nodes {len(fabric.nics)}", f"Connections {len(flows)}"]
    lines += [f"{idx[f.src]}->{idx[f.dst]} id {i + 1} start 0 size {int(f.size_bytes)}"
              for i, f in enumerate(flows)]
    path.write_text("\n".join(lines) + "\n")


def run_htsim(binary: str, hosts: int, matrix: Path, gbps: float, work: Path) -> dict:
    """One htsim_roce run; CPU time from the child's rusage, packets from the acked bytes."""
    cmd = [binary, "-nodes", str(hosts), "-tm", str(matrix), "-strat", "ecmp_host", "-paths",
           "256", "-linkspeed", str(int(gbps * 1000)), "-mtu", "4096", "-end", "100000",
           "-o", str(work / "htsim.log")]
    w0 = time.perf_counter()
    with open(work / "htsim.out", "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, cwd=work)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - w0
    if status != 0:
        raise RuntimeError(f"htsim exited with status {status}: {' '.join(cmd)}")
    done = [(float(t), int(b)) for t, b in _FINISHED.findall((work / "htsim.out").read_text())]
    payload = sum(b for _, b in done)
    return {"pkts": payload // 4096, "cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": wall,
            "done": len(done), "last_fct_us": max((t for t, _ in done), default=None)}


def run_engine(root: str, k: int, args, size: int, pure: bool = False) -> dict:
    env = {**os.environ, "PYTHONPATH": root, "NETSIM_PURE_PYTHON": "1" if pure else ""}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(k), str(args.gbps),
                          str(args.latency_ns), str(size), args.cc, "0"],
                         capture_output=True, text=True, env=env, check=True, cwd=root)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _tree_is_compiled(root: str) -> bool:
    """Whether the packet engine of the tree at *root* runs compiled (``setup.py``)."""
    code = "from netsim.packet.build_mode import engine_build; print(engine_build())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": root, "NETSIM_PURE_PYTHON": ""},
                         cwd=root)
    return out.stdout.strip() == "compiled"


def compare_htsim(args) -> int:
    """Alternate htsim, this tree (and the baseline) per host count; print rates and ratios."""
    here = str(Path(__file__).resolve().parents[1])
    size = parse_bytes(args.size)
    hosts = [int(h) for h in str(args.hosts).split(",")]
    load0 = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        contenders = {"htsim": None, "this tree": here}
        if _tree_is_compiled(here):  # the same tree on its plain Python path as well
            contenders["this tree, pure Python"] = here
        for ref in (args.baseline or "").split(","):
            if not ref:
                continue
            base = work / f"baseline-{ref}"
            base.mkdir()
            tar = subprocess.run(["git", "-C", here, "archive", ref],
                                 capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(base)], input=tar, check=True)
            contenders[ref] = str(base)
        for n in hosts:
            k = k_for_hosts(n)
            fabric = fat_tree(FatTreeSpec(k=k, link_speed_gbps=args.gbps,
                                          link_latency_ns=args.latency_ns))
            matrix = work / f"perm_{n}.cm"
            write_matrix(matrix, fabric, permutation(fabric, size, np.random.default_rng(0)))
            runs: dict[str, list[dict]] = {name: [] for name in contenders}
            for _ in range(args.reps):
                for name, root in contenders.items():
                    r = (run_htsim(args.htsim, n, matrix, args.gbps, work) if root is None
                         else run_engine(root, k, args, size, pure=name.endswith("Python")))
                    runs[name].append(r)
                    print(f"  {n} hosts, {name} ({r.get('build', 'C++')}): "
                          f"{r['pkts'] / r['cpu_s']:,.0f} pkts/CPU s "
                          f"({r['cpu_s']:.1f} CPU s, {r['wall_s']:.1f} wall s, "
                          f"{r['done']} flows done)", file=sys.stderr)
            rate = {name: statistics.median(r["pkts"] / r["cpu_s"] for r in v)
                    for name, v in runs.items()}
            rows.append({"hosts": n, "k": k, "pkts_per_cpu_s": rate,
                         "ratio_to_htsim": {name: rate[name] / rate["htsim"] for name in rate},
                         "runs": runs})
    out = {"scenario": f"permutation of {args.size} per host, 3-tier fat-tree, {args.gbps:g}G, "
                       f"{args.latency_ns:g} ns links, MTU 4096, PFC, cc={args.cc} (htsim_roce: "
                       "no CC)", "reps": args.reps, "loadavg_before": load0,
           "loadavg_after": os.getloadavg(), "rows": rows}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(out["scenario"], f"(median of {args.reps} alternating runs; load average "
                           f"{load0[0]:.1f} before, {out['loadavg_after'][0]:.1f} after)")
    names = list(contenders)
    print(f"{'hosts':>6}  " + "  ".join(f"{n + ' pkts/CPU s':>24}" for n in names)
          + "  " + "  ".join(f"{n + ' / htsim':>20}" for n in names[1:]))
    for r in rows:
        print(f"{r['hosts']:>6}  " + "  ".join(f"{r['pkts_per_cpu_s'][n]:>24,.0f}" for n in names)
              + "  " + "  ".join(f"{r['ratio_to_htsim'][n]:>20.3f}" for n in names[1:]))
    return 0
