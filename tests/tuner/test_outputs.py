"""Outputs written as a set (issue #30 item 1): ``recommend -o DIR`` appears whole or not at
all, replaces an earlier set as a whole, carries a manifest of hashes, refuses a second writer
and an unwritable ``-o`` before the search."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tuner.cli import main
from tuner.outputs import MANIFEST, OutputError, lock_path, output_lock, verify_manifest
from tuner.recommend import Recommendation, write_outputs
from tuner.render import TunerRow

# NIC and switch values as in tests/inputs/test_deploy.py (deployables need them)
RP = {"rpg_time_reset": 7, "rpg_byte_reset": 344844, "rpg_ai_rate": 8, "rpg_hai_rate": 444,
      "dce_tcp_g": 975}
NP = {"cnp_dscp": 48, "cnp_802p_prio": 6, "min_time_between_cnps": 1}
ECN = {"kmin_bytes": 21243, "kmax_bytes": 324344, "pmax": 0.0848}


def _rec(note: str = "first") -> Recommendation:
    rows = [TunerRow("allreduce", 0, 65535, "ring", "ll", -1, 16, 16)]
    return Recommendation(fabric="f", job={"model": note}, settings=[],
                          env={"NCCL_IB_QPS_PER_CONNECTION": "4"}, env_reasons={},
                          tuner_rows=rows, nic_rp=RP, nic_np=NP, ecn=ECN, headroom_ports=[],
                          ranks=[], iteration_default_s=1.0, iteration_recommended_s=1.0)


def _snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.parent.iterdir() if p.name != d.name)


def test_manifest_lists_every_file_with_its_hash(tmp_path) -> None:
    out = tmp_path / "reco"
    paths = write_outputs(_rec(), out, manifest={"command": "recommend", "seed": 7})
    doc = json.loads((out / MANIFEST).read_text())
    assert doc["schema"] == "netsim-output/1" and doc["seed"] == 7 and doc["version"]
    on_disk = {p.name for p in out.iterdir()} - {MANIFEST}
    assert set(doc["files"]) == on_disk == {p.name for p in paths} - {MANIFEST}
    for name, meta in doc["files"].items():
        data = (out / name).read_bytes()
        assert meta == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert verify_manifest(out) == []
    (out / "report.md").write_text("edited\n")
    assert verify_manifest(out) == ["report.md: sha256 differs"]
    assert _leftovers(out) == []  # no staging directory, no lock left behind


def test_paths_inside_the_files_name_the_final_directory(tmp_path) -> None:
    out = tmp_path / "reco"
    write_outputs(_rec(), out)
    env = (out / "nccl.env").read_text()
    assert f"NCCL_TUNER_CONFIG_FILE={out.resolve() / 'nccl_tuner.csv'}" in env
    assert ".tmp-" not in env


def test_a_writer_failing_mid_set_leaves_the_old_set(tmp_path, monkeypatch) -> None:
    # the old code wrote in place: a new nccl.env beside the old report.md of another job
    out = tmp_path / "reco"
    write_outputs(_rec("first"), out)
    before = _snapshot(out)
    import tuner.render

    def dies(path, *a, **k):
        Path(path).write_text("# Recommendation: half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tuner.render, "write_report", dies)
    with pytest.raises(OutputError, match="No space left on device") as err:
        write_outputs(_rec("second"), out)
    assert str(out) in str(err.value) and "unchanged" in str(err.value)
    assert _snapshot(out) == before and verify_manifest(out) == []
    assert _leftovers(out) == []


KILLED = textwrap.dedent("""
    import os, signal
    from pathlib import Path
    import tuner.render
    from tuner.recommend import Recommendation, write_outputs

    real = tuner.render.write_placement
    def killed(path, *a, **k):
        real(path, *a, **k)
        with open(path, "r+") as fh:
            fh.truncate(100)  # cut mid-file, then the process dies
        os.kill(os.getpid(), signal.SIGKILL)
    tuner.render.write_placement = killed
    rec = Recommendation(fabric="f", job={{"model": "second"}}, settings=[], env={{}},
                         env_reasons={{}}, tuner_rows=[], nic_rp={{}}, nic_np={{}}, ecn={{}},
                         headroom_ports=[], ranks=[], iteration_default_s=1.0,
                         iteration_recommended_s=1.0)
    write_outputs(rec, Path({out!r}))
