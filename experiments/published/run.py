"""Published training throughput predicted by ``netsim predict`` commands as a user types them.

    python -m experiments.published.run [-o DIR] [--quick] [--json] [--docs] [--fit]

Every row of ``experiments.published.table.ROWS`` is run through the CLI (``netsim predict ...
--json``, in process); the prediction is compared with the published figure. Writes
``published.csv`` and ``published.png`` to DIR (default ``experiments/published/results``);
``--docs`` renders the table from that CSV into ``docs/validation.md`` and this study's
README; ``--quick`` leaves out the rows marked slow; ``--fit`` refits the suite's one compute
parameter (``netsim.model.efficiency.TRAINING_FACTOR``) on Megatron-LM Table 1 row 1 and
prints it (every other row is held out from it).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import sys
from pathlib import Path

import numpy as np

from experiments._output import write_csv
from experiments.published.table import ROWS, Row

HERE = Path(__file__).parent
RESULTS = HERE / "results"
PEAK_TFLOPS = {"a100": 312.0, "h100": 989.0, "h800": 989.0, "h200": 989.0}
TOLERANCE = 0.15


def cli_prediction(command: str) -> dict:
    """The JSON ``netsim predict`` prints for ``command`` (``ValueError`` with its stderr)."""
    from tuner.cli import main

    argv = shlex.split(command)[1:] + ["--json"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    if status:
        raise ValueError(f"{command}: exit {status}: {err.getvalue().strip()}")
    return json.loads(out.getvalue())


def metric_value(pred: dict, metric: str) -> float:
    """The row's metric from a prediction's JSON."""
    if metric == "TFLOP/s/GPU":
        return pred["hfu"] * PEAK_TFLOPS[pred["hardware"]]
    if metric == "MFU":
        return pred["mfu"]
    if metric == "tokens/s":
        return pred["tokens_per_s"]
    if metric == "tokens/s/GPU":
        return pred["tokens_per_s"] / pred["gpus"]
    raise ValueError(f"unknown metric {metric!r}")


def predict_row(row: Row) -> dict:
    """Prediction, error and the row's provenance, one flat dict (a CSV row)."""
    pred = cli_prediction(row.command)
    value = metric_value(pred, row.metric)
    return {"source": row.source, "command": row.command, "metric": row.metric,
            "published": row.published, "predicted": value,
            "error": (value - row.published) / row.published, "fitted": row.fitted,
            "iteration_s": pred["iteration_s"], "bubble_fraction": pred["bubble_fraction"],
            "mfu": pred["mfu"], "mfu_causal": pred["mfu_causal"],
            "exposed_comm_s": pred["exposed_comm_s"]["total"], "miss": row.miss}


def run_rows(rows: list[Row]) -> list[dict]:
    return [predict_row(r) for r in rows]


def summary(table: list[dict]) -> dict:
    """Held-out rows (all but the fitted one): median and worst |error|, rows beyond 15%."""
    held = [r for r in table if not r["fitted"]]
    err = np.abs([r["error"] for r in held])
    return {"held_out_rows": len(held), "median_abs_error": float(np.median(err)),
            "max_abs_error": float(err.max()),
            "beyond_tolerance": [r["source"] for r in held if abs(r["error"]) > TOLERANCE]}


def fit_training_factor() -> float:
    """Bisect the training factor so that Megatron-LM Table 1 row 1 (137 TFLOP/s) comes out."""
    from netsim.model.efficiency import ATTENTION_FRACTION, MAMF_FRACTION
    from netsim.model.hardware import A100
    from netsim.workload import predict

    row = ROWS[0]
    job = job_of(row.command)
    lo, hi = 0.3, 1.0
    for _ in range(16):  # 0.7 / 2^16 < 1.1e-5
        mid = (lo + hi) / 2
        hw = A100.replace(gemm_efficiency=MAMF_FRACTION["a100"] * mid,
                          attention_efficiency=ATTENTION_FRACTION["a100"] * mid)
        tflops = predict(job, hardware=hw).hfu * PEAK_TFLOPS["a100"]
        lo, hi = (mid, hi) if tflops < row.published else (lo, mid)
    return (lo + hi) / 2


