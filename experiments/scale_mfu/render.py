"""Every number of the study README from its CSVs: :func:`values`, which
``python -m experiments.results --render --study scale_mfu`` writes into README.md
(``experiments.render``).

Each block sits between ``<!-- scale_mfu.NAME:begin -->`` and ``<!-- scale_mfu.NAME:end -->``;
the sentences that conclude (does overlap slow the fall with scale? do the paper's per-step
gains rank like the model's?) are chosen from the data here, not typed.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
OVERLAPS = ("none", "dp_grad_reduce", "dp_param_gather", "pp_send_recv", "tp_comm", "all")
OVERLAP_HEAD = ("Megatron-LM defaults", "DP grad reduce only", "DP param gather only", "PP only",
                "TP only", "all overlaps")
NETWORKS = ("nic_x0.5", "nic_x2", "agg_2to1", "spine_down")
STEP_PARTS = ("compute", "tp", "pp", "dp", "bubble", "optimizer")


def _rows(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def _pct(x) -> str:
    return f"{100 * float(x):.1f}%"


def _pts(x) -> str:
    """Signed points to a tenth, never ``-0.0``."""
    return f"{round(float(x), 1) + 0.0:+.1f}"


def _mfu(rows: list[dict], gpus, overlap: str, network: str = "base") -> float:
    return next(float(r["mfu"]) for r in rows if int(r["gpus"]) == int(gpus)
                and r["overlap"] == overlap and r["network"] == network)


def claim_block(published: list[dict]) -> str:
    top = next(r for r in published if r["table"] == "2" and r["method"] == "MegaScale"
               and r["gpus"] == max((r["gpus"] for r in published), key=int))
    return (f"MegaScale (NSDI'24, arXiv:2402.15627): {_pct(top['mfu'])} MFU training a 175B "
            f"model on {int(top['gpus']):,} GPUs, {float(top['speedup']):.2f}x Megatron-LM "
            f"(abstract and Table 2).")


def overlaps_table(rows: list[dict]) -> str:
    out = ["| GPUs | " + " | ".join(OVERLAP_HEAD) + " |", "|---" * (len(OVERLAPS) + 1) + "|"]
    for g in sorted({int(r["gpus"]) for r in rows}):
        out.append(f"| {g:,} | " + " | ".join(_pct(_mfu(rows, g, ov)) for ov in OVERLAPS)
                   + " |")
    return "\n".join(out)


def fall(rows: list[dict], overlap: str) -> tuple[int, int, float, float]:
    """Smallest and largest scale and the MFU at each, Megatron-LM defaults or all."""
    gpus = sorted({int(r["gpus"]) for r in rows})
    return gpus[0], gpus[-1], _mfu(rows, gpus[0], overlap), _mfu(rows, gpus[-1], overlap)


def overlap_effect(fall_none_pts: float, fall_all_pts: float) -> str:
    """What overlap does to the fall of MFU with scale, in MFU points lost from the smallest to
    the largest scale; a difference under one point (the paper's tables give MFU to a tenth of
    a point, and MegaScale's claim is about a clear difference) is "about the same"."""
    if fall_all_pts < fall_none_pts - 1.0:
        return "slows the fall of MFU with scale, as MegaScale says"
    if fall_all_pts > fall_none_pts + 1.0:
        return "speeds up the fall of MFU with scale, contrary to MegaScale"
    return "leaves the fall of MFU with scale about the same, contrary to MegaScale"


def fall_block(rows: list[dict]) -> str:
    lines, lost = [], {}
    for ov, label in (("none", "no overlap (Megatron-LM defaults)"), ("all", "every overlap")):
        g0, g1, m0, m1 = fall(rows, ov)
        lost[ov] = 100 * (m0 - m1)
        r = next(r for r in rows if int(r["gpus"]) == g1 and r["overlap"] == ov
                 and r["network"] == "base")
        share = {k: float(r[k]) / float(r["iteration_s"])
                 for k in ("bubble_s", "exposed_comm_s", "exposed_dp_s")}
        lines.append(f"- {label}: {_pct(m0)} at {g0:,} GPUs, {_pct(m1)} at {g1:,} "
                     f"({-lost[ov]:+.1f} points, {100 * (m1 / m0 - 1):+.1f}%); at {g1:,} GPUs "
                     f"the bubble is {_pct(share['bubble_s'])} of the iteration, exposed "
                     f"communication {_pct(share['exposed_comm_s'])} (DP "
                     f"{_pct(share['exposed_dp_s'])})")
    lines.append(f"\nSo overlap {overlap_effect(lost['none'], lost['all'])}.")
    return "\n".join(lines)


def network_table(rows: list[dict]) -> str:
    out = ["| GPUs | what-if | no overlap | change | every overlap | change |",
           "|---:|---|---:|---:|---:|---:|"]
    for g in sorted({int(r["gpus"]) for r in rows if r["network"] != "base"}):
        for net in ("base", *NETWORKS):
            cells = []
            for ov in ("none", "all"):
                m = _mfu(rows, g, ov, net)
                cells += [_pct(m), f"{_pts(100 * (m - _mfu(rows, g, ov)))} pts"]
            out.append(f"| {g:,} | {net} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def tables_block(rows: list[dict]) -> str:
    t2 = [r for r in rows if r["table"] == "2"]
    out = ["| GPUs | batch | Megatron-LM published | predicted | error | MegaScale published | "
           "predicted | error |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for g in sorted({int(r["gpus"]) for r in t2}):
        cells = []
        for method in ("Megatron-LM", "MegaScale"):
            r = next(r for r in t2 if int(r["gpus"]) == g and r["method"] == method)
            cells += [_pct(r["published_mfu"]), _pct(r["predicted_mfu"]),
                      f"{100 * float(r['error']):+.1f}%"]
        out.append(f"| {g:,} | {int(r['batch']):,} | " + " | ".join(cells) + " |")
    out += ["", "| Table 3 row | step | published | predicted | error |", "|---:|---|---:|---:|---:|"]
    for r in (r for r in rows if r["table"] == "3"):
        out.append(f"| {r['row']} | {r['method']} | {_pct(r['published_mfu'])} | "
                   f"{_pct(r['predicted_mfu'])} | {100 * float(r['error']):+.1f}% |")
    return "\n".join(out + ["", misses_line(rows, "")])


def misses_line(rows: list[dict], how: str) -> str:
    errors = [float(r["error"]) for r in rows]
    worst = max(errors, key=abs)
    rms = math.sqrt(sum(e * e for e in errors) / len(errors))
    return (f"Over the {len(rows)} rows{how}: largest miss {100 * worst:+.1f}%, root mean "
            f"square {100 * rms:.1f}%.")


def flow_block(flow: list[dict], analytic: list[dict]) -> str:
    moved = [(abs(float(f["predicted_mfu"]) - float(a["predicted_mfu"])), f)
             for f, a in zip(flow, analytic, strict=True)]
    small = max(d for d, f in moved if int(f["gpus"]) < 3072)
    large = [d for d, f in moved if int(f["gpus"]) >= 3072]
    return (misses_line(flow, " with the flow engine") + f" Rows below 3,072 GPUs move by at "
            f"most {100 * small:.2f} points from the analytic prediction, the larger ones by "
            f"{100 * min(large):.2f}-{100 * max(large):.2f} points.")


def steps_block(rows: list[dict]) -> str:
    from experiments.scale_mfu.table3_steps import summary

    out = ["| Table 3 row | step | paper (pts) | model (pts) | model: " +
           " | ".join(STEP_PARTS) + " |", "|---:|---|---:|---:|" + "---:|" * len(STEP_PARTS)]
    for r in rows:
        model = _pts(r["predicted_gain_pts"]) if r["modelled"] == "True" else "no switch"
        out.append(f"| {r['row']} | {r['step']} | {_pts(r['published_gain_pts'])} | "
                   f"{model} | " + " | ".join(_pts(r[f"from_{p}_pts"]) for p in STEP_PARTS)
                   + " |")
    s = summary([{**r, "modelled": r["modelled"] == "True",
                  "published_gain_pts": float(r["published_gain_pts"]),
                  "predicted_gain_pts": float(r["predicted_gain_pts"])} for r in rows])
    return "\n".join(out + ["", f"Spearman rank correlation of the {s['steps']} modelled "
                            f"steps' gains: {s['spearman_rho']:+.2f}. Total (row 1 to row 9): "
                            f"paper {s['published_total_pts']:+.1f} points, model "
                            f"{s['predicted_total_pts']:+.1f}."])


def ablation_table(rows: list[dict]) -> str:
    from experiments.scale_mfu.ablation import ablation_batch

    steps = list(dict.fromkeys(r["step"] for r in rows))
    out = ["| GPUs (batch before LAMB) | " + " | ".join(steps) + " |",
           "|---" + "|---:" * len(steps) + "|"]
    for g in sorted({int(r["gpus"]) for r in rows}):
        cells = [_pct(next(r["mfu"] for r in rows if int(r["gpus"]) == g and r["step"] == s))
                 for s in steps]
        out.append(f"| {g:,} ({ablation_batch(g):,}) | " + " | ".join(cells) + " |")
    return "\n".join(out)


def values(results: Path) -> dict[str, str]:
    """Every block of the README, by marker name, rendered from ``results``."""
    def rows(name: str) -> list[dict]:
        return _rows(Path(results) / f"{name}.csv")

    blocks = {"claim": lambda: claim_block(_rows(HERE / "megascale_published.csv")),
              "overlaps": lambda: overlaps_table(rows("mfu_overlaps")),
              "fall": lambda: fall_block(rows("mfu_overlaps")),
              "network": lambda: network_table(rows("mfu_network")),
              "tables": lambda: tables_block(rows("megascale_tables")),
              "flow": lambda: flow_block(rows("megascale_tables_flow"),
                                         rows("megascale_tables")),
              "steps": lambda: steps_block(rows("megascale_table3_steps")),
              "ablation": lambda: ablation_table(rows("mfu_ablation"))}
    return {f"scale_mfu.{name}": body() for name, body in blocks.items()}
