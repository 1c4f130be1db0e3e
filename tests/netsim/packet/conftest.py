"""Fixtures of the packet-engine tests: crafted fabrics and a run helper."""

from __future__ import annotations

import pytest

from netsim.packet import PacketConfig, simulate_packets
from netsim.packet.testbeds import ShortestPathRouter


@pytest.fixture
def run():
    """``run(fabric, flows, **config_fields)`` on a crafted fabric with its shortest-path router."""

    def _run(fabric, flows, router=None, seed=0, flaps=(), **cfg):
        config = PacketConfig(**cfg)
        return simulate_packets(fabric, flows, config, seed=seed,
                                router=router or ShortestPathRouter(fabric, seed=seed), flaps=flaps)

    return _run
