"""Whether a trace directory holds one whole run: run ids and step counts (issue #30).

The trainer writes a ``run_id`` into every rank's ``meta`` record (and ``summary.json``) and
closes each rank file with an ``end`` record (``run_id``, ``steps``: the iteration records
written before it). A reader refuses, naming the rank and the file:

- a file of another run (its run id differs from the first file's, or from ``summary.json``'s);
- a file without its ``end`` record, or with fewer iteration records than it counts: the file
  was cut (a killed run, a copy cut short), and the missing steps would read as absent work.

Traces written before run ids (no ``run_id`` in any meta) are read with a note; what can still
be told is checked: every rank holds the same steps, as many as ``summary.json`` counts
(``steps - start_step``), records of a step come with its ``iteration`` record, and a rank
whose siblings closed with a ``host`` record has one too.

The functions take the reader's ``RankTrace`` objects (``netsim.traces.records``) by duck
type: ``meta``, ``iterations``, ``compute``, ``collectives``, ``host_record``, ``end_record``.
"""

from __future__ import annotations

from typing import Any

OLD_TRACE_NOTE = ("no run id in the trace (written before issue #30): mixed runs are told "
                  "only by their layout, truncation only by step counts")


def check_run_ids(files: list[str], ranks: list[Any]) -> None:
    """Raise ValueError when two files carry different run ids (two runs in one directory)."""
    ref = ranks[0].meta.get("run_id")
    for f, r in zip(files, ranks, strict=True):
        if r.meta.get("run_id") != ref:
            raise ValueError(f"{f} (rank {r.meta.get('rank')}): run id "
                             f"{r.meta.get('run_id')!r}, but {files[0]} (rank "
                             f"{ranks[0].meta.get('rank')}) has {ref!r}: two runs in one "
                             "directory; keep one run per directory")


def check_complete(files: list[str], ranks: list[Any], summary: dict[str, Any]) -> list[str]:
    """Raise ValueError naming the rank and file of a cut or foreign file; returns notes."""
    check_run_ids(files, ranks)
    run_id = ranks[0].meta.get("run_id")
    if summary.get("run_id") is not None and summary["run_id"] != run_id:
        raise ValueError(f"summary.json of run {summary['run_id']!r} beside rank files of run "
                         f"{run_id!r} ({files[0]}): two runs in one directory")
    for f, r in zip(files, ranks, strict=True):
        if run_id is not None:
            _check_end(f, r)
        _check_steps_closed(f, r)
    _check_same_steps(files, ranks, summary)
    return [] if run_id is not None else [OLD_TRACE_NOTE]


def _who(f: str, r: Any) -> str:
    return f"{f} (rank {r.meta.get('rank')})"


def _check_end(f: str, r: Any) -> None:
    end = r.end_record
    if end is None:
        raise ValueError(f"{_who(f, r)}: no end record: the file was cut or its run did not "
                         "finish; rerun, or remove the directory's partial run")
    if end.get("run_id") != r.meta.get("run_id"):
        raise ValueError(f"{_who(f, r)}: end record of run {end.get('run_id')!r} after the meta "
                         f"of run {r.meta.get('run_id')!r}: two runs in one file")
    if end.get("steps") != len(r.iterations):
        raise ValueError(f"{_who(f, r)}: {len(r.iterations)} iteration records, its end "
                         f"record counts {end.get('steps')!r}: the file was cut")


def _check_steps_closed(f: str, r: Any) -> None:
    """Every step with records has its iteration record (a cut mid-step leaves it out)."""
    done = {it["step"] for it in r.iterations}
    open_ = sorted({x["step"] for x in (*r.compute, *r.collectives)} - done)
    if open_:
        raise ValueError(f"{_who(f, r)}: step {open_[0]} has records but no iteration record: "
                         "the file was cut")


def _check_same_steps(files: list[str], ranks: list[Any], summary: dict[str, Any]) -> None:
    """Every rank the same steps, as many as ``summary.json`` counts; host records on all or
    none of the ranks."""
    ref_f, ref = max(zip(files, ranks, strict=True), key=lambda p: len(p[1].iterations))
    want = [it["step"] for it in ref.iterations]
    if isinstance(summary.get("steps"), int) and isinstance(summary.get("start_step", 0), int):
        count = summary["steps"] - summary.get("start_step", 0)
        if len(want) != count:
            raise ValueError(f"{_who(ref_f, ref)}: {len(want)} steps, summary.json counts "
                             f"{count}: the rank files were cut")
    hosts = any(r.host_record is not None for r in ranks)
    for f, r in zip(files, ranks, strict=True):
        have = [it["step"] for it in r.iterations]
        if have != want:
            lost = sorted(set(want) - set(have))
            raise ValueError(f"{_who(f, r)}: steps {lost[:5] or have[:5]} differ from "
                             f"{_who(ref_f, ref)}'s: the file was cut")
        if hosts and r.host_record is None:
            raise ValueError(f"{_who(f, r)}: no host record where the other ranks have one: "
                             "the file was cut")
