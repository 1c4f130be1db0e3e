"""Property-based tests of every input format (issue #16).

For each format: generated *valid* files load, and load -> save -> load gives the same
object; generated *invalid* files (one key set to a value its type can never hold) are refused
by the command that reads them with exit status 2 and one line on stderr naming the file and
the key, never a traceback or a hang. The default run uses a small, derandomized budget
(``FAST``); the ``slow`` tests run the same properties with many more examples (``SLOW``).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import tempfile
import typing
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inputspec import InputError
from tuner.cli import main

FAST = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])

NAMES = st.text(alphabet=st.characters(categories=["L", "N"]), min_size=1, max_size=10)


def _both(prop, strategy):
    """The property under the default budget, and a ``slow`` copy with more examples."""
    fast = FAST(given(strategy)(prop))
    slow = pytest.mark.slow(SLOW(given(strategy)(prop)))
    return fast, slow


def _write(data, suffix: str) -> Path:
    d = Path(tempfile.mkdtemp(prefix="inputs-"))
    path = d / f"input{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True),
                        encoding="utf-8")
    return path


def _cli(argv: list[str]) -> tuple[int, str]:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
    return rc, err.getvalue()


def _assert_refused(argv: list[str], path: Path, key: str) -> None:
    rc, err = _cli(argv)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2, (rc, err)
    assert len(lines) == 1, err
    assert str(path) in lines[0] or path.parent.name in lines[0], lines[0]
    assert key in lines[0], (key, lines[0])


def _file_refused(suffix: str, argv):
    """A property of a ``(data, key)`` case: ``data`` written to a ``suffix`` file is refused
    by the CLI command ``argv(path)`` in one line naming the file and ``key``."""

    def refused(case):
        data, key = case
        path = _write(data, suffix)
        _assert_refused(argv(str(path)), path, key)

    return refused


# ---------------------------------------------------------------------------------------------
# Nonsense values for a field of a given type


def _nonsense_for(tp) -> list:
    args = typing.get_args(tp)
    optional = type(None) in args
    members = [a for a in args if a is not type(None)]
    base = members[0] if args else tp
    pool = [[1, 2], {"a": 1}, math.nan, math.inf]
    if not optional:
        pool.append(None)
    if len(members) > 1:  # e.g. str | int: only what no member accepts
        return pool + [True, 0.5]
    if base is bool:
        pool += [65, "abc", 2.5, 0]
    elif base in (int, float):
        pool += ["abc", "h100", True, -5]
        if base is int:
            pool.append(2.5)
    elif base is str:
        pool += [0.5, True, 7]
    elif typing.get_origin(base) is tuple:
        pool += ["abc", 3, True]
    return pool


def _bad_value(draw, cls, data: dict, skip=()) -> tuple[str, object]:
    hints = typing.get_type_hints(cls)
    keys = sorted(k for k in hints if k not in skip and k in data or k in hints
                  and k not in skip and not str(hints[k]).startswith(("dict", "typing.Any")))
    key = draw(st.sampled_from(keys))
    return key, draw(st.sampled_from(_nonsense_for(hints[key])))


# ---------------------------------------------------------------------------------------------
# Fabric files


@st.composite
def fabric_dicts(draw) -> dict:
    kind = draw(st.sampled_from(["fat_tree", "leaf_spine", "clos3"]))
    name = draw(NAMES)
    if kind == "fat_tree":
        k = 2 * draw(st.integers(1, 6))
        nps = draw(st.sampled_from([d for d in range(1, k // 2 + 1) if (k // 2) % d == 0]))
        return {"kind": kind, "name": name, "k": k, "nics_per_server": nps,
                "gpus_per_server": draw(st.integers(1, 8)),
                "link_speed_gbps": draw(st.floats(1, 800)),
                "link_latency_ns": draw(st.floats(0, 1e4))}
    if kind == "leaf_spine":
        nps = draw(st.integers(1, 4))
        spines, spl = draw(st.integers(1, 8)), draw(st.integers(1, 8))
        leaves = nps * draw(st.integers(1, 4))
        radix = max(spl + spines, leaves) + draw(st.integers(0, 8))
        return {"kind": kind, "name": name, "leaves": leaves, "spines": spines,
                "servers_per_leaf": spl, "nics_per_server": nps, "switch_radix": radix,
                "host_speed_gbps": draw(st.floats(1, 400)),
                "uplink_latency_ns": draw(st.floats(0, 1e4))}
    return {"kind": kind, "base": "megascale", "name": name,
            "servers": draw(st.integers(1, 200)), "gpus_per_server": draw(st.integers(1, 8)),
            "nics_per_server": draw(st.sampled_from([1, 2, 4, 8])),
            "nic_speed_gbps": draw(st.floats(1, 200))}


def _fabric_roundtrip(data):
    from topologies.files import read_spec, save_fabric

    suffix = ".json" if len(data["name"]) % 2 else ".yaml"
    path = _write(data, suffix)
    spec = read_spec(path)
    again = read_spec(save_fabric(spec, path.with_name("again" + suffix)))
    assert again == spec


test_fabric_roundtrip, test_fabric_roundtrip_slow = _both(_fabric_roundtrip, fabric_dicts())


@st.composite
def bad_fabrics(draw):
    from topologies.files import KINDS

    data = draw(fabric_dicts())
    key, value = _bad_value(draw, KINDS[data["kind"]], data)
    return {**data, key: value}, key


_fabric_refused = _file_refused(".yaml", lambda p: ["topo", p, "--json"])


test_fabric_refused, test_fabric_refused_slow = _both(_fabric_refused, bad_fabrics())


# ---------------------------------------------------------------------------------------------
# Job files


def _divisors(n: int, cap: int = 8) -> list[int]:
    return [d for d in range(1, cap + 1) if n % d == 0]


@st.composite
def job_dicts(draw) -> dict:
    from netsim.model.hardware import HARDWARE
    from netsim.model.models import get_model

    model = draw(st.sampled_from(["tiny", "gpt3-1.3b", "gpt3-175b"]))
    m = get_model(model)
    tp = draw(st.sampled_from(_divisors(math.gcd(m.hidden, m.heads))))
    pp = draw(st.sampled_from(_divisors(m.layers)))
    dp, mb = draw(st.integers(1, 8)), draw(st.integers(1, 4))
    data = {"model": model, "gpu": draw(st.sampled_from(sorted(HARDWARE))), "tp": tp,
            "pp": pp, "dp": dp, "micro_batch": mb,
            "global_batch": dp * mb * draw(st.integers(1, 8)),
            "recompute": draw(st.booleans()), "distributed_optimizer": draw(st.booleans()),
            "act_bytes": draw(st.sampled_from([1, 2, 4])), "seq": draw(st.none() |
                                                                       st.integers(1, 4096))}
    if draw(st.booleans()):
        data["overlap"] = draw(st.sampled_from(["megascale", "none"]) | st.fixed_dictionaries(
            {"dp_grad_reduce": st.booleans(), "tp_comm": st.booleans()}))
    if draw(st.booleans()):
        data["gpus"] = tp * pp * dp
    return data


def _job_roundtrip(data):
    from tuner.jobs import load_job

    path = _write(data, ".yaml")
    job = load_job(str(path))
    again = load_job(str(_write(job.to_dict(), ".json")))
    assert again == job


test_job_roundtrip, test_job_roundtrip_slow = _both(_job_roundtrip, job_dicts())


@st.composite
def bad_jobs(draw):
    from netsim.workload import JobSpec

    data = draw(job_dicts())
    key, value = _bad_value(draw, JobSpec, data, skip=("overlap",))
    return {**data, key: value}, key


_job_refused = _file_refused(".yaml", lambda p: ["predict", "--job", p, "--json"])


test_job_refused, test_job_refused_slow = _both(_job_refused, bad_jobs())


# ---------------------------------------------------------------------------------------------
# Flow files


@st.composite
def flow_dicts(draw) -> dict:
    from topologies import load_fabric

    nics = load_fabric("fat-tree-k4").nics
    flows = []
    for _ in range(draw(st.integers(1, 5))):
        src, dst = draw(st.lists(st.sampled_from(nics), min_size=2, max_size=2, unique=True))
        rec = {"src": src, "dst": dst, "qps": draw(st.integers(1, 128))}
        if draw(st.booleans()):
            rec["bytes"] = draw(st.integers(1, 2**40))
        else:
            rec["size"] = f"{draw(st.integers(1, 4096))}{draw(st.sampled_from(['KB', 'MiB']))}"
        if draw(st.booleans()):
            rec["start_ns"] = draw(st.integers(0, 10**9)) / 1000
        flows.append(rec)
    return {"flows": flows}


def _flow_roundtrip(data):
    from netsim.scenario.traffic import flows_to_records, load_flows

    flows = load_flows(_write(data, ".json"))
    again = load_flows(_write({"flows": flows_to_records(flows)}, ".yaml"))
    assert again == flows


test_flow_roundtrip, test_flow_roundtrip_slow = _both(_flow_roundtrip, flow_dicts())


@st.composite
def bad_flows(draw):
    from netsim.scenario.traffic import FlowRecord

    data = draw(flow_dicts())
    i = draw(st.integers(0, len(data["flows"]) - 1))
    rec = data["flows"][i]
    key, value = _bad_value(draw, FlowRecord, rec)
    flows = list(data["flows"])
    flows[i] = {**rec, key: value}
    return {"flows": flows}, key


_flow_refused = _file_refused(".json", lambda p: ["simulate", "--level", "flow", "--fabric",
                                                   "fat-tree-k4", "--flows", p, "--json"])


test_flow_refused, test_flow_refused_slow = _both(_flow_refused, bad_flows())


# ---------------------------------------------------------------------------------------------
# Placement files (placement.json of place/recommend, or GPU positions) and free servers


@st.composite
def placement_dicts(draw) -> dict:
    n = draw(st.integers(1, 16))
    gps = draw(st.sampled_from([1, 2, 4, 8]))
    slots = draw(st.permutations(range(n)))
    with_gpu = draw(st.booleans())
    ranks = []
    for r, slot in enumerate(slots):
        row = {"rank": r, "host": f"server{slot // gps}", "local_rank": slot % gps}
        if with_gpu:
            row["gpu"] = f"gpu{slot}"
        ranks.append(row)
    doc = {"schema": "netsim-placement/1", "ranks": ranks}
    if draw(st.booleans()):
        doc.update(strategy="topo", fabric="fat-tree-k8", predicted_iteration_s=0.5)
    return doc


def _placement_roundtrip(data):
    from tuner.inputs import placement_to_dict, read_placement_file

    doc = read_placement_file(_write(data, ".json"))
    again = read_placement_file(_write(placement_to_dict(doc), ".json"))
    assert again == doc


test_placement_roundtrip, test_placement_roundtrip_slow = _both(_placement_roundtrip,
                                                                placement_dicts())


@st.composite
def bad_placements(draw):
    from tuner.inputs import PlacementRank

    data = draw(placement_dicts())
    i = draw(st.integers(0, len(data["ranks"]) - 1))
    key, value = _bad_value(draw, PlacementRank, data["ranks"][i])
    ranks = list(data["ranks"])
    ranks[i] = {**ranks[i], key: value}
    return {**data, "ranks": ranks}, key


_placement_refused = _file_refused(".json", lambda p: [
    "predict", "--job", "tiny", "--fabric", "fat-tree-k8", "--comm", "analytic", "--placement", p,
    "--json"])


test_placement_refused, test_placement_refused_slow = _both(_placement_refused,
                                                            bad_placements())


@st.composite
def free_server_lists(draw):
    n = draw(st.integers(1, 16))
    return draw(st.permutations(range(16)))[:n], draw(st.sampled_from(["names", "positions",
                                                                       "yaml", "mapping"]))


def _free_roundtrip(case):
    from topologies import load_fabric
    from tuner.inputs import read_free_servers

    fabric = load_fabric("fat-tree-k4")
    positions, form = case
    names = [fabric.servers[i] for i in positions]
    d = Path(tempfile.mkdtemp(prefix="inputs-"))
    path = d / "free.txt"
    text = {"names": " ".join(names), "positions": ",".join(map(str, positions)),
            "yaml": yaml.safe_dump(names), "mapping": json.dumps({"servers": positions})}[form]
    path.write_text(text)
    got = read_free_servers(path, fabric)
    assert got == list(positions)
    (d / "again.txt").write_text("\n".join(fabric.servers[i] for i in got))
    assert read_free_servers(d / "again.txt", fabric) == got


test_free_roundtrip, test_free_roundtrip_slow = _both(_free_roundtrip, free_server_lists())


def _free_refused(value):
    d = Path(tempfile.mkdtemp(prefix="inputs-"))
    path = d / "free.json"
    path.write_text(json.dumps({"servers": ["srv0", value]}))
    _assert_refused(["place", "--fabric", "fat-tree-k4", "--job", "tiny", "--free", str(path),
                     "--json"], path, "servers[1]")


test_free_refused, test_free_refused_slow = _both(
    _free_refused, st.sampled_from([True, 2.5, None, [1], {"a": 1}, -1, 10**6, "nosuch"]))


# ---------------------------------------------------------------------------------------------
# Calibration files


FITS = st.builds(lambda a, r, p, q, m: {"intercept_s": a, "rate": r, "points": p,
                                         "rel_rms": q, "max_rel": m},
                 st.floats(0, 1), st.floats(1e3, 1e15) | st.just(math.inf), st.integers(0, 99),
                 st.floats(0, 10), st.floats(0, 10))


@st.composite
def calibration_dicts(draw) -> dict:
    from netsim.diagnose.calibration import SCHEMA

    keys = st.sampled_from(["forward", "backward", "optimizer"])
    comm_keys = st.sampled_from(["all_reduce/server", "all_gather/tor", "all_reduce/tor/dp",
                                 "send/cross_tor/pp"])
    return {"schema": SCHEMA, "sources": draw(st.lists(NAMES, max_size=3)),
            "world_size": draw(st.integers(1, 64)),
            "host_cores": draw(st.none() | st.floats(0.5, 256)),
            "host": draw(st.dictionaries(st.sampled_from(["cpu_msg_s", "cpu_iter_s"]),
                                         st.floats(0, 1), max_size=2)),
            "compute": draw(st.dictionaries(keys, FITS, max_size=3)),
            "comm": draw(st.dictionaries(comm_keys, FITS, max_size=3))}


def _calibration_roundtrip(data):
    from netsim.diagnose.calibration import load_calibration, save_calibration

    cal = load_calibration(_write(data, ".json"))
    path = Path(tempfile.mkdtemp(prefix="inputs-")) / "again.json"
    save_calibration(cal, path)
    assert load_calibration(path) == cal


test_calibration_roundtrip, test_calibration_roundtrip_slow = _both(_calibration_roundtrip,
                                                                    calibration_dicts())


@st.composite
def bad_calibrations(draw):
    from netsim.diagnose.calibration import Fit

    data = draw(calibration_dicts())
    fit = draw(FITS)
    key, value = _bad_value(draw, Fit, fit)
    if key == "rate" and value == math.inf:
        value = -5
    data["compute"] = {"forward": {**fit, key: value}}
    return data, key


def test_calibration_comm_keys_checked(tmp_path):
    from netsim.diagnose.calibration import SCHEMA

    fit = {"intercept_s": 0.0, "rate": 1e9, "points": 3, "rel_rms": 0.0, "max_rel": 0.0}
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({"schema": SCHEMA, "compute": {}, "comm": {"backward": fit}}))
    _assert_refused(["predict", "--job", "tiny", "--calibration", str(path)], path, "comm")


_calibration_refused = _file_refused(".json", lambda p: ["predict", "--job", "tiny",
                                                         "--calibration", p, "--json"])


test_calibration_refused, test_calibration_refused_slow = _both(_calibration_refused,
                                                                bad_calibrations())


# ---------------------------------------------------------------------------------------------
# Trace directories (trainer-trace/1) and their summary.json


@st.composite
def trace_records(draw) -> list[dict]:
    meta = {"type": "meta", "schema": "trainer-trace/1", "rank": 0, "world_size": 1, "tp": 1,
            "pp": 1, "dp": 1, "micro_batches": 1, "micro_batch_size": 1, "global_batch": 1,
            "model": {"layers": 2, "hidden": 8, "heads": 2, "seq": 4, "vocab": 16}}
    recs = [meta]
    t = 0.0
    for step in range(draw(st.integers(1, 4))):
        dur = draw(st.floats(1e-4, 1.0))
        recs.append({"type": "compute", "step": step, "phase": "forward", "layer": 0,
                     "start_s": t, "end_s": t + dur})
        recs.append({"type": "iteration", "step": step, "iteration_s": dur})
        t += dur
    return recs


def _write_trace(records: list[dict], summary: dict) -> Path:
    d = Path(tempfile.mkdtemp(prefix="trace-"))
    (d / "trace-rank0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (d / "summary.json").write_text(json.dumps(summary))
    return d


def _trace_roundtrip(records):
    from netsim.traces.records import read_trace_dir

    steps = sum(r["type"] == "iteration" for r in records)  # summary.json's steps: iterations
    run = read_trace_dir(_write_trace(records, {"steps": steps}))
    rank = run.ranks[0]
    again = read_trace_dir(_write_trace([rank.meta, *rank.compute, *rank.iterations],
                                        run.summary))
    assert again.ranks[0] == rank and again.summary == run.summary


test_trace_roundtrip, test_trace_roundtrip_slow = _both(_trace_roundtrip, trace_records())


@st.composite
def bad_traces(draw):
    recs = draw(trace_records())
    i = draw(st.integers(1, len(recs) - 1))
    numeric = [k for k in recs[i] if k.endswith("_s") or k == "step"]
    key = draw(st.sampled_from(numeric))
    value = draw(st.sampled_from(["abc", [1], None, True, math.nan, math.inf, -5]))
    recs[i] = {**recs[i], key: value}
    return recs, key


def _trace_refused(case):
    recs, key = case
    d = _write_trace(recs, {})
    out = d / "cal.json"
    _assert_refused(["calibrate", str(d), "-o", str(out), "--json"], d / "trace-rank0.jsonl",
                    key)


test_trace_refused, test_trace_refused_slow = _both(_trace_refused, bad_traces())


# ---------------------------------------------------------------------------------------------
# Hugging Face config.json (netsim.model.hf): no saver, so valid files load to the model the
# same keys give in memory (``model_from_hf``)


@st.composite
def hf_config_dicts(draw) -> dict:
    from netsim.model.hf import HF_PRESETS

    name = draw(st.sampled_from(sorted(HF_PRESETS)))
    data = dict(HF_PRESETS[name][0])
    heads = data["num_attention_heads"]
    data["num_hidden_layers"] = draw(st.integers(max(1, data.get("first_k_dense_replace", 0)
                                                     + 1), 128))
    data["hidden_size"] = heads * draw(st.sampled_from([64, 128]))
    data["vocab_size"] = draw(st.integers(1, 200_000))
    data["tie_word_embeddings"] = draw(st.booleans())
    data["architectures"] = ["SomethingForCausalLM"]  # keys the suite does not read are kept
    data["rope_scaling"] = draw(st.none() | st.fixed_dictionaries({"factor": st.floats(1, 8)}))
    return data


def _hf_roundtrip(data):
    from netsim.model.hf import hf_from_file, model_from_hf

    path = _write(data, ".json")
    assert hf_from_file(path, name="m") == model_from_hf(data, "m")


test_hf_config_loads, test_hf_config_loads_slow = _both(_hf_roundtrip, hf_config_dicts())


@st.composite
def bad_hf_configs(draw):
    from netsim.model.hf import HFConfigKeys

    data = draw(hf_config_dicts())
    key, value = _bad_value(draw, HFConfigKeys, data)
    return {**data, key: value}, key


_hf_refused = _file_refused(".json", lambda p: ["predict", "--model", p, "--json"])


test_hf_config_refused, test_hf_config_refused_slow = _both(_hf_refused, bad_hf_configs())


# ---------------------------------------------------------------------------------------------
# Sweep specs (sweeps): the run keeps the spec as loaded (claim_dir dumps spec.raw), so
# load -> dump -> load gives the same points and args


_SWEEP_VALUES = st.one_of(st.integers(-10, 10**6), st.floats(-1e6, 1e6), NAMES, st.booleans())
_FLAGS = st.sampled_from(["load", "size", "seed", "fabric", "fail_links", "cc"])


@st.composite
def sweep_specs(draw) -> dict:
    data: dict = {"command": draw(st.sampled_from(["simulate", "predict", "topo"]))}
    if draw(st.booleans()):
        data["args"] = draw(st.dictionaries(st.sampled_from(["level", "json", "gpu"]),
                                            _SWEEP_VALUES, max_size=2))
    kind = draw(st.sampled_from(["grid", "list", "sample"]))
    if kind == "grid":
        data["grid"] = draw(st.dictionaries(_FLAGS, st.lists(_SWEEP_VALUES, min_size=1,
                                                             max_size=3, unique=True),
                                            min_size=1, max_size=2))
    elif kind == "list":
        rows = draw(st.lists(st.dictionaries(_FLAGS, _SWEEP_VALUES, min_size=1, max_size=2),
                             min_size=1, max_size=4))
        data["list"] = list({json.dumps(r, sort_keys=True): r for r in rows}.values())
    else:
        lo = draw(st.floats(0.01, 10))
        data["sample"] = {"n": draw(st.integers(1, 5)), "seed": draw(st.integers(0, 2**31)),
                          "space": {"load": {"low": lo, "high": lo * 10,
                                             "log": draw(st.booleans())}}}
    return data


def _sweep_roundtrip(data):
    """The spec file's round trip (``sweeps.load_spec``); the flag names here are arbitrary,
    so the check of flags against the command (``tuner.cli.sweep.load_spec``) is not made:
    ``tests/inputs/test_issue30_readers.py`` tests it."""
    from sweeps import load_spec
    from tuner.cli import SUBCOMMANDS

    spec = load_spec(_write(data, ".yaml"), commands=SUBCOMMANDS)
    again = load_spec(_write(spec.raw, ".yaml"), commands=SUBCOMMANDS)
    assert (again.command, again.args, again.points) == (spec.command, spec.args, spec.points)


test_sweep_roundtrip, test_sweep_roundtrip_slow = _both(_sweep_roundtrip, sweep_specs())

#: Values no sweep-spec key can hold, per key.
_BAD_SWEEP = {
    "command": [[1, 2], 0.5, True, {"a": 1}],
    "function": [[1, 2], 7, False],
    "args": [[1, 2], "abc", 7, {3: 1}],
    "grid": [5, "abc", [1, 2], {"load": 5}, {"load": "abc"}],
    "list": ["abc", 5, [1, 2], {"load": 1}],
    "sample": [[1, 2], "abc", {"n": "abc", "seed": 1, "space": {"x": [1]}},
               {"n": 0, "seed": 1, "space": {"x": [1]}},
               {"n": 2, "seed": 1.5, "space": {"x": [1]}},
               {"n": 2, "seed": 1, "space": {"x": {"low": 0, "high": math.inf}}},
               {"n": 2, "seed": 1, "space": {"x": {"low": "a", "high": 2}}},
               {"n": 2, "seed": 1, "space": {"x": 5}}],
}


@st.composite
def bad_sweep_specs(draw):
    data = draw(sweep_specs())
    key = draw(st.sampled_from(sorted(_BAD_SWEEP)))
    return {**data, key: draw(st.sampled_from(_BAD_SWEEP[key]))}, key


_sweep_refused = _file_refused(".yaml", lambda p: ["sweep", p, "-o", str(Path(p).parent / "out"),
                                                    "--workers", "0"])


test_sweep_refused, test_sweep_refused_slow = _both(_sweep_refused, bad_sweep_specs())


# ---------------------------------------------------------------------------------------------
# Cluster job traces (tuner.cluster): write_trace is the saver


@st.composite
def trace_rows(draw) -> list[dict]:
    n = draw(st.integers(1, 5))
    # write_trace keeps milliseconds (%.3f): draw times it can hold
    return [{"name": f"j{i}", "arrival_s": draw(st.integers(0, 10**9)) / 1000,
             "duration_s": draw(st.integers(1000, 10**9)) / 1000,
             "gpus": 8 * draw(st.integers(1, 32))} for i in range(n)]


def _write_csv(rows: list[dict]) -> Path:
    d = Path(tempfile.mkdtemp(prefix="inputs-"))
    cols = list(dict.fromkeys(k for r in rows for k in r))
    lines = [",".join(cols)] + [",".join("" if r.get(c) is None else str(r[c]) for c in cols)
                                for r in rows]
    (d / "jobs.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return d / "jobs.csv"


def _cluster_trace_roundtrip(rows):
    from tuner.cluster import read_trace, write_trace

    jobs = read_trace(_write_csv(rows))
    again = read_trace(write_trace(_write_csv(rows).parent / "again.csv", jobs))
    assert [(j.name, j.job, j.arrival_s, j.duration_s) for j in again] == \
        [(j.name, j.job, j.arrival_s, j.duration_s) for j in jobs]


test_cluster_trace_roundtrip, test_cluster_trace_roundtrip_slow = _both(
    _cluster_trace_roundtrip, trace_rows())

_BAD_CELLS = {"arrival_s": ["abc", "nan", "inf", "-5", "[1]"],
              "duration_s": ["abc", "0", "-1", "nan", "true"],
              "gpus": ["abc", "12", "2.5", "0", "-8", "1e30", "nan"],
              "tp": ["abc", "0", "2.5"]}


@st.composite
def bad_cluster_traces(draw):
    rows = draw(trace_rows())
    key = draw(st.sampled_from(sorted(_BAD_CELLS)))
    i = draw(st.integers(0, len(rows) - 1))
    bad = dict(rows[i], **{key: draw(st.sampled_from(_BAD_CELLS[key]))})
    if key == "tp":
        bad.update(model="gpt3-1.3b", pp=1, dp=2)
    return [*rows[:i], bad, *rows[i + 1:]], key


def _cluster_trace_refused(case):
    rows, key = case
    path = _write_csv(rows)
    _assert_refused(["cluster", "simulate", "--fabric", "fat-tree-k8", "--trace", str(path)],
                    path, key)


test_cluster_trace_refused, test_cluster_trace_refused_slow = _both(
    _cluster_trace_refused, bad_cluster_traces())


# ---------------------------------------------------------------------------------------------
# Background jobs RUNNING.yaml (tuner.background): no saver; valid files load to the jobs and
# GPUs they list


@st.composite
def running_files(draw) -> dict:
    starts = draw(st.lists(st.integers(0, 7), min_size=1, max_size=2, unique=True))
    jobs = []
    for k, start in enumerate(sorted(starts)):
        dp = draw(st.sampled_from([1, 2]))
        entry = {"name": draw(NAMES) + str(k), "job": {"model": "tiny", "tp": 1, "pp": 1,
                                                       "dp": dp}}
        first = 16 * start
        if draw(st.booleans()):
            entry["gpus"] = f"{first}-{first + dp - 1}"
        else:
            entry["gpus"] = list(range(first, first + dp))
        jobs.append(entry)
    return {"jobs": jobs}


def _running_loads(data):
    from topologies.files import load_fabric
    from tuner.background import load_background

    jobs = load_background(_write(data, ".yaml"), load_fabric("fat-tree-k8"))
    assert [j.name for j in jobs] == [e["name"] for e in data["jobs"]]
    assert [j.job.world for j in jobs] == [len(j.gpu_of_rank) for j in jobs]


test_running_loads, test_running_loads_slow = _both(_running_loads, running_files())

_BAD_RUNNING = {
    "jobs": [5, "abc", {"a": 1}, [1, 2]],
    "name": [[1, 2], {"a": 1}, 2.5],
    "job": [7, [1, 2], {"tp": "abc"}, {"model": 0.5}, {"colour": 1}],
    "gpus": [2.5, {"a": 1}, "0-99999999999", "abc", [True]],
    "placement": [7, [1, 2]],
}


@st.composite
def bad_running_files(draw):
    data = draw(running_files())
    key = draw(st.sampled_from(sorted(_BAD_RUNNING)))
    value = draw(st.sampled_from(_BAD_RUNNING[key]))
    if key == "jobs":
        return {"jobs": value}, key
    entry = dict(data["jobs"][0], **{key: value})
    if key == "placement":
        entry.pop("gpus")
    return {"jobs": [entry, *data["jobs"][1:]]}, key


def _running_refused(case):
    data, key = case
    path = _write(data, ".yaml")
    _assert_refused(["predict", "--job", "tiny", "--fabric", "fat-tree-k8", "--background",
                     str(path), "--json"], path, key if key != "job" else "jobs[0].job")


test_running_refused, test_running_refused_slow = _both(_running_refused, bad_running_files())


# ---------------------------------------------------------------------------------------------
# torch.profiler Kineto traces (netsim.traces.kineto): no saver; valid documents load to one rank per
# file with one iteration per ProfilerStep range


@st.composite
def kineto_docs(draw) -> dict:
    steps = draw(st.integers(1, 4))
    t, events = float(draw(st.integers(0, 10**6))), []
    for k in range(steps):
        dur = float(draw(st.integers(1, 10**5)))
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k + 1}",
                       "ts": t, "dur": dur, "pid": 1, "tid": 1})
        t += dur
    return {"traceEvents": events, "distributedInfo": {"rank": 0, "world_size": 1}}


def _write_kineto(doc) -> Path:
    d = Path(tempfile.mkdtemp(prefix="inputs-"))
    (d / "kineto-rank0.json").write_text(json.dumps(doc), encoding="utf-8")
    return d


def _kineto_loads(doc):
    from netsim.traces.kineto import read_traces

    run = read_traces(_write_kineto(doc))
    assert [r.meta["rank"] for r in run.ranks] == [0]
    steps = [e for e in doc["traceEvents"] if e["name"].startswith("ProfilerStep")]
    assert [round(i["iteration_s"] * 1e6, 6) for i in run.ranks[0].iterations] == \
        [round(e["dur"], 6) for e in steps]


test_kineto_loads, test_kineto_loads_slow = _both(_kineto_loads, kineto_docs())

_BAD_EVENT = {"ts": ["abc", None, [1], {"a": 1}, True], "dur": ["abc", -5, [1], True],
              "name": [5, [1], None], "ph": [5, [1]]}


@st.composite
def bad_kineto_docs(draw):
    doc = draw(kineto_docs())
    kind = draw(st.sampled_from(["event", "events", "rank", "meta"]))
    if kind == "events":
        return {**doc, "traceEvents": draw(st.sampled_from([5, "abc", {"a": 1}, [7]]))}, \
            "traceEvents"
    if kind == "rank":
        return {**doc, "distributedInfo": {"rank": draw(st.sampled_from(["x", -1, 2.5, None])),
                                           "world_size": 1}}, "distributedInfo"
    if kind == "meta":
        return {**doc, "trainer_meta": draw(st.sampled_from(["{bad", 7, [1], {"a": 1}]))}, \
            "trainer_meta"
    key = draw(st.sampled_from(sorted(_BAD_EVENT)))
    events = [dict(e) for e in doc["traceEvents"]]
    events[draw(st.integers(0, len(events) - 1))][key] = draw(st.sampled_from(_BAD_EVENT[key]))
    return {**doc, "traceEvents": events}, key


def _kineto_refused(case):
    doc, key = case
    d = _write_kineto(doc)
    _assert_refused(["diagnose", str(d)], d / "kineto-rank0.json", key)


test_kineto_refused, test_kineto_refused_slow = _both(_kineto_refused, bad_kineto_docs())


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.99])
def test_truncated_kineto_trace_is_one_line(cut):
    doc = {"traceEvents": [{"ph": "X", "name": "ProfilerStep#1", "ts": 0, "dur": 10}] * 3,
           "distributedInfo": {"rank": 0, "world_size": 1}}
    d = _write_kineto(doc)
    text = (d / "kineto-rank0.json").read_text()
    (d / "kineto-rank0.json").write_text(text[: max(1, int(len(text) * cut))])
    rc, err = _cli(["diagnose", str(d)])
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "kineto-rank0.json" in err and "truncated" in err


# ---------------------------------------------------------------------------------------------
# File-level refusals shared by every format


@pytest.mark.parametrize("argv_of", [
    lambda p: ["topo", str(p), "--json"],
    lambda p: ["predict", "--job", str(p), "--json"],
    lambda p: ["simulate", "--level", "flow", "--fabric", "fat-tree-k4", "--flows", str(p)],
    lambda p: ["predict", "--job", "tiny", "--calibration", str(p)],
    lambda p: ["predict", "--job", "tiny", "--fabric", "fat-tree-k8", "--placement", str(p)],
    lambda p: ["predict", "--model", str(p)],
    lambda p: ["sweep", str(p), "-o", str(p.parent / "out"), "--workers", "0"],
], ids=["fabric", "job", "flow", "calibration", "placement", "hf-config", "sweep"])
@pytest.mark.parametrize("content", [b"kind: clos3\nname: \xff\xfe\n", b"[[[[[[[[", b"- 1\n- 2\n"],
                         ids=["non-utf8", "broken", "list"])
def test_file_level_refusals_name_the_file(argv_of, content, tmp_path):
    path = tmp_path / "input.yaml"
    if argv_of(path)[0] in ("topo",) or "--flows" in argv_of(path) or \
            "--calibration" in argv_of(path):
        path = tmp_path / "input.json" if "--calibration" in argv_of(path) else path
    path.write_bytes(content)
    rc, err = _cli(argv_of(path))
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1, err
    assert str(path) in lines[0]
    if content.startswith(b"kind"):
        assert "not UTF-8" in lines[0] and "0xff" in lines[0]


def test_input_error_is_one_line_with_example():
    from inputspec import from_dict
    from netsim.workload import JobSpec
    from netsim.workload.job import JOB_RULES

    with pytest.raises(InputError) as err:
        from_dict(JobSpec, {"pp": "h100"}, "jobs/my.yaml", rules=JOB_RULES)
    msg = str(err.value)
    assert msg == ("jobs/my.yaml: pp: got 'h100'; expected an integer >= 1 and <= 16,777,216 "
                   "(e.g. pp: 8)")
