"""Resource bounds: refuse up front what would need more memory than the machine has."""

from __future__ import annotations

import os

from inputspec.core import InputError

#: Share of the available memory one run may plan to use.
MEMORY_SHARE = 0.8
#: ``NETSIM_MEMORY_LIMIT_BYTES`` overrides the limit (tests, shared machines).
ENV_LIMIT = "NETSIM_MEMORY_LIMIT_BYTES"
#: ``NETSIM_TIME_LIMIT_S`` overrides the longest run planned up front (default one hour).
ENV_TIME_LIMIT = "NETSIM_TIME_LIMIT_S"
DEFAULT_TIME_LIMIT_S = 3600.0


class ResourceError(InputError):
    """The input is well-formed but too big for this machine."""


def available_memory_bytes() -> int:
    """MemAvailable from /proc/meminfo, else physical pages x page size."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 2**40


def memory_limit_bytes() -> int:
    """The most one run may plan to allocate."""
    env = os.environ.get(ENV_LIMIT)
    if env:
        return int(float(env))
    return int(available_memory_bytes() * MEMORY_SHARE)


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


def check_memory(estimate_bytes: float, what: str, how: str, source: str = "input") -> None:
    """Refuse when ``estimate_bytes`` exceeds the limit; the message gives both and the basis.

    ``what`` names the thing (``"fabric megascale-4x at packet level"``), ``how`` the estimate's
    basis (``"49,152 GPUs x 2 KiB per node"``).
    """
    limit = memory_limit_bytes()
    if estimate_bytes > limit:
        # the limit before the basis: a long basis is what a cut message loses
        raise ResourceError(source, problem=f"{what} needs about {_gib(estimate_bytes)} of "
                            f"memory; the limit here is {_gib(limit)} ({MEMORY_SHARE:.0%} of "
                            f"available memory, or ${ENV_LIMIT}): shrink it (estimate: {how})")


def time_limit_s() -> float:
    """The longest run one input may plan (``$NETSIM_TIME_LIMIT_S``, default one hour)."""
    env = os.environ.get(ENV_TIME_LIMIT)
    return float(env) if env else DEFAULT_TIME_LIMIT_S


def check_time(estimate_s: float, what: str, how: str, source: str = "input") -> None:
    """Refuse when the estimated run time exceeds the limit; the message gives both."""
    limit = time_limit_s()
    if estimate_s > limit:
        raise ResourceError(source, problem=f"{what} would take about {estimate_s:,.0f} s; the "
                            f"limit is {limit:,.0f} s (${ENV_TIME_LIMIT}): shrink it "
                            f"(estimate: {how})")
