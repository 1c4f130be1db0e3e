"""Read a trace directory of any format the suite knows, the format told by its files:
native ``trace-rank*.jsonl`` (``netsim.traces.records``), the trainer's torch.profiler
documents (``trainer_meta``: ``netsim.traces.kineto``) or any other PyTorch job's profiler
documents (``netsim.traces.generic_kineto``), with PyTorch execution traces (Chakra's input,
``netsim.traces.chakra``) beside them when present."""

from __future__ import annotations

from pathlib import Path

from netsim.traces.chakra import execution_traces
from netsim.traces.generic_kineto import Layout, read_generic_docs
from netsim.traces.kineto import is_kineto_dir, load_kineto_docs, run_from_docs
from netsim.traces.records import TraceRun, read_trace_dir


def read_traces(path: str | Path, layout: Layout | None = None) -> TraceRun:
    """The run in directory ``path``; ``layout`` (``--tp --pp --dp --cp --ep``) sets the
    degrees of a foreign job's profiler traces (the trainer's traces carry their own)."""
    d = Path(path)
    if not d.is_dir():
        raise ValueError(f"trace {path}: not a directory (expected a trainer --trace-dir, "
                         "--profile directory or torch.profiler traces)")
    if not is_kineto_dir(d):
        return read_trace_dir(d)
    docs = load_kineto_docs(d)
    if any("trainer_meta" in doc for _, doc in docs):
        return run_from_docs(d, docs)
    return read_generic_docs(d, docs, layout, _execution_traces(d, {f for f, _ in docs}))


def _execution_traces(d: Path, kineto: set[Path]) -> dict[int, dict]:
    """{pid: document} of the execution traces (``netsim.traces.chakra``) among the other
    JSON files of ``d``."""
    from inputspec import read_data
    from netsim.traces.records import MAX_TRACE_BYTES

    docs = []
    for f in sorted(d.glob("*.json")):
        if f not in kineto and f.name not in ("summary.json", "host.json") \
                and f.stat().st_size <= MAX_TRACE_BYTES:
            docs.append((f, read_data(f, "execution trace", default_format="json")))
    return execution_traces(docs)
