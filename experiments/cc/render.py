"""The numbers of the CC README and its ``docs/experiments.md`` entry, from
``results/summary.csv`` (``python -m experiments.results --render --study cc``)."""

from __future__ import annotations

from pathlib import Path

from experiments.compare import read_csv
from experiments.render import markdown_table


def _by(summary: list[dict]) -> dict[tuple[str, str], dict]:
    return {(r["scenario"], r["cc"]): r for r in summary}


def _num(x: str, digits: int) -> str:
    v = float(x)
    return str(int(v)) if v == int(v) else f"{v:.{digits}f}"


def table(summary: list[dict]) -> str:
    rows = [[r["scenario"], r["cc"], _num(r["pfc_pauses"], 1), _num(r["paused_us"], 1),
             _num(r["hol_victims"], 1), f"{float(r['goodput']):.3f}",
             f"{float(r['fct_p50_us']):.1f}", f"{float(r['fct_p99_us']):.1f}"] for r in summary]
    return markdown_table(["pattern", "CC", "PFC pauses", "time paused (us)", "HoL victims",
                           "goodput", "p50 FCT (us)", "p99 FCT (us)"], rows, "llrrrrrr")


def _goodput(by: dict, kind: str, cc: str) -> float:
    return float(by[(kind, cc)]["goodput"])


def hybrid_vs(summary: list[dict], other: str, gains: bool) -> list[tuple[str, float, float]]:
    """``(pattern, hybrid goodput, other's goodput)`` where the hybrid does better (``gains``)
    or worse than ``other``."""
    by = _by(summary)
    kinds = dict.fromkeys(r["scenario"] for r in summary)
    pairs = [(k, _goodput(by, k, "hybrid"), _goodput(by, k, other)) for k in kinds]
    return [p for p in pairs if (p[1] > p[2]) == gains and p[1] != p[2]]


def _losses(summary: list[dict]) -> list[float]:
    return [100 * (o - h) / o for _, h, o in hybrid_vs(summary, "swift", gains=False)]


def values(results: Path) -> dict[str, str]:
    summary = read_csv(results / "summary.csv")
    by = _by(summary)
    paused = [r for r in summary if float(r["pfc_pauses"]) > 0]
    losses = _losses(summary)
    return {
        "cc.table": table(summary),
        "cc.paused": "; ".join(f"{r['scenario']} under {r['cc']}: {_num(r['pfc_pauses'], 1)} "
                               f"PAUSE frames, {float(r['paused_us']):.1f} us paused in all"
                               for r in paused) or "none",
        "cc.hybrid_gains_over_dcqcn": ", ".join(
            f"{h:.2f} vs {o:.2f} on {k}" for k, h, o in hybrid_vs(summary, "dcqcn", True)),
        "cc.hybrid_loss_vs_swift": ", ".join(
            f"{100 * (o - h) / o:.0f}% on {k}" for k, h, o in hybrid_vs(summary, "swift", False)),
        "cc.hybrid_loss_range": (f"{min(losses):.0f}-{max(losses):.0f}%" if losses else "nothing"),
        "cc.incast16_swift_hybrid": (f"{_goodput(by, 'incast16', 'swift'):.3f} vs "
                                     f"{_goodput(by, 'incast16', 'hybrid'):.3f}"),
    }
