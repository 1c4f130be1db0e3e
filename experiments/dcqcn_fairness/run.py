"""DCQCN unfairness on the long permutation: ``python -m experiments.dcqcn_fairness.run -o DIR``.

Why the flow engine's ``dcqcn`` model misses NIC-default DCQCN per flow on the 200 MB
permutation of ``netsim.flow.crosscheck`` (tests/netsim/flow/test_vs_packet.py): the packet
engine runs it with ``--seeds`` packet seeds (each seed also draws the ECMP hash, so the flows
that collide differ), and :func:`netsim.flow.crosscheck.group_compare` compares the model per
flow, per bottleneck group and on the converged window. Writes ``DIR/seeds.csv`` (one row per
seed), ``DIR/pair.csv`` (seed 0's worst group in 2 ms windows) and, with ``--doc FILE``, renders
both into FILE between the ``dcqcn-fairness`` markers (docs/validation.md). Every seed is a
point of the sweep runner (``DIR/sweep``): resumable, on Dask (``--workers``, ``--scheduler``).
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

import numpy as np

from experiments._output import parse_study_args, write_csv
from experiments._sweeps import ok_outputs, study_parser
from experiments.render import render_file
from netsim.flow.crosscheck import group_compare, run_packet, scenarios, window_gbps
from netsim.flow.sharing import SharingModel

LONG_BYTES = 200_000_000
WINDOW_NS = 2_000_000
MARKER = "dcqcn-fairness"  # <!-- dcqcn-fairness:begin --> ... :end --> in docs/validation.md


def seed_point(seed: int) -> dict:
    """One sweep point: the packet run of one seed against the model; ``row`` (a row of
    ``seeds.csv``) and, for seed 0, ``pair`` (the rows of ``pair.csv``)."""
    scn = {s.name: s for s in scenarios(LONG_BYTES)}["permutation"]
    run = run_packet(scn, "dcqcn", int(seed))
    r = group_compare(scn, SharingModel("dcqcn"), run)
    worst = max(r["groups"], key=lambda g: _floor(np.array(r["window_packet_gbps"]), g))
    row = {
        "seed": int(seed), "flows": len(r["packet_gbps"]), "groups": len(r["groups"]),
        "window_start_ms": r["window_ns"][0] / 1e6, "window_end_ms": r["window_ns"][1] / 1e6,
        "max_abs_err": r["max_abs_err"], "window_max_abs_err": r["window_max_abs_err"],
        "mean_ratio": r["mean_ratio"], "group_err": r["group_err"],
        "window_group_err": r["window_group_err"], "symmetric_floor": r["symmetric_floor"],
        "floor_first_half": r["half_floors"][0], "floor_second_half": r["half_floors"][1],
        "min_group_jain": r["min_group_jain"],
        "worst_group": " ".join(map(str, worst)),
        "worst_group_packet_gbps": " ".join(f"{r['window_packet_gbps'][i]:.1f}" for i in worst),
        "worst_group_model_gbps": " ".join(f"{r['window_flow_gbps'][i]:.1f}" for i in worst),
    }
    return {"row": row, "pair": pair_rows(row, run) if int(seed) == 0 else []}


def run_seeds(out: Path, seeds: int, workers: int | None = None, scheduler: str | None = None
              ) -> tuple[list[dict], list[dict]]:
    """Every seed a point of :func:`sweeps.run_points` (resumed from ``out/sweep``); the rows
    of ``seeds.csv`` and ``pair.csv``."""
    from sweeps import run_points

    res = run_points(_point, [{"seed": k} for k in range(seeds)], out_dir=out / "sweep",
                     workers=workers, scheduler=scheduler)
    outs = ok_outputs(res, "dcqcn_fairness")
    return [o["row"] for o in outs], [p for o in outs for p in o["pair"]]


def _point(point: dict) -> dict:
    return seed_point(point["seed"])


def _floor(rates: np.ndarray, g: list[int]) -> float:
    return float((rates[g].max() - rates[g].min()) / (rates[g].max() + rates[g].min()))


def pair_rows(row: dict, run) -> list[dict]:
    """The worst group of one seed in ``WINDOW_NS`` windows until its last flow is done."""
    _, pk = run
    g = [int(i) for i in row["worst_group"].split()]
    end = max(pk.flows[i].start_ns + pk.flows[i].fct_ns for i in g)
    out = []
    for t0 in np.arange(0, end - WINDOW_NS + 1, WINDOW_NS):
        rates = window_gbps(pk, float(t0), float(t0 + WINDOW_NS))
        out.append({"start_ms": t0 / 1e6, **{f"flow_{i}_gbps": round(float(rates[i]), 2)
                                             for i in g}})
    return out


def render(seeds: list[dict], pair: list[dict]) -> str:
    """The markdown between the markers, every number from the two CSVs' rows."""
    head = ("| seed | groups | max err (bytes/FCT) | max err (window) | mean ratio | group err "
            "(FCT) | group err (window) | symmetric floor (window; halves) | min Jain | "
            "worst group: packet / model Gb/s |\n|---|---|---|---|---|---|---|---|---|---|")
    lines = [head] + [
        f"| {r['seed']} | {r['groups']} | {100 * float(r['max_abs_err']):.1f}% | "
        f"{100 * float(r['window_max_abs_err']):.1f}% | {float(r['mean_ratio']):.3f} | "
        f"{100 * float(r['group_err']):.1f}% | {100 * float(r['window_group_err']):.1f}% | "
        f"{100 * float(r['symmetric_floor']):.1f}% ({100 * float(r['floor_first_half']):.1f}%, "
        f"{100 * float(r['floor_second_half']):.1f}%) | {float(r['min_group_jain']):.3f} | "
        f"{r['worst_group_packet_gbps']} / {r['worst_group_model_gbps']} |" for r in seeds]
    cols = [c for c in pair[0] if c != "start_ms"]
    s0 = seeds[0]
    lines += ["", f"Seed 0, worst group (flows {s0['worst_group']}), delivered Gb/s per 2 ms "
              f"(model while every flow runs: {s0['worst_group_model_gbps']}; converged window "
              f"{float(s0['window_start_ms']):.1f}-{float(s0['window_end_ms']):.1f} ms):", "",
              "| from ms | " + " | ".join(c.replace("_gbps", "") for c in cols) + " |",
              "|---|" + "---|" * len(cols)]
    lines += [f"| {float(p['start_ms']):.0f} | " + " | ".join(f"{float(p[c]):.1f}" for c in cols)
              + " |" for p in pair]
    return "\n".join(lines)


