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

import yaml

from topologies.builders import Clos3Spec, FatTreeSpec, LeafSpineSpec, clos3, fat_tree, leaf_spine
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
        return build(spec)
    text = str(spec)
    if text in PRESETS:
        return build(PRESETS[text])
    path = Path(text)
    if path.suffix.lower() in (".yaml", ".yml", ".json"):
        return build(read_spec(path))
    raise ValueError(f"unknown fabric {text!r}: give a preset ({', '.join(PRESETS)}) or a "
                     ".yaml/.json fabric file")


def read_spec(path: str | Path) -> Any:
    """Read and validate a fabric file; returns the spec dataclass."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"fabric file {path} does not exist")
    raw = path.read_text()
    try:
        data = json.loads(raw) if path.suffix.lower() == ".json" else yaml.safe_load(raw)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"fabric file {path} is not valid {path.suffix[1:].upper()}: "
                         f"{str(exc).splitlines()[0]}") from None
    return spec_from_dict(data, source=str(path))


def spec_from_dict(data: Any, source: str = "fabric") -> Any:
    """Turn a mapping into a validated spec dataclass (errors name the field)."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}: a fabric file must be a mapping with a 'kind' key")
    data = dict(data)
    base = data.pop("base", None)
    if base is not None:
        if base not in PRESETS:
            raise ValueError(f"{source}: base: unknown preset {base!r} "
                             f"(choose from {', '.join(PRESETS)})")
        start = PRESETS[base]
        kind = data.pop("kind", _KIND_OF[type(start)])
        if KINDS.get(kind) is not type(start):
            raise ValueError(f"{source}: kind: {kind!r} does not match base {base!r} "
                             f"({_KIND_OF[type(start)]})")
        fields = dataclasses.asdict(start)
    else:
        if "kind" not in data:
            raise ValueError(f"{source}: missing key 'kind' (one of {', '.join(KINDS)})")
        kind = data.pop("kind")
        if kind not in KINDS:
            raise ValueError(f"{source}: kind: unknown kind {kind!r} "
                             f"(choose from {', '.join(KINDS)})")
        fields = {}
    cls = KINDS[kind]
    known = {f.name: f for f in dataclasses.fields(cls)}
    for key, value in data.items():
        if key not in known:
            raise ValueError(f"{source}: unknown key {key!r} for kind {kind} "
                             f"(known keys: {', '.join(known)})")
        fields[key] = _coerce(key, value, known[key], source)
    spec = cls(**fields)
    _validate(spec)
    return spec


def _coerce(key: str, value: Any, field: dataclasses.Field, source: str) -> Any:
    """Check one value against the field's declared type."""
    t = str(field.type)
    if t.startswith("tuple"):
        if not (isinstance(value, (list, tuple)) and len(value) == 2):
            raise ValueError(f"{source}: {key} must be a list of two integers [down, up], "
                             f"got {value!r}")
        return tuple(value)
    if t == "str":
        if not isinstance(value, str):
            raise ValueError(f"{source}: {key} must be a string, got {value!r}")
        return value
    if value is None and "None" in t:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{source}: {key} must be a number, got {value!r}")
    if t.startswith("int"):
        if value != int(value):
            raise ValueError(f"{source}: {key} must be a whole number, got {value!r}")
        return int(value)
    return float(value)


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
        path.write_text(json.dumps(data, indent=2) + "\n")
    elif path.suffix.lower() in (".yaml", ".yml"):
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    else:
        raise ValueError(f"fabric file {path} must end in .yaml, .yml or .json")
    return path