""")


def test_sigkill_mid_write_keeps_the_old_set_and_the_next_run_recovers(tmp_path) -> None:
    out = tmp_path / "reco"
    write_outputs(_rec("first"), out)
    before = _snapshot(out)
    r = subprocess.run([sys.executable, "-c", KILLED.format(out=str(out))],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == -9, r.stderr
    assert _snapshot(out) == before and verify_manifest(out) == []
    assert lock_path(out).exists()  # the dead writer's lock and staging directory remain
    # the next writer takes over the stale lock and clears the leftovers
    write_outputs(_rec("third"), out)
    assert json.loads((out / "placement.json").read_text())["job"] == {"model": "third"}
    assert verify_manifest(out) == [] and _leftovers(out) == []


def test_a_rerun_replaces_the_set_as_a_whole(tmp_path) -> None:
    from topologies import load_fabric

    out = tmp_path / "reco"
    write_outputs(_rec("first"), out, load_fabric("fat-tree-k8"))
    assert (out / "nic_setup.sh").exists()
    write_outputs(_rec("second"), out)  # no fabric: no deployables in this set
    assert not (out / "nic_setup.sh").exists() and verify_manifest(out) == []


def test_a_directory_of_other_files_is_refused_not_replaced(tmp_path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    with pytest.raises(OutputError, match="not an earlier output"):
        write_outputs(_rec(), out)
    assert (out / "thesis.tex").read_text() == "precious"


def test_an_old_style_output_without_manifest_is_replaced(tmp_path) -> None:
    out = tmp_path / "reco"
    out.mkdir()
    for name in ("nccl.env", "report.md", "switch_nvue_tor.txt", "libnetsim_tuner.so"):
        (out / name).write_text("old\n")
    write_outputs(_rec(), out)
    assert not (out / "switch_nvue_tor.txt").exists() and verify_manifest(out) == []


def _recommend_argv(out: Path) -> list[str]:
    return ["recommend", "--fabric", "fat-tree-k8", "--job", "tiny", "--budget", "1",
            "--workers", "0", "-o", str(out)]


@pytest.fixture
def no_search(monkeypatch):
    """recommend's search replaced by a failure: a test passes only if it never starts."""
    import tuner.recommend

    def search(*a, **k):
        raise AssertionError("the search ran")

    monkeypatch.setattr(tuner.recommend, "recommend", search)


@pytest.mark.parametrize("where", ["under-a-file", "is-a-file"])
def test_unwritable_output_exits_2_before_the_search(tmp_path, capsys, no_search,
                                                     where) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = blocker / "reco" if where == "under-a-file" else blocker
    t0 = time.perf_counter()
    rc = main(_recommend_argv(out))
    elapsed = time.perf_counter() - t0
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and str(out) in err[0], err
    assert elapsed < 5.0


HOLDER = textwrap.dedent("""
    import sys
    from tuner.outputs import output_lock
    with output_lock({out!r}):
        print("held", flush=True)
        sys.stdin.read()
""")


def test_a_second_writer_is_refused_while_the_first_runs(tmp_path, capsys, no_search) -> None:
    out = tmp_path / "reco"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER.format(out=str(out))],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        rc = main(_recommend_argv(out))
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1
        assert "another netsim is writing it" in err[0] and f"pid {holder.pid}" in err[0]
        with pytest.raises(OutputError, match="another netsim"):
            write_outputs(_rec(), out)  # the library path takes the same lock
    finally:
        holder.communicate("", timeout=60)
    assert holder.returncode == 0 and not lock_path(out).exists()  # removed at exit
    write_outputs(_rec(), out)  # free again


def test_a_lock_of_a_dead_process_is_stale(tmp_path) -> None:
    import socket

    out = tmp_path / "reco"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    lock_path(out).write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname()}))
    with output_lock(out):
        assert json.loads(lock_path(out).read_text())["pid"] == os.getpid()
    assert not lock_path(out).exists()


def test_place_and_calibrate_refuse_an_unwritable_output_first(tmp_path, capsys,
                                                               monkeypatch) -> None:
    import tuner.placement

    monkeypatch.setattr(tuner.placement, "compare_strategies",
                        lambda *a, **k: (_ for _ in ()).throw(AssertionError("searched")))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc = main(["place", "--fabric", "fat-tree-k8", "--job", "tiny", "-o",
               str(blocker / "p.json")])
    assert rc == 2 and str(blocker / "p.json") in capsys.readouterr().err
    rc = main(["calibrate", str(tmp_path / "no-such-trace"), "-o", str(blocker / "c.json")])
    assert rc == 2 and str(blocker / "c.json") in capsys.readouterr().err


def test_sweep_refuses_an_unwritable_output_and_a_second_writer(tmp_path, capsys) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("command: json:dumps\nlist:\n  - {obj: 1}\n")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc = main(["sweep", str(spec), "-o", str(blocker / "o"), "--workers", "0"])
    assert rc == 2 and str(blocker / "o") in capsys.readouterr().err
    out = tmp_path / "o"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER.format(out=str(out))],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        rc = main(["sweep", str(spec), "-o", str(out), "--workers", "0"])
        assert rc == 2 and "another netsim is writing it" in capsys.readouterr().err
    finally:
        holder.communicate("", timeout=60)
    assert not (out / "results.jsonl").exists()
