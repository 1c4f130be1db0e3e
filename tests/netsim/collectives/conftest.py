"""Fabrics for the collective tests."""

from __future__ import annotations

import pytest

from topologies import Clos3Spec, clos3


@pytest.fixture(scope="session")
def one_tor():
    """8 single-GPU servers under one ToR: no ECMP choice on a ring, a non-blocking fabric."""
    return clos3(Clos3Spec(name="one-tor", servers=8, gpus_per_server=1, nics_per_server=1,
                           servers_per_tor_group=8, switch_radix=16))


@pytest.fixture(scope="session")
def rail_pod():
    """4 servers x 8 GPUs, 8 rails of one ToR each: rail-aligned traffic never leaves a ToR."""
    return clos3(Clos3Spec(name="rail-pod", servers=4, gpus_per_server=8, nics_per_server=8,
                           servers_per_tor_group=4, switch_radix=16))


@pytest.fixture(scope="session")
def two_tier(fabric_400g):
    """32 single-GPU servers on 4 ToRs with 8 x 400G uplinks each (ECMP across 8 aggs)."""
    return fabric_400g
