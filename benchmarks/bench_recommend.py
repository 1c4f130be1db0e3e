"""Benchmark: the recommendation run (``netsim recommend``) on megascale with GPT-3 175B.

Run: ``python benchmarks/bench_recommend.py [--job gpt3-175b] [--dp 16 192] [--budget 16]
[--repeat 3] [--no-cc-scaling] [--csv FILE] [--json]``; ``--render DOC --from LABEL=CSV ...``
puts the CSVs' rows as one table between DOC's ``rec28`` markers. ``--qp-split CSV`` instead
splits the CPU of the QP step's predicts (``qp_split``); ``--render-split DOC [LABEL=]CSV ...`` renders them.

For every data-parallel width given (16: the packaged 1,024-GPU job; 192: all 12,288 GPUs of
megascale) it prints the median over ``--repeat`` runs of the wall time of each step of
:func:`tuner.recommend.recommend` (from its progress callback) and of the whole run, then the
congestion-control search alone with 1 and 2 local worker processes of the sweep runner (the
parallel speed-up of its evaluations; zero when the job has no congestion point, as the search
then runs no packet simulation). The machine is shared: the load average before and
after is printed with the figures.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import statistics
import time
from pathlib import Path

from topologies import load_fabric
from tuner.ccsearch import job_scenarios, search_job_cc
from tuner.jobs import load_job
from tuner.placement import place
from tuner.recommend import RecommendOptions, recommend


def steps(fabric, job, budget: int) -> tuple[dict, float, float, dict]:
    """Wall time of every step of one recommendation run, the totals (wall, CPU) and the
    step CPU times with what the run chose."""
    marks: list[tuple[str, float, float]] = []
    t0, c0 = time.perf_counter(), time.process_time()
    rec = recommend(fabric, job, RecommendOptions(budget=budget),
                    progress=lambda name, _f: marks.append(
                        (name, time.perf_counter(), time.process_time())))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out: dict[str, float] = {}
    step_cpu: dict[str, float] = {}
    ends = marks[1:] + [("end", t0 + wall, c0 + cpu)]
    for (name, t, c), (_, t_next, c_next) in zip(marks, ends, strict=False):
        out[name] = out.get(name, 0.0) + (t_next - t)
        step_cpu[name] = step_cpu.get(name, 0.0) + (c_next - c)
    chose = {"qps": int(rec.env["NCCL_IB_QPS_PER_CONNECTION"]),
             "iteration_s": rec.iteration_recommended_s, "step_cpu_s": step_cpu}
    return out, wall, cpu, chose


def median_steps(fabric, job, budget: int, repeat: int) -> dict:
    """Per-step and total medians over ``repeat`` runs."""
    runs = [steps(fabric, job, budget) for _ in range(repeat)]
    names = list(runs[0][0])
    return {"steps_wall_s": {n: statistics.median(r[0].get(n, 0.0) for r in runs) for n in names},
            "wall_s": statistics.median(r[1] for r in runs),
            "cpu_s": statistics.median(r[2] for r in runs),
            "wall_s_all": [r[1] for r in runs], "cpu_s_all": [r[2] for r in runs],
            "chose": runs[0][3]}


def write_csv(path: Path, doc: dict) -> None:
    """One row per data-parallel width: CPU of the main process (least and each run), the
    QP step's and the whole run's, what the run chose, the load average."""
    rows = []
    for run in doc["runs"]:
        step = run["chose"]["step_cpu_s"]
        rows.append({"gpus": run["gpus"], "dp": run["dp"], "cpu_s_least": min(run["cpu_s_all"]),
                     "cpu_s_runs": " ".join(f"{c:.1f}" for c in run["cpu_s_all"]),
                     "qp_step_cpu_s": step.get("QPs per connection", 0.0),
                     "placement_cpu_s": step.get("placement", 0.0),
                     "collectives_cpu_s": step.get("collectives", 0.0),
                     "wall_s_median": run["wall_s"], "qps": run["chose"]["qps"],
                     "iteration_s": run["chose"]["iteration_s"],
                     "load_before": doc["load_before"][0], "load_after": doc["load_after"][0]})
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def render(doc_path: Path, sets: list[str]) -> None:
    """``LABEL=CSV`` files as one table between the rec28 markers of *doc_path*."""
    from _results import render_between

    lines = ["| tree | GPUs | CPU s, main process (least) | CPU s of each run | QP step CPU s | "
             "placement CPU s | collectives CPU s | QPs chosen | iteration s | load before / "
             "after |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for item in sets:
        label, path = item.split("=", 1)
        with open(path) as fh:
            for r in csv.DictReader(fh):
                f = {k: float(v) for k, v in r.items() if k != "cpu_s_runs"}
                lines.append(
                    f"| {label} | {f['gpus']:,.0f} | {f['cpu_s_least']:.1f} | {r['cpu_s_runs']} | "
                    f"{f['qp_step_cpu_s']:.1f} | {f['placement_cpu_s']:.1f} | "
                    f"{f['collectives_cpu_s']:.1f} | {f['qps']:.0f} | {f['iteration_s']:.4f} | "
                    f"{f['load_before']:.1f} / {f['load_after']:.1f} |")
    render_between(doc_path, "\n".join(lines), "<!-- rec28:begin -->", "<!-- rec28:end -->")


def qp_split(fabric, job, check_qps: int) -> dict[str, float]:
    """CPU of the QP step's flow-engine predicts, made as ``recommend`` makes them (the search's
    2, 4 and 8 QPs on the search seed; the check's ``check_qps`` and 1 QP on the other seeds),
    on the topology-aware placement: the whole, and the time inside the max-min kernel (or its
    first round alone, where a stop rule is settled there: ``first_round_rates``), inside
    building the batches' commodities, within that routing (``_replicate``), and dropping
    dominated links (inside building up to ee6acf6; since then on first use, by a full
    allocation only)."""
    import netsim.flow.maxmin_fast as mf
    import netsim.workload.flowcomm as fc
    from tuner.outofsample import seeds_of
    from tuner.placement import iteration_scorer

    gpus = place(fabric, job, "topo").gpu_of_rank
    iteration_scorer(fabric, job, qps=2, seed=7)(gpus)  # imports and compiled kernels loaded
    acc = dict.fromkeys(("kernel", "construct", "routes", "dominated"), 0.0)

    def timed(name, fn):
        def run(*a, **k):
            c = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                acc[name] += time.process_time() - c
        return run

    wrapped = {(mf, "_kernel"): "kernel", (mf, "first_round_rates"): "kernel",
               (fc.FlowCommModel, "_construct"): "construct",
               (fc, "_replicate"): "routes", (fc, "_drop_dominated"): "dominated"}
    saved = {(obj, attr): getattr(obj, attr) for obj, attr in wrapped}
    ins, held = seeds_of(0)
    pairs = [(q, 0) for q in (2, 4, 8)] + [(q, s) for s in ins[1:] + held
                                           for q in (check_qps, 1)]
    try:
        for (obj, attr), name in wrapped.items():
            setattr(obj, attr, timed(name, saved[obj, attr]))
        c0 = time.process_time()
        for q, s in pairs:
            iteration_scorer(fabric, job, qps=q, seed=s)(gpus)
        total = time.process_time() - c0
    finally:
        for (obj, attr), fn in saved.items():
            setattr(obj, attr, fn)
    return {"gpus": job.world, "predicts": len(pairs), "cpu_s": total,
            **{f"{k}_cpu_s": v for k, v in acc.items()}, "load": os.getloadavg()[0]}


def render_split(doc_path: Path, sources: list[str]) -> None:
    """``--qp-split`` CSVs (each ``CSV`` or ``LABEL=CSV``) as a table, one row each, between
    DOC's ``rec28-split`` markers."""
    from _results import render_between

    lines = ["| run | GPUs | predicts | CPU s | max-min kernel | building commodities | of which "
             "replicating connections (QPs, routes) | dropping dominated links (inside building "
             "before ee6acf6) | load |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for source in sources:
        label, _, path = source.rpartition("=")
        lines.append(_split_row(label or Path(path).stem, path))
    render_between(doc_path, "\n".join(lines), "<!-- rec28-split:begin -->",
                   "<!-- rec28-split:end -->")


def _split_row(label: str, path: str) -> str:
    with open(path) as fh:
        r = {k: float(v) for k, v in next(csv.DictReader(fh)).items()}
    share = {k: f"{r[k + '_cpu_s']:.1f} s ({r[k + '_cpu_s'] / r['cpu_s']:.0%})"
             for k in ("kernel", "construct", "routes", "dominated")}
    return (f"| {label} | {r['gpus']:,.0f} | {r['predicts']:.0f} | {r['cpu_s']:.1f} | "
            f"{share['kernel']} | {share['construct']} | {share['routes']} | "
            f"{share['dominated']} | {r['load']:.1f} |")


def cc_scaling(fabric, job, budget: int) -> dict[int, float]:
    """Wall time of the CC search with 1 and 2 worker processes (same seed, same points)."""
    scenarios, found = job_scenarios(fabric, job, place(fabric, job, "topo").gpu_of_rank)
    out = {}
    for workers in (1, 2):
        t0 = time.perf_counter()
        search_job_cc(scenarios, found, budget=budget, seed=0, workers=workers)
        out[workers] = time.perf_counter() - t0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fabric", default="megascale")
    ap.add_argument("--job", default="gpt3-175b")
    ap.add_argument("--dp", type=int, nargs="+", default=[16, 192],
                    help="data-parallel widths to run (default: 16 and 192)")
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-cc-scaling", action="store_true",
                    help="skip the CC search with 1 and 2 workers")
    ap.add_argument("--csv", default=None, help="also write one row per width here")
    ap.add_argument("--render", default=None, metavar="DOC",
                    help="render the LABEL=CSV arguments of --from into DOC, run nothing")
    ap.add_argument("--from", dest="sets", nargs="*", default=[], metavar="LABEL=CSV")
    ap.add_argument("--qp-split", default=None, metavar="CSV",
                    help="only split the CPU of the QP step's predicts (largest --dp) into "
                         "kernel / building / routing / dominated links, written here")
    ap.add_argument("--check-qps", type=int, default=4,
                    help="with --qp-split: the QP count the check confirms (default 4)")
    ap.add_argument("--render-split", nargs="+", default=None, metavar="DOC CSV",
                    help="render --qp-split CSVs (each CSV or LABEL=CSV) into DOC, run nothing")
    a = ap.parse_args()
    if a.render:
        render(Path(a.render), a.sets)
        return
    if a.render_split:
        render_split(Path(a.render_split[0]), a.render_split[1:])
        return
    fabric = load_fabric(a.fabric)
    if a.qp_split:
        row = qp_split(fabric, load_job(a.job, dp=max(a.dp)), a.check_qps)
        Path(a.qp_split).parent.mkdir(parents=True, exist_ok=True)
        with open(a.qp_split, "w", newline="") as fh:
            w = csv.DictWriter(fh, list(row))
            w.writeheader()
            w.writerow(row)
        print(row)
        return
    doc = {"fabric": fabric.name, "job": a.job, "budget": a.budget, "repeat": a.repeat,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
           "cpus": os.cpu_count(), "load_before": os.getloadavg(), "runs": []}
    for dp in a.dp:
        job = load_job(a.job, dp=dp)
        run = {"dp": dp, "gpus": job.world, **median_steps(fabric, job, a.budget, a.repeat)}
        scaling = {1: 0.0, 2: 0.0} if a.no_cc_scaling else cc_scaling(fabric, job, a.budget)
        run.update(cc_search_wall_s=scaling,
                   cc_speedup_2_workers=scaling[1] / scaling[2] if scaling[2] > 0 else 1.0)
        doc["runs"].append(run)
    doc["load_after"] = os.getloadavg()
    if a.csv:
        write_csv(Path(a.csv), doc)
    if a.json:
        print(json.dumps(doc, indent=2))
        return
    print(f"{doc['date']}, {doc['cpus']} CPUs, load average before "
          f"{doc['load_before'][0]:.1f}, after {doc['load_after'][0]:.1f}")
    for run in doc["runs"]:
        print(f"recommend {a.job} dp={run['dp']} ({run['gpus']} GPUs) on {fabric.name}, budget "
              f"{a.budget}: median of {a.repeat}: {run['wall_s']:.1f} s wall "
              f"({', '.join(f'{w:.1f}' for w in run['wall_s_all'])}), {run['cpu_s']:.1f} s CPU "
              "(main process)")
        for name, s in run["steps_wall_s"].items():
            print(f"  {name:22s} {s:7.2f} s")
        sc = run["cc_search_wall_s"]
        print(f"  CC search alone: 1 worker {sc[1]:.1f} s, 2 workers {sc[2]:.1f} s, "
              f"speed-up {run['cc_speedup_2_workers']:.2f}x")


if __name__ == "__main__":
    main()
