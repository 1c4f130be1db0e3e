"""The end-to-end step of the shared-host fit (``fit_host_on_iterations``) against a known truth.

Synthetic traces give the per-record fits; their iteration times are then replaced by what a
known host model predicts (compute 1.3x slower than the records say, a per-message and a
per-iteration CPU cost, the per-byte cost of the per-record fit). The model is linear in
those unknowns, so the refit must recover them and reproduce every iteration time, also of a
run it was not fitted on.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from netsim.diagnose.calibration import (
    _host_variant,
    fit_calibration,
    fit_host_on_iterations,
    job_from_trace,
)
from netsim.traces.records import read_trace_dir
from netsim.workload import predict

from .conftest import write_trace

TRUTH = {"compute_scale": 1.3, "cpu_msg_s": 2e-4, "cpu_iter_s": 0.05}
CORES = 2.0
LAYOUTS = [(1, 1, 8), (2, 1, 4), (4, 1, 2), (1, 2, 4), (2, 2, 2)]


def _with_truth_iterations(run, truth_cal):
    t = predict(job_from_trace(run), hardware=truth_cal.hardware(), calibration=truth_cal)
    assert t.host_s >= t.pipeline_s  # host-bound: the regime the refit is for
    for rec in run.ranks[0].iterations:
        rec["iteration_s"] = t.iteration_s
    return t.iteration_s


@pytest.fixture
def setup(tmp_path):
    runs = [read_trace_dir(write_trace(tmp_path / f"t{tp}{pp}{dp}", tp, pp, dp, mb=2))
            for tp, pp, dp in LAYOUTS]
    base = fit_calibration(runs, host_cores=CORES, comm_weight=0.5)
    per_byte = 1.0 / base.host.get("cpu_bytes_per_s", math.inf)
    truth = _host_variant(base, TRUTH["compute_scale"], TRUTH["cpu_msg_s"], TRUTH["cpu_iter_s"],
                          per_byte)
    expected = [_with_truth_iterations(r, truth) for r in runs]
    return runs, base, truth, expected


def test_refit_recovers_the_host_model(setup):
    runs, base, _truth, expected = setup
    cal = fit_host_on_iterations(base, runs[:4])
    for key, value in TRUTH.items():
        assert cal.host[key] == pytest.approx(value, rel=1e-6), key
    assert cal.host["iteration_fit"]["runs"] == 4 and cal.host["iteration_fit"]["max_rel"] < 1e-6
    assert cal.host["iteration_fit"]["terms"] == ["compute_scale", "cpu_msg_s", "cpu_iter_s"]
    held = runs[4]  # not fitted on
    got = predict(job_from_trace(held), hardware=cal.hardware(), calibration=cal).iteration_s
    assert got == pytest.approx(expected[4], rel=1e-6)


def test_refit_needs_enough_host_bound_runs(setup):
    runs, base, _truth, _ = setup
    cal = fit_host_on_iterations(base, runs[:3])
    assert "skipped" in cal.host["iteration_fit"]
    assert cal.compute["forward"].rate == base.compute["forward"].rate


def test_gpu_calibration_is_left_alone(setup):
    runs, _base, _truth, _ = setup
    wall = fit_calibration(runs)  # no host model
    assert fit_host_on_iterations(wall, runs) is wall


def test_refit_keeps_a_degree_of_freedom(setup):
    """Four runs fit three unknowns (the per-byte cost keeps its per-record value), so a
    noisy run is averaged, not passed through; five runs free the fourth."""
    runs, base, _truth, expected = setup
    noisy = runs[:4]
    for rec in noisy[0].ranks[0].iterations:
        rec["iteration_s"] *= 1.2
    cal = fit_host_on_iterations(base, noisy)
    assert cal.host.get("cpu_bytes_per_s") == base.host.get("cpu_bytes_per_s")
    assert cal.host["iteration_fit"]["max_rel"] > 0.01  # not an exact interpolation
    got = [predict(job_from_trace(r), hardware=cal.hardware(), calibration=cal).iteration_s
           for r in noisy[1:]]
    assert np.max(np.abs(np.array(got) / expected[1:4] - 1)) < 0.2
    five = fit_host_on_iterations(base, runs)
    assert len(five.host["iteration_fit"]["terms"]) == 4


def test_repeats_of_a_layout_free_no_unknown(setup):
    """Two repeats of four layouts are four layouts: the unknowns enter a repeat's row as they
    enter its layout's, so eight runs freed all four and the fit passed through the four
    layouts (compute_scale 0.60 on the 2026-12-06 held-out runs, then -34% on a held-out
    sequence length). Three are freed, as for one repeat."""
    runs, base, _truth, _ = setup
    again = [copy.deepcopy(r) for r in runs[:4]]  # a second repeat of the same layouts
    cal = fit_host_on_iterations(base, runs[:4] + again)
    assert cal.host["iteration_fit"]["runs"] == 8
    assert cal.host["iteration_fit"]["terms"] == ["compute_scale", "cpu_msg_s", "cpu_iter_s"]
