"""Counts (not times) of the max-min kernel's rounds on recommend's heaviest allocation: why an
incremental level pass would not pay, and where the stop rule ends the filling.

Run: ``python benchmarks/maxmin_rounds.py [--dp 192] [--qps 4] [--seed 3] [--csv FILE]``;
``--render DOC CSV`` puts a kept CSV's totals between DOC's ``maxmin-rounds`` markers.

It predicts GPT-3 175B on megascale (``--dp 192``: 12,288 GPUs) with ``--qps`` QPs per
connection on the topology-aware placement, as the QP step of ``recommend`` does, keeps the
largest incidence the max-min kernel is given (a pipeline send round: one commodity per QP)
with its stop rule (``predict`` reads the slowest pair of each stage:
``netsim.flow.maxmin.Slowest``), and replays its whole progressive filling round by round in
numpy (the rounds of ``netsim.flow.maxmin.maxmin_rates``). Per round it counts the live
entries a full level pass visits, the flows it freezes, what an incremental pass would have
to revisit (the links whose share the freezes change, the live flows on them: their level
may change, and the live entries of those flows' links: their minimum level may change), and
whether the stop rule is settled after the round. One row per round goes to ``--csv``; the
totals are printed.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np


def capture(dp: int, qps: int, seed: int) -> dict:
    """The largest incidence the kernel gets in one ``predict`` (its arrays)."""
    import netsim.flow.maxmin_fast as mf
    from topologies import load_fabric
    from tuner.jobs import load_job
    from tuner.placement import iteration_scorer, place

    kept: dict = {}
    fill = mf._fill

    def keep(*a):
        if len(a[0]) > len(kept.get("f_ptr", ())):
            kept.update(f_ptr=a[0].copy(), e_link=a[1].copy(), e_weight=a[2].copy(),
                        cap=a[5].copy(), active=a[6].copy(), ceil=a[7].copy(), tol=a[8],
                        rule=tuple(x.copy() for x in a[-5:]))
        return fill(*a)

    first = mf.first_round_rates
    mf._fill = keep
    mf.first_round_rates = lambda *a: None  # every allocation through the kernel
    try:
        fabric, job = load_fabric("megascale"), load_job("gpt3-175b", dp=dp)
        iteration_scorer(fabric, job, qps=qps, seed=seed)(place(fabric, job, "topo").gpu_of_rank)
    finally:
        mf._fill, mf.first_round_rates = fill, first
    return kept


def rounds(inc: dict) -> list[dict]:
    """The filling's rounds with the counts of a full and of an incremental level pass."""
    f_ptr, el, ew, cap, tol = inc["f_ptr"], inc["e_link"], inc["e_weight"], inc["cap"], inc["tol"]
    nf, nl = len(f_ptr) - 1, len(cap)
    ef = np.repeat(np.arange(nf), np.diff(f_ptr))
    alive, residual, out = inc["active"].copy(), cap.copy(), []
    rate = np.zeros(nf)
    while alive.any():
        keep = alive[ef]
        e_f, e_l, e_w = ef[keep], el[keep], ew[keep]
        load = np.bincount(e_l, weights=e_w, minlength=nl)
        share = np.where(load > 0, np.maximum(residual, 0) / np.where(load > 0, load, 1), np.inf)
        m = np.full(nf, np.inf)
        np.minimum.at(m, e_f, share[e_l])
        m = np.minimum(m, inc["ceil"])
        lmin = np.full(nl, np.inf)
        np.minimum.at(lmin, e_l, m[e_f])
        hit = np.zeros(nf, bool)
        hit[e_f[((load > 0) & (share <= lmin * tol))[e_l]]] = True
        hit |= alive & (inc["ceil"] <= m * tol)
        hit &= alive
        changed = np.zeros(nl, bool)  # links whose share the freezes move
        changed[e_l[hit[e_f]]] = True
        touched = np.zeros(nf, bool)  # live flows on them: their level may move
        touched[e_f[changed[e_l]]] = True
        touched &= alive & ~hit
        relinks = np.zeros(nl, bool)  # their links: the minimum level may move
        relinks[e_l[touched[e_f]]] = True
        rate[hit] = m[hit]
        alive &= ~hit
        out.append({"round": len(out), "live_entries": int(len(e_f)),
                    "frozen_flows": int(hit.sum()), "links_changed": int(changed.sum()),
                    "incremental_entries": int(touched[e_f].sum() + relinks[e_l].sum()),
                    "rule_settled": int(_settled(inc["rule"], inc["active"] & ~alive, alive, rate,
                                                  m))})
        sel = hit[e_f]
        residual -= np.bincount(e_l[sel], weights=e_w[sel] * m[e_f[sel]], minlength=nl)
    return out


def _settled(rule, frozen, alive, rate, level) -> bool:
    """The stop rule after a round (the numpy loop's test, ``netsim.flow.maxmin._settled``)."""
    from netsim.flow import maxmin

    return len(rule[0]) > 0 and maxmin._settled(maxmin.Slowest(*rule), frozen, alive, rate,
                                                level)


def totals(rows: list[dict]) -> str:
    """The sentence the docs quote, from one round per row."""
    full = sum(int(r["live_entries"]) for r in rows)
    incr = sum(int(r["incremental_entries"]) for r in rows)
    text = (f"{len(rows)} rounds; a full level pass visits {full / 1e6:.0f} M entries over the "
            f"rounds, an incremental one {incr / 1e6:.0f} M ({incr / full:.2f}x)")
    settled = [int(r["round"]) for r in rows if int(r.get("rule_settled", 0))]
    if settled:
        k = settled[0]
        upto = sum(int(r["live_entries"]) for r in rows[:k + 1])
        text += (f". The stop rule is settled after round {k + 1} of {len(rows)}: "
                 f"{upto / 1e6:.1f} M entries visited, {upto / full:.1%} of the full filling")
    return text


def render(doc: Path, source: Path) -> None:
    from _results import render_between

    with open(source, newline="") as fh:
        rows = list(csv.DictReader(fh))
    render_between(doc, totals(rows), "<!-- maxmin-rounds:begin -->",
                   "<!-- maxmin-rounds:end -->")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dp", type=int, default=192)
    ap.add_argument("--qps", type=int, default=4)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--csv", type=Path, default=None)
    ap.add_argument("--render", nargs=2, type=Path, metavar=("DOC", "CSV"), default=None)
    a = ap.parse_args()
    if a.render:
        return render(*a.render)
    inc = capture(a.dp, a.qps, a.seed)
    rows = rounds(inc)
    if a.csv:
        a.csv.parent.mkdir(parents=True, exist_ok=True)
        with open(a.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    print(f"{len(inc['f_ptr']) - 1:,} commodities, {len(inc['e_link']):,} entries, "
          f"{totals(rows)}")


if __name__ == "__main__":
    main()
