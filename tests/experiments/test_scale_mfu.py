"""experiments/scale_mfu: overlaps and network what-ifs move MFU the way physics says."""

from __future__ import annotations

import pytest

from experiments.scale_mfu.study import mfu_point


def test_overlapping_communication_never_lowers_mfu() -> None:
    none, every = (mfu_point(512, ov, "base", global_batch=512) for ov in ("none", "all"))
    assert every["mfu"] >= none["mfu"]
    assert every["exposed_comm_s"] <= none["exposed_comm_s"]


def test_network_bandwidth_orders_mfu_across_tor_groups() -> None:
    # 1,536 GPUs = 192 servers = three ToR groups: DP traffic crosses the aggregation tier
    mfu = {net: mfu_point(1536, "none", net, global_batch=768)["mfu"]
           for net in ("nic_x0.5", "base", "nic_x2")}
    assert mfu["nic_x0.5"] < mfu["base"] < mfu["nic_x2"]


def test_aggregation_what_ifs_do_not_touch_a_job_under_one_tor_group() -> None:
    # 512 GPUs = 64 servers = one ToR group: nothing crosses the aggregation or core tier
    base = mfu_point(512, "none", "base", global_batch=512)
    for net in ("agg_2to1", "spine_down"):
        assert mfu_point(512, "none", net, global_batch=512)["mfu"] == pytest.approx(
            base["mfu"], rel=1e-9)
