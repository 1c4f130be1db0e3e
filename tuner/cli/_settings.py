"""``netsim simulate --settings DIR``: apply a ``netsim recommend -o DIR`` output to a run.

Values from the files fill the flags that were not given; a flag given on the command line
wins over the file (and the file's value is listed as overridden). What each level applies and
ignores is :func:`tuner.settings.packet_plan` / :func:`tuner.settings.flow_plan`.
"""

from __future__ import annotations

import argparse

from tuner.cli._output import format_table

#: Simulator knob -> (argparse dest, flag) of the flags a settings file can fill.
KNOB_FLAGS = {"ecn_kmin_bytes": ("ecn_kmin", "--ecn-kmin"),
              "ecn_kmax_bytes": ("ecn_kmax", "--ecn-kmax"),
              "pfc": ("pfc", "--pfc"), "qps": ("qps", "--qps"),
              "ib_timeout": ("ib_timeout", "--ib-timeout"),
              "retry_cnt": ("retry_cnt", "--retry-cnt")}


def add_argument(p: argparse.ArgumentParser) -> None:
    """The shared ``--settings`` flag."""
    p.add_argument("--settings", default=None, metavar="DIR",
                   help="apply the output of `netsim recommend -o DIR`: DCQCN (nic_dcqcn.conf), "
                        "ECN/PFC (switch_qos.yaml) and QPs per connection (nccl.env); flags "
                        "given explicitly win; --json lists every value under settings_applied")


def given_flags(args: argparse.Namespace) -> set[str]:
    """The fillable flags given on the command line (their dest is not None)."""
    return {flag for dest, flag in KNOB_FLAGS.values() if getattr(args, dest, None) is not None}


def plan_for(args: argparse.Namespace, level: str, cc_given: set[str] = frozenset()):
    """The :class:`tuner.settings.Plan` of ``--settings`` (None without it); fills ``args``'
    unset flags from it so that the level's own flag handling applies the values."""
    if not getattr(args, "settings", None):
        return None
    from tuner.settings import flow_plan, packet_plan, read_settings

    rs = read_settings(args.settings)
    if level == "packet":
        plan = packet_plan(rs, args.cc or "dcqcn", given_flags(args), set(cc_given))
    else:
        plan = flow_plan(rs, given_flags(args))
    for knob, value in plan.knobs.items():
        if knob in KNOB_FLAGS:
            dest = KNOB_FLAGS[knob][0]
            setattr(args, dest, ("on" if value else "off") if knob == "pfc" else value)
    return plan


def print_plan(plan, directory: str) -> None:
    """The text report: the values applied (file, key, knob), then the others by reason."""
    rows = [[u.file, u.key, u.value, u.knob] for u in plan.uses if u.knob is not None]
    print(f"\nsettings applied from {directory}:")
    print(format_table(["file", "key", "value", "knob"], rows) if rows else "(none)")
    why: dict[str, list[str]] = {}
    for u in plan.uses:
        if u.knob is None:
            why.setdefault(u.why, []).append(f"{u.file} {u.key}")
    for reason, keys in why.items():
        print(f"not applied: {', '.join(keys)}: {reason}")
