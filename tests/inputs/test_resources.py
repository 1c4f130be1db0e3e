"""Resource bounds: inputs too big for this machine are refused up front with the estimate
and the limit (issue #16), and the file fuzzer finds no traceback, hang or nonsense accepted."""

from __future__ import annotations

import contextlib
import io

import pytest

from inputspec import ResourceError, check_memory
from tuner.cli import main


def _cli(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(argv)
    return rc, err.getvalue().strip()


def test_ten_million_gpus_at_packet_level_refused(tmp_path):
    path = tmp_path / "ten-million.yaml"
    path.write_text("kind: fat_tree\nname: ten-million\nk: 344\n")  # k^3/4 = 10,176,896 GPUs
    rc, err = _cli(["simulate", "--level", "packet", "--fabric", str(path)])
    assert rc == 2 and len(err.splitlines()) == 1
    assert "at packet level needs about" in err and "GiB" in err and "limit here is" in err
    assert str(path) in err


def test_fabric_build_refused_over_limit(monkeypatch):
    monkeypatch.setenv("NETSIM_MEMORY_LIMIT_BYTES", str(10 * 2**20))
    rc, err = _cli(["topo", "megascale", "--json"])
    assert rc == 2
    assert "fabric megascale needs about" in err and "0.0 GiB" in err  # the 10 MiB limit


def test_job_too_big_refused():
    rc, err = _cli(["predict", "--tp", "8", "--pp", "8", "--dp", "16000000"])
    assert rc == 2 and "a job of 1,024,000,000 ranks needs about" in err


def test_check_memory_names_estimate_and_limit(monkeypatch):
    monkeypatch.setenv("NETSIM_MEMORY_LIMIT_BYTES", str(2**30))
    check_memory(2**29, "thing", "basis")  # under the limit: no error
    with pytest.raises(ResourceError, match=r"thing needs about 2\.0 GiB of memory; "
                                            r"the limit here is 1\.0 GiB.*\(estimate: basis\)"):
        check_memory(2**31, "thing", "basis")


def test_huge_pipeline_schedule_refused():
    """10^12 sequences per iteration would be 2.5 x 10^11 pipeline steps: refused up front."""
    rc, err = _cli(["predict", "--job", "tiny", "--global-batch", "1000000000000"])
    assert rc == 2 and "pipeline schedule" in err and "limit" in err


def test_time_bound(monkeypatch):
    from inputspec import check_time

    monkeypatch.setenv("NETSIM_TIME_LIMIT_S", "10")
    check_time(5, "it", "basis")
    with pytest.raises(ResourceError, match=r"would take about 20 s; the limit is 10 s.*\(estimate: basis\)"):
        check_time(20, "it", "basis")
