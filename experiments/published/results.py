"""The published-anchors study as committed results: ``python -m experiments.published.results
-o DIR`` writes ``published.csv`` (the Megatron-LM 2021 and MegaScale rows of ``run.rows``),
``modern.csv`` (Llama 3 and DeepSeek-V3, ``modern.modern_rows``) and ``published.png``.

A plain study (one process, no sweep): the rows are closed-form predictions, seconds each,
computed by ``run.py``'s functions; its modelling lives there and in ``modern.py``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from experiments._output import finish_figure, parse_study_args, write_csv

FLAT = ("source", "model", "gpus", "tp", "pp", "v", "batch", "metric", "published", "predicted",
        "error")


def tables() -> tuple[list[dict], list[dict]]:
    """(the A100-era rows, today's rows), each with the columns of ``FLAT``."""
    from experiments.published.modern import modern_rows
    from experiments.published.run import A100, rows

    return ([{k: r[k] for k in FLAT} for r in rows(A100)],
            [{k: r[k] for k in FLAT} | {"gpu": r["gpu"], "cp": r["cp"], "ep": r["ep"]}
             for r in modern_rows()])


def plot(rows: list[dict], path: Path | None = None):
    """Predicted over published, one bar per row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    ratio = [float(r["predicted"]) / float(r["published"]) for r in rows]
    ax.bar(range(len(rows)), ratio, color=["C0" if "Megatron" in r["source"] else "C1"
                                           for r in rows])
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(range(len(rows)), [f"{r['model']} {r['gpus']} GPUs\n{r['metric']}"
                                     for r in rows], rotation=60, ha="right", fontsize=6)
    ax.set_ylabel("predicted / published")
    ax.set_title("Published training throughput: prediction against the papers")
    fig = finish_figure(fig, path)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out", required=True, type=Path, help="output directory")
    args = parse_study_args(p, argv)
    old, new = tables()
    write_csv(args.out / "published.csv", old)
    write_csv(args.out / "modern.csv", new)
    plot(old + new, args.out / "published.png")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
