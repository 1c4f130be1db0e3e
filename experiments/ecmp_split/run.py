"""ECMP split study: ``python -m experiments.ecmp_split.run [--full] -o DIR``.

Runs the sweeps ``collisions.yaml`` and ``iteration.yaml`` (``*_full.yaml`` with ``--full``)
through ``sweeps`` on a local Dask cluster (``--workers``, ``--scheduler``), resumable
into ``DIR/collisions`` and ``DIR/iteration``, then writes ``DIR/summary.csv``,
``DIR/iteration.csv`` and the figures. See README.md beside this file.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

import sweeps as sweep
from experiments._output import finish_figure, parse_study_args, write_csv
from experiments._sweeps import ok_rows, run_spec_files, study_parser
from experiments.ecmp_split.study import BinsForm

HERE = Path(__file__).resolve().parent
SPECS = {"collisions": "collisions", "iteration": "iteration"}


def run_specs(out: Path, full: bool, workers: int | None, scheduler: str | None,
              progress: bool = True) -> dict[str, list[sweep.PointResult]]:
    """Run (or resume) both sweeps; return their results by name."""
    return run_spec_files(HERE, SPECS, out, full, workers, scheduler, progress)


def _ok(results) -> list[dict]:
    """Flat rows (point + output) of the points that succeeded; failures are reported."""
    return ok_rows(results, "ecmp_split")


def summarize_collisions(rows: list[dict]) -> list[dict]:
    """Mean over seeds of each (fabric, pattern, qps, hashing): slowdown mean/p99/max."""
    return _over_seeds(rows, ("fabric", "pattern", "qps", "hashing"), lambda rs: {
        "mean_slowdown": _mean(rs, "mean"), "p99_slowdown": _mean(rs, "p99"),
        "max_slowdown": float(np.max([r["max"] for r in rs])),
        "collided_fraction": _mean(rs, "collided_fraction")})


def summarize_iteration(rows: list[dict]) -> list[dict]:
    """Mean over seeds of each (fabric, placement, qps, hashing): iteration and ECMP cost."""
    return _over_seeds(rows, ("fabric", "placement", "qps", "hashing"), lambda rs: {
        "gpus": rs[0]["gpus"], "iteration_s": _mean(rs, "iteration_s"),
        "iteration_nonblocking_s": _mean(rs, "iteration_nonblocking_s"),
        "ecmp_cost": _mean(rs, "ecmp_cost"), "mfu": _mean(rs, "mfu")})


def _over_seeds(rows: list[dict], keys: tuple[str, ...], stats) -> list[dict]:
    """One row per value of ``keys`` (sorted): the keys, the number of seeds and
    ``stats(rows of that value)``."""
    acc: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        acc[tuple(r[k] for k in keys)].append(r)
    return [{**dict(zip(keys, key, strict=True)), "seeds": len(rs), **stats(rs)}
            for key, rs in sorted(acc.items())]


def _mean(rows: list[dict], key: str) -> float:
    return float(np.mean([r[key] for r in rows]))


def closed_form() -> dict[str, float]:
    """Mean single-connection slowdown at the ToR uplink tier alone (``BinsForm``): 64 x 200G
    connections onto 32 x 400G uplinks (split) vs 32 x 400G onto 32 x 400G (not split)."""
    return {"split": BinsForm(n=64, m=32, c=2).mean_slowdown(),
            "nosplit": BinsForm(n=32, m=32, c=1).mean_slowdown()}


# ------------------------------------------------------------------------------ figures


def plot_qps(summary: list[dict], path: Path | None = None):
    """Mean DP-ring and single-connection slowdown vs QPs per connection."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, pattern in zip(axes, ("dp_ring", "pairs"), strict=True):
        for fab, color in (("split", "tab:blue"), ("nosplit", "tab:red")):
            for h, style in (("per_switch", "-o"), ("polarized", "--x")):
                rs = sorted((r for r in summary if (r["fabric"], r["pattern"], r["hashing"])
                             == (fab, pattern, h)), key=lambda r: r["qps"])
                if rs:
                    ax.plot([r["qps"] for r in rs], [r["mean_slowdown"] for r in rs], style,
                            color=color, label=f"{fab}, {h.replace('_', ' ')} seeds")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("QPs per connection (NCCL_IB_QPS_PER_CONNECTION)")
        ax.set_title({"dp_ring": "DP rings (slowest edge)",
                      "pairs": "single connections (permutation)"}[pattern])
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("mean collision slowdown (x non-blocking time)")
    axes[1].legend(fontsize=8)
    return finish_figure(fig, path)


