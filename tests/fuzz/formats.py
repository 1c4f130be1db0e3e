"""The input formats the fuzzer mutates: for each, valid starting points, the schema its
oracle reads (the dataclass annotations), the file's name and the command that reads it.

Adding a format: a ``Format`` entry in ``FORMATS`` (see docs/contributing.md, "Adding an input
format"). Most formats mutate one mapping (a file, or a record ``wrap`` puts into a file);
``setup`` writes the sibling files a directory format needs; ``dump`` writes non-YAML files.
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import json
import tempfile
import typing
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True)
class Format:
    """A fuzzed input format: its valid starting points, its schema, the command reading it."""

    bases: typing.Callable[[], list[dict]]
    schema: typing.Callable[[dict], type]
    argv: typing.Callable[[str], list[str]]
    suffixes: tuple[str, ...] = (".yaml", ".json")
    required: tuple[str, ...] = ("kind",)   # removing one of these must be refused
    wrap: typing.Callable[[Any], Any] = lambda d: d       # mutated dict -> file content
    dump: typing.Callable[[Any], bytes] | None = None     # file bytes (default YAML/JSON)
    as_read: typing.Callable[[str, Any], Any] = lambda k, v: v  # a value as the reader sees it
    extra_keys_ok: bool = False                           # unknown keys ignored by the reader
    filename: str = "input"                               # the file's name (suffix added)
    setup: typing.Callable[[Path], None] = lambda d: None  # sibling files in the case's dir
    allow_inf: tuple[str, ...] = ()                       # keys whose rules allow +infinity
    # an in-process reader other than ``netsim ARGV`` (the trainer's files): reads and checks
    # the file at the path; InputError/ValueError/OSError is a clean refusal, a return is 0
    call: typing.Callable[[str], None] | None = None


# ---------------------------------------------------------------------------------------------
# The formats of issue #16 and after


def _fabric_bases() -> list[dict]:
    from topologies.files import PRESETS, spec_to_dict

    out = [spec_to_dict(PRESETS[n]) for n in ("fat-tree-k4", "fat-tree-k8", "leaf-spine-64")]
    out.append({**spec_to_dict(PRESETS["megascale"]), "servers": 128, "name": "small-clos"})
    return out


def _job_bases() -> list[dict]:
    from tuner.jobs import read_job_dict

    tiny = read_job_dict("tiny")
    return [tiny, read_job_dict("gpt3-175b"),
            {**tiny, "overlap": {"dp_grad_reduce": True, "tp_comm": False}, "recompute": True,
             "seq": 1024, "virtual_stages": 1}]


def _hf_bases() -> list[dict]:
    from netsim.model.hf import HF_PRESETS

    return [dict(HF_PRESETS[n][0]) for n in ("llama3-8b", "mixtral-8x7b", "deepseek-v3")]


def _sweep_bases() -> list[dict]:
    """Specs whose every point runs (flags of ``netsim predict``): a mutation is what fails."""
    args = {"job": "tiny", "fabric": "fat-tree-k8", "json": True}
    return [{"command": "predict", "args": args, "grid": {"dp": [8], "micro_batch": [1, 2]}},
            {"command": "predict", "args": args, "list": [{"micro_batch": 1}]},
            {"command": "predict", "args": args,
             "sample": {"n": 2, "seed": 3, "space": {"micro_batch": {"low": 1, "high": 4,
                                                                     "int": True}}}}]


def _sweep_argv(path: str) -> list[str]:
    out = tempfile.mkdtemp(prefix="fuzz-sweep-", dir=str(Path(path).parent))
    return ["sweep", path, "-o", out, "--workers", "0", "--no-progress"]


def _running_bases() -> list[dict]:
    """Entries of RUNNING.yaml (mutated, then wrapped as ``{jobs: [entry]}``)."""
    return [{"name": "a", "job": "tiny", "gpus": "64-127"},
            {"name": "b", "job": {"model": "tiny", "tp": 1, "pp": 1, "dp": 2}, "gpus": [64, 72]}]


def _running_argv(path: str) -> list[str]:
    return ["predict", "--job", "tiny", "--fabric", "fat-tree-k8", "--background", path,
            "--json"]


def _trace_bases() -> list[dict]:
    """Rows of a cluster job trace (mutated, then written as a one-row CSV)."""
    return [{"name": "j0", "arrival_s": 0.0, "duration_s": 60.0, "gpus": 16},
            {"name": "j1", "arrival_s": 5.0, "duration_s": 30.0, "model": "gpt3-1.3b",
             "tp": 8, "pp": 1, "dp": 2}]


def _trace_argv(path: str) -> list[str]:
    return ["cluster", "simulate", "--fabric", "fat-tree-k8", "--trace", path,
            "--policy", "linear", "--json"]


def _csv_text(value: Any) -> str:
    return "" if value is None else str(value)


def _csv_dump(data: Any) -> bytes:
    import csv

    if not isinstance(data, dict):
        return _csv_text(data).encode()
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(list(data))
    w.writerow([_csv_text(v) for v in data.values()])
    return buf.getvalue().encode()


def _trace_cell(key: str, value: Any) -> Any:
    from tuner.cluster import _cell

    return _cell(key, _csv_text(value))


@dataclasses.dataclass(frozen=True)
class KinetoEvent:
    """The event fields ``netsim.traces.kineto`` reads (the fuzz oracle's schema)."""

    ph: str
    name: str
    ts: float
    dur: float
    cat: str = "user_annotation"
    args: dict = dataclasses.field(default_factory=dict)


def _kineto_bases() -> list[dict]:
    """One event of a Chrome trace (mutated, then put after a ProfilerStep range)."""
    return [{"ph": "X", "cat": "user_annotation", "name": "forward/layer/0/0", "ts": 10.0,
             "dur": 5.0, "pid": 1, "tid": 1},
            {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce", "ts": 20.0, "dur": 8.0,
             "args": {"Collective name": "allreduce"}}]


def _kineto_wrap(event: dict) -> dict:
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0.0,
            "dur": 100.0}
    return {"traceEvents": [step, event], "distributedInfo": {"rank": 0, "world_size": 1}}


