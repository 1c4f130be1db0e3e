"""The compiled hot path (Cython build of ``engine.py`` and ``qp.py``) gives bit-identical
results to the plain Python path: the result digest of every check scenario of
``netsim/packet/digest.py`` (FCTs, counters, ports, sampled series) and the event count,
compiled in this process against ``NETSIM_PURE_PYTHON=1`` in a child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from netsim.packet import build_mode
from netsim.packet.digest import SCENARIOS, result_digest, run_scenario

_DIGESTS = """
import json
from netsim.packet import build_mode
from netsim.packet.digest import SCENARIOS, result_digest, run_scenario
out = {}
for name in SCENARIOS:
    res = run_scenario(name)
    out[name] = [result_digest(res), res.events]
print(json.dumps({"build": build_mode.engine_build(), "digests": out}))
"""


def _child(code: str, pure: bool) -> dict:
    env = {**os.environ, build_mode.PURE_ENV: "1" if pure else ""}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_pure_python_switch_loads_the_sources():
    code = "import json; from netsim.packet import build_mode; " \
           "print(json.dumps(build_mode.engine_build()))"
    assert _child(code, pure=True) == "python"


@pytest.mark.skipif(build_mode.engine_build() != "compiled",
                    reason="the compiled hot path is not built here (installed without Cython or "
                           "a C compiler, or NETSIM_PURE_PYTHON set): nothing to compare")
def test_compiled_and_plain_paths_give_identical_results():
    pure = _child(_DIGESTS, pure=True)
    assert pure["build"] == "python"
    compiled = {}
    for name in SCENARIOS:
        res = run_scenario(name)
        compiled[name] = [result_digest(res), res.events]
    differ = [n for n in SCENARIOS if compiled[n] != pure["digests"][n]]
    assert not differ, f"compiled and plain paths differ on {differ}"


def test_a_simulator_with_pending_events_is_freed():
    # A run stopped with events still queued leaves cycles (entries -> callbacks -> simulator
    # -> heap); the garbage collector must reach them on either build (the compiled heap keeps
    # its entries in a Python list for that).
    import gc
    import weakref

    import numpy as np

    from netsim.packet import PacketConfig
    from netsim.packet.build import _make_qps, build_sim
    from netsim.packet.testbeds import ShortestPathRouter, star
    from netsim.scenario.traffic import Flow

    fab = star(5, host_gbps=400, latency_ns=1000)
    flows = [Flow(f"h{i + 1}", "h0", 400_000) for i in range(4)]
    cfg, rng = PacketConfig(), np.random.default_rng(0)
    sim = build_sim(fab, cfg, rng)
    _make_qps(sim, fab, flows, cfg, ShortestPathRouter(fab), rng)
    sim.run(2_000_000)  # 2 us: packets still in flight, wakes and arrivals still queued
    assert sim.events > 0 and (len(sim.q) + (len(sim.hq) if sim.hq is not None else 0)) > 0
    ref = weakref.ref(sim)
    del sim
    gc.collect()
    assert ref() is None
