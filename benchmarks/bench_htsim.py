"""This engine against htsim (Broadcom csg-htsim ``htsim_roce``), like for like (issue 28).

The same permutation of 2 MB flows (ours, seed 0, written as an htsim connection matrix, host i =
the fabric's i-th NIC) on the same 3-tier fat-tree (K^3/4 hosts, 400G, 1 us links, MTU 4096,
no CC, PFC on), whole process against whole process:

* htsim at ``-q 1000 -strat ecmp_host -paths 256 -mtu 4096 -linkspeed 400000``. ``-q`` only
  sets the size over which its lossless queues print a "LOSSLESS not working!" line per packet
  (at the default 15 that is megabytes of output); one ``-q 15`` run per size checks that the
  flows finish at the same times as at ``-q 1000`` (``q15_same``). htsim seeds each flow's
  path id with ``srand(time(NULL))``, so every htsim run here has ``time()`` fixed by a
  preloaded one-line shim (built with ``cc``): its runs repeat exactly, the binary is untouched.
* this engine with htsim's model (``_htsim_child.matched_config``: PAUSE over 15 packets,
  RESUME under 12 per ingress queue, one ACK per packet, htsim's packet sizes, no buffer
  limit, ECN off) and, for the cost of matching, at its defaults (CC none).
  Each run is ``python benchmarks/_htsim_child.py`` with ``PYTHONPATH`` = this tree, so the
  child's CPU time includes interpreter start, imports and the fabric build. The tree's
  extension is built in place first when it is not (``setup.py build_ext --inplace``), its
  packages are byte-compiled (``compileall``, as an installed copy is), and each run reports
  the build that ran (compiled or python) and the engine file it loaded.
* this engine's start-up alone (``engine start-up``: interpreter, imports, fabric and
  permutation, no simulation), the part of each engine run that does not grow with the
  traffic; its row has no rate or ratio, only CPU and memory.

CPU = user + system of each whole child from ``os.wait4``; peak RSS = the child's own VmHWM
(``ru_maxrss`` of a child of this Python process would count the parent's pages);
contenders interleaved, ``--reps`` rounds, minimum and median. Makespan and mean FCT are
start to the last ACK at the sender on both sides (htsim's "finished at" lines, our
``completion_ns``). Every run is a CSV row with the 1-minute load average at its start.

Run: ``python benchmarks/bench_htsim.py --htsim BIN [--hosts 128,432,1024] [--reps 3]
[--csv benchmarks/results/htsim28.csv] [--render docs/performance.md]``; ``--render-only``
re-renders the doc's tables from the CSV. htsim's build: ``../shared/reference/peer-bench.md``.
"""

from __future__ import annotations

import argparse
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CHILD = HERE / "_htsim_child.py"
_FINISHED = re.compile(r"Flow (\S+) \d+ finished at ([0-9.]+) total bytes (\d+)")
#: ``time()`` fixed at 1; at exit, the process's peak RSS (VmHWM) appended to $PEAK_RSS_FILE.
#: (``ru_maxrss`` of a child forked from this Python process counts the parent's pages too.)
_SHIM_C = r"""#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
time_t time(time_t *t) { if (t) *t = 1; return 1; }
__attribute__((destructor)) static void peak_rss(void) {
    const char *path = getenv("PEAK_RSS_FILE");
    FILE *in = fopen("/proc/self/status", "r"), *out;
    char line[256];
    if (!path || !in) return;
    out = fopen(path, "w");
    while (out && fgets(line, sizeof line, in))
        if (!strncmp(line, "VmHWM:", 6)) fputs(line, out);
    if (out) fclose(out);
    fclose(in);
}
"""
CONTENDERS = ("htsim -q 1000", "engine matched", "engine default", "engine start-up")


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


def build_shim(work: Path) -> Path:
    """A shared object whose ``time()`` returns 1 (htsim's per-flow ``srand(time(NULL))``)."""
    src, lib = work / "fixtime.c", work / "fixtime.so"
    src.write_text(_SHIM_C)
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(lib), str(src)], check=True)
    return lib


def ensure_built(root: Path) -> str:
    """The engine build a child of *root* will import; builds the extension in place if the
    tree is not compiled (needs Cython) and reports what it then gets."""
    build = _probe_build(root)
    if build != "compiled":
        print(f"{root}: engine not compiled in place; running setup.py build_ext --inplace",
              file=sys.stderr)
        subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=root,
                       check=False, stdout=subprocess.DEVNULL)
        build = _probe_build(root)
    _compile_bytecode(root)
    return build


#: The packages a child imports from the tree (``_htsim_child.py``).
TREE_PACKAGES = ("netsim", "topologies", "inputspec")


def _compile_bytecode(root: Path) -> None:
    """Byte-compile the tree's packages, as an installed package ships them: with
    ``PYTHONDONTWRITEBYTECODE`` set (or a read-only tree) every child would otherwise compile
    each module it imports from source, a start-up cost no installed copy pays."""
    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    *(str(root / p) for p in TREE_PACKAGES)], check=False,
                   stdout=subprocess.DEVNULL)


def _probe_build(root: Path) -> str:
    code = "from netsim.packet.build_mode import engine_build; print(engine_build())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(root), "NETSIM_PURE_PYTHON": ""},
                         cwd=root)
    return out.stdout.strip() or "error"


def _wait_child(cmd: list[str], out_path: Path, env: dict | None = None,
                cwd: Path | None = None) -> dict:
    """Run *cmd* with stdout to *out_path*; its whole-process CPU and wall time."""
    load = os.getloadavg()[0]
    w0 = time.perf_counter()
    with open(out_path, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if status != 0:
        raise RuntimeError(f"exit status {status}: {' '.join(cmd)}\n{err[-2000:]}")
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "user_s": usage.ru_utime,
            "sys_s": usage.ru_stime, "wall_s": time.perf_counter() - w0, "load1": load}


