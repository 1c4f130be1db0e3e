"""Retransmit study: ``python -m experiments.retransmit.run [--full] -o DIR``.

Sweeps ``closed_form.yaml`` (every setting x flap length, closed form) and ``packet.yaml``
(the short flaps through the packet engine) with ``sweeps`` (``*_full.yaml`` with
``--full``), resumable into ``DIR/closed_form`` and ``DIR/packet``; writes
``DIR/crosscheck.csv``, ``DIR/settings.csv`` and the figures. See README.md beside this file.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from experiments._output import finish_figure, parse_study_args, write_csv
from experiments._sweeps import ok_rows, run_spec_files, study_parser
from experiments.retransmit.study import job_survival

HERE = Path(__file__).resolve().parent
SPECS = ("closed_form", "packet")
KEYS = ("timeout", "retry_cnt", "flap_s", "adaptive")
#: flap lengths of the job-survival table: lognormal, an assumption (MegaScale 6.3 only says
#: "usually within several seconds"); change with --flap-median/--flap-p99/--flaps-per-job
FLAP_MEDIAN_S, FLAP_P99_S, FLAPS_PER_JOB = 1.0, 6.0, 10


def run_specs(out: Path, full: bool, workers: int | None, scheduler: str | None,
              progress: bool = True) -> dict[str, list[dict]]:
    """Run (or resume) both sweeps; rows of point + output of the points that succeeded."""
    res = run_spec_files(HERE, SPECS, out, full, workers, scheduler, progress)
    return {name: _ok(r) for name, r in res.items()}


def _ok(results) -> list[dict]:
    return ok_rows(results, "retransmit")


def crosscheck(closed: list[dict], packet: list[dict]) -> list[dict]:
    """Closed form against the packet engine on every point both ran."""
    by_key = {tuple(r[k] for k in KEYS): r for r in closed}
    out = []
    for p in sorted(packet, key=lambda r: tuple(r[k] for k in KEYS)):
        c = by_key.get(tuple(p[k] for k in KEYS))
        if c is None:
            continue
        both = c["stall_s"] is not None and p["stall_s"] is not None
        out.append({**{k: p[k] for k in KEYS},
                    "closed_survives": c["qp_survives"], "packet_job_survives": p["job_survives"],
                    "packet_qp_survival": p["qp_survival"],
                    "agree": c["qp_survives"] == p["job_survives"],
                    "closed_stall_s": c["stall_s"], "packet_stall_s": p["stall_s"],
                    "stall_ratio": p["stall_s"] / c["stall_s"] if both else None,
                    "closed_detection_s": c["detection_s"],
                    "packet_detection_s": p["detection_s"]})
    return out


def settings_table(closed: list[dict], median_s: float, p99_s: float,
                   flaps: int) -> list[dict]:
    """Per (timeout, retry_cnt, adaptive): window, detection, job survival under the flap
    model, and the largest stall among survived flaps of the grid."""
    groups: dict[tuple, list[dict]] = {}
    for r in closed:
        groups.setdefault((r["timeout"], r["retry_cnt"], r["adaptive"]), []).append(r)
    out = []
    for (t, n, a), rs in sorted(groups.items()):
        window = rs[0]["survivable_flap_s"]
        stalls = {r["flap_s"]: r["stall_s"] for r in rs}
        out.append({"timeout": t, "retry_cnt": n, "adaptive": a, "timeout_s": rs[0]["timeout_s"],
                    "survivable_flap_s": window, "detection_s": rs[0]["detection_s"],
                    "job_survival": job_survival(window, median_s, p99_s, flaps),
                    "stall_1s_flap_s": stalls.get(1.0)})
    return out


# ------------------------------------------------------------------------------ figures


def plot_stall(closed: list[dict], packet: list[dict], path: Path | None = None,
               settings=((14, 3), (18, 7), (20, 7))):
    """Stall vs flap length: closed form (lines) and packet engine (markers), adaptive
    retransmission off and on; a flap the QP does not survive is drawn at the top."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    colors = ("tab:blue", "tab:orange", "tab:green", "tab:red")
    dead = 2 * max(r["detection_s"] for r in closed)
    for ax, adaptive in zip(axes, (False, True), strict=True):
        for (t, n), color in zip(settings, colors, strict=False):
            cs = sorted((r for r in closed if (r["timeout"], r["retry_cnt"], r["adaptive"])
                         == (t, n, adaptive)), key=lambda r: r["flap_s"])
            if not cs:
                continue
            ax.plot([r["flap_s"] for r in cs],
                    [r["stall_s"] if r["stall_s"] is not None else dead for r in cs],
                    "-", color=color, label=f"closed form, TIMEOUT={t} RETRY_CNT={n}")
            ps = [r for r in packet if (r["timeout"], r["retry_cnt"], r["adaptive"])
                  == (t, n, adaptive)]
            if ps:
                ax.plot([r["flap_s"] for r in ps],
                        [r["stall_s"] if r["stall_s"] is not None else dead for r in ps],
                        "o", mfc="none", color=color, ms=8, label="packet engine")
        ax.axhline(dead, color="k", lw=0.8, ls=":")
        ax.text(1e-3, dead * 1.1, "QP error (job restarts)", fontsize=8)
        ax.plot([1e-3, 30], [1e-3, 30], color="gray", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("flap length (s)")
        ax.set_title(f"adaptive retransmission {'on' if adaptive else 'off'}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("stall: flap start to recovery (s)")
    axes[0].legend(fontsize=7, loc="lower right")
    return finish_figure(fig, path)


def plot_tradeoff(settings: list[dict], path: Path | None = None):
    """Survivable flap vs dead-link detection time of every (timeout, retry count), coloured
    by job survival under the flap model."""
    import matplotlib.pyplot as plt

    rs = [r for r in settings if not r["adaptive"]]
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    sc = ax.scatter([r["survivable_flap_s"] for r in rs], [r["detection_s"] for r in rs],
                    c=[r["job_survival"] for r in rs], cmap="viridis", vmin=0, vmax=1,
                    s=[15 + 8 * r["retry_cnt"] for r in rs])
    for r in rs:
        if r["retry_cnt"] == max(x["retry_cnt"] for x in rs):
            ax.annotate(str(r["timeout"]), (r["survivable_flap_s"], r["detection_s"]),
                        fontsize=7, xytext=(3, -8), textcoords="offset points")
    fig.colorbar(sc, label="job survival (lognormal flaps, see README)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("longest flap a QP survives (s)")
    ax.set_ylabel("dead-link detection time (s)")
    ax.set_title("NCCL_IB_TIMEOUT (labels) x NCCL_IB_RETRY_CNT (size)")
    ax.grid(True, which="both", alpha=0.3)
    return finish_figure(fig, path)


# ------------------------------------------------------------------------------ entry point


def main(argv: list[str] | None = None) -> int:
    p = study_parser(__doc__, "the finer grid, 8 QPs")
    p.add_argument("--flap-median", type=float, default=FLAP_MEDIAN_S, help="seconds")
    p.add_argument("--flap-p99", type=float, default=FLAP_P99_S, help="seconds")
    p.add_argument("--flaps-per-job", type=int, default=FLAPS_PER_JOB)
    args = parse_study_args(p, argv)
    rows = run_specs(args.out, args.full, args.workers, args.scheduler)
    closed, packet = rows["closed_form"], rows["packet"]
    check = crosscheck(closed, packet)
    table = settings_table(closed, args.flap_median, args.flap_p99, args.flaps_per_job)
    write_csv(args.out / "crosscheck.csv", check)
    write_csv(args.out / "settings.csv", table)
    plot_stall(closed, packet, args.out / "stall_vs_flap.png")
    plot_tradeoff(table, args.out / "survival_vs_detection.png")
    _print_findings(check, table)
    return 0


def _print_findings(check: list[dict], table: list[dict]) -> None:
    from tuner.cli._output import format_table

    agree = sum(r["agree"] for r in check)
    ratios = [r["stall_ratio"] for r in check if r["stall_ratio"] is not None]
    fixed = [r for r in ratios if r is not None]
    print(f"cross-check: survival agrees on {agree}/{len(check)} points; packet/closed stall "
          f"ratio median {np.median(fixed):.3f}, range {min(fixed):.3f}..{max(fixed):.3f}"
          if fixed else "cross-check: no common survived point")
    for r in check:
        if not r["agree"]:
            print(f"  disagree: {({k: r[k] for k in KEYS})} closed={r['closed_survives']} "
                  f"packet QP survival={r['packet_qp_survival']}")
    print()
    print(format_table(["timeout", "retry", "adaptive", "T_s", "window_s", "detect_s",
                        "job_survival", "stall@1s"],
                       [[r["timeout"], r["retry_cnt"], r["adaptive"], r["timeout_s"],
                         r["survivable_flap_s"], r["detection_s"], r["job_survival"],
                         r["stall_1s_flap_s"] if r["stall_1s_flap_s"] is not None else math.inf]
                        for r in table if r["retry_cnt"] in (1, 7)]))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
