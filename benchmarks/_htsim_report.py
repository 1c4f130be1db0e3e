"""The CSV of ``bench_htsim.py`` (one row per run) and the tables rendered from it into
``docs/performance.md`` (between the ``htsim28`` markers)."""

from __future__ import annotations

import statistics
from pathlib import Path

from _results import read_meta_csv, render_between, write_meta_csv

CSV_DEFAULT = Path(__file__).resolve().parent / "results" / "htsim28.csv"
BEGIN, END = "<!-- htsim28:begin -->", "<!-- htsim28:end -->"
COLS = ["hosts", "contender", "rep", "build", "cpu_s", "user_s", "sys_s", "wall_s", "maxrss_mib",
        "data_pkts", "events", "flows_done", "makespan_us", "mean_fct_us", "pfc_pauses",
        "pfc_refreshes", "output_bytes", "q15_same", "load1", "engine_file"]
REFERENCE = "htsim -q 1000"


def write_csv(path: Path, rows: list[dict], meta: dict) -> None:
    write_meta_csv(path, rows, meta, COLS)


def read_csv(path: Path) -> tuple[list[dict], dict]:
    rows, meta = read_meta_csv(path)
    return [{k: _num(v) for k, v in r.items()} for r in rows], meta


def _num(v: str):
    if v in ("", "None"):
        return None
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v


def summarise(rows: list[dict]) -> list[dict]:
    """Per fabric size and contender: min / median CPU, rate and ratio to htsim, memory, FCTs."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["hosts"], r["contender"]), []).append(r)
    out = []
    for (hosts, name), runs in groups.items():
        cpu = [r["cpu_s"] for r in runs]
        first = runs[0]
        out.append({"hosts": hosts, "contender": name, "build": first["build"], "n": len(runs),
                    "cpu_min": min(cpu), "cpu_median": statistics.median(cpu),
                    "sys_median": statistics.median(r["sys_s"] for r in runs),
                    "rss_max": max(r["maxrss_mib"] for r in runs), "data_pkts": first["data_pkts"],
                    "events": first["events"], "flows_done": first["flows_done"],
                    "makespan_us": first["makespan_us"], "mean_fct_us": first["mean_fct_us"],
                    "pauses": first["pfc_pauses"], "refreshes": first["pfc_refreshes"],
                    "load_min": min(r["load1"] for r in runs),
                    "load_max": max(r["load1"] for r in runs), "extra": first})
    ref = {s["hosts"]: s for s in out if s["contender"] == REFERENCE}
    for s in out:
        h = ref.get(s["hosts"])
        sim = bool(s["data_pkts"])  # not the start-up alone: a rate, and a ratio to htsim's
        s["rate_median"] = s["data_pkts"] / s["cpu_median"] if sim else None
        s["ratio_min"] = h["cpu_min"] / s["cpu_min"] if h and sim else None
        s["ratio_median"] = h["cpu_median"] / s["cpu_median"] if h and sim else None
        s["rss_ratio"] = s["rss_max"] / h["rss_max"] if h else None
    return out


def _f(v, fmt: str = ",.0f") -> str:
    return "-" if v is None else format(v, fmt)


def render(summary: list[dict], meta: dict) -> str:
    lines = [f"Tree `{meta['tree']}` ({meta['build']} engine build), {meta['date']}, "
             f"{meta['reps']} interleaved rounds, permutation of {meta['size']} per host, "
             f"{meta['cpus']} cores; `{meta['htsim']}`. Rate = data packets per CPU second of the "
             "whole process (median CPU); ratios are htsim's CPU over the contender's (above 1: "
             "faster than htsim).", "",
             "| hosts | contender | runs | CPU s min | CPU s median (sys) | data pkts / CPU s | "
             "x htsim (min) | x htsim (median) | peak RSS MiB (x htsim) | events / data pkt | "
             "PAUSEs (refreshes) | makespan us | mean FCT us | load (1 min) |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|"]
    for s in sorted(summary, key=lambda s: (s["hosts"], s["contender"])):
        epp = s["events"] / s["data_pkts"] if s["events"] else None
        lines.append(
            f"| {s['hosts']:,} | {s['contender']} ({s['build']}) | {s['n']} | {s['cpu_min']:.2f} | "
            f"{s['cpu_median']:.2f} ({s['sys_median']:.2f}) | {_f(s['rate_median'])} | "
            f"{_f(s['ratio_min'], '.2f')} | {_f(s['ratio_median'], '.2f')} | "
            f"{s['rss_max']:.0f} ({_f(s['rss_ratio'], '.2f')}) | {_f(epp, '.2f')} | "
            f"{_pauses(s)} | "
            f"{_f(s['makespan_us'], '.1f')} | {_f(s['mean_fct_us'], '.1f')} | "
            f"{s['load_min']:.1f}-{s['load_max']:.1f} |")
    lines += ["", *_q15_lines(summary)]
    return "\n".join(lines)


def _pauses(s: dict) -> str:
    if s["pauses"] is None:
        return "-"
    return f"{s['pauses']:,} ({s['refreshes']:,})"


def _q15_lines(summary: list[dict]) -> list[str]:
    out = []
    for s in sorted(summary, key=lambda s: s["hosts"]):
        if s["contender"] != "htsim -q 15":
            continue
        same = "the same" if s["extra"]["q15_same"] in (True, "True") else "NOT the same"
        out.append(f"* {s['hosts']:,} hosts: htsim `-q 15` printed "
                   f"{s['extra']['output_bytes'] / 1e6:,.1f} MB and finished every flow at "
                   f"{same} time as `-q 1000`; it took {s['cpu_min']:.2f} CPU s.")
    return out


def render_into(doc: Path, text: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace what lies between the *begin* and *end* markers of *doc* with *text*."""
    render_between(doc, text, begin, end)
