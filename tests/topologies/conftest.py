"""Fixtures of the topologies tests: built fabrics (cheap, shared per session) and helpers."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from topologies import load_fabric

LEVEL = {"nic": 0, "tor": 1, "agg": 2, "core": 3}


def _preset(name: str):
    """A session fixture: the preset fabric ``name``, built once."""

    @pytest.fixture(scope="session")
    def fabric():
        return load_fabric(name)

    return fabric


k4 = _preset("fat-tree-k4")
k8 = _preset("fat-tree-k8")
leafspine = _preset("leaf-spine-64")
megascale = _preset("megascale")


@pytest.fixture(scope="session")
def net_graph():
    """Factory: the NIC + switch part of a fabric's graph (GPUs and NVSwitches removed)."""
    cache = {}

    def make(fabric):
        if fabric.name not in cache:
            g = fabric.graph
            keep = [n for n, r in g.nodes(data="role") if r in LEVEL]
            cache[fabric.name] = nx.DiGraph(g.subgraph(keep))
        return cache[fabric.name]

    return make


@pytest.fixture(scope="session")
def check_path():
    """Validator: a NIC-to-NIC link list is contiguous, valley-free and returns its length."""

    def check(fabric, links, src_nic: int, dst_nic: int) -> int:
        links = np.asarray(links)
        if src_nic == dst_nic:
            assert links.size == 0
            return 0
        nodes = [int(fabric.link_src[links[0]])] + fabric.link_dst[links].tolist()
        assert np.array_equal(fabric.link_src[links[1:]], fabric.link_dst[links[:-1]])
        assert fabric.nodes[nodes[0]] == fabric.nics[src_nic]
        assert fabric.nodes[nodes[-1]] == fabric.nics[dst_nic]
        levels = [LEVEL[str(fabric.node_role[n])] for n in nodes]
        steps = np.diff(levels)
        assert set(steps.tolist()) <= {-1, 1}, f"hop skips a tier: {levels}"
        peak = int(np.argmax(levels))
        assert (steps[:peak] == 1).all() and (steps[peak:] == -1).all(), f"valley: {levels}"
        return len(links)

    return check
