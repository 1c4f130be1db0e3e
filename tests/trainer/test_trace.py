"""The traces against the analytic communication volumes and the 1F1B schedule."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from trainer.config import preset
from trainer.flops import layer_forward_flops, training_flops
from trainer.mesh import Layout

ELEM = 8  # float64 in the self-check
M, GLOBAL_BATCH = 4, 16

META_KEYS = {"schema", "rank", "world_size", "tp", "pp", "dp", "order", "backend", "device",
             "dtype", "model", "micro_batches", "micro_batch_size", "global_batch", "tp_rank",
             "pp_rank", "dp_rank", "host", "run_id"}
KEYS = {
    "compute": {"step", "phase", "layer", "microbatch", "start_s", "end_s", "flops"},
    "collective": {"step", "op", "kind", "group", "bytes", "dtype", "start_s", "end_s", "overlapped"},
    "iteration": {"step", "iteration_s", "loss", "tokens", "tokens_per_s", "model_flops",
                  "achieved_flops_per_s", "mfu"},
    "end": {"run_id", "steps"},
    "host": {"host_cores", "ranks_per_host", "wall_s", "cpu_s", "host_busy_cores", "loadavg_1m"},
}
LAYOUTS = {"tp2_pp2_dp2": (2, 2, 2, True), "tp2": (2, 1, 1, True), "pp2_untied": (1, 2, 1, False),
           "dp2": (1, 1, 2, True)}


def rank_params(tp: int, pp: int, stage: int, tied: bool) -> int:
    """Parameters held by one rank: TP-split matrices, replicated norms and row-parallel biases."""
    m = preset("tiny")
    h, f, v, s = m.hidden, m.ffn_hidden, m.vocab, m.seq
    per_layer = (3 * h * h + 3 * h) // tp + h * h // tp + h + 4 * h + (h * f + f) // tp + h * f // tp + h
    n = per_layer * m.layers // pp
    if stage == 0:
        n += v * h // tp + s * h
    if stage == pp - 1:
        n += 2 * h + (v * h // tp if (not tied or pp > 1) else 0)
    return n


def by_step(records, **match):
    out = defaultdict(list)
    for r in records:
        if all(r.get(k) == v for k, v in match.items()):
            out[r["step"]].append(r)
    return out


@pytest.mark.parametrize("case", sorted(LAYOUTS))
def test_collective_bytes_equal_analytic_volumes(selfcheck, read_trace, case):
    _, out = selfcheck
    tp, pp, dp, tied = LAYOUTS[case]
    lay, m = Layout(tp=tp, dp=dp, pp=pp), preset("tiny")
    mbs = GLOBAL_BATCH // (dp * M)
    act = mbs * m.seq * m.hidden * ELEM
    for rank in range(lay.world_size):
        recs = read_trace(out / case, rank)
        c = lay.coords(rank)
        first, last = c["pp"] == 0, c["pp"] == pp - 1
        for _step, rs in by_step(recs, type="collective").items():
            sizes = Counter((r["op"], r["kind"], r["bytes"]) for r in rs)
            if tp > 1:  # f/g per layer fwd+bwd, embedding g, head f, three CE all-reduces
                n_act = M * (4 * m.layers // pp + first + last)
                assert sizes[("all_reduce", "tp", act)] == n_act
                assert sizes[("all_reduce", "tp", mbs * m.seq * ELEM)] == 3 * M * last
            assert sum(r["kind"] == "tp" for r in rs) == (0 if tp == 1 else n_act + 3 * M * last)
            assert sizes[("send", "pp", act)] == M * ((not last) + (not first))
            assert sizes[("recv", "pp", act)] == M * ((not last) + (not first))
            dp_bytes = sum(r["bytes"] for r in rs if r["kind"] == "dp")
            assert dp_bytes == (rank_params(tp, pp, c["pp"], tied) * ELEM if dp > 1 else 0)
            emb = [r for r in rs if r["kind"] == "other" and r["group"] != list(range(lay.world_size))]
            assert sum(r["bytes"] for r in emb) == (m.vocab * m.hidden // tp * ELEM
                                                    if (tied and pp > 1) else 0)


def test_send_recv_pairs_match_between_stages(selfcheck, read_trace):
    _, out = selfcheck
    sends = [r for r in read_trace(out / "pp2_untied", 0) if r.get("op") == "send"]
    recvs = [r for r in read_trace(out / "pp2_untied", 1) if r.get("op") == "recv"]
    assert [r["group"] for r in sends] == [[0, 1]] * len(sends)
    assert [(r["bytes"], r["group"]) for r in sends] == [(r["bytes"], r["group"]) for r in recvs]


def test_sharded_optimizer_moves_each_padded_bucket_twice(selfcheck, read_trace):
    _, out = selfcheck
    recs = read_trace(out / "dp2_rs", 0)
    for _step, rs in by_step(recs, type="collective", kind="dp").items():
        rs_bytes = [r["bytes"] for r in rs if r["op"] == "reduce_scatter"]
        ag_bytes = [r["bytes"] for r in rs if r["op"] == "all_gather"]
        assert sorted(rs_bytes) == sorted(ag_bytes)
        params = rank_params(1, 1, 0, True) * ELEM
        assert params <= sum(rs_bytes) < params + len(rs_bytes) * 2 * ELEM  # pad to dp elements


def test_dp_buckets_overlap_the_backward(selfcheck, read_trace):
    _, out = selfcheck
    dp = [r for r in read_trace(out / "tp2_pp2_dp2", 0) if r.get("kind") == "dp"]
    assert sum(r["overlapped"] for r in dp) >= len(dp) // 2 > 0
    ends = {r["step"]: r["end_s"] for r in read_trace(out / "tp2_pp2_dp2", 0)
            if r.get("phase") == "optimizer"}
    assert all(r["end_s"] <= ends[r["step"]] for r in dp)  # waited before the step


def expected_1f1b(stage: int, stages: int, m: int) -> list[tuple[str, int]]:
    """Megatron's 1F1B order on one stage: warm-up forwards, steady F/B pairs, cool-down."""
    warm = min(stages - stage - 1, m)
    seq = [("forward", i) for i in range(warm)]
    for i in range(m - warm):
        seq += [("forward", warm + i), ("backward", i)]
    return seq + [("backward", i) for i in range(m - warm, m)]


