"""The worked example of docs/recommend.md, "Check a recommendation on your own traffic".

Runs what an operator runs: ``netsim recommend ... -o DIR`` for a small job, then
``netsim simulate --level packet`` on traffic the recommendation never saw, once with the
defaults and once with ``--settings DIR``, for each scenario and seed. Writes to OUT
``compare.csv`` (one row per run) and ``compare.md`` (the table the doc shows, rendered from the
CSV by :func:`render_table`). The 18 simulate runs are points of the sweep runner
(``OUT/sweep``): an interrupted run resumes, ``--workers N`` spreads them over Dask::

    python -m experiments.settings_check.run -o experiments/settings_check/results
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import functools
import io
import json
from pathlib import Path

FABRIC = "fat-tree-k8"
RECOMMEND = ["recommend", "--fabric", FABRIC, "--model", "gpt3-1.3b", "--tp", "1", "--pp", "2",
             "--dp", "8", "--global-batch", "32", "--budget", "2"]
SCENARIOS = {"incast:8 of 4MB": ["--traffic", "incast:8", "--size", "4MB"],
             "permutation of 4MB": ["--traffic", "permutation", "--size", "4MB"]}
SEEDS = (1, 2, 3)
COLUMNS = ("scenario", "seed", "settings", "max_fct_us", "mean_gbps", "ecn_marks", "cnps",
           "pfc_pauses", "drops", "qps_per_flow")


def _netsim(argv: list[str]) -> str:
    """Run one ``netsim`` command in-process; its stdout (exit status checked)."""
    from tuner.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    if rc != 0:
        raise RuntimeError(f"netsim {' '.join(argv)} exited {rc}")
    return out.getvalue()


#: The runs per scenario and seed: label -> whether --settings is given, extra flags. The
#: third keeps the recommended DCQCN/ECN/retransmit values but 1 QP (an explicit flag wins
#: over the file), which separates the QP change from the rest.
VARIANTS = {"defaults": (False, []), "recommended": (True, []),
            "recommended, --qps 1": (True, ["--qps", "1"])}


def simulate_row(scenario: str, seed: int, variant: str, settings: Path) -> dict:
    """One packet-level run of a scenario: the figures the table compares."""
    use, extra = VARIANTS[variant]
    argv = ["simulate", "--level", "packet", "--fabric", FABRIC, *SCENARIOS[scenario],
            "--seed", str(seed), "--json", *extra]
    if use:
        argv += ["--settings", str(settings)]
    doc = json.loads(_netsim(argv))
    flows = doc["flows"]
    return {"scenario": scenario, "seed": seed,
            "settings": variant,
            "max_fct_us": round(max(f["fct_ns"] for f in flows) / 1e3, 1),
            "mean_gbps": round(sum(f["throughput_gbps"] for f in flows) / len(flows), 2),
            "ecn_marks": doc["ecn_marks"], "cnps": doc["cnps"], "pfc_pauses": doc["pfc_pauses"],
            "drops": doc["drops"],
            "qps_per_flow": max(f["qps"] for f in flows)}


def run_study(out: Path, workers: int | None = 0, scheduler: str | None = None) -> list[dict]:
    """Recommend into OUT/reco (kept once written), then every scenario x seed x variant as a
    point of :func:`sweeps.run_points` (resumed from OUT/sweep)."""
    from experiments._sweeps import ok_outputs
    from sweeps import run_points

    reco = out / "reco"
    if not (reco / "manifest.json").exists():
        _netsim(RECOMMEND + ["-o", str(reco)])
    points = [{"scenario": sc, "seed": seed, "variant": v} for sc in SCENARIOS for seed in SEEDS
              for v in VARIANTS]
    res = run_points(functools.partial(_point, settings=str(reco)), points,
                     out_dir=out / "sweep", workers=workers, scheduler=scheduler)
    return ok_outputs(res, "settings_check")


def _point(point: dict, settings: str) -> dict:
    return simulate_row(point["scenario"], point["seed"], point["variant"], Path(settings))


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def read_csv(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def render_table(rows: list[dict]) -> str:
    """The markdown table of docs/recommend.md (values as the CSV holds them)."""
    head = ("scenario", "seed", "settings", "QPs per flow", "max FCT (us)", "mean Gb/s",
            "ECN marks", "CNPs", "PFC pauses", "drops")
    keys = ("scenario", "seed", "settings", "qps_per_flow", "max_fct_us", "mean_gbps",
            "ecn_marks", "cnps", "pfc_pauses", "drops")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", type=Path, required=True, help="output directory")
    p.add_argument("--workers", type=int, default=0,
                   help="local Dask workers for the simulate runs (0, the default: in this "
                        "process)")
    p.add_argument("--scheduler", default=None, help="tcp://HOST:PORT of a Dask cluster")
    args = p.parse_args(argv)
    args.output.mkdir(parents=True, exist_ok=True)
    write_csv(run_study(args.output, args.workers, args.scheduler), args.output / "compare.csv")
    (args.output / "compare.md").write_text(render_table(read_csv(args.output / "compare.csv")))
    from experiments.settings_check.figure import figure

    figure(args.output, args.output / "compare.png")
    print(f"wrote compare.csv, compare.md, compare.png and reco/ to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