def job_of(command: str):
    """The ``JobSpec`` a ``netsim predict`` command describes."""
    from tuner.cli import build_parser
    from tuner.cli.predict import _job_from_args

    return _job_from_args(build_parser().parse_args(shlex.split(command)[1:]))


def render(table: list[dict]) -> str:
    """The Markdown table of the CSV rows plus the summary line."""
    lines = ["| source | command | metric | published | predicted | error |",
             "|---|---|---|---|---|---|"]
    for r in table:
        mark = " (fitted)" if _truthy(r["fitted"]) else ""
        cmd = str(r["command"]).replace("netsim predict ", "")
        lines.append(f"| {r['source']}{mark} | `{cmd}` | {r['metric']} | "
                     f"{_fmt(float(r['published']))} | {_fmt(float(r['predicted']))} | "
                     f"{float(r['error']):+.1%} |")
    s = summary([{**r, "fitted": _truthy(r["fitted"]), "error": float(r["error"])}
                 for r in table])
    lines += ["", f"Held-out rows ({s['held_out_rows']}): median |error| "
              f"{s['median_abs_error']:.1%}, worst {s['max_abs_error']:.1%}; beyond 15%: "
              f"{', '.join(s['beyond_tolerance']) or 'none'}."]
    misses = [r for r in table if r["miss"]]
    lines += [f"\n* {r['source']}: {r['miss']}" for r in misses]
    return "\n".join(lines)


def _fmt(x: float) -> str:
    return f"{x:.3f}" if x < 1 else f"{x:,.0f}"


def _truthy(v) -> bool:
    return v is True or str(v) == "True"


BEGIN, END = "<!-- published-table:begin -->", "<!-- published-table:end -->"


def write_between(doc: Path, text: str) -> None:
    """Replace what lies between the published-table markers of ``doc`` with ``text``."""
    body = doc.read_text()
    i, j = body.index(BEGIN) + len(BEGIN), body.index(END)
    doc.write_text(body[:i] + "\n" + text + "\n" + body[j:])


def figure(table: list[dict], path: Path | None = None):
    """Predicted / published per row, the 15% band shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments._output import finish_figure

    ratio = [1 + float(r["error"]) for r in table]
    fig, ax = plt.subplots(figsize=(7, 0.22 * len(table) + 1.2))
    y = np.arange(len(table))
    ax.axvspan(1 - TOLERANCE, 1 + TOLERANCE, color="0.9")
    ax.scatter(ratio, y, s=14)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_yticks(y, [r["source"] for r in table], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("predicted / published (shaded: within 15%)")
    return finish_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, default=RESULTS)
    ap.add_argument("--quick", action="store_true", help="leave out the slow rows")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--docs", action="store_true",
                    help="render the table into docs/validation.md and the README")
    ap.add_argument("--fit", action="store_true", help="refit the training factor first")
    args = ap.parse_args(argv)
    if args.fit:
        print(f"training factor fitted on Megatron-LM Table 1 row 1: "
              f"{fit_training_factor():.4f}", file=sys.stderr)
    rows = [r for r in ROWS if not (args.quick and r.slow)]
    table = run_rows(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "published.csv", table)
    figure(table, args.out / "published.png")
    if args.docs:
        text = render(table)
        for doc in (HERE.parent.parent / "docs" / "validation.md", HERE / "README.md"):
            write_between(doc, text)
    if args.json:
        print(json.dumps({"rows": table, "summary": summary(table)}, indent=2))
        return 0
    for r in table:
        print(f"{r['source']:48s} {r['metric']:13s} {r['published']:>10.4g} "
              f"{r['predicted']:>10.4g} {r['error']:+7.1%}")
    s = summary(table)
    print(f"held-out rows {s['held_out_rows']}: median |error| {s['median_abs_error']:.1%}, "
          f"worst {s['max_abs_error']:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
