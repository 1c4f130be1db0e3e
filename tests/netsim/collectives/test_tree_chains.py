"""The double binary tree's chains inside servers, built in one array operation where every
server has as many members, are the per-server rotations NCCL's chain takes (the loop form)."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.collectives.algorithms import _chains


def _loop(members, c):
    chains = [np.roll(m, -(c % len(m))) for m in members]
    return (np.array([m[c % len(m)] for m in members]),
            np.concatenate([s[:-1] for s in chains]), np.concatenate([s[1:] for s in chains]))


@pytest.mark.parametrize("sizes", [[8, 8, 8], [1, 1], [4], [3, 5, 2, 8]])
@pytest.mark.parametrize("c", [0, 1, 5, 17])
def test_chains_are_the_rotations_of_every_server(sizes, c):
    rng = np.random.default_rng(sum(sizes) + c)
    gpus = rng.permutation(100)[:sum(sizes)].astype(np.int64)
    members = np.split(gpus, np.cumsum(sizes)[:-1])
    for got, want in zip(_chains(members, c), _loop(members, c), strict=True):
        assert got.dtype == np.int64 and np.array_equal(got, want)
