"""The numbers of the ecmp_split README and its ``docs/experiments.md`` entry, from
``results/summary.csv`` and ``results/iteration.csv``
(``python -m experiments.results --render --study ecmp_split``)."""

from __future__ import annotations

from pathlib import Path

from experiments.compare import read_csv
from experiments.ecmp_split.study import BinsForm
from experiments.render import markdown_table

PATTERNS = (("dp_ring", "DP rings"), ("pairs", "single connections"),
            ("alltoall", "all-to-all (64 servers)"))
HASHING = (("per_switch", "per-switch seeds"), ("polarized", "one seed everywhere"))
COLUMNS = (("split", "1"), ("nosplit", "1"), ("split", "8"), ("nosplit", "8"))


def _slowdown(summary: list[dict], fabric: str, pattern: str, qps: str, hashing: str) -> float:
    return next(float(r["mean_slowdown"]) for r in summary if (
        r["fabric"], r["pattern"], r["qps"], r["hashing"]) == (fabric, pattern, qps, hashing))


def table(summary: list[dict]) -> str:
    rows = [[f"{label}, {hlabel}"] + [f"{_slowdown(summary, f, p, q, h):.3g}" for f, q in COLUMNS]
            for h, hlabel in HASHING for p, label in PATTERNS]
    return markdown_table(["mean slowdown", "split, 1 QP", "400G, 1 QP", "split, 8 QPs",
                           "400G, 8 QPs"], rows, "lrrrr")


def _cost(iteration: list[dict], fabric: str, placement: str, qps: str, hashing: str) -> str:
    r = next(r for r in iteration if (r["fabric"], r["placement"], r["qps"], r["hashing"])
             == (fabric, placement, qps, hashing))
    return f"{100 * float(r['ecmp_cost']):.1f}%"


def iteration_costs(iteration: list[dict]) -> str:
    """ECMP cost over the non-blocking prediction, 1 QP / 8 QPs, per placement and fabric."""
    cases = (("contiguous placement", "contiguous", "per_switch"),
             ("scattered", "scattered", "per_switch"),
             ("one hash seed everywhere and scattered", "scattered", "polarized"))
    return "; ".join(
        f"{label} " + " and ".join(
            f"{_cost(iteration, f, pl, '1', h)} / {_cost(iteration, f, pl, '8', h)} ({name})"
            for f, name in (("split", "split"), ("nosplit", "400G")))
        for label, pl, h in cases)


def values(results: Path) -> dict[str, str]:
    summary = read_csv(results / "summary.csv")
    iteration = read_csv(results / "iteration.csv")

    def s(f, p, q="1", h="per_switch"):
        return f"{_slowdown(summary, f, p, q, h):.3g}x"

    return {
        "ecmp_split.table": table(summary),
        "ecmp_split.pairs": f"{s('nosplit', 'pairs')} to {s('split', 'pairs')}",
        "ecmp_split.pairs_split_400g": f"{s('split', 'pairs')} on average against "
                                       f"{s('nosplit', 'pairs')}",
        "ecmp_split.pairs_400g_to_split": f"{s('nosplit', 'pairs')} to {s('split', 'pairs')}",
        "ecmp_split.rings_split_400g": f"{s('split', 'dp_ring')} against {s('nosplit', 'dp_ring')}",
        "ecmp_split.rings_8qps": f"{s('split', 'dp_ring', '8')} vs {s('nosplit', 'dp_ring', '8')}",
        "ecmp_split.closed_form": (f"{BinsForm(n=64, m=32, c=2).mean_slowdown():.3g} (split: 64 x "
                                   f"200G onto 32 x 400G) and "
                                   f"{BinsForm(n=32, m=32, c=1).mean_slowdown():.3g} (400G: 32 "
                                   "onto 32)"),
        "ecmp_split.iteration": iteration_costs(iteration),
    }
