"""``netsim predict`` / ``place`` with today's flags: config.json, cp, ep, sp, stages."""

from __future__ import annotations

import json

import pytest

from netsim.model.hf import HF_PRESETS
from tuner.cli import main


@pytest.fixture
def mixtral_json(tmp_path):
    d = tmp_path / "Mixtral-8x7B-v0.1"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(HF_PRESETS["mixtral-8x7b"][0]))
    return d / "config.json"


def test_predict_config_json_with_ep_cp_sp(capsys, mixtral_json):
    rc = main(["predict", "--model", str(mixtral_json), "--gpu", "h100", "--tp", "2", "--sp",
               "--cp", "2", "--ep", "8", "--dp", "4", "--pp", "2", "--seq", "8192",
               "--global-batch", "16", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model_name"] == "Mixtral-8x7B-v0.1"
    assert {"cp", "ep"} <= set(out["exposed_comm_s"]) and out["comm_s"]["ep"] > 0
    assert out["comm_s"]["cp"] > 0 and out["gpus"] == 32
    assert out["job"]["sequence_parallel"] and out["job"]["order"] == "tp-cp-ep-dp-pp"


def test_predict_packaged_llama3_job_states_schedule(capsys):
    rc = main(["predict", "--job", "llama3-405b", "--dp", "2", "--global-batch", "32",
               "--virtual-stages", "2"])
    assert rc == 0
    text = capsys.readouterr().out
    assert text.startswith("llama3-405b on 256 x h100")
    assert "schedule interleaved (v 2)" in text and "7, 8 x14, 7" in text


def test_model_dimension_flags(capsys):
    rc = main(["predict", "--model", "llama3-8b", "--layers", "4", "--hidden", "1024",
               "--heads", "8", "--kv-heads", "2", "--ffn-hidden", "2048", "--json"])
    assert rc == 0
    job = json.loads(capsys.readouterr().out)["job"]
    assert (job["layers"], job["kv_heads"], job["ffn_hidden"]) == (4, 2, 2048)


@pytest.mark.parametrize("argv,msg", [
    (["--model", "llama3-8b", "--ep", "2", "--dp", "2"], "drop --ep"),
    (["--model", "llama3-405b", "--pp", "5"], "--first-stage-layers"),
    (["--model", "llama3-405b", "--pp", "4", "--first-stage-layers", "30",
      "--last-stage-layers", "31"], "do not divide evenly"),
    (["--model", "mixtral-8x7b", "--tp", "2", "--ep", "2", "--dp", "2"], "--sp"),
    (["--model", "missing/config.json"], "no such config.json"),
])
def test_bad_layouts_are_one_line_exit_2(argv, msg, capsys):
    assert main(["predict", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert msg in err and len(err.splitlines()) == 1


def test_bad_config_json_names_the_key(tmp_path, capsys):
    cfg = dict(HF_PRESETS["llama3-8b"][0])
    del cfg["intermediate_size"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert main(["predict", "--model", str(path)]) == 2
    assert "intermediate_size" in capsys.readouterr().err


def test_place_takes_the_same_flags(capsys, mixtral_json):
    rc = main(["place", "--fabric", "fat-tree-k8", "--model", str(mixtral_json), "--seq", "1024",
               "--tp", "1", "--pp", "1", "--dp", "16", "--ep", "8", "--global-batch", "16",
               "--iterations", "100", "--json"])
    assert rc == 0
    assert json.loads(capsys.readouterr().out)["world"] == 16
