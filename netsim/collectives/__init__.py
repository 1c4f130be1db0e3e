"""NCCL-style collectives on the flow engine.

Public API::

    from netsim.collectives import (run_collective, run_concurrent, simulate_calls,
                                    CollectiveCall, CollectiveResult, OPS, busbw_factor)

``run_collective(fabric, "allreduce", ranks=1024, size_bytes=1 << 30, nccl=NcclConfig())``
returns time, algbw and busbw in nccl-tests' terms, per-link load and ECMP collision
statistics; ``run_concurrent(fabric, calls, nccl)`` returns each call's finish time when they
share the fabric; ``alltoall_load(fabric, ranks, size_bytes, nccl)`` is the all-to-all in load
mode (per-link bytes routed in bulk, for 10,000+ GPUs). See ``docs/flow-engine.md``.
"""

from netsim.collectives.algorithms import OPS, Plan, build_plan, busbw_factor, canonical_op
from netsim.collectives.load import alltoall_load
from netsim.collectives.runner import (
                                       CollectiveCall,
                                       CollectiveResult,
                                       resolve_ranks,
                                       run_collective,
                                       run_concurrent,
                                       simulate_calls,
)

__all__ = ["OPS", "CollectiveCall", "alltoall_load", "CollectiveResult", "Plan", "build_plan", "busbw_factor",
           "canonical_op", "resolve_ranks", "run_collective", "run_concurrent", "simulate_calls"]
