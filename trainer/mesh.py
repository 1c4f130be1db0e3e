"""Rank layout: which global rank holds which (tp, dp, pp) coordinate, and its process groups.

The order string lists the axes **innermost first**, as Megatron-Core's ``RankGenerator`` does
(``megatron/core/parallel_state.py``, default ``tp-cp-ep-dp-pp``; see
shared/reference/nccl-roce.md section 6.1). For ``tp-dp-pp``::

    rank = tp_rank + dp_rank * tp + pp_rank * tp * dp

A group of axis X holds the ranks that differ only in their X coordinate. With 16 ranks, tp=2,
pp=4: tp groups [0,1], [2,3], ...; dp groups [0,2], [1,3], ...; pp groups [0,4,8,12], ...

A *placement file* maps each rank to a host and a local rank (the tuner writes one)::

    {"ranks": [{"rank": 0, "host": "node0", "local_rank": 0}, ...]}

:func:`rank_from_placement` turns the torchrun identity of a process (its host and LOCAL_RANK)
into the trainer rank the placement asks for.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

AXES = ("tp", "dp", "pp")


@dataclass(frozen=True)
class Layout:
    """Degrees and order of the axes; maps ranks to coordinates and back."""

    tp: int
    dp: int
    pp: int
    order: str = "tp-dp-pp"

    def __post_init__(self) -> None:
        axes = self.order.split("-")
        if sorted(axes) != sorted(AXES):
            raise ValueError(f"order={self.order!r} must be a permutation of tp-dp-pp (innermost first)")

    @property
    def world_size(self) -> int:
        return self.tp * self.dp * self.pp

    def _strides(self) -> dict[str, int]:
        strides, s = {}, 1
        for axis in self.order.split("-"):
            strides[axis] = s
            s *= getattr(self, axis)
        return strides

    def rank(self, tp: int, dp: int, pp: int) -> int:
        """Global rank of a coordinate."""
        st = self._strides()
        return tp * st["tp"] + dp * st["dp"] + pp * st["pp"]

    def coords(self, rank: int) -> dict[str, int]:
        """``{"tp": ., "dp": ., "pp": .}`` of ``rank``."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} is outside the world of {self.world_size}")
        st = self._strides()
        return {a: (rank // st[a]) % getattr(self, a) for a in AXES}

    def groups(self, axis: str) -> list[list[int]]:
        """All groups of ``axis``, each sorted by its coordinate on that axis, in a fixed order."""
        others = [a for a in AXES if a != axis]
        out = []
        for i in range(getattr(self, others[0])):
            for j in range(getattr(self, others[1])):
                base = {others[0]: i, others[1]: j}
                out.append([self.rank(**{**base, axis: k}) for k in range(getattr(self, axis))])
        return sorted(out)

    def embedding_groups(self) -> list[list[int]]:
        """Groups [first stage, last stage] that share a tied word embedding (pp > 1)."""
        if self.pp == 1:
            return []
        return sorted([g[0], g[-1]] for g in self.groups("pp"))


@dataclass
class Group:
    """A process group as the trainer sees it: global ranks (layout ranks) and the torch handle."""

    kind: str
    ranks: tuple[int, ...]
    pg: object | None = None
    """torch ProcessGroup; None for a group of one (no communication)."""

    @property
    def size(self) -> int:
        return len(self.ranks)

    def index(self, rank: int) -> int:
        return self.ranks.index(rank)


@dataclass
class Mesh:
    """This rank's coordinates and groups within a layout."""

    layout: Layout
    rank: int
    """Rank within the layout (the rank written into traces)."""
    world_ranks: tuple[int, ...]
    """torch.distributed rank of each layout rank (identity for a whole-world run)."""
    tp: Group
    dp: Group
    pp: Group
    embedding: Group | None
    world: Group
    coords: dict[str, int] = field(default_factory=dict)

    @property
    def first_stage(self) -> bool:
        return self.coords["pp"] == 0

    @property
    def last_stage(self) -> bool:
        return self.coords["pp"] == self.layout.pp - 1

    def pp_neighbor(self, delta: int) -> int:
        """Layout rank of the stage ``delta`` away on this rank's pipeline."""
        c = dict(self.coords)
        c["pp"] += delta
        return self.layout.rank(**c)

    def to_world(self, rank: int) -> int:
        return self.world_ranks[rank]


def build_mesh(layout: Layout, my_world_rank: int, world_ranks: list[int] | None = None,
               new_group: Callable[[list[int]], object] | None = None) -> Mesh | None:
    """Create every process group of ``layout`` and return this rank's :class:`Mesh`.

    Every process of the torch world must call this with the same arguments, in the same order
    (``torch.distributed.new_group`` is collective); a process outside ``world_ranks`` gets None.
    Groups of one rank are not created.
    """
    world_ranks = list(range(layout.world_size)) if world_ranks is None else list(world_ranks)
    if len(world_ranks) != layout.world_size:
        raise ValueError(f"layout needs {layout.world_size} ranks, got {len(world_ranks)}")
    if new_group is None:
        import torch.distributed as dist

        new_group = dist.new_group
    me = world_ranks.index(my_world_rank) if my_world_rank in world_ranks else None
    mine: dict[str, Group] = {}
    spec = [(a, layout.groups(a)) for a in AXES] + [("embedding", layout.embedding_groups()),
                                                    ("world", [list(range(layout.world_size))])]
    for kind, groups in spec:
        for ranks in groups:
            pg = new_group([world_ranks[r] for r in ranks]) if len(ranks) > 1 else None
            if me in ranks:
                mine[kind] = Group(kind, tuple(ranks), pg)
    if me is None:
        return None
    return Mesh(layout=layout, rank=me, world_ranks=tuple(world_ranks), tp=mine["tp"],
                dp=mine["dp"], pp=mine["pp"], embedding=mine.get("embedding"),
                world=mine["world"], coords=layout.coords(me))


@dataclass(frozen=True)
class PlacementEntry:
    rank: int
    host: str
    local_rank: int


def load_placement(path: str | Path) -> list[PlacementEntry]:
    """Read and validate a placement file (schema in the module docstring)."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or not isinstance(data.get("ranks"), list):
        raise ValueError(f"{path}: a placement file is {{\"ranks\": [{{\"rank\", \"host\", \"local_rank\"}}]}}")
    out = []
    for i, e in enumerate(data["ranks"]):
        try:
            out.append(PlacementEntry(int(e["rank"]), str(e["host"]), int(e["local_rank"])))
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path}: ranks[{i}] needs integer rank, string host, integer local_rank") from None
    ranks = sorted(e.rank for e in out)
    if ranks != list(range(len(out))):
        raise ValueError(f"{path}: ranks must be 0..{len(out) - 1}, each once")
    slots = [(e.host, e.local_rank) for e in out]
    if len(set(slots)) != len(slots):
        raise ValueError(f"{path}: two ranks share one (host, local_rank) slot")
    return out


def rank_from_placement(entries: list[PlacementEntry], host: str, node_rank: int,
                        local_rank: int) -> PlacementEntry:
    """The entry for this process.

    Matched by (host, local_rank). When no entry names ``host`` (e.g. several torchrun nodes
    on one machine, or hosts named by the tuner), hosts are taken in order of first appearance
    in the file and host number ``node_rank`` is used.
    """
    hosts = list(dict.fromkeys(e.host for e in entries))
    if host not in hosts:
        if node_rank >= len(hosts):
            raise ValueError(f"placement names {len(hosts)} hosts; this is node {node_rank} ({host})")
        host = hosts[node_rank]
    for e in entries:
        if e.host == host and e.local_rank == local_rank:
            return e
    raise ValueError(f"placement has no rank for host {host!r} local_rank {local_rank}")
