"""``netsim sweep`` and :mod:`sweeps`: specs, the results file, resume, Dask, SIGKILL."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sweeps as sweep
from tuner.cli import main
from tuner.cli import sweep as cli_sweep

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # sweep_fns: importable here and in Dask's spawned workers
    sys.path.insert(0, str(HERE))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _spec(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _canon(results) -> list[tuple]:
    """Results without wall time, sorted by point: what two runs must agree on."""
    recs = [r.to_record() if isinstance(r, sweep.PointResult) else r for r in results]
    return sorted((sweep.point_key(r["point"]), r["status"], r["error"],
                   json.dumps(r["output"], sort_keys=True)) for r in recs)


# ------------------------------------------------------------------------- specs


def test_grid_is_cartesian_in_order() -> None:
    spec = cli_sweep.parse_spec({"command": "simulate", "args": {"level": "flow"},
                             "grid": {"size": ["1MB", "4MB"], "seed": [1, 2, 3]}})
    assert spec.command == "simulate" and len(spec.points) == 6
    assert spec.points[0] == {"size": "1MB", "seed": 1}
    assert spec.points[-1] == {"size": "4MB", "seed": 3}


def test_sample_is_seeded_distinct_and_in_range() -> None:
    raw = {"function": "sweep_fns:square",
           "sample": {"n": 12, "seed": 7, "space": {"x": {"low": 1, "high": 1000, "log": True,
                                                          "int": True},
                                                    "offset": [0, 1]}}}
    a, b = cli_sweep.parse_spec(raw).points, cli_sweep.parse_spec(raw).points
    assert a == b and len({sweep.point_key(p) for p in a}) == 12
    assert all(1 <= p["x"] <= 1000 and p["offset"] in (0, 1) for p in a)
    raw["sample"]["seed"] = 8
    assert cli_sweep.parse_spec(raw).points != a


@pytest.mark.parametrize("raw, needle", [
    ({"command": "nope", "grid": {"a": [1]}}, "not a netsim subcommand"),
    ({"command": "simulate", "grid": {"a": [1]}, "list": [{"a": 1}]}, "exactly one of 'grid'"),
    ({"command": "simulate", "grid": {"a": []}}, "grid.a"),
    ({"command": "simulate", "list": [{"a": 1}, {"a": 1}]}, "more than once"),
    ({"command": "simulate", "args": {"a": 1}, "grid": {"a": [1]}}, "both fixed"),
    ({"command": "no_such_module_xyz:f", "grid": {"a": [1]}}, "cannot be imported"),
    ({"command": "simulate", "grid": {"a": [1]}, "gird": 1}, "unknown field"),
    ({"function": "sweep_fns:square", "sample": {"n": 5, "seed": 1, "space": {"x": [1, 2]}}},
     "fewer than 5 distinct"),
])
def test_bad_specs_are_refused_with_the_field(raw, needle) -> None:
    with pytest.raises(ValueError, match=needle):
        cli_sweep.parse_spec(raw)


def test_cli_flags() -> None:
    assert cli_sweep.cli_flags({"fail_links": [1, 2], "no_pxn": True, "cc": None, "x": False,
                            "size": "4MB"}) == ["--fail-links", "1,2", "--no-pxn",
                                                "--size", "4MB"]


# ------------------------------------------------------------------------- results file


def test_torn_last_line_is_ignored_and_truncated(tmp_path) -> None:
    path = tmp_path / sweep.RESULTS_JSONL
    rec = sweep.PointResult({"x": 1}, {"x": 1}, "ok", None, {"y": 1}, 0.1)
    path.write_text(json.dumps(rec.to_record()) + "\n" + '{"point": {"x": 2}, "ar')
    assert [r.point for r in sweep.read_results(path)] == [{"x": 1}]
    sweep.runner._ResultWriter(path).close()
    assert path.read_text().count("\n") == 1 and path.read_text().endswith("\n")


def test_a_corrupt_inner_line_is_an_error(tmp_path) -> None:
    path = tmp_path / sweep.RESULTS_JSONL
    path.write_text('garbage\n{"point": {}, "status": "ok"}\n')
    with pytest.raises(ValueError, match="line 1"):
        sweep.read_results(path)


# ------------------------------------------------------------------------- running points


def test_in_process_failing_point_is_recorded_and_others_go_on(tmp_path) -> None:
    pts = [{"x": x} for x in range(5)]
    fn = sweep.FunctionPoint("sweep_fns:square", {"fail_on": 3})
    res = sweep.run_points(fn, pts, out_dir=tmp_path, workers=0, progress=False,
                           args={"fail_on": 3})
    assert [r.point for r in res] == pts
    assert [r.status for r in res] == ["ok", "ok", "ok", "error", "ok"]
    assert res[3].error.startswith("ValueError: point x=3 fails on purpose")
    assert "\n" not in res[3].error and res[4].output == {"y": 16, "nested": {"x": 4}}
    assert res[0].args == {"fail_on": 3, "x": 0}
    # resume: nothing runs again (a function that would fail everywhere proves it)
    again = sweep.run_points(sweep.FunctionPoint("sweep_fns:square", {"fail_on": None,
                                                                      "offset": "bad"}),
                             pts, out_dir=tmp_path, workers=0, progress=False)
    assert _canon(again) == _canon(res)
    assert len((tmp_path / sweep.RESULTS_JSONL).read_text().splitlines()) == 5


def test_retry_errors_reruns_only_the_failed_points(tmp_path) -> None:
    pts = [{"x": x} for x in range(4)]
    first = sweep.run_points(sweep.FunctionPoint("sweep_fns:square", {"fail_on": 2}), pts,
                             out_dir=tmp_path, workers=0, progress=False)
    assert [r.status for r in first] == ["ok", "ok", "error", "ok"]
    fixed = sweep.FunctionPoint("sweep_fns:square", {"fail_on": None, "offset": 100})
    again = sweep.run_points(fixed, pts, out_dir=tmp_path, workers=0, progress=False,
                             retry_errors=True)
    assert [r.status for r in again] == ["ok"] * 4
    assert [r.output["y"] for r in again] == [0, 1, 104, 9]  # only x=2 ran again
    lines = (tmp_path / sweep.RESULTS_JSONL).read_text().splitlines()
    assert len(lines) == 4


def test_run_points_on_a_local_dask_cluster_matches_in_process() -> None:
    pts = [{"x": x} for x in range(8)]
    fn = sweep.FunctionPoint("sweep_fns:square", {"fail_on": 5})
    with sweep.dask_client(workers=2) as client:
        on_dask = sweep.run_points(fn, pts, client=client, progress=False)
        plain = sweep.run_points(_x_of, pts, client=client, progress=False)  # a plain function
    local = sweep.run_points(fn, pts, workers=0, progress=False)
    assert _canon(on_dask) == _canon(local)
    assert [r.point for r in on_dask] == pts and on_dask[5].status == "error"
    assert [r.output for r in plain] == [p["x"] for p in pts]


def test_a_dying_point_fails_alone_named_and_is_retried_once_elsewhere(tmp_path) -> None:
    # issue 29: os._exit in one point took a healthy point with it, both recorded as
    # "FutureCancelledError ... already forgotten", the death not named
    pts = [{"x": x} for x in range(6)]
    dies = sweep.FunctionPoint("sweep_fns:dies", {"die_on": 3, "exit_code": 7})
    marker = tmp_path / "died-once"
    flaky = sweep.FunctionPoint("sweep_fns:dies", {"die_on": 2, "once_marker": str(marker)})
    with sweep.dask_client(workers=2) as client:
        res = sweep.run_points(dies, pts, client=client, progress=False)
        again = sweep.run_points(flaky, pts, client=client, progress=False)
        pids = sweep.run_points(sweep.FunctionPoint("sweep_fns:pid", {}),
                                [{"x": x} for x in range(12)], client=client, progress=False)
    # points run one after another in a point process per worker (caches live on between
    # points), not one process per point
    assert 1 <= len({r.output["pid"] for r in pids}) <= 2
    assert [r.ok for r in res] == [True, True, True, False, True, True]
    assert [r.output for r in res if r.ok] == [{"y": x} for x in (0, 1, 2, 4, 5)]
    assert res[3].error == ("worker died (exit code 7), and again when retried on another "
                            "worker: worker died (exit code 7)")
    assert marker.exists() and all(r.ok for r in again)  # died once, the retry finished it
    assert again[2].output == {"y": 2}


def test_cli_sweep_exits_1_when_a_point_died(tmp_path) -> None:
    spec = _spec(tmp_path, "command: sweep_fns:dies\nargs: {die_on: 1}\n"
                           "grid: {x: [0, 1, 2]}\n")
    r = _cli(str(spec), "-o", str(tmp_path / "o"), "--workers", "2", "--no-progress")
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1].startswith(
        'netsim sweep: 1 of 3 points failed (first: {"x":1}: worker died (exit code 3)')
    ok = _cli(str(spec), "-o", str(tmp_path / "o"), "--workers", "0", "--allow-failures")
    assert ok.returncode == 0, ok.stderr  # resumed: nothing reruns, failures allowed


def _x_of(point: dict) -> int:
    return point["x"]


def test_without_dask_the_error_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "dask", None)
    with pytest.raises(ValueError, match=r"roce-netsim\[dist\]"):
        sweep.run_points(_x_of, [{"x": 1}], workers=2, progress=False)


# ------------------------------------------------------------------------- the CLI


SPEC = """\
command: sweep_fns:square
args: {fail_on: 4, sleep_s: %s}
grid: {x: [%s], offset: [0, 10]}
"""


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), *sys.path])
    return env


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tuner.cli", "sweep", *argv], env=_env(),
                          capture_output=True, text=True, timeout=300)


def test_cli_sweep_writes_jsonl_csv_spec_and_refuses_another_spec(tmp_path) -> None:
    spec = _spec(tmp_path, SPEC % (0.0, "1, 2, 3, 4"))
    out = tmp_path / "out"
    r = _cli(str(spec), "-o", str(out), "--workers", "2", "--json")
    assert r.returncode == 1, r.stderr  # points failed: exit 1, one line saying so
    summary = json.loads(r.stdout)
    assert (summary["points"], summary["ok"], summary["errors"], summary["ran"]) == (8, 6, 2, 8)
    assert "100%" in r.stderr  # the progress bar
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("netsim sweep: 2 of 8 points failed (first: ")
    assert "fails on purpose" in last and "--allow-failures" in last
    lines = (out / "results.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    assert set(rec) == {"point", "args", "status", "error", "output", "wall_s"}
    rows = _rows(out / "results.csv")
    assert [(r["point.x"], r["point.offset"]) for r in rows][:2] == [("1", "0"), ("1", "10")]
    assert {"status", "error", "output.y", "output.nested.x", "wall_s"} <= set(rows[0])
    assert (out / "spec.yaml").read_text() == spec.read_text()
    # rerun: everything resumed
    r2 = _cli(str(spec), "-o", str(out), "--workers", "0", "--json", "--allow-failures")
    assert r2.returncode == 0, r2.stderr
    assert json.loads(r2.stdout)["resumed"] == 8 and json.loads(r2.stdout)["ran"] == 0
    # a different spec into the same DIR: one line, exit 2
    other = _spec(tmp_path, SPEC % (0.0, "1, 2, 3"), "other.yaml")
    r3 = _cli(str(other), "-o", str(out))
    assert r3.returncode == 2 and len(r3.stderr.strip().splitlines()) == 1
    assert "different sweep" in r3.stderr


def test_cli_sweep_of_a_netsim_command(tmp_path, capsys) -> None:
    spec = _spec(tmp_path, "command: simulate\nargs: {level: flow, collective: allreduce, "
                           "ranks: 4, size: 1MB}\nlist: [{fabric: fat-tree-k4}, "
                           "{fabric: no-such-fabric}]\n")
    rc = main(["sweep", str(spec), "-o", str(tmp_path / "o"), "--workers", "0", "--json",
               "--no-progress"])
    assert rc == 1  # one point failed: exit 1 (--allow-failures for 0)
    res = sweep.read_results(tmp_path / "o" / "results.jsonl")
    by = {r.point["fabric"]: r for r in res}
    assert by["fat-tree-k4"].status == "ok" and isinstance(by["fat-tree-k4"].output, dict)
    assert by["fat-tree-k4"].output["size_bytes"] == 1_000_000
    assert by["no-such-fabric"].status == "error" and "no-such-fabric" in by["no-such-fabric"].error


def test_sigkill_then_rerun_equals_an_uninterrupted_run(tmp_path) -> None:
    xs = ", ".join(str(x) for x in range(12))
    spec = _spec(tmp_path, SPEC % (0.25, xs))
    # the reference runs in-process (--workers 0): Dask + kill + resume must equal it
    ref = _cli(str(spec), "-o", str(tmp_path / "ref"), "--workers", "0", "--no-progress",
               "--allow-failures")
    assert ref.returncode == 0, ref.stderr
    out = tmp_path / "killed"
    jsonl = out / "results.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "sweep", str(spec), "-o",
                             str(out), "--workers", "2", "--no-progress"], env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if jsonl.exists() and jsonl.read_text().count("\n") >= 5:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the sweep finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    n_killed = jsonl.read_text().count("\n")
    assert 5 <= n_killed < 24
    with jsonl.open("a") as fh:  # a kill in the middle of a write leaves a torn line
        fh.write('{"point": {"x": 11, "offset": 10}, "args": {"fai')
    again = _cli(str(spec), "-o", str(out), "--workers", "2", "--json", "--no-progress",
                 "--allow-failures")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["resumed"] == n_killed
    lines = jsonl.read_text().splitlines()
    assert len(lines) == 24 and len({sweep.point_key(json.loads(ln)["point"]) for ln in lines}) == 24
    assert _canon(json.loads(ln) for ln in lines) == _canon(
        json.loads(ln) for ln in (tmp_path / "ref" / "results.jsonl").read_text().splitlines())
    strip = lambda p: [{k: v for k, v in row.items() if k != "wall_s"}  # noqa: E731
                       for row in _rows(p)]
    assert strip(out / "results.csv") == strip(tmp_path / "ref" / "results.csv")
