"""Before/after benchmark of issue #25's hot-path split (named helpers), two trees in one run.

Issue #25 split three hot paths into short named helpers: ``engine._hot_path`` (helpers on a
cdef ``_Fabric`` record), ``qp.nic_path`` (helpers on a cdef ``_Nic`` record) and
``maxmin_fast._resolve_py`` (numba-inlined helpers). This script measures a tree before those
commits against a tree after them, on a machine shared with other jobs:

* packet engine, instruction counts: ``valgrind --tool=callgrind`` of a fixed run (the k=8
  fat-tree DCQCN permutation of ``bench_packet.py``, PFC on, seed 0), minus a baseline run of
  the same child that only imports and builds the fabric and flows. Counts do not depend on
  the load (``PYTHONHASHSEED=0``);
* packet engine, CPU seconds (``time.process_time`` around ``simulate_packets``) of fresh
  child processes, compiled and plain (``NETSIM_PURE_PYTHON=1``), the two trees interleaved;
  event counts and result digests (``netsim.packet.digest.result_digest``) must agree;
* flow engine max-min re-runs (``maxmin_fast._resolve``, numba): CPU seconds of a warm
  sequence of allocations on one incidence (after a full untimed pass that loads the compiled
  code and records the trace), each differing by a few commodities, the trace path forced
  (``_Trace.SLOW`` raised, so no allocation goes back to the kernel on a timing);
  ``--cg-maxmin`` adds callgrind counts of that pass (slow: numba's loading of its cached
  code alone ran over 7 minutes under callgrind on the 2-core project machine).

Each tree must have its extension built in place (``python setup.py build_ext --inplace``);
the children run with ``PYTHONPATH=TREE`` from a scratch folder, and each reports which files
it imported, which are checked against the tree.

Run: ``python benchmarks/bench_hot25.py --before TREE --after TREE [--reps 7]
[--csv benchmarks/results/hot25.csv] [--render docs/performance.md]``. ``--render-only``
re-renders the doc's table from an existing CSV. Progress and every run's figures
go to stderr (keep them: ``2> benchmarks/results/hot25.log``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import read_meta_csv, render_between, write_meta_csv

HERE = Path(__file__).resolve()
BEGIN, END = "<!-- hot25:begin -->", "<!-- hot25:end -->"


# ---------------------------------------------------------------------------- children
def _packet_child(size_bytes: int, base: bool, digest: bool) -> dict:
    import numpy as np

    from netsim.packet import PacketConfig, simulate_packets
    from netsim.packet.build_mode import engine_build
    from topologies import FatTreeSpec, fat_tree

    try:
        from netsim.scenario.traffic import permutation
    except ImportError:  # trees before the scenario/ package
        from netsim.traffic import permutation
    import netsim.packet.engine as engine
    import netsim.packet.qp as qp

    fabric = fat_tree(FatTreeSpec(k=8, link_speed_gbps=400.0))
    flows = permutation(fabric, size_bytes, np.random.default_rng(0))
    out = {"build": engine_build(), "files": [engine.__file__, qp.__file__]}
    if base:
        return out
    c0 = time.process_time()
    res = simulate_packets(fabric, flows, PacketConfig(cc="dcqcn", pfc=True), seed=0)
    out.update(cpu_s=time.process_time() - c0, events=res.events, pkts=res.data_packets,
               done=bool(res.completed))
    if digest:
        from netsim.packet.digest import result_digest

        out["digest"] = result_digest(res)
    return out


def _maxmin_case(nf: int, nl: int, steps: int, seed: int = 0):
    """Ring-like commodities (10 to 40 of ``nl`` links, 1 to 3 QPs per link) on two
    capacities, as in the scheduler replay, and a sequence of active sets: 1 to 3
    commodities join or leave at each step."""
    import numpy as np

    from netsim.flow.maxmin import Incidence

    rng = np.random.default_rng(seed)
    paths = [rng.choice(nl, size=int(rng.integers(10, 41)), replace=False) for _ in range(nf)]
    indptr = np.r_[0, np.cumsum([len(p) for p in paths])]
    links = np.concatenate(paths)
    inc = Incidence.from_csr(indptr, links, nl, rng.integers(1, 4, len(links)).astype(float))
    cap = rng.choice([200e9, 400e9], size=nl)
    act = rng.random(nf) < 0.9
    seq = [act.copy()]
    for _ in range(steps):
        act = act.copy()
        act[rng.integers(nf, size=int(rng.integers(1, 4)))] ^= True
        seq.append(act)
    return inc, cap, seq


def _maxmin_child(nf: int, nl: int, steps: int, base: bool) -> dict:
    from netsim.flow import maxmin_fast
    from netsim.flow.maxmin import maxmin_rates

    maxmin_fast._Trace.SLOW = 10**9  # always the trace path (no timing-dependent choice)
    inc, cap, seq = _maxmin_case(nf, nl, steps)
    h = hashlib.sha256()
    for act in seq:  # warm: compiled code loaded, trace recorded
        h.update(maxmin_rates(inc, cap, act).tobytes())
    out = {"files": [maxmin_fast.__file__], "digest": h.hexdigest(),
           "entries": int(len(inc.e_link))}
    if base:
        return out
    h = hashlib.sha256()
    c0 = time.process_time()
    for act in reversed(seq):  # the same allocations, walked back: re-runs only
        h.update(maxmin_rates(inc, cap, act).tobytes())
    out.update(cpu_s=time.process_time() - c0, digest2=h.hexdigest(),
               resolved=inc.cache["maxmin_trace"]["trace"] is not None)
    return out


def child_main(argv) -> int:
    kind, base = argv[0], argv[1] == "base"
    if kind == "packet":
        out = _packet_child(int(argv[2]), base, digest=argv[3] == "digest")
    else:
        out = _maxmin_child(int(argv[2]), int(argv[3]), int(argv[4]), base)
    print(json.dumps(out))
    return 0


# ---------------------------------------------------------------------------- parent
def _env(tree: str, pure: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": tree, "PYTHONHASHSEED": "0"}
    env.pop("NETSIM_PURE_PYTHON", None)
    if pure:
        env["NETSIM_PURE_PYTHON"] = "1"
    return env


def _run(tree: str, args: list[str], pure: bool = False, callgrind: str | None = None) -> dict:
    cmd = [sys.executable, str(HERE), "--child", *args]
    if callgrind:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={callgrind}", *cmd]
    with tempfile.TemporaryDirectory() as cwd:  # never the tree or a checkout as sys.path[0]
        out = subprocess.run(cmd, capture_output=True, text=True, env=_env(tree, pure), cwd=cwd)
    if out.returncode:
        raise SystemExit(f"child failed in {tree}: {out.stderr.strip().splitlines()[-1:]}")
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    root = str(Path(tree).resolve())
    bad = [f for f in doc["files"] if not str(Path(f).resolve()).startswith(root)]
    if bad:
        raise SystemExit(f"child of {tree} imported {bad}")
    if callgrind:
        doc["ir"] = _callgrind_total(callgrind)
    return doc


def _callgrind_total(path: str) -> int:
    text = Path(path).read_text(errors="replace")
    m = re.search(r"^totals:\s+(\d+)", text, re.M) or re.search(r"^summary:\s+(\d+)", text, re.M)
    if not m:
        raise SystemExit(f"no totals in {path}")
    return int(m.group(1))


def _load() -> float:
    return os.getloadavg()[0]


def callgrind_rows(trees: dict, packet_args: list[str], maxmin_args: list[str] | None,
                   pure_too: bool, tmp: str) -> list[dict]:
    """Ir of (run - base) per tree: packet compiled (and plain), max-min warm pass."""
    rows = []
    cases = [("packet", "compiled", packet_args, False)]
    if pure_too:
        cases.append(("packet", "plain", packet_args, True))
    if maxmin_args:
        cases.append(("maxmin", "numba", maxmin_args, False))
    for bench, build, bargs, pure in cases:
        for name, tree in trees.items():
            irs = {}
            for mode in ("base", "run"):
                f = f"{tmp}/cg.{bench}.{build}.{name}.{mode}.out"
                a = [bargs[0], mode, *bargs[1:]]
                t0 = time.time()
                irs[mode] = _run(tree, a, pure, callgrind=f)["ir"]
                print(f"  callgrind {bench} {build} {name} {mode}: {irs[mode]:,} Ir "
                      f"({time.time() - t0:.0f} s wall, load {_load():.1f})", file=sys.stderr)
            rows.append({"bench": bench, "build": build, "tree": name, "rep": 0,
                         "metric": "ir", "value": irs["run"] - irs["base"], "load1": _load()})
    return rows


def timing_rows(trees: dict, packet_args: list[str], maxmin_args: list[str], reps: int
                ) -> list[dict]:
    """CPU seconds of fresh children, the trees (and builds) interleaved, the order of the
    trees swapped every repetition."""
    rows = []
    names = list(trees)
    for rep in range(reps):
        order = names if rep % 2 == 0 else names[::-1]
        for bench, build, bargs, pure in (("packet", "compiled", packet_args, False),
                                          ("packet", "plain", packet_args, True),
                                          ("maxmin", "numba", maxmin_args, False)):
            for name in order:
                load = _load()
                a = [bargs[0], "run", *bargs[1:]]
                doc = _run(trees[name], a, pure)
                if bench == "packet" and doc["build"] != ("python" if pure else "compiled"):
                    raise SystemExit(f"{name}: engine build {doc['build']}, wanted {build}")
                row = {"bench": bench, "build": build, "tree": name, "rep": rep,
                       "metric": "cpu_s", "value": doc["cpu_s"], "load1": load}
                rows.append(row)
                ident = ({"events": doc["events"], "digest": doc["digest"][:16],
                          "done": doc["done"]} if bench == "packet" else
                         {"digest": doc["digest2"][:16], "resolved": doc["resolved"]})
                rows.extend({**row, "metric": k, "value": v} for k, v in ident.items())
                print(f"  rep {rep} {bench} {build} {name}: {doc['cpu_s']:.3f} CPU s "
                      f"(load {load:.1f}) {ident}", file=sys.stderr)
    return rows


# ---------------------------------------------------------------------------- summary
def summarize(raw: list[dict]) -> list[dict]:
    """One row per (bench, build, statistic): before, after, after/before."""
    out = []
    keys = list(dict.fromkeys((r["bench"], r["build"], r["metric"]) for r in raw))
    for bench, build, metric in keys:
        vals = {t: [r["value"] for r in raw if (r["bench"], r["build"], r["metric"], r["tree"])
                    == (bench, build, metric, t)] for t in ("before", "after")}
        loads = [float(r["load1"]) for r in raw if (r["bench"], r["build"], r["metric"])
                 == (bench, build, metric)]
        base = {"bench": bench, "build": build, "n": len(vals["after"]),
                "load_min": min(loads), "load_max": max(loads)}
        if metric == "ir":
            b, a = int(vals["before"][0]), int(vals["after"][0])
            out.append({**base, "stat": "Ir (run - base)", "before": b, "after": a,
                        "ratio": a / b})
        elif metric == "cpu_s":
            for stat, fn in (("CPU s min", min), ("CPU s median", statistics.median)):
                b, a = fn(map(float, vals["before"])), fn(map(float, vals["after"]))
                out.append({**base, "stat": stat, "before": b, "after": a, "ratio": a / b})
        else:  # identity checks: every run of both trees must agree
            seen = {str(v) for v in vals["before"] + vals["after"]}
            out.append({**base, "stat": metric, "before": str(vals["before"][0]),
                        "after": str(vals["after"][0]),
                        "ratio": "same" if len(seen) == 1 else "DIFFERENT"})
    return out


def _fmt(v) -> str:
    if isinstance(v, str):
        try:
            v = float(v) if "." in v or "e" in v else int(v)
        except ValueError:
            return v
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:.3f}"


def render(summary: list[dict], meta: dict) -> str:
    lines = [f"Trees: before `{meta['before']}`, after `{meta['after']}`; {meta['date']}; "
             f"packet run: {meta['packet']}; max-min: {meta['maxmin']}; load average (1 min) "
             f"{meta['load_min']:.1f} to {meta['load_max']:.1f} on {meta['cpus']} cores.", "",
             "| benchmark | build | measure | runs | before | after | after / before |",
             "|---|---|---|---:|---:|---:|---:|"]
    for r in summary:
        lines.append(f"| {r['bench']} | {r['build']} | {r['stat']} | {r['n']} | "
                     f"{_fmt(r['before'])} | {_fmt(r['after'])} | {_fmt(r['ratio'])} |")
    return "\n".join(lines)


def write_csv(path: Path, summary: list[dict], meta: dict) -> None:
    cols = ["bench", "build", "stat", "n", "before", "after", "ratio", "load_min", "load_max"]
    write_meta_csv(path, summary, meta, cols)


def render_into(doc: Path, table: str) -> None:
    render_between(doc, table, BEGIN, END)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child_main(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="tree before the split (extension built in place)")
    ap.add_argument("--after", help="tree after the split (extension built in place)")
    ap.add_argument("--reps", type=int, default=7, help="interleaved timed runs per tree")
    ap.add_argument("--size", type=int, default=1_000_000, help="bytes per flow (timed runs)")
    ap.add_argument("--cg-size", type=int, default=1_000_000, help="bytes per flow, callgrind")
    ap.add_argument("--cg-plain", action="store_true", help="callgrind of the plain path too")
    ap.add_argument("--cg-maxmin", action="store_true", help="callgrind of the max-min pass (very slow)")
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--flows", type=int, default=6000, help="max-min commodities")
    ap.add_argument("--links", type=int, default=1500, help="max-min links")
    ap.add_argument("--steps", type=int, default=60, help="max-min allocations per pass")
    ap.add_argument("--csv", default=str(HERE.parent / "results" / "hot25.csv"))
    ap.add_argument("--render", default=None, metavar="DOC",
                    help="write the table between the hot25 markers of DOC")
    ap.add_argument("--render-only", action="store_true", help="render --csv, run nothing")
    args = ap.parse_args(argv)
    if args.render_only:
        rows, meta = read_meta_csv(Path(args.csv))
        table = render(rows, meta)
        if args.render:
            render_into(Path(args.render), table)
        print(table)
        return 0
    if not (args.before and args.after):
        print("bench_hot25: --before and --after trees are required", file=sys.stderr)
        return 2
    trees = {"before": args.before, "after": args.after}
    for t in trees.values():
        if not Path(t, "netsim").is_dir():
            print(f"bench_hot25: {t} is not a netsim tree", file=sys.stderr)
            return 2
    mm = ["maxmin", str(args.flows), str(args.links), str(args.steps)]
    raw = []
    loads = [_load()]
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_callgrind:
            raw += callgrind_rows(trees, ["packet", str(args.cg_size), "nodigest"],
                                  mm if args.cg_maxmin else None, args.cg_plain, tmp)
    raw += timing_rows(trees, ["packet", str(args.size), "digest"], mm, args.reps)
    loads += [float(r["load1"]) for r in raw] + [_load()]
    meta = {"before": _rev(args.before), "after": _rev(args.after),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "packet": f"fat-tree k=8, 400G, DCQCN, PFC on, permutation of {args.size:,} B "
                      f"(callgrind: {args.cg_size:,} B), seed 0",
            "maxmin": f"{args.flows:,} commodities on {args.links:,} links, "
                      f"{args.steps + 1} allocations re-run from the trace",
            "load_min": min(loads), "load_max": max(loads), "cpus": os.cpu_count()}
    summary = summarize(raw)
    write_csv(Path(args.csv), summary, meta)
    table = render(read_meta_csv(Path(args.csv))[0], meta)
    if args.render:
        render_into(Path(args.render), table)
    print(table)
    return 0


def _rev(tree: str) -> str:
    out = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True)
    return out.stdout.strip() or tree


if __name__ == "__main__":
    raise SystemExit(main())
