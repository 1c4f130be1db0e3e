"""A delayed link in a plain PyTorch job's torch.profiler traces (``tp_job.py``: three
tensor-parallel pairs on gloo, one pair's connections through ``link_relay.py``) is named by
``netsim diagnose``, and nobody else."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

HERE = Path(__file__).resolve().parent
DELAY_MS = 5.0
ACTIVE = 8
"""Profiled steps, as the snippet of ``docs/diagnose.md`` traces them."""


@pytest.fixture(scope="session")
def delayed_run(run_job, tmp_path_factory):
    """Pair (2, 3) of three on links ``DELAY_MS`` late each way."""
    return run_job("tp_job.py", tmp_path_factory.mktemp("delayed") / "kineto",
                   "--delay-group", "1", "--link-delay-ms", str(DELAY_MS),
                   "--active", str(ACTIVE), "--port", "29661")


@pytest.fixture(scope="session")
def clean_tp_run(run_job, tmp_path_factory):
    return run_job("tp_job.py", tmp_path_factory.mktemp("clean_tp") / "kineto",
                   "--active", str(ACTIVE), "--port", "29671")


def _diagnose(path: Path, capsys) -> dict:
    from tuner.cli import main as netsim

    assert netsim(["diagnose", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_delayed_link_is_named_alone(delayed_run, capsys):
    from netsim.traces.detect import read_traces

    out = _diagnose(delayed_run, capsys)
    assert [sl["ranks"] for sl in out["slow_links"]] == [[2, 3]], out["slow_links"]
    assert out["slow_links"][0]["family"].startswith("tp all_reduce")
    assert out["stragglers"] == [], out["stragglers"]
    calls = [c["end_s"] - c["start_s"] for c in read_traces(delayed_run).ranks[2].collectives
             if c["group"] == [2, 3]]
    assert len(calls) == ACTIVE * 4  # two row-parallel layers: forward and backward all-reduces
    assert np.median(calls) >= DELAY_MS * 1e-3  # every call waits for a message on the link


@pytest.mark.slow
def test_clean_tensor_parallel_run_names_nobody(clean_tp_run, capsys):
    out = _diagnose(clean_tp_run, capsys)
    assert out["slow_links"] == [] and out["stragglers"] == [], (out["slow_links"],
                                                                 out["stragglers"])
    assert not any("could be in any" in n for n in out["notes"])  # one group per rank


def test_relay_ports_keep_the_pairs_order():
    """A gloo pair's members each compare their own port with the other's to choose who
    connects; a relay port must compare as the peer's does, read either byte order."""
    sys.path.insert(0, str(HERE))
    from delayed_link import same_side

    assert same_side(40000, 50000, 50000 + 257)
    assert not same_side(40000, 50000, 30000)
    assert not same_side(0x1234, 0x1334, 0x1300)  # above as a port, below byte-swapped


def test_relay_delays_each_way():
    """An echo through ``link_relay.py`` with 50 ms each way takes at least 100 ms."""
    echo = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = echo.accept()
        with conn:
            while data := conn.recv(1024):
                conn.sendall(data)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    with echo, subprocess.Popen([sys.executable, str(HERE / "link_relay.py"),
                                 str(echo.getsockname()[1]), "0.05"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True) as relay:
        port = int(relay.stdout.readline())
        with socket.create_connection(("127.0.0.1", port)) as s:
            t0 = time.perf_counter()
            s.sendall(b"ping")
            assert s.recv(4) == b"ping"
            assert time.perf_counter() - t0 >= 0.1
        relay.stdin.close()  # the relay exits
        server.join()