def write_doc(doc: Path, text: str) -> None:
    """Replace what lies between the markers of ``doc`` with ``text``."""
    render_file(doc, {MARKER: text}, strict=True)


def values(results: Path) -> dict[str, str]:
    """The tables by marker name, from the CSVs in ``results`` (the study's renderer)."""
    return {MARKER: render(_read(results / "seeds.csv"), _read(results / "pair.csv"))}


def _read(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def main(argv: list[str] | None = None) -> int:
    p = study_parser(__doc__, "(the default run is the study's size)")
    p.add_argument("--seeds", type=int, default=6, help="packet seeds 0..N-1")
    p.add_argument("--doc", type=Path, help="render the CSVs into this file's markers")
    args = parse_study_args(p, argv)
    t0 = time.time()
    rows, pair = run_seeds(args.out, args.seeds, args.workers, args.scheduler)
    write_csv(args.out / "seeds.csv", rows)
    write_csv(args.out / "pair.csv", pair)
    from experiments.dcqcn_fairness.figure import figure

    figure(args.out, args.out / "fairness.png")
    print(f"{args.seeds} seeds in {time.time() - t0:.0f} s; wrote {args.out}/seeds.csv, pair.csv, "
          "fairness.png")
    if args.doc:
        write_doc(args.doc, render(_read(args.out / "seeds.csv"), _read(args.out / "pair.csv")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
