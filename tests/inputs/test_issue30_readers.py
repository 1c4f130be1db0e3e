"""Issue #30, item 2: each "Why" case of a reader, through the CLI as a user meets it (one
line on stderr, exit 2, naming the file and the field; or the documented file accepted)."""

import json
import math

import pytest

from inputspec.errors import MAX_MESSAGE_CHARS
from tuner.cli import main

BOMB = "\n".join(["l0: &l0 [" + ", ".join(['"lol"'] * 9) + "]"] + [
    f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]) + "\n"
FIT = {"intercept_s": 1e-5, "rate": 1e11, "points": 4, "rel_rms": 0.01, "max_rel": 0.02}


def _refused(capsys, argv, *needles):
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and len(err) <= MAX_MESSAGE_CHARS + 40, err
    for needle in needles:
        assert needle in err, err
    return err


def test_duplicate_job_key_is_refused_not_last_wins(tmp_path, capsys):
    p = tmp_path / "job.yaml"
    p.write_text("model: tiny\ngpu: a100\ntp: 4\npp: 2\ndp: 8\ndp: 4\nglobal_batch: 64\n")
    _refused(capsys, ["predict", "--job", p, "--json"], "job.yaml", "duplicate key 'dp'")


def test_duplicate_hf_config_key_is_refused(tmp_path, capsys):
    from netsim.model.hf import HF_PRESETS

    text = json.dumps(dict(HF_PRESETS["llama3-8b"][0]))
    text = text.replace('"num_hidden_layers": ', '"num_hidden_layers": 8, "num_hidden_layers": ')
    p = tmp_path / "config.json"
    p.write_text(text)
    _refused(capsys, ["predict", "--model", p, "--json"], "config.json",
             "duplicate key 'num_hidden_layers'")


def test_alias_bomb_in_a_typed_field_is_refused_at_once(tmp_path, capsys):
    p = tmp_path / "job.yaml"
    p.write_text(BOMB + "model: tiny\ntp: 4\npp: 2\ndp: *l8\n")
    _refused(capsys, ["predict", "--job", p, "--json"], "job.yaml", "aliases")


def test_a_1e_300_gbps_link_is_refused(tmp_path, capsys):
    p = tmp_path / "fabric.yaml"
    p.write_text("kind: fat_tree\nname: slow\nk: 4\nlink_speed_gbps: 1.0e-300\n")
    _refused(capsys, ["topo", p, "--json"], "fabric.yaml", "link_speed_gbps", ">= 0.01")


def _calibration(tmp_path, **over):
    from netsim.diagnose.calibration import SCHEMA

    doc = {"schema": SCHEMA, "compute": {"forward": FIT}, "comm": {}, "world_size": 8,
           "host_cores": 8, "host": {}, "hardware": {"name": "cpu:h0", "device": "cpu",
                                                    "hosts": ["h0"], "backend": "gloo"}}
    p = tmp_path / "cal.json"
    p.write_text(json.dumps({**doc, **over}, allow_nan=True))
    return p


def test_a_calibration_of_absurd_numbers_is_refused(tmp_path, capsys):
    big = {k: 1e12 for k in FIT}
    p = _calibration(tmp_path, compute={"forward": big}, comm={"all_reduce/tor": big},
                     world_size=1e12, host_cores=1e12,
                     host={"cpu_msg_s": 1e12, "cpu_iter_s": 1e12})
    _refused(capsys, ["predict", "--job", "tiny", "--calibration", p, "--json"],
             "cal.json")


@pytest.mark.parametrize("over, field", [
    ({"world_size": 1e12}, "world_size"),
    ({"host": {"cpu_iter_s": 1e12}}, "host.cpu_iter_s"),
    ({"host": {"utilization": 2.0}}, "host.utilization"),
    ({"compute": {"forward": {**FIT, "rate": 1e-300}}}, "forward.rate"),
])
def test_each_calibration_number_has_a_physical_bound(tmp_path, capsys, over, field):
    p = _calibration(tmp_path, **over)
    _refused(capsys, ["predict", "--job", "tiny", "--calibration", p, "--json"], field)


def test_nan_in_hardware_hosts_is_refused(tmp_path, capsys):
    p = _calibration(tmp_path, hardware={"name": "cpu:h0", "device": "cpu",
                                         "hosts": [math.nan], "backend": "gloo"})
    _refused(capsys, ["predict", "--job", "tiny", "--calibration", p, "--json"],
             "cal.json", "hardware.hosts[0]")


