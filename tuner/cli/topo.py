"""``netsim topo SPEC``: build a fabric and report its shape (counts, bisection, ECMP, ...)."""

from __future__ import annotations

import argparse

from tuner.cli._output import add_command, add_json_flag, format_table, print_json


def register(sub) -> argparse.ArgumentParser:
    p = add_command(
        sub, "topo",
        "build a fabric (preset or file) and report its counts, bisection and ECMP width",
        "Build a fabric from a preset name (megascale, megascale-4x, fat-tree-k4, "
        "fat-tree-k8, leaf-spine-64) or a .yaml/.json fabric file and report switch and link "
        "counts by tier, bisection bandwidth, oversubscription, diameter and ECMP widths.")
    p.add_argument("spec", nargs="?", default="megascale",
                   help="preset name or fabric file (default: megascale)")
    p.add_argument("--draw", metavar="OUT.png", default=None,
                   help="render the fabric with matplotlib (small fabrics only)")
    p.add_argument("--save", metavar="OUT.yaml", default=None,
                   help="write the fabric's spec as a YAML or JSON fabric file")
    add_json_flag(p)
    return p


def run(args: argparse.Namespace) -> int:
    from topologies import load_fabric, save_fabric
    from topologies.analysis import analyze, draw

    fabric = load_fabric(args.spec)
    report = analyze(fabric)
    if args.draw:
        draw(fabric, args.draw)
    if args.save:
        save_fabric(fabric, args.save)
    if args.json:
        print_json(report.to_json())
        return 0
    sw = report.switches
    rows = [
        ("GPUs", report.gpus), ("servers", report.servers), ("NICs", report.nics),
        ("ToR switches", sw["tor"]), ("agg switches", sw["agg"]), ("core switches", sw["core"]),
        ("pods", report.pods), ("links (cables)", report.links),
    ]
    rows += [(f"  {k} links", v) for k, v in report.links_by_kind.items()]
    rows += [("bisection (Tb/s)", report.bisection_bps / 1e12)]
    rows += [(f"oversubscription {t}", "-" if v is None else f"{v:g}:1")
             for t, v in report.oversubscription.items()]
    rows += [("diameter (hops NIC-NIC)", report.diameter_hops)]
    rows += [(f"ECMP width {k.replace('_', ' ')}", v) for k, v in report.ecmp_width.items()]
    print(f"fabric {report.name}")
    print(format_table(("quantity", "value"), rows, floatfmt=".2f"))
    if args.draw:
        print(f"drawing written to {args.draw}")
    if args.save:
        print(f"fabric file written to {args.save}")
    return 0
