"""Readers of the tuner's own input files, through ``inputspec``: placement files (the
``placement.json`` that ``netsim place``/``recommend`` write, which the trainer reads too, or a
plain list of GPU positions) and free-server lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inputspec import InputError, from_dict, is_decimal, read_text, rule, to_dict
from inputspec.core import nonempty_list, parse_text

PLACEMENT_SCHEMA = "netsim-placement/1"


@dataclass(frozen=True)
class PlacementRank:
    """One row of ``placement.json``: the trainer's (rank, host, local_rank) and the GPU."""

    rank: int = rule(min=0, max=2**40, example=0)
    host: str = rule(example="server0")
    local_rank: int = rule(min=0, max=2**20, example=0)
    gpu: str | int | None = rule(None, min=0, example="gpu0")


@dataclass(frozen=True)
class PlacementFile:
    """``placement.json`` (``tuner.render.write_placement``; trainer ``--placement``)."""

    ranks: list[PlacementRank]
    schema: str = rule(PLACEMENT_SCHEMA, choices=(PLACEMENT_SCHEMA,))
    torchrun_hosts: list[str] | None = None
    strategy: str | None = None
    fabric: str | None = None
    job: dict[str, Any] | None = None
    predicted_iteration_s: float | None = rule(None, min=0)

    def __post_init__(self) -> None:
        ranks = sorted(r.rank for r in self.ranks)
        if ranks != list(range(len(ranks))):
            raise ValueError(f"ranks must number 0..{len(ranks) - 1}, each once")
        slots = {(r.host, r.local_rank) for r in self.ranks}
        if len(slots) != len(self.ranks):
            raise ValueError("two ranks share one (host, local_rank) slot")


def read_placement_file(path: str | Path) -> PlacementFile | list[int]:
    """A ``placement.json`` (``PlacementFile``) or a whitespace/comma list of GPU positions."""
    source = f"placement file {path}"
    text = read_text(path, "placement")
    if text.lstrip()[:1] in "[{" or Path(path).suffix.lower() in (".json", ".yaml", ".yml"):
        data = parse_text(text, "json" if str(path).endswith(".json") else "yaml", source)
        if isinstance(data, dict):
            return from_dict(PlacementFile, data, source)
        return _positions(data, source)
    return _positions(text.replace(",", " ").split(), source)


def _positions(items: Any, source: str) -> list[int]:
    if not isinstance(items, list) or not items:
        raise InputError(source, None, items, "GPU positions, one per rank, or a "
                         "placement.json", "0 1 2 3")
    out = []
    for i, item in enumerate(items):
        if isinstance(item, str) and is_decimal(item.strip()):
            item = int(item)
        if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item < 2**40:
            raise InputError(source, f"rank {i}", item, "a GPU position (integer >= 0)", 8)
        out.append(item)
    if len(set(out)) != len(out):
        raise InputError(source, problem="two ranks are placed on the same GPU")
    return out


def placement_positions(path: str | Path, fabric=None, world: int | None = None) -> list[int]:
    """GPU position (index in ``fabric.gpus``) of every rank, from either placement format;
    ``world`` (the job's ranks) and the fabric's GPU count are checked when given."""
    source = f"placement file {path}"
    doc = read_placement_file(path)
    if isinstance(doc, list):
        out = doc
    elif fabric is None:
        raise InputError(source, problem="names GPUs of fabric "
                         f"{doc.fabric or '?'}: give the same --fabric to read it")
    else:
        out = [_position(r, fabric, source) for r in sorted(doc.ranks, key=lambda r: r.rank)]
    if world is not None and len(out) != world:
        raise InputError(source, problem=f"places {len(out)} ranks; the job has {world}")
    if fabric is not None and max(out) >= len(fabric.gpus):
        raise InputError(source, problem=f"GPU position {max(out)} is beyond fabric "
                         f"{fabric.name}'s {len(fabric.gpus)} GPUs")
    return out


