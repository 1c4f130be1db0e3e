"""The placement verdict says why placement gains nothing, and how much it gains when it
does (the sentence ``netsim recommend`` and ``netsim place`` print)."""

from __future__ import annotations

import numpy as np

from tuner.placement import Placement, verdict


def _p(name, tor_gb, pod_gb, t):
    return Placement(name, np.arange(8), tor_gb * 1e9, pod_gb * 1e9, 0.0, t)


def test_fewer_bytes_same_time_says_why():
    text = verdict({"linear": _p("linear", 40, 10, 1.0), "topo": _p("topo", 20, 0, 1.0002)})
    assert "cross-ToR 40.0 -> 20.0 GB" in text
    assert "no gain over linear" in text and "do not limit the iteration" in text


def test_gain_says_how_much():
    text = verdict({"linear": _p("linear", 40, 10, 1.10), "topo": _p("topo", 20, 0, 1.0)})
    assert "(+10.00% throughput)" in text and "no gain" not in text


def test_aligned_order_says_why():
    text = verdict({"linear": _p("linear", 40, 10, 1.0), "topo": _p("topo", 40, 10, 1.0)})
    assert text.startswith("topo gives no gain over linear: the scheduler's order is already "
                           "ToR-aligned")


def test_verdict_and_choice_agree():
    # topo_gains (what netsim recommend applies) is false exactly where the verdict says
    # "no gain"; a gain within the tie is no gain
    from tuner.placement import topo_gains

    same = {"linear": _p("linear", 40, 10, 1.0), "topo": _p("topo", 40, 10, 1.0)}
    fewer = {"linear": _p("linear", 40, 10, 1.0), "topo": _p("topo", 20, 0, 0.9995)}
    faster = {"linear": _p("linear", 40, 10, 1.10), "topo": _p("topo", 20, 0, 1.0)}
    for res in (same, fewer):
        assert not topo_gains(res) and "no gain" in verdict(res)
    assert topo_gains(faster) and "no gain" not in verdict(faster)
