"""``topologies.fabric.gpu_links`` and ``kind_mask``: computed once per fabric, and the links a
direct scan of the link arrays finds."""

from __future__ import annotations

import numpy as np
import pytest

from topologies import load_fabric
from topologies.fabric import gpu_links, kind_mask


@pytest.fixture(scope="module")
def fabric():
    return load_fabric("fat-tree-k4")


@pytest.mark.parametrize("kind", ["pcie", "nvlink", "host"])
def test_gpu_links_are_the_links_a_scan_finds(fabric, kind):
    out, into = gpu_links(fabric, kind)
    kinds = np.asarray(fabric.link_kind).astype(str)
    for pos, gpu in enumerate(fabric.gpus):
        node = fabric.node_index[gpu]
        for got, end in ((out[pos], fabric.link_src), (into[pos], fabric.link_dst)):
            hits = np.flatnonzero((kinds == kind) & (end == node))
            assert got == (hits[0] if len(hits) else -1)
    assert gpu_links(fabric, kind)[0] is out  # kept, not recomputed
    with pytest.raises(ValueError):
        out[0] = 0  # shared: read-only


def test_kind_mask(fabric):
    kinds = np.asarray(fabric.link_kind).astype(str)
    mask = kind_mask(fabric, ("tor-agg", "agg-core"))
    assert np.array_equal(mask, np.isin(kinds, ["tor-agg", "agg-core"]))
    assert mask.any() and not mask.all()
    assert kind_mask(fabric, ("tor-agg", "agg-core")) is mask