def _kineto_argv(path: str) -> list[str]:
    return ["diagnose", str(Path(path).parent), "--json"]


def _fabric_schema(data: dict) -> type:
    from topologies.files import KINDS

    return KINDS[data["kind"]]


def _schema(module: str, name: str) -> typing.Callable[[dict], type]:
    """The schema ``module.name`` of a format, imported when first fuzzed (as its reader is)."""
    return lambda data: getattr(importlib.import_module(module), name)


def _kineto_schema(data: dict) -> type:
    return KinetoEvent


# ---------------------------------------------------------------------------------------------
# The formats of issue #30


#: The job and fabric the placement, free-server and calibration formats run with.
_JOB, _FABRIC = "tiny", "fat-tree-k8"


def _calibration_bases() -> list[dict]:
    """One fit (mutated, then put as ``compute.forward`` into a whole calibration file)."""
    return [{"intercept_s": 1e-5, "rate": 1e11, "points": 4, "rel_rms": 0.01, "max_rel": 0.02},
            {"intercept_s": 0.0, "rate": float("inf"), "points": 8, "rel_rms": 0.1,
             "max_rel": 0.3}]


def _calibration_wrap(fit: Any) -> dict:
    from netsim.diagnose.calibration import SCHEMA

    return {"schema": SCHEMA, "compute": {"forward": fit}, "comm": {"all_reduce/tor": fit},
            "world_size": 8, "host_cores": 8, "host": {"cpu_msg_s": 1e-6, "utilization": 0.9},
            "hardware": {"name": "cpu:h0", "device": "cpu", "hosts": ["h0"],
                         "backend": "gloo"}}


def _calibration_argv(path: str) -> list[str]:
    return ["predict", "--job", _JOB, "--calibration", path, "--json"]


def _calibration_schema(data: dict) -> type:
    return _schema("netsim.diagnose.calibration", "Fit")(data)


