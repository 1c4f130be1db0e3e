"""PyTorch's execution traces (``torch.profiler.ExecutionTraceObserver``, the JSON that
MLCommons Chakra's ``chakra_trace_link`` / ``chakra_converter`` take; schema
``1.1.1-chakra.0.0.4``) beside a job's Kineto traces, linked operator by operator.

An execution trace holds every operator of the traced steps as a node (``id``, ``name``,
``ctrl_deps``, ``inputs`` with ``values`` / ``shapes`` / ``types``, ``attrs`` with ``rf_id``)
and no times; Kineto holds the times. The two are linked as Chakra's trace linker links them:
a node's ``rf_id`` is the Kineto event's ``Record function id``
(``mlcommons/chakra``, ``src/trace_link/kineto_operator.py``: ``rf_id``; execution trace
schema: ``PyTorch ExecutionTraceObserver``). What is taken from it (``netsim.traces.generic_kineto``):
the process groups of its ``## process_group:init ##`` node when the Kineto document has no
``distributedInfo.pg_config``, and a collective's message size from its node's input shapes
and types when Kineto recorded none (``record_shapes=False``). A file is matched to its Kineto
document by the process id (``pid``) both carry.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ELEMENT_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "half": 2,
                 "bfloat16": 2, "long": 8, "int": 4, "bool": 1, "unsigned char": 1,
                 "signed char": 1, "c10::Float8_e4m3fn": 1}
TENSOR = re.compile(r"Tensor\(([^)]+)\)")
PG_INIT = "## process_group:init ##"


def is_execution_trace(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("nodes"), list) and "schema" in doc


def execution_traces(docs: list[tuple[Path, Any]]) -> dict[int, dict]:
    """{pid: execution trace} of the documents that are execution traces."""
    return {int(doc["pid"]): doc for _, doc in docs
            if is_execution_trace(doc) and isinstance(doc.get("pid"), int)}


def _attr(node: dict, name: str) -> Any:
    for a in node.get("attrs") or []:
        if isinstance(a, dict) and a.get("name") == name:
            return a.get("value")
    return None


def comm_sizes(et: dict) -> dict[int, int]:
    """{rf_id: bytes} of the communication operators (``c10d::``): the largest input tensor
    (a reduce-scatter's input, an all-gather's output list's first input is its shard, the
    gathered tensor is the larger)."""
    out = {}
    for node in et["nodes"]:
        if not isinstance(node, dict) or not str(node.get("name", "")).startswith("c10d::"):
            continue
        rf = _attr(node, "rf_id")
        size = _largest_tensor(node.get("inputs") or {})
        if rf is not None and size:
            out[int(rf)] = size
    return out


def _largest_tensor(inputs: dict) -> int | None:
    sizes = []
    for typ, shape in zip(inputs.get("types") or [], inputs.get("shapes") or [], strict=False):
        m = TENSOR.search(str(typ))
        el = ELEMENT_BYTES.get(m.group(1)) if m else None
        if el is None or not isinstance(shape, list):
            continue
        shapes = shape if shape and isinstance(shape[0], list) else [shape]
        for s in shapes:
            if isinstance(s, list) and s and all(isinstance(x, int) for x in s):
                n = 1
                for x in s:
                    n *= x
                sizes.append(n * el)
    return max(sizes) if sizes else None


def process_groups(et: dict, world: int) -> list[list[int]]:
    """Sorted rank lists of the ``## process_group:init ##`` node (groups of one left out;
    the default group, which lists no ranks, is the world)."""
    for node in et["nodes"]:
        if isinstance(node, dict) and node.get("name") == PG_INIT:
            values = (node.get("inputs") or {}).get("values") or []
            try:
                pgs = json.loads(values[0]) if values else []
            except (TypeError, json.JSONDecodeError):
                return []
            out = []
            for pg in pgs if isinstance(pgs, list) else []:
                ranks = pg.get("ranks") if isinstance(pg, dict) else None
                if not isinstance(ranks, list) or not all(
                        isinstance(r, int) and 0 <= r < world for r in ranks):
                    continue  # not a group this reader can use
                ranks = sorted(ranks)
                if not ranks and pg.get("group_size") == world:
                    ranks = list(range(world))
                if len(ranks) >= 2 and ranks not in out:
                    out.append(ranks)
            return out
    return []
