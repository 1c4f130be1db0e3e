"""Predicted vs published throughput of large runs (Megatron-LM 2021, MegaScale 2024).

The published figures are the papers' (cited in ``experiments/published/run.py``); only the
A100 ``gemm_efficiency`` was fitted, on Table 1's first row. Every other row must land within
15% (the issue's target).
"""

from __future__ import annotations

import pytest

from experiments.published.run import fit_gemm_efficiency, rows
from netsim.model.hardware import A100

TOLERANCE = 0.15


@pytest.fixture(scope="module")
def table():
    return rows(A100)


def test_profile_efficiency_is_the_row1_fit():
    assert fit_gemm_efficiency() == pytest.approx(A100.gemm_efficiency, abs=0.01)


def test_every_published_row_within_tolerance(table):
    bad = [f"{r['source']} {r['model']} {r['gpus']}: {r['error']:+.1%}" for r in table
           if abs(r["error"]) > TOLERANCE]
    assert not bad, bad


def test_megascale_beats_megatron_baseline(table):
    """MegaScale's overlaps give it 1.34x Megatron-LM's MFU; ours must at least order them."""
    ms = next(r for r in table if r["source"] == "MegaScale (abstract)")
    mg = next(r for r in table if "baseline" in r["source"])
    assert ms["predicted"] > 1.15 * mg["predicted"]
