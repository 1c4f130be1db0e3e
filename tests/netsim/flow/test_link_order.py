"""The counting sort of incidence entries by link is numpy's stable argsort, exactly."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.flow.link_order import MIN_ENTRIES, njit, stable_order


@pytest.mark.skipif(njit is None, reason="the counting sort needs numba")
@pytest.mark.parametrize("num_keys", [1, 7, 5000, 200_000])
def test_counting_sort_is_the_stable_argsort(rng, num_keys):
    keys = rng.integers(0, num_keys, 3 * MIN_ENTRIES + 11)
    keys[:100] = num_keys - 1  # runs of one key: their input order must be kept
    got = stable_order(keys, num_keys)
    assert got.dtype == np.int64
    assert np.array_equal(got, np.argsort(keys, kind="stable"))


def test_keys_outside_the_range_fall_back_to_numpy(rng):
    keys = rng.integers(-3, 50, 2 * MIN_ENTRIES)
    assert np.array_equal(stable_order(keys, 40), np.argsort(keys, kind="stable"))
    assert np.array_equal(stable_order(keys.astype(float), 60), np.argsort(keys, kind="stable"))
