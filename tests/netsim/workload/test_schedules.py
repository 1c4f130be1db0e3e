"""Parallelism as the frameworks do it: DualPipe and ZB-H1 by their published bubbles,
uneven interleaved stages, EP/CP overlap on the CLI, node-limited MoE routing."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.model.models import get_model
from netsim.workload import JobSpec, predict
from netsim.workload.layout import stage_layers
from netsim.workload.schedules import bubble_s, closed_form_pipeline
from netsim.workload.volumes import ep_bytes


def test_bubbles_are_the_published_closed_forms():
    """F = 1, B = 2 (W = 1): 1F1B (p-1)(F+B) = 3(p-1); ZB-H1 (p-1)(F+B-2W) = (p-1);
    DualPipe (p/2-1)(F&B+B-3W) = 2(p/2-1) (DeepSeek-V3 Table 2)."""
    assert bubble_s("zb", 8, 1.0, 2.0) == pytest.approx(7.0)
    assert bubble_s("dualpipe", 8, 1.0, 2.0) == pytest.approx(6.0)
    with pytest.raises(ValueError, match="closed form"):
        bubble_s("1f1b", 8, 1.0, 2.0)


def test_closed_form_pipeline_is_busy_time_plus_bubble():
    p, m = 4, 8
    run = closed_form_pipeline("zb", np.ones(p), 2 * np.ones(p), np.zeros(p), m, p)
    assert run.makespan_s == pytest.approx(m * 3 + (p - 1) * 1)
    assert run.stage_busy_s.tolist() == [m * 3] * p


def test_schedules_order_the_bubble():
    job = JobSpec(model="gpt3-13b", gpu="h100", tp=8, pp=4, dp=1, global_batch=16)
    bubble = {s: predict(job.replace(schedule=s)).bubble_fraction
              for s in ("1f1b", "zb", "dualpipe")}
    assert bubble["dualpipe"] < bubble["zb"] < bubble["1f1b"]
    assert predict(job.replace(schedule="zb")).schedule["schedule"] == "zb"


@pytest.mark.parametrize("changes, msg", [
    (dict(schedule="interleaved"), "virtual-stages"),
    (dict(schedule="zb", virtual_stages=2), "one chunk per stage"),
    (dict(schedule="dualpipe", pp=3, layers=48), "even pp"),
    (dict(schedule="pipedream"), "choose one of"),
])
def test_schedule_refusals_name_the_fix(changes, msg):
    base = dict(model="gpt3-13b", gpu="h100", tp=8, pp=4, dp=1, global_batch=48)
    with pytest.raises(ValueError, match=msg):
        JobSpec(**{**base, **changes})


def test_dualpipe_hides_the_expert_all_to_all():
    job = JobSpec(model="deepseek-v3", gpu="h800", pp=16, dp=8, ep=8, global_batch=64,
                  first_stage_layers=3, last_stage_layers=2)
    plain = predict(job).exposed_comm_s["ep"]
    dual = predict(job.replace(schedule="dualpipe")).exposed_comm_s["ep"]
    assert dual < 0.5 * plain


def test_uneven_interleaved_stages_deepseek_v3_pp4_v8():
    per_q = stage_layers(61, 4, 8)
    assert per_q.sum() == 61 and per_q.min() >= 1 and per_q.max() - per_q.min() <= 1
    job = JobSpec(model="deepseek-v3", gpu="h100", pp=4, dp=8, ep=8, virtual_stages=8,
                  global_batch=64)
    assert job.stage_layer_counts().sum() == 61
    assert predict(job).schedule["uneven"]


def test_node_limited_routing_sends_fewer_copies():
    model = get_model("deepseek-v3")  # top-8 routing
    job = JobSpec(model="deepseek-v3", gpu="h800", pp=16, dp=8, ep=8, global_batch=64,
                  first_stage_layers=3, last_stage_layers=2)
    assert ep_bytes(job.replace(moe_node_limit=4), model) == pytest.approx(ep_bytes(job, model) / 2)
    assert ep_bytes(job.replace(moe_node_limit=16), model) == ep_bytes(job, model)


def test_cli_takes_the_new_flags(capsys):
    from tuner.cli import main

    argv = ["predict", "--model", "deepseek-v3", "--gpu", "h800", "--pp", "16", "--dp", "8",
            "--ep", "8", "--global-batch", "64", "--first-stage-layers", "3",
            "--last-stage-layers", "2", "--fp8", "--schedule", "dualpipe",
            "--moe-node-limit", "4", "--overlap", "ep_comm,cp_comm,dp_grad_reduce", "--json"]
    assert main(argv) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["job"]["fp8"] and out["job"]["schedule"] == "dualpipe"
    assert out["job"]["overlap"]["ep_comm"] and out["schedule"]["schedule"] == "dualpipe"


def test_job_file_schedule_and_fp8_keys(tmp_path, capsys):
    from tuner.cli import main

    good = tmp_path / "job.yaml"
    good.write_text("model: gpt3-13b\ngpu: h100\ntp: 8\npp: 4\nglobal_batch: 16\n"
                    "schedule: zb\nfp8: true\n")
    assert main(["predict", "--job", str(good), "--json"]) == 0
    assert '"schedule": "zb"' in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: gpt3-13b\nschedule: pipedream\n")
    assert main(["predict", "--job", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "schedule" in err and "dualpipe" in err and err.count("\n") == 1
