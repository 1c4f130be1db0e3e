"""Presets and fabric files (YAML or JSON): load, save, validate.

A fabric file is one mapping::

    kind: clos3            # clos3 | fat_tree | leaf_spine
    name: my-cluster       # optional
    servers: 512           # ... any field of the kind's spec dataclass
    base: megascale        # optional: start from a preset's spec and override fields

Unknown keys, wrong types and inconsistent values are refused with a ``ValueError`` naming the
field. The spec dataclasses (``Clos3Spec``, ``FatTreeSpec``, ``LeafSpineSpec``) are the schema.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from inputspec import InputError, check_memory, from_dict, read_data, to_dict, write_text
from inputspec.core import Rule
from topologies.builders import (
    MAX_CABLE_M,
    Clos3Spec,
    FatTreeSpec,
    LeafSpineSpec,
    clos3,
    fat_tree,
    leaf_spine,
)
from topologies.fabric import Fabric

KINDS: dict[str, type] = {"clos3": Clos3Spec, "fat_tree": FatTreeSpec, "leaf_spine": LeafSpineSpec}
_KIND_OF = {v: k for k, v in KINDS.items()}

PRESETS: dict[str, Any] = {
    # MegaScale (NSDI'24 §3.6): 1,536 servers x 8 GPUs x 8 x 200G NICs, 64 x 400G switches,
    # 1:1 per tier, ToR downlinks split 2 x 200G, 64 servers per ToR group.
    "megascale": Clos3Spec(name="megascale"),
    # Four times MegaScale (49,152 GPUs) for scaling benchmarks.
    "megascale-4x": Clos3Spec(name="megascale-4x", servers=4 * 1536),
    "fat-tree-k4": FatTreeSpec(name="fat-tree-k4", k=4),
    "fat-tree-k8": FatTreeSpec(name="fat-tree-k8", k=8),
    # 64 servers of one GPU/100G NIC, 8 leaves of 16 ports (8 down, 8 up), 8 spines: 1:1.
    "leaf-spine-64": LeafSpineSpec(name="leaf-spine-64"),
}


def build(spec: Any) -> Fabric:
    """Build the fabric a spec dataclass describes."""
    if isinstance(spec, Clos3Spec):
        return clos3(spec)
    if isinstance(spec, FatTreeSpec):
        return fat_tree(spec)
    if isinstance(spec, LeafSpineSpec):
        return leaf_spine(spec)
    raise ValueError(f"not a fabric spec: {spec!r}")


def load_fabric(spec: str | Path | Any) -> Fabric:
    """Build a fabric from a preset name, a ``.yaml``/``.yml``/``.json`` file, or a spec.

    Parameters
    ----------
    spec : str, Path or spec dataclass
        ``"megascale"``, ``"fat-tree-k8"``, ... (see ``PRESETS``), a fabric file, or a
        ``Clos3Spec``/``FatTreeSpec``/``LeafSpineSpec``.

    Returns
    -------
    Fabric
    """
    if dataclasses.is_dataclass(spec) and not isinstance(spec, type):
        check_fabric_size(spec)
        return build(spec)
    text = str(spec)
    if text in PRESETS:
        check_fabric_size(PRESETS[text], f"fabric {text}")
        return build(PRESETS[text])
    path = Path(text)
    if path.suffix.lower() in (".yaml", ".yml", ".json"):
        return build(read_spec(path))
    raise ValueError(f"unknown fabric {text!r}: give a preset ({', '.join(PRESETS)}) or a "
                     ".yaml/.json fabric file")


def resolve_spec(spec: str | Path | Any) -> Any:
    """The spec dataclass a preset name, fabric file or spec names, without building it."""
    if dataclasses.is_dataclass(spec) and not isinstance(spec, type):
        return spec
    text = str(spec)
    if text in PRESETS:
        return PRESETS[text]
    if Path(text).suffix.lower() in (".yaml", ".yml", ".json"):
        return read_spec(text, check_size=False)
    raise ValueError(f"unknown fabric {text!r}: give a preset ({', '.join(PRESETS)}) or a "
                     ".yaml/.json fabric file")


def read_spec(path: str | Path, *, check_size: bool = True) -> Any:
    """Read and validate a fabric file; returns the spec dataclass."""
    path = Path(path)
    data = read_data(path, "fabric")
    return spec_from_dict(data, source=f"fabric file {path}", check_size=check_size)


MAX_RADIX = 4096
#: Bytes of a built fabric per node and per directed link (measured: megascale peaks at
#: 190 B per element under tracemalloc; rounded up).
FABRIC_BYTES_PER_ELEMENT = 256


#: The slowest link speed a fabric file may give: 10 Mb/s, the slowest Ethernet (IEEE 802.3
#: 10BASE-T). A 1e-300 Gb/s link (issue #30) gave a bisection of 0 and was accepted.
MIN_GBPS = 0.01


def _rules(cls: type) -> dict[str, Rule]:
    """Bounds of every field, from its name and type (the spec dataclasses are the schema).

    Counts are >= 1; ``switch_radix``/``k`` and ratio parts at most 4,096 (no switch ASIC has
    more ports); speeds from 0.01 Gb/s (``MIN_GBPS``) to 10^6 Gb/s; latencies 0 to 1 s (10^9 ns); cable
    lengths > 0 and at most 10 km.
    """
    out: dict[str, Rule] = {}
    for f in dataclasses.fields(cls):
        t = str(f.type)
        if f.name in ("switch_radix", "k") or t.startswith("tuple"):
            out[f.name] = Rule(min=1, max=MAX_RADIX)
        elif f.name.endswith("_gbps"):
            out[f.name] = Rule(min=MIN_GBPS, max=1e6)
        elif f.name.endswith("_ns"):
            out[f.name] = Rule(min=0, max=1e9)
        elif f.name.endswith("_cable_m"):
            out[f.name] = Rule(gt=0, max=MAX_CABLE_M)
        elif t.startswith("int"):
            out[f.name] = Rule(min=1)
    return out


def spec_from_dict(data: Any, source: str = "fabric", *, check_size: bool = True) -> Any:
    """Turn a mapping into a validated spec dataclass (errors name the file and field)."""
    if not isinstance(data, dict):
        raise InputError(source, None, data, "a mapping with a 'kind' key",
                         {"kind": "clos3", "servers": 64})
    data = dict(data)
    base = data.pop("base", None)
    if base is not None:
        if not isinstance(base, str) or base not in PRESETS:
            raise InputError(source, "base", base, f"one of {', '.join(PRESETS)}", "megascale")
        start = PRESETS[base]
        kind = data.pop("kind", _KIND_OF[type(start)])
        if not isinstance(kind, str) or KINDS.get(kind) is not type(start):
            raise InputError(source, "kind", kind, f"{_KIND_OF[type(start)]!r}, the kind of "
                             f"base {base!r}", _KIND_OF[type(start)])
        fields = to_dict(start)
    else:
        if "kind" not in data:
            raise InputError(source, problem=f"missing key 'kind' (one of {', '.join(KINDS)}; "
                             "e.g. kind: clos3)")
        kind = data.pop("kind")
        if not isinstance(kind, str) or kind not in KINDS:
            raise InputError(source, "kind", kind, f"one of {', '.join(KINDS)}", "clos3")
        fields = {}
    cls = KINDS[kind]
    spec = from_dict(cls, {**fields, **data}, source, rules=_rules(cls))
    try:
        _validate(spec)
    except ValueError as exc:
        raise InputError(source, problem=str(exc)) from None
    if check_size:
        check_fabric_size(spec, source)
    return spec


def fabric_size(spec: Any) -> tuple[int, int]:
    """(nodes, directed links) the builder will create, from the spec alone."""
    if isinstance(spec, FatTreeSpec):
        spec = spec.to_clos3()
    d = spec.derive()
    gps, nps = spec.gpus_per_server, spec.nics_per_server
    servers = d.get("servers", getattr(spec, "servers", 0))
    if isinstance(spec, LeafSpineSpec):
        switches = spec.leaves + spec.spines
        trunk = spec.leaves * spec.spines
    else:
        switches = d["tors"] + d["aggs"] + d["cores"]
        trunk = d["tors"] * d["tor_up"] + d["aggs"] * d["agg_up"]
    nodes = servers * (gps + nps + 1) + switches
    links = 2 * (servers * gps * 2 + servers * nps + trunk)
    return nodes, links


def check_fabric_size(spec: Any, source: str = "fabric", *, bytes_per_element: float = 0.0,
                      level: str = "") -> None:
    """Refuse a fabric whose build (or simulation at ``level``) would not fit in memory."""
    nodes, links = fabric_size(spec)
    per = bytes_per_element or FABRIC_BYTES_PER_ELEMENT
    name = getattr(spec, "name", "") or _KIND_OF[type(spec)]
    what = f"fabric {name}" + (f" at {level} level" if level else "")
    check_memory(per * (nodes + links), what,
                 f"{nodes:,} nodes + {links:,} directed links x {per:,.0f} B", source)


def _validate(spec: Any) -> None:
    """Run the same checks the builder runs, without building."""
    if isinstance(spec, Clos3Spec):
        spec.derive()
    elif isinstance(spec, FatTreeSpec):
        spec.to_clos3().derive()
    else:
        spec.derive()


def spec_to_dict(spec: Any) -> dict[str, Any]:
    """The file form of a spec (``kind`` first)."""
    d = {"kind": _KIND_OF[type(spec)]}
    for k, v in dataclasses.asdict(spec).items():
        d[k] = list(v) if isinstance(v, tuple) else v
    return d


def save_fabric(fabric_or_spec: Fabric | Any, path: str | Path) -> Path:
    """Write the spec of a fabric (or a spec) as YAML or JSON, chosen by the file suffix."""
    spec = fabric_or_spec.spec if isinstance(fabric_or_spec, Fabric) else fabric_or_spec
    path = Path(path)
    data = spec_to_dict(spec)
    if path.suffix.lower() == ".json":
        write_text(path, json.dumps(data, indent=2) + "\n")
    elif path.suffix.lower() in (".yaml", ".yml"):
        import yaml  # only when writing YAML (loading it costs ~0.05 s CPU at start-up)

        write_text(path, yaml.safe_dump(data, sort_keys=False))
    else:
        raise ValueError(f"fabric file {path} must end in .yaml, .yml or .json")
    return path