def _placement_rows() -> list[dict]:
    from topologies import load_fabric

    fabric = load_fabric(_FABRIC)
    g = int(fabric.gpus_per_server)
    return [{"rank": i, "host": fabric.servers[i // g], "local_rank": i % g,
             "gpu": fabric.gpus[i]} for i in range(64)]


def _placement_bases() -> list[dict]:
    """Rank 0 of a placement of the tiny job (mutated, then put first in the whole file)."""
    row = _placement_rows()[0]
    return [row, {k: v for k, v in row.items() if k != "gpu"}]


def _placement_wrap(rank0: Any) -> dict:
    return {"schema": "netsim-placement/1", "ranks": [rank0] + _placement_rows()[1:],
            "fabric": _FABRIC}


def _placement_argv(path: str) -> list[str]:
    return ["predict", "--job", _JOB, "--fabric", _FABRIC, "--placement", path, "--json"]


@dataclasses.dataclass(frozen=True)
class FreeServers:
    """A free-server file as a mapping (the oracle's schema; a bare list is read too)."""

    servers: list[str]


def _free_bases() -> list[dict]:
    from topologies import load_fabric

    servers = load_fabric(_FABRIC).servers
    return [{"servers": servers[8:16]}, {"servers": [servers[3], servers[40], servers[9],
                                                     servers[10], servers[11], servers[12],
                                                     servers[13], servers[14]]}]


def _free_argv(path: str) -> list[str]:
    return ["place", "--fabric", _FABRIC, "--job", _JOB, "--free", path, "--json"]


def _settings_bases() -> list[dict]:
    """The ECN ramp of ``switch_qos.yaml`` (mutated, then put into the whole file)."""
    return [{"priority": 3, "kmin_bytes": 5_000, "kmax_bytes": 50_000, "pmax": 0.5},
            {"priority": 3, "kmin_bytes": 150_000, "kmax_bytes": 1_500_000, "pmax": 0.2}]


def _settings_wrap(ecn: Any) -> dict:
    from tuner import render

    with tempfile.TemporaryDirectory() as tmp:
        doc = render.write_switch_qos(Path(tmp) / "q.yaml", {"kmin_bytes": 5_000,
                                                            "kmax_bytes": 50_000, "pmax": 0.5},
                                      [{"link_kind": "host", "port_speed_gbps": 100.0,
                                        "cable_m": 100.0, "headroom_bytes": 46072}])
    return {**doc, "ecn": ecn}


def _settings_setup(d: Path) -> None:
    """The other two files of a ``netsim recommend -o DIR``."""
    from tuner import render

    render.write_nic_conf(d / "nic_dcqcn.conf", {"rpg_ai_rate": 20}, {"cnp_dscp": 48}, 3)
    render.write_nccl_env(d / "nccl.env", {"NCCL_IB_QPS_PER_CONNECTION": "4"})


def _settings_argv(path: str) -> list[str]:
    return ["simulate", "--level", "flow", "--fabric", "fat-tree-k4", "--settings",
            str(Path(path).parent), "--json"]






# ---------------------------------------------------------------------------------------------
# Trainer trace directories (record-level checks: issue #30 item 3, branch trace30)


@dataclasses.dataclass(frozen=True)
class RankMeta:
    """The ``meta`` record of a ``trace-rank*.jsonl`` (``netsim.traces.records.FIELD_TYPES``;
    the oracle's schema)."""

    type: str
    schema: str
    rank: int
    world_size: int
    tp: int
    pp: int
    dp: int
    model: dict
    micro_batches: int
    micro_batch_size: int
    global_batch: int
    host: str = "h0"


_TRACE_MODEL = {"layers": 4, "hidden": 64, "heads": 4, "ffn_hidden": 256, "seq": 32,
                "vocab": 128}


def _rank_meta(rank: int) -> dict:
    return {"type": "meta", "schema": "trainer-trace/1", "rank": rank, "world_size": 2,
            "tp": 2, "pp": 1, "dp": 1, "model": dict(_TRACE_MODEL), "micro_batches": 1,
            "micro_batch_size": 1, "global_batch": 1, "host": "h0"}


def _rank_records(meta: Any) -> list[Any]:
    recs = [meta]
    for step in range(3):
        t = step * 0.02
        recs += [{"type": "compute", "step": step, "phase": "forward", "name": "layer",
                  "layer": 0, "start_s": t, "end_s": t + 0.01, "flops": 1.0},
                 {"type": "collective", "step": step, "op": "all_reduce", "kind": "tp",
                  "group": [0, 1], "bytes": 4096, "start_s": t + 0.01, "end_s": t + 0.011,
                  "overlapped": False},
                 {"type": "iteration", "step": step, "iteration_s": 0.012}]
    return recs


def _jsonl_dump(meta: Any) -> bytes:
    return ("\n".join(json.dumps(r, allow_nan=True) for r in _rank_records(meta)) + "\n").encode()


def _ranks_setup(d: Path) -> None:
    (d / "trace-rank1.jsonl").write_bytes(_jsonl_dump(_rank_meta(1)))


# ---------------------------------------------------------------------------------------------
# The trainer's own input files (issue #30 item 6): ``python -m trainer --config`` and
# ``--placement``, read and checked in-process as the trainer does before it joins the world


def _trainer_config_bases() -> list[dict]:
    """Config files as flat mappings: ``parallel.tp`` is key ``tp`` of the ``parallel``
    sub-mapping (``_nest`` puts them back), so the oracle reaches the nested fields too."""
    return [{"model.preset": "tiny", "parallel.tp": 2, "parallel.dp": 2,
             "parallel.micro_batches": 2, "parallel.global_batch": 8, "steps": 5, "lr": 1e-3,
             "betas": [0.9, 0.95]},
            {"model.layers": 4, "model.hidden": 64, "model.heads": 4, "model.seq": 32,
             "model.vocab": 128, "model.ffn": "gated", "model.kv_heads": 2, "parallel.pp": 2,
             "parallel.order": "tp-dp-pp", "parallel.stage_layers": [3, 1], "seed": 7,
             "dtype": "float32"},
            {"model.preset": "tiny-moe", "parallel.dp": 2, "parallel.ep": 2,
             "parallel.global_batch": 4, "parallel.order": "tp-cp-ep-dp-pp", "inject_slow_rank": 1, "slow_factor": 2.0,
             "profile_schedule": [1, 1, 2]}]


def _nest(flat: Any) -> Any:
    """A flat config mapping as the file holds it; a whole ``model:`` or ``parallel:`` value
    given beside dotted keys wins over them."""
    if not isinstance(flat, dict):
        return flat
    out: dict = {}
    for key, value in flat.items():
        head, dot, rest = str(key).partition(".")
        if not dot:
            out[key] = value
        elif isinstance(out.setdefault(head, {}), dict) and head not in flat:
            out[head][rest] = value
    return out


def _trainer_config_schema(data: dict) -> type:
    """The flat keys' types: TrainConfig's own, ``parallel.*`` and ``model.*`` (plus
    ``model.preset``), and the whole ``model`` (a preset, a config.json path or a mapping)."""
    from trainer.config import ModelConfig, ParallelConfig, TrainConfig

    hints = dict(typing.get_type_hints(TrainConfig))
    hints["model"] = str | dict
    hints["parallel"] = dict
    for prefix, cls in (("parallel", ParallelConfig), ("model", ModelConfig)):
        hints |= {f"{prefix}.{k}": v for k, v in typing.get_type_hints(cls).items()}
    hints["model.preset"] = str
    return type("TrainerConfigKeys", (), {"__annotations__": hints})


def _trainer_config_call(path: str) -> None:
    """What ``python -m trainer --config PATH`` reads and checks before training."""
    from trainer.cli import build_parser, config_from_args

    config_from_args(build_parser().parse_args(["--config", path]), 1)


def _trainer_placement_rows() -> list[dict]:
    """Eight ranks on two hosts, as the tuner writes them (``gpu`` is read by netsim only)."""
    return [{"rank": i, "host": f"node{i // 4}", "local_rank": i % 4, "gpu": i}
            for i in range(8)]


def _trainer_placement_call(path: str) -> None:
    """What ``python -m trainer --placement PATH`` reads and checks before training."""
    from trainer.mesh import load_placement

    load_placement(path)


#: Formats whose readers another change is fixing: fuzzed by ``--formats all`` and by name,
#: left out of the gate (``--formats gate``) until it lands, then removed from here.
PENDING: dict[str, str] = {}


#: Every fuzzed format (``--formats``); the default run of the script keeps fabric and job, as
#: issue #16's; the gate (``tests/fuzz/test_fuzzer.py``) runs them all.
FORMATS: dict[str, Format] = {
    "fabric": Format(_fabric_bases, _fabric_schema, lambda p: ["topo", p, "--json"]),
    "job": Format(_job_bases, _schema("netsim.workload", "JobSpec"),
                  lambda p: ["predict", "--job", p, "--json"]),
    "hf": Format(_hf_bases, _schema("netsim.model.hf", "HFConfigKeys"),
                 lambda p: ["predict", "--model", p, "--json"],
                 suffixes=(".json",), required=("num_hidden_layers", "hidden_size",
                                                "num_attention_heads", "intermediate_size",
                                                "vocab_size", "hidden_act"),
                 extra_keys_ok=True),
    "sweep": Format(_sweep_bases, _schema("sweeps", "SpecKeys"), _sweep_argv,
                    required=("command", "grid", "list", "sample")),
    "background": Format(_running_bases, _schema("tuner.background", "RunningEntry"),
                         _running_argv,
                         required=("job", "gpus"), wrap=lambda d: {"jobs": [d]}),
    "trace": Format(_trace_bases, _schema("tuner.cluster", "TraceRow"), _trace_argv,
                    suffixes=(".csv",),
                    required=("arrival_s", "duration_s", "gpus"), dump=_csv_dump,
                    as_read=_trace_cell),
    "kineto": Format(_kineto_bases, _kineto_schema, _kineto_argv, suffixes=(".json",),
                     required=(), wrap=_kineto_wrap, extra_keys_ok=True),
    "calibration": Format(_calibration_bases, _calibration_schema, _calibration_argv,
                          suffixes=(".json",), required=("intercept_s", "rate", "points",
                                                         "rel_rms", "max_rel"),
                          wrap=_calibration_wrap, allow_inf=("rate",)),
    "placement": Format(_placement_bases, _schema("tuner.inputs", "PlacementRank"),
                        _placement_argv, required=("rank", "host", "local_rank"),
                        wrap=_placement_wrap),
    "free": Format(_free_bases, lambda d: FreeServers, _free_argv, suffixes=(".yaml",),
                   required=("servers",)),
    "settings": Format(_settings_bases, _schema("tuner.settings", "EcnThresholds"),
                       _settings_argv, suffixes=(".yaml",), filename="switch_qos",
                       required=("priority", "kmin_bytes", "kmax_bytes", "pmax"),
                       wrap=_settings_wrap, setup=_settings_setup),
    "ranks": Format(lambda: [_rank_meta(0)], lambda d: RankMeta,
                    lambda p: ["diagnose", str(Path(p).parent), "--json"], suffixes=(".jsonl",),
                    filename="trace-rank0", required=("type", "rank", "world_size", "tp", "pp"),
                    dump=_jsonl_dump, setup=_ranks_setup, extra_keys_ok=True),
    "trainer_config": Format(_trainer_config_bases, _trainer_config_schema,
                             lambda p: ["python -m trainer", "--config", p], required=(),
                             wrap=_nest, filename="config", call=_trainer_config_call),
    "trainer_placement": Format(lambda: _trainer_placement_rows()[:1],
                                _schema("trainer.mesh", "PlacementEntry"),
                                lambda p: ["python -m trainer", "--placement", p],
                                suffixes=(".json",), required=("rank", "host", "local_rank"),
                                wrap=lambda r0: {"ranks": [r0] + _trainer_placement_rows()[1:]},
                                extra_keys_ok=True, filename="placement",
                                call=_trainer_placement_call),
}
DEFAULT_FORMATS = ("fabric", "job")
#: What the gate fuzzes: every format but the pending ones.
GATE_FORMATS = tuple(f for f in FORMATS if f not in PENDING)
