"""Rank layout (Megatron-Core order, innermost first) and placement files."""

from __future__ import annotations

import json

import pytest

from trainer.mesh import Layout, build_mesh, load_placement, rank_from_placement


def test_megatron_example_16_ranks_tp2_pp4():
    # Megatron-Core parallel_state docstring: TP=2, PP=4 on 16 GPUs (shared/reference 6.1)
    lay = Layout(tp=2, dp=2, pp=4)
    assert lay.groups("tp")[:2] == [[0, 1], [2, 3]]
    assert lay.groups("dp")[:2] == [[0, 2], [1, 3]]
    assert lay.groups("pp")[0] == [0, 4, 8, 12]


@pytest.mark.parametrize("order", ["tp-dp-pp", "tp-pp-dp", "dp-tp-pp", "pp-dp-tp"])
def test_coords_round_trip_and_groups_partition(order):
    lay = Layout(tp=2, dp=3, pp=2, order=order)
    assert [lay.rank(**lay.coords(r)) for r in range(12)] == list(range(12))
    for axis in ("tp", "dp", "pp"):
        groups = lay.groups(axis)
        assert sorted(r for g in groups for r in g) == list(range(12))
        for g in groups:  # members differ only in this axis
            cs = [lay.coords(r) for r in g]
            assert [c[axis] for c in cs] == list(range(getattr(lay, axis)))
            others = {tuple(v for k, v in c.items() if k != axis) for c in cs}
            assert len(others) == 1


def test_innermost_axis_is_contiguous():
    assert Layout(tp=4, dp=2, pp=1, order="tp-dp-pp").groups("tp")[0] == [0, 1, 2, 3]
    assert Layout(tp=4, dp=2, pp=1, order="dp-tp-pp").groups("dp")[0] == [0, 1]


def test_build_mesh_creates_every_group_in_one_order():
    created = []
    lay = Layout(tp=2, dp=2, pp=2)
    mesh = build_mesh(lay, 5, new_group=lambda ranks: created.append(tuple(ranks)) or len(created))
    assert mesh.coords == {"tp": 1, "cp": 0, "ep": 0, "dp": 0, "pp": 1}
    assert mesh.tp.ranks == (4, 5) and mesh.dp.ranks == (5, 7) and mesh.pp.ranks == (1, 5)
    assert mesh.embedding.ranks == (1, 5) and mesh.last_stage
    again = []
    build_mesh(lay, 0, new_group=lambda ranks: again.append(tuple(ranks)))
    assert again == created  # every rank calls new_group identically


def test_placement_file(tmp_path):
    path = tmp_path / "p.json"
    entries = [{"rank": r, "host": f"node{r // 2}", "local_rank": 1 - r % 2} for r in range(4)]
    path.write_text(json.dumps({"ranks": entries}))
    ents = load_placement(path)
    assert rank_from_placement(ents, "node1", 1, 1).rank == 2
    # unknown host name: hosts in order of appearance are node ranks
    assert rank_from_placement(ents, "elsewhere", 0, 0).rank == 1


@pytest.mark.parametrize("ranks, match", [
    ([{"rank": 0, "host": "a", "local_rank": 0}, {"rank": 0, "host": "a", "local_rank": 1}], "each once"),
    ([{"rank": 0, "host": "a", "local_rank": 0}, {"rank": 1, "host": "a", "local_rank": 0}], "share"),
    ([{"rank": 0, "host": "a"}], "local_rank"),
])
def test_bad_placement_names_the_problem(tmp_path, ranks, match):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"ranks": ranks}))
    with pytest.raises(ValueError, match=match):
        load_placement(path)
