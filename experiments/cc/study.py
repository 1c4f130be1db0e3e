"""CC study: one sweep point = one traffic pattern under one congestion control, one seed.

:func:`pattern_point` runs a pattern of :mod:`netsim.validation.jobtraffic` on a 4-ToR
non-blocking leaf-spine (spines = NICs per ToR) in the packet engine and returns its figures
(``run_scenario``'s dict: PFC pauses, time paused, HoL victims, goodput, FCT percentiles).
"""

from __future__ import annotations

TORS = 4


def pattern_point(scenario: str, cc: str, seed: int, hosts_per_tor: int, msg_bytes: int,
                  dcqcn_params: dict | None = None) -> dict:
    """``scenario`` under ``cc``; ``dcqcn_params`` override DCQCN's defaults (DCQCN only)."""
    from netsim.validation.jobtraffic import JobScenario, run_scenario

    sc = JobScenario(scenario, tors=TORS, hosts_per_tor=int(hosts_per_tor),
                     spines=int(hosts_per_tor), msg_bytes=int(msg_bytes))
    params = dcqcn_params if cc == "dcqcn" else None
    return run_scenario(sc, cc, cc_params=params or None, seed=int(seed))
