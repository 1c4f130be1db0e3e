"""Rank layout: which global rank holds which (tp, cp, ep, dp, pp) coordinate, and its groups.

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

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

AXES = ("tp", "dp", "pp")
ALL_AXES = ("tp", "cp", "ep", "dp", "pp")
"""Megatron-Core's axes. ``dp`` is the whole data-parallel degree; expert parallelism is carved
out of it (``parallel_state.RankGenerator``): the order's ``dp`` token then stands for the
expert-data-parallel part of size dp / ep, and the data index of a rank is ep + ep x edp."""

GROUP_AXES = {"tp": ("tp",), "cp": ("cp",), "ep": ("ep",), "dp": ("ep", "edp"), "pp": ("pp",),
              "dpcp": ("cp", "ep", "edp"), "edp": ("cp", "edp")}
"""Internal axes each group kind spans, least significant first. ``dpcp``: the gradient
reduction of dense parameters (data x context parallel, Megatron's dp-cp group); ``edp``: that
of expert parameters (expert-data-parallel x context parallel)."""


def full_order(order: str) -> list[str]:
    """``order`` with cp and ep inserted where Megatron-Core's tp-cp-ep-dp-pp puts them."""
    axes = order.split("-")
    if "cp" not in axes and "tp" in axes:
        axes.insert(axes.index("tp") + 1, "cp")
    if "ep" not in axes and "dp" in axes:
        axes.insert(axes.index("dp"), "ep")
    return axes


@dataclass(frozen=True)
class Layout:
    """Degrees and order of the axes; maps ranks to coordinates and back."""

    tp: int
    dp: int
    pp: int
    order: str = "tp-dp-pp"
    cp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        axes = full_order(self.order)
        if sorted(axes) != sorted(ALL_AXES):
            raise ValueError(f"order={self.order!r} must be a permutation of tp-dp-pp, optionally "
                             f"with cp and ep (innermost first, e.g. tp-cp-ep-dp-pp)")
        if self.dp % self.ep:
            raise ValueError(f"ep={self.ep} must divide dp={self.dp}")

    @property
    def world_size(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    def _sizes(self) -> dict[str, int]:
        return {"tp": self.tp, "cp": self.cp, "ep": self.ep, "edp": self.dp // self.ep,
                "pp": self.pp}

    def _strides(self) -> dict[str, int]:
        strides, s, sizes = {}, 1, self._sizes()
        for axis in full_order(self.order):
            axis = "edp" if axis == "dp" else axis
            strides[axis] = s
            s *= sizes[axis]
        return strides

    def rank(self, tp: int, dp: int, pp: int, cp: int = 0, **_ignored: int) -> int:
        """Global rank of a coordinate (``dp`` is the data index; ep and edp follow from it)."""
        st = self._strides()
        return (tp * st["tp"] + cp * st["cp"] + (dp % self.ep) * st["ep"]
                + (dp // self.ep) * st["edp"] + pp * st["pp"])

    def _internal(self, rank: int) -> dict[str, int]:
        st, sizes = self._strides(), self._sizes()
        return {a: (rank // st[a]) % sizes[a] for a in sizes}

    def coords(self, rank: int) -> dict[str, int]:
        """``{"tp", "cp", "ep", "dp", "pp"}`` of ``rank``; dp is the data index, ep + ep x edp
        (edp, the expert-data-parallel index, is dp // ep)."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} is outside the world of {self.world_size}")
        c = self._internal(rank)
        return {"tp": c["tp"], "cp": c["cp"], "ep": c["ep"], "dp": c["ep"] + self.ep * c["edp"],
                "pp": c["pp"]}

    def groups(self, axis: str) -> list[list[int]]:
        """All groups of ``axis`` (a key of GROUP_AXES), each sorted by its coordinates on that
        axis (most significant last), in a fixed order."""
        span = GROUP_AXES[axis]
        out: dict[tuple, list[tuple[tuple, int]]] = {}
        for r in range(self.world_size):
            c = self._internal(r)
            key = tuple(c[a] for a in self._sizes() if a not in span)
            out.setdefault(key, []).append((tuple(c[a] for a in reversed(span)), r))
        return sorted([r for _, r in sorted(members)] for members in out.values())

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
    cp: Group | None = None
    """Context-parallel group (ring attention)."""
    ep: Group | None = None
    """Expert-parallel group (all-to-all dispatch and combine)."""
    dpcp: Group | None = None
    """Gradient reduction of dense parameters: data x context parallel."""
    edp: Group | None = None
    """Gradient reduction of expert parameters: expert-data x context parallel."""

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
    made: dict[tuple[int, ...], object] = {}  # one process group per distinct rank set
    spec = [(a, layout.groups(a)) for a in AXES] + [("embedding", layout.embedding_groups()),
                                                    ("world", [list(range(layout.world_size))])]
    spec += [(a, layout.groups(a)) for a in ("cp", "ep", "dpcp", "edp")]
    for kind, groups in spec:
        for ranks in groups:
            key = tuple(ranks)
            if len(ranks) > 1 and key not in made:
                made[key] = new_group([world_ranks[r] for r in ranks])
            if me in ranks:
                mine[kind] = Group(kind, key, made.get(key))
    if me is None:
        return None
    return Mesh(layout=layout, rank=me, world_ranks=tuple(world_ranks), tp=mine["tp"],
                dp=mine["dp"], pp=mine["pp"], embedding=mine.get("embedding"),
                world=mine["world"], coords=layout.coords(me), cp=mine["cp"], ep=mine["ep"],
                dpcp=mine["dpcp"], edp=mine["edp"])


@dataclass(frozen=True)
class PlacementEntry:
    rank: int
    host: str
    local_rank: int


def load_placement(path: str | Path) -> list[PlacementEntry]:
    """Read and validate a placement file (schema in the module docstring) through
    ``inputspec``: regular files only, size-capped; each entry's fields typed and bounded."""
    from inputspec import InputError, check_value, read_data
    from inputspec.core import Rule

    source = f"placement file {path}"
    data = read_data(path, "placement", default_format="json")
    if not isinstance(data, dict) or not isinstance(data.get("ranks"), list):
        raise InputError(source, problem='a placement file is {"ranks": [{"rank", "host", '
                         '"local_rank"}]}')
    out = []
    for i, e in enumerate(data["ranks"]):
        if not isinstance(e, dict) or not {"rank", "host", "local_rank"} <= set(e):
            raise InputError(source, f"ranks[{i}]", e, "an object with rank, host, local_rank",
                             {"rank": 0, "host": "node0", "local_rank": 0})
        out.append(PlacementEntry(
            check_value(e["rank"], int, source, f"ranks[{i}].rank", Rule(min=0, max=2**24)),
            check_value(e["host"], str, source, f"ranks[{i}].host"),
            check_value(e["local_rank"], int, source, f"ranks[{i}].local_rank",
                        Rule(min=0, max=2**16))))
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
