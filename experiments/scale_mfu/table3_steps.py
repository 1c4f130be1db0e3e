"""MegaScale's Table 3 step by step: what each cumulative optimization adds, paper against model.

    python -m experiments.scale_mfu.table3_steps [-o DIR]

Table 3 of arXiv:2402.15627 (175B, 256 GPUs, batch 256 before LAMB) lists cumulative MFU;
the gain of a step is its row minus the row before, in MFU points. The model's rows are
``megascale_tables.table3_predictions`` (the paper's setup, nothing fitted). Each predicted
gain is split by where the time per sequence went: compute, exposed TP / PP / DP
communication, pipeline bubble, optimizer step (a component's share of the saved time per
sequence, so the parts add up to the gain). Row 8 ("misc optimizations": data pipeline,
problematic-code fixes) has no switch: its predicted gain is 0 by construction and it is left
out of the rank correlation. Writes ``DIR/megascale_table3_steps.csv``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from experiments._output import print_rows, write_csv
from experiments.scale_mfu.megascale_tables import load_published, table3_predictions

PARTS = ("compute", "tp", "pp", "dp", "bubble", "optimizer")
NO_SWITCH_ROW = 8  # Table 3 row 8: misc optimizations


def time_parts_s(pred) -> dict[str, float]:
    """Seconds per sequence of one prediction, by where they go (they add up to the
    iteration: the pipeline = compute + bubble, exposed TP and PP inside its compute; then
    exposed DP and embedding reductions and the optimizer step)."""
    exposed = pred.exposed_comm_s
    batch = pred.job["global_batch"]
    parts = {"tp": exposed.get("tp", 0.0), "pp": exposed.get("pp", 0.0),
             "dp": exposed.get("dp", 0.0) + exposed.get("embedding", 0.0),
             "bubble": pred.bubble_s, "optimizer": pred.optimizer_s}
    parts["compute"] = pred.iteration_s - sum(parts.values())
    return {k: v / batch for k, v in parts.items()}


def step_rows(window: int | None = None) -> list[dict]:
    """One row per Table 3 step (rows 2..9): published and predicted gain in points, and
    the predicted gain split over :data:`PARTS`."""
    published = [r for r in load_published() if r.table == 3]
    preds = table3_predictions() if window is None else table3_predictions(window)
    by_row = [p for _, p in preds[:7]] + [preds[6][1], preds[7][1]]  # row 8 repeats row 7
    out = []
    for k in range(1, len(published)):
        before, after = by_row[k - 1], by_row[k]
        gain = 100 * (after.mfu - before.mfu)
        out.append({"row": published[k].row, "step": published[k].method,
                    "modelled": published[k].row != NO_SWITCH_ROW,
                    "published_gain_pts": 100 * (published[k].mfu - published[k - 1].mfu),
                    "predicted_gain_pts": gain,
                    **{f"from_{p}_pts": v for p, v in _split(before, after, gain).items()}})
    return out


def _split(before, after, gain_pts: float) -> dict[str, float]:
    """``gain_pts`` shared over the parts by the time per sequence each saved."""
    t0, t1 = time_parts_s(before), time_parts_s(after)
    saved = {p: t0[p] - t1[p] for p in PARTS}
    total = sum(saved.values())
    return {p: (gain_pts * s / total if total else 0.0) for p, s in saved.items()}


def summary(rows: list[dict]) -> dict:
    """Spearman rank correlation of published and predicted gains over the modelled steps,
    and the total gain of every step (row 9 minus row 1), published and predicted."""
    from scipy.stats import spearmanr

    modelled = [r for r in rows if r["modelled"]]
    rho = spearmanr([r["published_gain_pts"] for r in modelled],
                    [r["predicted_gain_pts"] for r in modelled]).statistic
    return {"steps": len(modelled), "spearman_rho": float(rho),
            "published_total_pts": sum(r["published_gain_pts"] for r in rows),
            "predicted_total_pts": sum(r["predicted_gain_pts"] for r in rows)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-o", "--out", type=Path, help="write megascale_table3_steps.csv here")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = p.parse_args(argv)
    rows = step_rows()
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        write_csv(args.out / "megascale_table3_steps.csv", rows)
    print_rows(rows, args.json, _line, indent=1)
    if not args.json:
        print(summary(rows))
    return 0


def _line(r: dict) -> str:
    return (f"{r['row']} {r['step']:<32} published {r['published_gain_pts']:+5.1f} "
            f"predicted {r['predicted_gain_pts']:+5.1f} pts")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
