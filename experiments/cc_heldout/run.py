"""Held-out check of recommend's CC advice: ``python -m experiments.cc_heldout.run [--full | --tiny] -o DIR``.

Runs ``netsim recommend`` (the CLI, as an operator does) on three fabrics and keeps, from its
JSON, every CC setting the search took to all seeds: its in-sample effect per scenario and, for
the in-sample best, its held-out effect, with 90% intervals. Writes ``DIR/cc_heldout.csv`` (a row
per setting x scenario), ``DIR/table.md`` (the table docs/recommend.md shows) and
``DIR/cc_heldout.png``. Small (default): the three fabrics at recommend's defaults; ``--full``:
10 paired seeds per scenario instead of 5 (``--cc-samples``); ``--tiny`` (CI's size): the
200G leaf-spine alone. Each fabric is a point of the sweep
runner (``DIR/sweep/results.jsonl``): an interrupted run resumes with the fabrics not yet done;
``--workers`` goes to recommend, which runs its own search on Dask. See README.md beside this
file.
"""

from __future__ import annotations

import csv
import functools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: (fabric, what the case stands for, recommend's job flags)
CASES = (
    ("megascale", "MegaScale CLOS, 400G/200G, 1:1 (the README's job)", ["--job", "gpt3-175b"]),
    (str(HERE / "clos21.yaml"), "2:1 CLOS at 200G (issue #26)",
     ["--model", "gpt3-13b", "--gpu", "h100", "--tp", "8", "--pp", "2", "--dp", "16",
      "--global-batch", "256", "--micro-batch", "1"]),
    (str(HERE / "leaf_spine_200g.yaml"), "200G leaf-spine, 2:1",
     ["--model", "gpt3-13b", "--gpu", "h100", "--tp", "8", "--pp", "2", "--dp", "4",
      "--global-batch", "256", "--micro-batch", "1"]),
)
METRICS = ("goodput", "p99_fct", "pause")
COLUMNS = ("fabric", "setting", "decision", "sample", "scenario", "seeds",
           *(f"{m}_{k}" for m in METRICS for k in ("ratio", "ratio_lo", "ratio_hi")),
           "goodput_default", "goodput")


def recommend_cc(fabric: str, job: list[str], out: Path, extra: list[str]) -> dict:
    """``netsim recommend --json`` on one case; its ``details.cc``."""
    cmd = [sys.executable, "-m", "tuner.cli", "recommend", "--fabric", fabric, *job,
           "-o", str(out), "--json", *extra]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)[
        "details"]["cc"]


def moved(params: dict, default: dict) -> str:
    return ", ".join(f"{k} {default[k]:g} -> {v:g}" for k, v in params.items()
                     if v != default[k]) or "none (defaults)"


def rows_of(name: str, cc: dict) -> list[dict]:
    """A row per (setting taken to all seeds) x scenario, in sample and held out."""
    if not cc["scenarios"]:
        return [{"fabric": name, "setting": "none", "decision": cc["status"], "sample": "",
                 "scenario": "", "seeds": 0}]
    out = []
    refused = {json.dumps(r["params"], sort_keys=True) for r in cc["refused"]}
    for s in cc["evaluated"]:
        if not s.get("effects") or s["params"] == cc["default"]:
            continue
        key = json.dumps(s["params"], sort_keys=True)
        held = cc["held_out_effects"] if (key in refused or s["params"] == cc["chosen"]) and \
            s["params"] != cc["default"] else []
        for sample, effects in (("in sample", s["effects"]), ("held out", held)):
            for e in effects:
                out.append({"fabric": name, "setting": moved(s["params"], cc["default"]),
                            "decision": s["verdict"], "sample": sample, **e})
    return out


