"""Fabrics shared by the netsim tests of more than one folder."""

from __future__ import annotations

import pytest

from topologies import Clos3Spec, clos3


@pytest.fixture(scope="session")
def fabric_400g():
    """4 ToRs x 8 servers, one 400G NIC each, 8 x 400G uplinks per ToR (1:1, two tiers: ECMP
    across 8 aggs)."""
    return clos3(Clos3Spec(name="ecmp-400", servers=32, gpus_per_server=1, nics_per_server=1,
                           servers_per_tor_group=8, switch_radix=16, nic_speed_gbps=400,
                           port_speed_gbps=400, tor_downlink_split=1))
