"""Fabric models: builders (clos3, fat-tree, leaf-spine), presets, fabric files and routing.

``topologies`` depends on nothing else of this suite. See ``docs/architecture.md`` (section
topologies) for the names other packages rely on and ``docs/fabrics.md`` for the wiring.
"""

from topologies.builders import Clos3Spec, FatTreeSpec, LeafSpineSpec, clos3, fat_tree, leaf_spine
from topologies.fabric import Fabric
from topologies.files import PRESETS, load_fabric, read_spec, save_fabric, spec_from_dict

__all__ = [
    "Clos3Spec", "FatTreeSpec", "LeafSpineSpec", "Fabric", "PRESETS", "clos3", "fat_tree",
    "leaf_spine", "load_fabric", "read_spec", "save_fabric", "spec_from_dict",
]