def table(rows: list[dict], cases=CASES) -> str:
    """Markdown: per fabric and setting, the worst scenario of each sample with its interval."""
    lines = ["| fabric | setting | decision | in sample: worst goodput | in sample: worst PFC "
             "pause | held out: worst goodput | held out: worst PFC pause |",
             "|---|---|---|---|---|---|---|"]
    for _, label, _ in cases:
        mine = [r for r in rows if r["fabric"] == label]
        for setting in dict.fromkeys(r["setting"] for r in mine):
            rs = [r for r in mine if r["setting"] == setting]
            cells = [_worst(rs, s, m) for s in ("in sample", "held out")
                     for m in ("goodput", "pause")]
            lines.append(f"| {label} | {setting} | {_short(rs[0]['decision'])} | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _worst(rows: list[dict], sample: str, metric: str) -> str:
    rs = [r for r in rows if r["sample"] == sample and r.get(f"{metric}_ratio") not in (None, "")]
    if not rs:
        return "not run"
    sign = -1 if metric == "goodput" else 1
    r = max(rs, key=lambda r: sign * float(r[f"{metric}_ratio"]))
    return (f"x{float(r[f'{metric}_ratio']):.3f} [{float(r[f'{metric}_ratio_lo']):.3f}, "
            f"{float(r[f'{metric}_ratio_hi']):.3f}] ({_scenario(r['scenario'])}, "
            f"{r['seeds']} seeds)")


def _scenario(text: str) -> str:
    unit = "64 B" if "in 64 B units" in text else "bytes"
    head = text.split(" [")[0].replace("held out: ", "")
    return f"{head.split(' (')[0].split(', offered')[0]}, {unit}"


def _short(decision: str) -> str:
    """The decision without its figures (the cells beside it carry them)."""
    head, _, rest = decision.partition(": ")
    if head in ("not shown no worse", "refused held out"):
        return f"{head}: {rest.split(' x')[0]}"
    return head.split(" (")[0]


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def plot(rows: list[dict], path: Path) -> None:
    """Goodput ratio with its 90% interval per scenario, in sample and held out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rs = [r for r in rows if r.get("goodput_ratio") not in (None, "")]
    fig, ax = plt.subplots(figsize=(12, 0.32 * len(rs) + 1.2))
    for i, r in enumerate(rs):
        c = "tab:blue" if r["sample"] == "in sample" else "tab:red"
        g, lo, hi = (float(r[k]) for k in ("goodput_ratio", "goodput_ratio_lo", "goodput_ratio_hi"))
        ax.errorbar(g, i, xerr=[[g - lo], [hi - g]], fmt="o", color=c, ms=3)
    ax.set_yticks(range(len(rs)))
    ax.set_yticklabels([f"{r['setting']} | {_scenario(r['scenario'])}" for r in rs],
                       fontsize=6)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.axvline(0.98, color="grey", ls=":", lw=0.8)
    ax.set_xlabel("goodput, setting / defaults (blue: in sample, red: held out; 90% interval)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def case_point(point: dict, extra: tuple[str, ...] = ()) -> dict:
    """One sweep point: recommend on case ``point["case"]`` of ``CASES`` (10 paired seeds when
    ``point["full"]``); its rows."""
    fabric, label, job = CASES[int(point["case"])]
    args = list(extra) + (["--cc-samples", "10"] if point["full"] else [])
    with tempfile.TemporaryDirectory() as tmp:  # recommend's own files are not this study's
        return {"rows": rows_of(label, recommend_cc(fabric, job, Path(tmp), args))}


def run(out: Path, full: bool = False, cases=CASES, extra: list[str] = ()) -> list[dict]:
    """Every case through recommend, a point each of :func:`sweeps.run_points` (resumed from
    ``out/sweep``; recommend itself takes ``extra``, e.g. its ``--workers``); the CSV, table
    and figure in *out*."""
    from experiments._sweeps import ok_outputs
    from sweeps import run_points

    out.mkdir(parents=True, exist_ok=True)
    points = [{"case": CASES.index(c), "full": full} for c in cases]
    fn = functools.partial(case_point, extra=tuple(extra))
    res = run_points(fn, points, out_dir=out / "sweep", workers=0, progress=False)
    rows = [r for o in ok_outputs(res, "cc_heldout") for r in o["rows"]]
    write_csv(rows, out / "cc_heldout.csv")
    (out / "table.md").write_text(table(rows, cases))
    plot(rows, out / "cc_heldout.png")
    return rows


def main(argv=None) -> int:
    from experiments._sweeps import study_parser

    p = study_parser(__doc__, "10 paired seeds per scenario instead of 5")
    p.add_argument("--tiny", action="store_true", help="CI's size: the 200G leaf-spine alone")
    args = p.parse_args(argv)
    if args.tiny and args.full:
        p.error("--tiny and --full exclude each other")
    extra = [] if args.workers is None else ["--workers", str(args.workers)]
    run(args.out, args.full, CASES[2:] if args.tiny else CASES, extra=extra)
    print((args.out / "table.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