def _position(r: PlacementRank, fabric, source: str) -> int:
    if r.gpu is None:
        return _slot_position(r, fabric, source)
    if isinstance(r.gpu, int):
        if r.gpu >= len(fabric.gpus):
            raise InputError(source, f"ranks[{r.rank}].gpu", r.gpu,
                             f"a GPU position below {len(fabric.gpus)}", 0)
        pos = r.gpu
    else:
        try:
            pos = fabric.gpu_position(r.gpu)
        except (KeyError, ValueError):
            raise InputError(source, f"ranks[{r.rank}].gpu", r.gpu,
                             f"a GPU of fabric {fabric.name}", fabric.gpus[0]) from None
    _check_slot(r, pos, fabric, source)
    return pos


def _check_slot(r: PlacementRank, pos: int, fabric, source: str) -> None:
    """A rank whose ``host`` is a server of the fabric must sit on that server's GPU
    ``local_rank``: a ``gpu`` elsewhere contradicts it (the trainer would use one, the
    simulation the other). Hosts that are not fabric servers (the cluster's own names)
    cannot be checked."""
    gps = int(fabric.gpus_per_server)
    server, local = fabric.servers[pos // gps], pos % gps
    if r.host in fabric.servers and r.host != server:
        raise InputError(source, f"ranks[{r.rank}].host", r.host,
                         f"{server}, the server of its gpu {r.gpu}", server)
    if r.host == server and r.local_rank != local:
        raise InputError(source, f"ranks[{r.rank}].local_rank", r.local_rank,
                         f"{local}, the local index of its gpu {r.gpu} on {server}", local)


def _slot_position(r: PlacementRank, fabric, source: str) -> int:
    try:
        server = fabric.servers.index(r.host)
    except ValueError:
        raise InputError(source, f"ranks[{r.rank}].host", r.host,
                         f"a server of fabric {fabric.name}", fabric.servers[0]) from None
    gps = int(fabric.gpus_per_server)
    if r.local_rank >= gps:
        raise InputError(source, f"ranks[{r.rank}].local_rank", r.local_rank,
                         f"an integer below gpus_per_server={gps}", 0)
    return fabric.gpu_position(fabric.server_gpus(fabric.servers[server])[r.local_rank])


def placement_to_dict(doc: PlacementFile) -> dict[str, Any]:
    """The file form (drops unset optional keys)."""
    return {k: v for k, v in to_dict(doc).items() if v is not None}


def read_free_servers(path: str | Path, fabric) -> list[int]:
    """Free servers from a file: names or positions, whitespace/comma separated, or a
    JSON/YAML list, or a mapping with a ``servers`` list; order kept (the scheduler's)."""
    source = f"free-server file {path}"
    text = read_text(path, "free-server")
    if _is_yaml(path, text):
        data = parse_text(text, "yaml", source)
    else:
        data = text.replace(",", " ").split()
    data = nonempty_list(data, "servers", source, "one key 'servers' (a list)",
                         "server names or positions (a list)", fabric.servers[:2])
    return _server_positions(data, fabric, source)


def _is_yaml(path: str | Path, text: str) -> bool:
    """A free-server file is YAML/JSON by its suffix, or by its start: a flow list or
    mapping, a block list (``- srv8``) or the ``servers:`` key of a block mapping."""
    head = text.lstrip()
    return Path(path).suffix.lower() in (".yaml", ".yml", ".json") or head[:1] in "[{" \
        or head.startswith(("- ", "-\n", "servers:"))


def _server_positions(items: list, fabric, source: str) -> list[int]:
    pos = {s: i for i, s in enumerate(fabric.servers)}
    out = []
    for i, item in enumerate(items):
        if isinstance(item, str) and item in pos:
            out.append(pos[item])
        elif isinstance(item, str) and is_decimal(item) and int(item) < len(fabric.servers):
            out.append(int(item))
        elif isinstance(item, int) and not isinstance(item, bool) \
                and 0 <= item < len(fabric.servers):
            out.append(item)
        else:
            raise InputError(source, f"servers[{i}]", item,
                             f"a server of fabric {fabric.name!r} (name or position below "
                             f"{len(fabric.servers)})", fabric.servers[0])
    if len(set(out)) != len(out):
        raise InputError(source, problem="a server is listed twice")
    return out