@pytest.mark.parametrize("rank, stage", [(0, 0), (1, 1)])
def test_pipeline_runs_1f1b(selfcheck, read_trace, rank, stage):
    _, out = selfcheck
    recs = read_trace(out / "pp2_untied", rank)
    layer = 2 * stage  # first block of the stage
    for _step, rs in by_step(recs, type="compute", name="layer", layer=layer).items():
        order = [(r["phase"], r["microbatch"]) for r in sorted(rs, key=lambda r: r["start_s"])]
        assert order == expected_1f1b(stage, 2, M)


def test_compute_records_cover_every_layer_and_microbatch(selfcheck, read_trace):
    _, out = selfcheck
    m = preset("tiny")
    fwd = layer_forward_flops(m, GLOBAL_BATCH // (2 * M)) / 2
    for rank, layers in ((0, [0, 1]), (7, [2, 3])):
        recs = [r for r in read_trace(out / "tp2_pp2_dp2", rank)
                if r["type"] == "compute" and r["name"] == "layer"]
        seen = Counter((r["step"], r["layer"], r["microbatch"], r["phase"], r["flops"]) for r in recs)
        expect = {(s, layer, mb, ph, fl): 1 for s in range(3) for layer in layers
                  for mb in range(M) for ph, fl in (("forward", fwd), ("backward", 2 * fwd))}
        assert dict(seen) == expect
        assert all(r["start_s"] <= r["end_s"] for r in recs)


def test_every_record_has_the_schema_keys(selfcheck, read_trace):
    _, out = selfcheck
    recs = read_trace(out / "tp2_pp2_dp2", 3)
    assert recs[0]["type"] == "meta" and META_KEYS <= set(recs[0])
    assert recs[0]["schema"] == "trainer-trace/1"
    assert set(recs[0]["model"]) >= {"layers", "hidden", "heads", "ffn_hidden", "seq", "vocab"}
    for r in recs[1:]:
        assert KEYS[r["type"]] <= set(r), r
    its = [r for r in recs if r["type"] == "iteration"]
    assert [r["step"] for r in its] == [0, 1, 2]
    assert recs[-1] == {"type": "end", "run_id": recs[0]["run_id"], "steps": 3}
    for r in its:
        assert r["model_flops"] == training_flops(preset("tiny"), GLOBAL_BATCH)
        assert r["tokens"] == GLOBAL_BATCH * 16
        assert r["tokens_per_s"] == pytest.approx(r["tokens"] / r["iteration_s"])
        assert r["mfu"] is None  # no peak on CPU unless --peak-flops is given


def test_rank_order_is_applied(selfcheck, read_trace):
    # order pp-dp-tp: pp is innermost, so ranks 0 and 1 are the two stages of one pipeline
    _, out = selfcheck
    metas = [read_trace(out / "resume_full", r)[0] for r in range(4)]
    assert [(m["pp_rank"], m["dp_rank"]) for m in metas] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    sends = [r for r in read_trace(out / "resume_full", 2) if r.get("op") == "send"]
    assert sends and all(r["group"] == [2, 3] for r in sends)