@pytest.mark.parametrize("spec, needle", [
    ("command: predict\nargs: {job: tiny, fabric: false}\ngrid: {dp: [1, 2]}\n",
     "args.fabric: got False"),
    ("command: predict\nargs: {job: tiny}\ngrid: {dp: [1, x]}\n", "grid.dp[1]"),
    ("command: predict\nargs: {job: tiny, colour: red}\ngrid: {dp: [1]}\n", "--colour"),
    ("command: predict\nargs: {job: tiny}\ngrid:\n" + "".join(
        f"  f{i}: [{', '.join(map(str, range(40)))}]\n" for i in range(8)),
     "6,553,600,000,000 points"),
    ("command: predict\nargs: {job: tiny}\nsample: {n: 1000000, seed: 1, space: {dp: [1]}}\n",
     "sample.n"),
    ("command: predict\nargs: {job: tiny}\nsample: {n: 1000, seed: 1, space: {dp: [1]}}\n",
     "1 distinct points"),
])
def test_sweep_specs_are_refused_at_load(tmp_path, capsys, spec, needle):
    p = tmp_path / "spec.yaml"
    p.write_text(spec)
    _refused(capsys, ["sweep", p, "-o", tmp_path / "out", "--workers", "0", "--no-progress"],
             "spec.yaml", needle)
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_a_results_file_linked_to_dev_full_is_refused(tmp_path, capsys):
    from sweeps import read_results

    link = tmp_path / "results.jsonl"
    link.symlink_to("/dev/full")
    with pytest.raises(ValueError, match="results.jsonl: is not a regular file"):
        read_results(link)


def test_a_sweep_prints_its_size_before_it_starts(tmp_path, capsys):
    p = tmp_path / "spec.yaml"
    saves = [str(tmp_path / "a.yaml"), str(tmp_path / "b.json")]
    p.write_text(json.dumps({"command": "topo", "args": {"json": True},
                             "grid": {"save": saves}}))
    rc = main(["sweep", str(p), "-o", str(tmp_path / "out"), "--workers", "0", "--json"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "netsim sweep: 2 points (grid 2) of netsim topo" in err.splitlines()[0]


def _fabric_gpus():
    from topologies import load_fabric

    return load_fabric("fat-tree-k8")


def test_a_placement_rank_whose_host_disagrees_with_its_gpu_is_refused(tmp_path, capsys):
    fabric = _fabric_gpus()
    g = int(fabric.gpus_per_server)
    ranks = [{"rank": i, "host": fabric.servers[i // g], "local_rank": i % g,
              "gpu": fabric.gpus[i]} for i in range(64)]
    ranks[3]["host"] = fabric.servers[-1]  # a server no other rank uses; gpu 3 is on server 0
    p = tmp_path / "placement.json"
    p.write_text(json.dumps({"schema": "netsim-placement/1", "ranks": ranks}))
    _refused(capsys, ["predict", "--job", "tiny", "--fabric", "fat-tree-k8", "--placement", p,
                      "--json"], "placement.json", "ranks[3].host")


def test_a_cluster_csv_with_a_byte_order_mark_keeps_its_name_column(tmp_path):
    from tuner.cluster import read_trace

    p = tmp_path / "trace.csv"
    p.write_bytes("\ufeffname,arrival_s,duration_s,gpus\nalpha,0,60,16\n".encode())
    assert [j.name for j in read_trace(p)] == ["alpha"]


def test_unknown_cluster_csv_columns_are_refused_naming_them(tmp_path, capsys):
    p = tmp_path / "trace.csv"
    p.write_text("name,arrival_s,duration_s,gpus,priorty\nalpha,0,60,16,3\n")
    _refused(capsys, ["cluster", "simulate", "--fabric", "fat-tree-k8", "--trace", p,
                      "--policy", "linear", "--json"], "trace.csv", "'priorty'")


def test_the_documented_block_yaml_free_server_file_is_read(tmp_path):
    from tuner.placement import read_free_servers

    fabric = _fabric_gpus()
    p = tmp_path / "free.txt"
    p.write_text(f"servers:\n  - {fabric.servers[8]}\n  - {fabric.servers[3]}\n")
    assert read_free_servers(p, fabric) == [8, 3]


def test_a_superscript_digit_is_refused_naming_the_flag(capsys):
    err = _refused(capsys, ["simulate", "--level", "flow", "--fabric", "fat-tree-k4",
                            "--fail-links", "\u00b2", "--json"], "--fail-links")
    assert "invalid literal" not in err


def test_a_full_disk_names_the_path(tmp_path, capsys):
    link = tmp_path / "out.yaml"
    link.symlink_to("/dev/full")
    _refused(capsys, ["topo", "fat-tree-k4", "--save", link], "No space left", str(link))


def test_a_100_kb_key_gives_a_readable_line(tmp_path, capsys):
    p = tmp_path / "job.json"
    p.write_text(json.dumps({"model": "tiny", "tp": 4, "pp": 2, "dp": 8, "k" * 100_000: 1}))
    _refused(capsys, ["predict", "--job", p, "--json"], "job.json", "unknown key")


@pytest.mark.parametrize("text", ["\u00b2\n", "servers: ['\u00b2']\n"])
def test_a_superscript_digit_in_a_free_server_file_names_the_file_and_entry(tmp_path, text):
    from inputspec import InputError
    from tuner.placement import read_free_servers

    p = tmp_path / "free.txt"
    p.write_text(text)
    with pytest.raises(InputError, match=r"free-server file .*free.txt: servers\[0\]"):
        read_free_servers(p, _fabric_gpus())
