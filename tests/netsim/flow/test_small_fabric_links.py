"""The per-fabric link mask the flow engine keeps (``topologies.fabric.kind_mask``) works on
the packet engine's small testbeds too (not a ``Fabric``)."""

from __future__ import annotations

import numpy as np

from netsim.flow.stats import fabric_link_mask
from netsim.packet.testbeds import dumbbell


def test_small_testbed_fabric_mask():
    small = dumbbell(2, 2)
    mask = fabric_link_mask(small)
    assert np.array_equal(mask, np.asarray(small.link_kind).astype(str) == "tor-agg")
    assert mask.any() and mask is fabric_link_mask(small)