def run_htsim(binary: str, hosts: int, matrix: Path, q: int, shim: Path, work: Path) -> dict:
    """One htsim_roce run; flows, makespan and mean FCT from its "finished at" lines."""
    cmd = [binary, "-nodes", str(hosts), "-tm", str(matrix), "-strat", "ecmp_host", "-paths",
           "256", "-linkspeed", "400000", "-mtu", "4096", "-end", "100000", "-q", str(q),
           "-o", str(work / "htsim.log")]
    out = work / f"htsim_q{q}.out"
    peak = work / "htsim.peak"
    row = _wait_child(cmd, out, env={**os.environ, "LD_PRELOAD": str(shim),
                                     "PEAK_RSS_FILE": str(peak)}, cwd=work)
    row["maxrss_mib"] = int(peak.read_text().split()[1]) / 1024
    done = _FINISHED.findall(out.read_text())
    times = [float(t) for _, t, _ in done]
    row.update(data_pkts=sum(-(-int(b) // 4096) for *_, b in done), events=None,
               flows_done=len(done), makespan_us=max(times, default=None),
               mean_fct_us=statistics.fmean(times) if times else None, build="C++",
               output_bytes=out.stat().st_size, finish_lines=sorted(done))
    return row


def run_engine(root: Path, k: int, size: int, settings: str, work: Path) -> dict:
    """One child run of this engine (``_htsim_child.py``) with its whole-process rusage."""
    env = {**os.environ, "PYTHONPATH": str(root), "NETSIM_PURE_PYTHON": ""}
    out = work / "engine.out"
    row = _wait_child([sys.executable, str(CHILD), str(k), str(size), settings, "0"], out,
                      env=env, cwd=work)
    row.update(json.loads(out.read_text().strip().splitlines()[-1]))
    return row


def one_size(args, hosts: int, shim: Path, work: Path) -> list[dict]:
    """Interleaved reps of every contender on one fabric size, plus the ``-q 15`` check."""
    k, size = k_for_hosts(hosts), parse_bytes(args.size)
    fabric = fat_tree(FatTreeSpec(k=k, link_speed_gbps=400, link_latency_ns=1000))
    matrix = work / f"perm_{hosts}.cm"
    write_matrix(matrix, fabric, permutation(fabric, size, np.random.default_rng(0)))
    rows = []
    for rep in range(args.reps):
        for name in CONTENDERS:
            r = (run_htsim(args.htsim, hosts, matrix, 1000, shim, work) if name.startswith("htsim")
                 else run_engine(ROOT, k, size, _SETTINGS[name], work))
            rows.append({"hosts": hosts, "contender": name, "rep": rep, **r})
            _progress(rows[-1])
    q15 = run_htsim(args.htsim, hosts, matrix, 15, shim, work)
    same = q15["finish_lines"] == rows[0]["finish_lines"]
    rows.append({"hosts": hosts, "contender": "htsim -q 15", "rep": 0, **q15,
                 "q15_same": same})
    _progress(rows[-1])
    return rows


#: ``_htsim_child.py``'s SETTINGS of each engine contender.
_SETTINGS = {"engine matched": "matched", "engine default": "default",
             "engine start-up": "startup"}


def _progress(r: dict) -> None:
    span = "-" if r["makespan_us"] is None else f"{r['makespan_us']:.1f}"
    print(f"  {r['hosts']} hosts, {r['contender']} ({r['build']}): {r['cpu_s']:.2f} CPU s "
          f"(sys {r['sys_s']:.2f}), {r['maxrss_mib']:.0f} MiB, {r['data_pkts']} pkts, "
          f"makespan {span} us, {r['flows_done']} flows, load {r['load1']:.1f}",
          file=sys.stderr)


def main(argv=None) -> int:
    from _htsim_report import CSV_DEFAULT, read_csv, render, render_into, summarise, write_csv

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--htsim", metavar="BIN", help="htsim's sim/datacenter/htsim_roce")
    ap.add_argument("--hosts", default="128,432,1024", help="fat-tree sizes (K^3/4 hosts)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved rounds (>= 3)")
    ap.add_argument("--size", default="2MB", help="bytes per flow (default 2MB = 2,000,000)")
    ap.add_argument("--csv", default=str(CSV_DEFAULT), help="where the runs are written")
    ap.add_argument("--render", default=None, metavar="DOC", help="render the tables into DOC")
    ap.add_argument("--render-only", action="store_true", help="render --csv, run nothing")
    args = ap.parse_args(argv)
    if not args.render_only:
        if not args.htsim or not Path(args.htsim).is_file():
            print(f"bench_htsim: --htsim {args.htsim!r}: not a file; build htsim_roce as in "
                  "shared/reference/peer-bench.md and pass its path", file=sys.stderr)
            return 2
        build = ensure_built(ROOT)
        print(f"engine build under test: {build} ({ROOT})", file=sys.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            shim = build_shim(Path(tmp))
            rows = [r for h in str(args.hosts).split(",") for r in
                    one_size(args, int(h), shim, Path(tmp))]
        meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count(),
                "htsim": args.htsim, "size": args.size, "reps": args.reps,
                "tree": _git_head(), "build": build}
        write_csv(Path(args.csv), rows, meta)
    rows, meta = read_csv(Path(args.csv))
    text = render(summarise(rows), meta)
    print(text)
    if args.render:
        render_into(Path(args.render), text)
    return 0


def _git_head() -> str:
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True)
    return out.stdout.strip()


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
