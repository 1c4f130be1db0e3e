"""MegaScale's Table 2 and Table 3 (arXiv:2402.15627) predicted row by row with ``netsim
predict``'s switches, against the published figures in ``megascale_published.csv``.

    python -m experiments.scale_mfu.megascale_tables [-o DIR] [--flow] [--json]

Every row runs the paper's stated setup (section 6.1, Table 1): the ``megascale-175b`` preset
(96 layers, hidden 12,288, 128 heads, sequence 2,048, vocabulary 64,000), TP 8, PP 8, DP =
GPUs / 64, interleaved 1F1B with six chunks per stage, the row's published batch, A100.
Assumed where the paper is silent: micro-batch 1, no activation recomputation, a 512-token
window, collectives priced analytically (alpha-beta, rail-optimised servers), or with
``--flow`` by the flow engine on the ``megascale`` fabric (``netsim.workload.FlowCommModel``,
ranks in Megatron's order from the first GPU, ECMP seed 1).

* Megatron-LM rows: no switch at all (Megatron-LM's defaults: no overlap, no distributed
  optimizer).
* MegaScale rows of Table 2: ``--ptb --swa 512 --efficient-ops``, every overlap, the
  distributed optimizer (ZeRO-2, the paper's Figure 1); not ``--lamb``: the published batch
  is the batch trained (LAMB is what let it grow from 256 to 768, Table 3 row 9).
* Table 3 (256 GPUs, batch 256): ``netsim.workload.megascale_opts.ablation_steps``, the
  paper's row order; its row 8 ("misc optimizations") has no switch and is compared with the
  prediction of row 7.

Nothing is fitted to these tables. The one fitted parameter of the predictor is the A100's
``gemm_efficiency`` (fitted on Narayanan et al. 2021 Table 1 row 1, ``experiments.published``).
"""

from __future__ import annotations

import argparse
import csv
import functools
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from experiments._output import finish_figure, print_rows, write_csv
from netsim.model.hardware import A100
from netsim.workload import JobSpec, Overlap, predict
from netsim.workload.megascale_opts import MegaScaleOpts, ablation_steps, apply

PUBLISHED_CSV = Path(__file__).with_name("megascale_published.csv")
VIRTUAL_STAGES = 6  # "six ... interleaving stages for the 175B" model (section 6.1)
WINDOW = 512  # sliding-window size: an assumption, not stated in the paper
FIELDS = ("table", "row", "method", "gpus", "batch", "iteration_s", "tokens_per_s", "mfu",
          "speedup", "source")


@dataclass(frozen=True, slots=True)
class PublishedRow:
    """One row of the paper's Table 2 or Table 3."""

    table: int
    row: int
    method: str
    gpus: int
    batch: int
    mfu: float
    iteration_s: float | None
    source: str


