"""``netsim calibrate TRACE... -o calibration.json``: fit the workload model to measurements.

Each TRACE is a trainer ``--trace-dir`` (``trainer-trace/1``) or a ``python -m trainer.bench``
JSON file (``trainer-bench/1``). Prints every fit with its residuals.
"""

from __future__ import annotations

import argparse
import sys

from tuner.cli._output import add_json_flag, format_table, print_json, progress


def register(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "calibrate",
        help="fit compute throughput and alpha-beta per collective from trainer traces",
        description="Fit compute throughput per operation shape and alpha-beta (latency, bus "
        "bandwidth) per collective and scope from trainer traces and microbenchmarks; report "
        "the residuals.",
    )
    p.add_argument("traces", nargs="+", metavar="TRACE",
                   help="trainer trace directory or trainer-bench JSON file")
    p.add_argument("-o", "--output", default="calibration.json",
                   help="where to write the calibration (default calibration.json)")
    add_json_flag(p)
    return p


def run(args: argparse.Namespace) -> int:
    from netsim.calibration import fit_calibration, save_calibration
    from netsim.traces import TraceRun, read_any

    runs, benches = [], []
    for path in progress(args.traces, desc="reading traces", enabled=sys.stderr.isatty()):
        item = read_any(path)
        (runs if isinstance(item, TraceRun) else benches).append(item)
    cal = fit_calibration(runs, benches)
    if not cal.compute and not cal.comm:
        raise ValueError("the traces hold no compute or collective records to fit")
    save_calibration(cal, args.output)
    if args.json:
        out = cal.to_json()
        out["output"] = args.output
        print_json(out)
        return 0
    rows = [(f"compute {k}", f.intercept_s, f.rate, f.points, f.rel_rms, f.max_rel)
            for k, f in cal.compute.items()]
    rows += [(f"comm {k}", f.intercept_s, f.rate, f.points, f.rel_rms, f.max_rel)
             for k, f in cal.comm.items()]
    print(format_table(["fit", "intercept_s", "rate (/s)", "points", "rel_rms", "max_rel"],
                       rows, floatfmt=".4g"))
    print(f"wrote {args.output}")
    return 0
