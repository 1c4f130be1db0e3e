"""Parameter sweeps on Dask: one way to fan work out, for the ``netsim sweep`` CLI, recommend's CC
search and the studies under ``experiments/`` (it depends on nothing of ours but ``inputspec``).

Two layers:

:func:`run_points`
    the engine. Calls ``fn(point)`` for every point (a dict) on a Dask cluster: a local
    ``dask.distributed`` cluster of ``workers`` processes by default, an existing one when
    ``scheduler`` is an address (``tcp://HOST:PORT``), or in this process when ``workers=0``.
    With ``out_dir`` every finished point is appended to ``out_dir/results.jsonl`` as it
    arrives, and a rerun skips the points already there (resume). Returns one
    :class:`PointResult` per point, in the order of ``points``.
:func:`run_sweep`
    a sweep spec (YAML, :func:`load_spec`): a ``netsim`` subcommand or a ``module:function``,
    fixed ``args`` and a ``grid`` / ``list`` / ``sample`` of points; keeps ``spec.yaml`` and
    ``results.csv`` beside ``results.jsonl``.

Crash safety: only the calling process writes ``results.jsonl``; each record is one whole line
written with a single ``write``, then flushed and fsynced. A kill (SIGKILL included) can leave at
most a torn last line, which :func:`read_results` ignores and the next run truncates before it
appends, so a point is never recorded twice and never half; the points in flight are lost and run
again.
"""

from sweeps.runner import (
    DIST_EXTRA,
    RESULTS_CSV,
    RESULTS_JSONL,
    SPEC_COPY,
    FunctionPoint,
    PointResult,
    SweepSummary,
    claim_dir,
    dask_client,
    drop_errors,
    flatten,
    point_function,
    point_key,
    read_results,
    run_points,
    run_sweep,
    write_csv,
)
from sweeps.spec import (
    MAX_POINTS,
    RangeKeys,
    SampleKeys,
    SpecKeys,
    SweepSpec,
    check_spec_keys,
    load_spec,
    parse_spec,
)

__all__ = [
    "DIST_EXTRA", "RESULTS_CSV", "RESULTS_JSONL", "SPEC_COPY", "FunctionPoint", "PointResult",
    "SweepSummary", "claim_dir", "dask_client", "drop_errors", "flatten", "point_function",
    "point_key", "read_results", "run_points", "run_sweep", "write_csv", "RangeKeys", "SampleKeys",
    "SpecKeys", "SweepSpec", "check_spec_keys", "load_spec", "parse_spec", "MAX_POINTS",
]
