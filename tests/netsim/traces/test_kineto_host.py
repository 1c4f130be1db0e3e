"""Issue #27 item 4: a profiler-only (Kineto) run of the CPU trainer records its host's cores
(``trainer_meta.host_cores``), so ``netsim calibrate`` fits the shared-host model on it as on
the native traces instead of pricing 8 ranks as if each had a core."""

from __future__ import annotations

from netsim.diagnose.calibrated import default_host_cores
from netsim.traces.detect import read_traces

from .test_integrity import write_kineto


def test_kineto_meta_with_host_cores_gives_the_host_model(tmp_path):
    d = write_kineto(tmp_path / "kineto", {})
    for f in d.glob("*.json"):  # both ranks: the trainer's meta since issue #27
        f.write_text(f.read_text().replace('\\"seed\\": 1', '\\"seed\\": 1, \\"host_cores\\": 2'
                                           ', \\"device\\": \\"cpu\\"'))
    run = read_traces(d)
    assert run.host == {"host_cores": 2.0}
    assert default_host_cores([run]) == 2.0


def test_kineto_meta_without_host_cores_has_no_host(tmp_path):
    run = read_traces(write_kineto(tmp_path / "kineto", {}))
    assert run.host == {}
    assert default_host_cores([run]) is None

