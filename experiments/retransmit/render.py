"""The numbers of the retransmit README, computed from ``results/crosscheck.csv`` and
``results/settings.csv`` (``python -m experiments.results --render --study retransmit``)."""

from __future__ import annotations

from pathlib import Path

from experiments.compare import read_csv


def fmt_s(x: float) -> str:
    """Seconds with three significant digits, in ms below one second."""
    return f"{x * 1e3:.3g} ms" if x < 1 else f"{x:.3g} s"


def _span(xs: list[float], fmt=fmt_s) -> str:
    lo, hi = fmt(min(xs)), fmt(max(xs))
    if lo == hi:
        return lo
    unit = lo.rpartition(" ")[2]
    return f"{lo.rpartition(' ')[0]}-{hi}" if " " in lo and hi.endswith(" " + unit) else f"{lo}-{hi}"


def _f(r: dict, col: str) -> float | None:
    return float(r[col]) if r[col] not in ("", "None") else None


def _stalls(check: list[dict], flap_s: float, adaptive: bool) -> list[float]:
    """Closed-form and packet stalls of every survived point of one flap length."""
    rows = [r for r in check if float(r["flap_s"]) == flap_s and r["adaptive"] == str(adaptive)]
    return [v for r in rows for v in (_f(r, "closed_stall_s"), _f(r, "packet_stall_s"))
            if v is not None]


def _disagreements(check: list[dict]) -> str:
    rows = [r for r in check if r["agree"] != "True"]
    return "; ".join(
        f"NCCL_IB_TIMEOUT={r['timeout']}, RETRY_CNT={r['retry_cnt']}, a {fmt_s(float(r['flap_s']))}"
        f" flap, adaptive {'on' if r['adaptive'] == 'True' else 'off'} (closed form: "
        f"{'survives' if r['closed_survives'] == 'True' else 'QP error'}, packet engine: "
        f"{'survives' if r['packet_job_survives'] == 'True' else 'QP error'})"
        for r in rows) or "none"


def _crosscheck_values(check: list[dict]) -> dict[str, str]:
    fixed = [float(r["stall_ratio"]) for r in check if r["stall_ratio"] and r["adaptive"] == "False"]
    adaptive = [float(r["stall_ratio"]) for r in check if r["stall_ratio"] and r["adaptive"] == "True"]
    one_ms = {int(r["timeout"]): float(r["closed_stall_s"]) for r in check
              if float(r["flap_s"]) == 0.001 and r["adaptive"] == "False"}
    first = check[0]
    return {
        "retransmit.points": str(len(check)),
        "retransmit.agree": str(sum(r["agree"] == "True" for r in check)),
        "retransmit.fixed_ratio_dev": f"{max(abs(x - 1) for x in fixed) * 100:.2g}%",
        "retransmit.detection_example": (
            f"{fmt_s(float(first['closed_detection_s']))} for NCCL_IB_TIMEOUT="
            f"{first['timeout']}, {first['retry_cnt']} retry"),
        "retransmit.adaptive_ratio": _span(adaptive, lambda x: f"{x:.2f}"),
        "retransmit.disagreements": _disagreements(check),
        "retransmit.fixed_1ms_stall": ", ".join(f"{fmt_s(s)} at {t}" for t, s in sorted(one_ms.items())),
        "retransmit.adaptive_1ms_stall": _span(_stalls(check, 0.001, True)),
        "retransmit.adaptive_1s_stall": _span(_stalls(check, 1.0, True)),
    }


def _setting(settings: list[dict], timeout: int, retry: int) -> dict:
    return next(r for r in settings if int(r["timeout"]) == timeout and int(r["retry_cnt"]) == retry
                and r["adaptive"] == "False")


def _describe(settings: list[dict], timeout: int, retry: int) -> str:
    r = _setting(settings, timeout, retry)
    return (f"{timeout}/{retry} survives {fmt_s(float(r['survivable_flap_s']))} (job survival "
            f"{float(r['job_survival']):.3f} under the assumed flaps) and detects a dead link in "
            f"{fmt_s(float(r['detection_s']))}")


def _settings_values(settings: list[dict]) -> dict[str, str]:
    short = [float(r["survivable_flap_s"]) for r in settings if int(r["timeout"]) <= 16]
    return {
        "retransmit.default_setting": _describe(settings, 20, 7),
        "retransmit.setting_18_7": _describe(settings, 18, 7),
        "retransmit.setting_18_1": _describe(settings, 18, 1),
        "retransmit.window_upto_16": fmt_s(max(short)),
    }


def values(results: Path) -> dict[str, str]:
    """Every marked number of the README, from the CSVs in ``results``."""
    return {**_crosscheck_values(read_csv(results / "crosscheck.csv")),
            **_settings_values(read_csv(results / "settings.csv"))}