def plot_cdf(results_rows: list[dict], path: Path | None = None):
    """CDF of per-connection slowdown (permutation, per-switch seeds), split vs not split."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    forms = closed_form()
    for fab, color in (("split", "tab:blue"), ("nosplit", "tab:red")):
        for q, style in ((1, "-"), (8, ":")):
            vals = np.sort(np.concatenate([r["slowdowns"] for r in results_rows
                                           if (r["fabric"], r["pattern"], r["qps"],
                                               r["hashing"]) == (fab, "pairs", q,
                                                                 "per_switch")] or [[]]))
            if vals.size:
                ax.step(vals, np.arange(1, vals.size + 1) / vals.size, style, color=color,
                        where="post", label=f"{fab}, {q} QP{'s' if q > 1 else ''}")
        ax.axvline(forms[fab], color=color, alpha=0.4, lw=4,
                   label=f"{fab}: closed form, ToR tier, 1 QP (mean)")
    ax.set_xlabel("collision slowdown of a connection (x non-blocking time)")
    ax.set_ylabel("fraction of connections (CDF)")
    ax.set_xlim(0.95, None)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return finish_figure(fig, path)


def plot_iteration(summary: list[dict], path: Path | None = None):
    """Left: iteration time over the same fabric made non-blocking (%), the cost of ECMP
    collisions; right: the iteration time itself. Per fabric, placement, hashing, QPs."""
    import matplotlib.pyplot as plt

    qs = sorted({1, max(r["qps"] for r in summary)})
    hashes = [h for h in ("per_switch", "polarized") if any(r["hashing"] == h for r in summary)]
    labels, cost, iters = [], defaultdict(list), defaultdict(list)
    for pl in ("contiguous", "scattered"):
        for h in hashes:
            labels.append(f"{pl}\n{h.replace('_', ' ')}")
            for fab in ("split", "nosplit"):
                for q in qs:
                    r = next((r for r in summary if (r["fabric"], r["placement"], r["hashing"],
                                                     r["qps"]) == (fab, pl, h, q)), None)
                    cost[(fab, q)].append(100 * r["ecmp_cost"] if r else np.nan)
                    iters[(fab, q)].append(r["iteration_s"] if r else np.nan)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    x = np.arange(len(labels))
    width = 0.8 / len(cost)
    for ax, data in zip(axes, (cost, iters), strict=True):
        for i, ((fab, q), vals) in enumerate(sorted(data.items())):
            ax.bar(x + (i - (len(data) - 1) / 2) * width, vals, width,
                   label=f"{fab}, {q} QP{'s' if q > 1 else ''}")
        ax.set_xticks(x, labels, fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylabel("iteration time over non-blocking fabric (%)")
    axes[0].set_yscale("symlog", linthresh=1)
    axes[1].set_ylabel("iteration time (s)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"GPT-3 175B, TP 8 PP 8, {summary[0]['gpus']} GPUs "
                 "(split: 200G NICs; nosplit: 400G NICs)", fontsize=10)
    return finish_figure(fig, path)


# ------------------------------------------------------------------------------ entry point


def main(argv: list[str] | None = None) -> int:
    p = study_parser(__doc__, "the 12,288-GPU fabric, more seeds")
    args = parse_study_args(p, argv)
    results = run_specs(args.out, args.full, args.workers, args.scheduler)
    coll_rows, it_rows = _ok(results["collisions"]), _ok(results["iteration"])
    summary, iteration = summarize_collisions(coll_rows), summarize_iteration(it_rows)
    write_csv(args.out / "summary.csv", summary)
    write_csv(args.out / "iteration.csv", iteration)
    plot_qps(summary, args.out / "slowdown_vs_qps.png")
    plot_cdf(coll_rows, args.out / "connection_cdf.png")
    plot_iteration(iteration, args.out / "iteration_cost.png")
    _print_findings(summary, iteration)
    return 0


def _print_findings(summary: list[dict], iteration: list[dict]) -> None:
    from tuner.cli._output import format_table

    keep = [r for r in summary if r["qps"] in (1, 8)]
    print(format_table(["fabric", "pattern", "qps", "hashing", "mean", "p99", "max"],
                       [[r["fabric"], r["pattern"], r["qps"], r["hashing"], r["mean_slowdown"],
                         r["p99_slowdown"], r["max_slowdown"]] for r in keep]))
    print()
    print(format_table(["fabric", "placement", "qps", "hashing", "iteration_s", "ecmp_cost_%"],
                       [[r["fabric"], r["placement"], r["qps"], r["hashing"], r["iteration_s"],
                         100 * r["ecmp_cost"]] for r in iteration]))
    cf = closed_form()
    print(f"\nclosed form, ToR tier, 1 QP: mean slowdown split {cf['split']:.3f}, "
          f"not split {cf['nosplit']:.3f}")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
