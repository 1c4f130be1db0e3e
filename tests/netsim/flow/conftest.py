"""Small fabrics for the flow-engine tests (built with the clos3 builder); ``fabric_400g``
is in ``tests/netsim/conftest.py``."""

from __future__ import annotations

import pytest

from topologies import Clos3Spec, clos3


@pytest.fixture(scope="session")
def fabric_2x200g():
    """Same switches with every ToR down port split 2 x 200G: 16 x 200G servers per ToR."""
    return clos3(Clos3Spec(name="ecmp-2x200", servers=64, gpus_per_server=1, nics_per_server=1,
                           servers_per_tor_group=16, switch_radix=16, nic_speed_gbps=200,
                           port_speed_gbps=400, tor_downlink_split=2))