def load_published(path: Path = PUBLISHED_CSV) -> list[PublishedRow]:
    """The published rows; a missing or malformed field is an error naming row and field."""
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [f for f in FIELDS if f not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing columns {missing}; expected {list(FIELDS)}")
        return [_parse_row(path, i, r) for i, r in enumerate(reader, start=2)]


def _parse_row(path: Path, line: int, r: dict) -> PublishedRow:
    try:
        row = PublishedRow(table=int(r["table"]), row=int(r["row"]), method=r["method"],
                           gpus=int(r["gpus"]), batch=int(r["batch"]), mfu=float(r["mfu"]),
                           iteration_s=float(r["iteration_s"]) if r["iteration_s"] else None,
                           source=r["source"].strip())
    except ValueError as exc:
        raise ValueError(f"{path} line {line}: {exc}; table/row/gpus/batch are integers, "
                         "mfu a fraction") from None
    if row.table not in (2, 3) or not 0 < row.mfu < 1 or not row.source:
        raise ValueError(f"{path} line {line}: table must be 2 or 3, mfu in (0, 1), "
                         "source non-empty")
    return row


def paper_job(gpus: int, batch: int, **changes) -> JobSpec:
    """The paper's 175B job at ``gpus`` GPUs and global batch ``batch``."""
    job = JobSpec(model="megascale-175b", gpu="a100", tp=8, pp=8, dp=gpus // 64,
                  global_batch=batch, micro_batch=1, virtual_stages=VIRTUAL_STAGES)
    return replace(job, **changes)


@functools.lru_cache(maxsize=1)
def _megascale_fabric():
    from topologies import load_fabric

    return load_fabric("megascale")


def predicted(job: JobSpec, opts: MegaScaleOpts, flow: bool = False):
    """``netsim predict`` of ``job`` with MegaScale switches ``opts`` (the whole
    ``Prediction``); with ``flow`` the collectives run on the ``megascale`` fabric through the
    flow engine."""
    if not flow:
        j, hw, cm, cp = apply(job, A100, opts)
        return predict(j, hardware=hw, comm_model=cm, compute_model=cp)
    from netsim.workload import FlowCommModel

    fabric = _megascale_fabric()
    j, hw, cm, cp = apply(job, A100, opts, comm_model=FlowCommModel(fabric, A100, seed=1))
    return predict(j, fabric=fabric, hardware=hw, comm_model=cm, compute_model=cp)


def predicted_mfu(job: JobSpec, opts: MegaScaleOpts, flow: bool = False) -> float:
    """MFU of :func:`predicted`."""
    return predicted(job, opts, flow).mfu


def megascale_opts(window: int = WINDOW) -> MegaScaleOpts:
    """MegaScale's switches for a Table 2 row (every one but LAMB's batch multiplier)."""
    return MegaScaleOpts(ptb=True, swa_window=window, efficient_ops=True)


def predict_table2(row: PublishedRow, window: int = WINDOW, flow: bool = False) -> float:
    """Predicted MFU of one Table 2 row."""
    if row.method == "Megatron-LM":
        return predicted_mfu(paper_job(row.gpus, row.batch), MegaScaleOpts(), flow)
    job = paper_job(row.gpus, row.batch, distributed_optimizer=True,
                    overlap=Overlap.megascale())
    return predicted_mfu(job, megascale_opts(window), flow)


def table3_predictions(window: int = WINDOW, flow: bool = False) -> list[tuple[str, object]]:
    """The ``Prediction`` of each modelled step of Table 3 (256 GPUs, batch 256 before LAMB)."""
    out = []
    for name, opts, overlap in ablation_steps(window):
        job = paper_job(256, 256, overlap=overlap,
                        distributed_optimizer=overlap.dp_param_gather)
        out.append((name, predicted(job, opts, flow)))
    return out


def predict_table3(window: int = WINDOW, flow: bool = False) -> list[tuple[str, float]]:
    """Predicted MFU of each modelled step of Table 3."""
    return [(name, pred.mfu) for name, pred in table3_predictions(window, flow)]


def compare(rows: list[PublishedRow] | None = None, window: int = WINDOW,
            flow: bool = False) -> list[dict]:
    """Published against predicted MFU for every row of Table 2 and Table 3."""
    rows = load_published() if rows is None else rows
    steps = predict_table3(window, flow)
    out = []
    for r in rows:
        if r.table == 2:
            pred = predict_table2(r, window, flow)
        else:  # Table 3 row 8 (misc) has no switch: the prediction of row 7
            pred = steps[r.row - 1 if r.row <= 7 else r.row - 2][1]
        out.append({"table": r.table, "row": r.row, "method": r.method, "gpus": r.gpus,
                    "batch": r.batch, "published_mfu": r.mfu, "predicted_mfu": pred,
                    "error": pred / r.mfu - 1.0})
    return out


def plot(results: list[dict], path=None):
    """Published and predicted MFU: Table 2 against GPUs, Table 3 step by step."""
    import matplotlib.pyplot as plt

    fig, (a2, a3) = plt.subplots(1, 2, figsize=(11, 4.2))
    for method, colour in (("Megatron-LM", "tab:gray"), ("MegaScale", "tab:red")):
        rs = [r for r in results if r["table"] == 2 and r["method"] == method]
        g = [r["gpus"] for r in rs]
        a2.plot(g, [100 * r["published_mfu"] for r in rs], "o-", color=colour,
                label=f"{method} published")
        a2.plot(g, [100 * r["predicted_mfu"] for r in rs], "x--", color=colour,
                label=f"{method} predicted")
    a2.set_xscale("log")
    a2.set_xlabel("GPUs")
    a2.set_ylabel("MFU (%)")
    a2.set_title("Table 2: strong scaling, 175B")
    a2.legend(fontsize=7)
    t3 = [r for r in results if r["table"] == 3]
    x = range(len(t3))
    a3.bar([i - 0.2 for i in x], [100 * r["published_mfu"] for r in t3], 0.4, label="published")
    a3.bar([i + 0.2 for i in x], [100 * r["predicted_mfu"] for r in t3], 0.4, label="predicted")
    a3.set_xticks(list(x), [r["method"] for r in t3], rotation=30, ha="right", fontsize=7)
    a3.set_ylim(40, 70)
    a3.set_ylabel("MFU (%)")
    a3.set_title("Table 3: ablation, 256 GPUs")
    a3.legend(fontsize=7)
    for ax in (a2, a3):
        ax.grid(True, alpha=0.3)
    return finish_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-o", "--out", type=Path, help="write megascale_tables.csv and .png here")
    p.add_argument("--window", type=int, default=WINDOW, help="sliding-window size (tokens)")
    p.add_argument("--flow", action="store_true",
                   help="collectives on the megascale fabric with the flow engine (minutes)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = p.parse_args(argv)
    print("predicting the 25 rows of MegaScale Tables 2 and 3", file=sys.stderr)
    results = compare(window=args.window, flow=args.flow)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        name = "megascale_tables_flow" if args.flow else "megascale_tables"
        write_csv(args.out / f"{name}.csv", results)
        plot(results, args.out / f"{name}.png")
    print_rows(results, args.json, _line, indent=1)
    return 0


def _line(r: dict) -> str:
    return (f"T{r['table']} {r['row']:>2} {r['method']:<30} {r['gpus']:>6} {r['batch']:>5} "
            f"published {100 * r['published_mfu']:5.1f}% predicted "
            f"{100 * r['predicted_mfu']:5.1f}% ({100 * r['error']:+5.1f}%)")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
