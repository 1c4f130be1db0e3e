"""``netsim calibrate TRACE... -o calibration.json``: fit the workload model to measurements.

Each TRACE is a trainer ``--trace-dir`` (``trainer-trace/1``) or a ``python -m trainer.bench``
JSON file (``trainer-bench/1``), or a directory of torch.profiler Chrome traces (the trainer's
``--profile``: ``netsim.traces.kineto``; any PyTorch job: ``netsim.traces.generic_kineto``,
its degrees from ``--tp --pp --dp --cp --ep`` or its process groups). Prints every fit with its
residuals, and on stderr what the reader could not identify.
"""

from __future__ import annotations

import argparse
import json
import sys

from tuner.cli._output import add_command, add_json_flag, format_table, print_json, progress


def register(sub) -> argparse.ArgumentParser:
    p = add_command(
        sub, "calibrate",
        "fit compute throughput and alpha-beta per collective from trainer traces",
        "Fit compute throughput per operation shape and alpha-beta (latency, bus "
        "bandwidth) per collective and scope from trainer traces and microbenchmarks; report "
        "the residuals.")
    p.add_argument("traces", nargs="+", metavar="TRACE",
                   help="trainer trace directory or trainer-bench JSON file")
    p.add_argument("-o", "--output", default="calibration.json",
                   help="where to write the calibration (default calibration.json)")
    p.add_argument("--host-cores", type=float, default=None, metavar="C",
                   help="CPU cores the traced ranks shared (CPU trainer on one host): fit "
                   "dedicated-core work and the host's CPU cost of collectives (default: the "
                   "cores in the traces' host records for CPU runs; off for GPU traces)")
    p.add_argument("--no-iteration-fit", action="store_true",
                   help="with --host-cores: keep the per-record fits; by default the host "
                   "model (compute scale, CPU cost per message and per iteration) is refitted "
                   "on the traces' measured iteration times")
    p.add_argument("--comm-weight", default="fit", metavar="W",
                   help="with --host-cores: runnable weight of a rank inside a blocking "
                   "collective, in [0, 1], or 'fit' (default): the one of 0, 0.25, ..., 1 whose "
                   "host fit has the smallest residual")
    from tuner.cli.diagnose import add_layout_flags

    add_layout_flags(p)
    add_json_flag(p)
    return p


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from netsim.diagnose.calibration import (
        fit_calibration,
        fit_host_on_iterations,
    )
    from netsim.traces.detect import read_traces
    from netsim.traces.generic_kineto import layout_of
    from netsim.traces.records import TraceRun, read_bench
    from tuner.outputs import check_output_file, write_file_atomic

    check_output_file(args.output)  # an unwritable -o fails before the traces are read
    layout = layout_of(args)
    runs, benches = [], []
    for path in progress(args.traces, desc="reading traces", enabled=sys.stderr.isatty()):
        item = read_traces(path, layout) if Path(path).is_dir() else read_bench(path)
        (runs if isinstance(item, TraceRun) else benches).append(item)
        for note in getattr(item, "notes", []):
            print(f"netsim calibrate: {path}: {note}", file=sys.stderr)
    if args.host_cores is not None and not args.host_cores > 0:
        raise ValueError(f"--host-cores must be positive, got {args.host_cores}")
    try:
        weight = None if args.comm_weight == "fit" else float(args.comm_weight)
    except ValueError:
        raise ValueError(f"--comm-weight must be a number or 'fit', got {args.comm_weight!r}"
                         ) from None
    if weight is not None and not 0.0 <= weight <= 1.0:
        raise ValueError(f"--comm-weight must lie in [0, 1], got {weight}")
    from netsim.diagnose.calibrated import default_host_cores, fit_warnings, host_sharing

    cores = args.host_cores
    if cores is None and (cores := default_host_cores(runs)) is not None:
        print(f"netsim calibrate: CPU traces of ranks sharing {cores:g} cores (their host "
              "records): fitting the shared-host model (--host-cores)", file=sys.stderr)
    cal = fit_calibration(runs, benches, host_cores=cores, comm_weight=weight)
    if cores is not None and not args.no_iteration_fit:
        cal = fit_host_on_iterations(cal, runs)
    for warning in fit_warnings(cal, runs):
        print(f"netsim calibrate: warning: {warning}", file=sys.stderr)
    if shared := host_sharing(cal.hardware_info, cal.world_size, cal.host_cores):
        print(f"netsim calibrate: note: the traced host was shared: {shared} (the fits hold "
              "for that load; netsim predict says so too)", file=sys.stderr)
    if not cal.compute and not cal.comm:
        raise ValueError("the traces hold no compute or collective records to fit")
    write_file_atomic(args.output, json.dumps(cal.to_json(), indent=2))  # = save_calibration
    if args.json:
        out = cal.to_json()
        out["output"] = args.output
        print_json(out)
        return 0
    rows = [(f"compute {k}", f.intercept_s, f.rate, f.points, f.rel_rms, f.max_rel)
            for k, f in cal.compute.items()]
    rows += [(f"comm {k}", f.intercept_s, f.rate, f.points, f.rel_rms, f.max_rel)
             for k, f in cal.comm.items()]
    if cal.host:
        h = cal.host
        rows.append((f"host cpu per message (+{h['cpu_iter_s']:.3g} s per iteration)",
                     h["cpu_msg_s"], h.get("cpu_bytes_per_s", float("inf")), h["points"],
                     h["rel_rms"], h["max_rel"]))
    print(format_table(["fit", "intercept_s", "rate (/s)", "points", "rel_rms", "max_rel"],
                       rows, floatfmt=".4g"))
    print(f"wrote {args.output}")
    return 0
