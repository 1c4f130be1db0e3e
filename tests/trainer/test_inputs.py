"""The trainer's own readers (issue #30 item 4): `--config` and `--placement` go through
`inputspec`, so a pipe, a device, deep nesting or an ill-typed number is one line on stderr,
exit status 2, naming the file and the field; nothing is read from a pipe or a device."""

from __future__ import annotations

import json
import os
import threading

import pytest

from trainer.cli import main

DEEP = "[" * 1500 + "]" * 1500


def one_line_error(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("trainer: error: ") and len(err) < 400, err
    return err


@pytest.mark.parametrize("text, field", [
    ('{"steps": 0.5}', "steps"),
    ('{"parallel": {"order": 1e308}}', "parallel.order"),
    ('{"parallel": {"tp": -Infinity}}', "parallel.tp"),
    ('{"model": {"preset": "tiny", "layers": "8"}}', "model.layers"),
    ('{"model": {"preset": "tiny", "layer": 8}}', "model.layer"),
    ('{"model": {"layers": 2}}', "model.hidden"),
    ('{"lr": NaN}', "lr"),
    ('{"betas": [0.9]}', "betas"),
    ('{"model": "gpt9"}', "model: unknown model preset 'gpt9'"),
    ('{"inject_slow_rank": "abc"}', "inject_slow_rank"),
])
def test_an_ill_typed_config_names_the_field(tmp_path, capsys, text, field):
    path = tmp_path / "config.json"
    path.write_text(text)
    err = one_line_error(["--config", str(path)], capsys)
    assert str(path) in err and field in err, err


def test_steps_one_half_in_yaml_is_refused(tmp_path, capsys):
    path = tmp_path / "config.yaml"
    path.write_text("steps: 0.5\n")
    err = one_line_error(["--config", str(path)], capsys)
    assert "steps: got 0.5; expected an integer" in err, err


@pytest.mark.parametrize("flag", ["--config", "--placement"])
def test_deep_nesting_is_one_line(tmp_path, capsys, flag):
    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    err = one_line_error([flag, str(path)], capsys)
    assert str(path) in err and "nested too deeply" in err, err


@pytest.mark.parametrize("entry, field", [
    ({"rank": 0, "host": "h0", "local_rank": float("-inf")}, "ranks[0].local_rank"),
    ({"rank": 1e308, "host": "h0", "local_rank": 0}, "ranks[0].rank"),
    ({"rank": 0, "host": None, "local_rank": 0}, "ranks[0].host"),
    ({"rank": 0, "local_rank": 0}, "ranks[0]"),
])
def test_an_ill_typed_placement_names_the_field(tmp_path, capsys, entry, field):
    path = tmp_path / "placement.json"
    path.write_text(json.dumps({"ranks": [entry]}))  # -inf written as -Infinity
    err = one_line_error(["--placement", str(path)], capsys)
    assert str(path) in err and field in err, err


@pytest.mark.parametrize("flag", ["--config", "--placement"])
def test_a_named_pipe_is_refused_without_being_opened(tmp_path, capsys, flag):
    """A writer waits on the pipe: a reader that opened it would get '{}' and go on."""
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text("{}"), daemon=True)
    writer.start()
    try:
        err = one_line_error([flag, str(fifo)], capsys)
    finally:  # release the writer: open the read end without blocking, drain, close
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        writer.join(5)
        os.close(fd)
    assert str(fifo) in err and "not a regular file" in err, err


@pytest.mark.parametrize("flag", ["--config", "--placement"])
def test_a_device_is_refused_without_being_read(capsys, flag):
    err = one_line_error([flag, "/dev/zero"], capsys)
    assert "/dev/zero" in err and "not a regular file" in err, err


@pytest.mark.parametrize("name", ["tiny", "small"])
def test_a_config_written_from_the_dataclasses_loads_back_equal(tmp_path, name):
    """The typed reader accepts everything the trainer's own config holds (json of to_dict)."""
    from trainer.config import ParallelConfig, TrainConfig, load_config_file, preset

    cfg = TrainConfig(model=preset(name), parallel=ParallelConfig(dp=2, global_batch=4),
                      steps=3, inject_slow_link=(0, 1), link_delay_us=5.0)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg.to_dict()))
    assert load_config_file(path) == cfg


def test_a_preset_renamed_in_the_config_file_loads(tmp_path):
    """``model: {preset: tiny, name: ...}`` names the model (it raised TypeError: preset() got
    multiple values for argument 'name')."""
    from trainer.config import load_config_file

    path = tmp_path / "config.yaml"
    path.write_text("model: {preset: tiny, name: my-tiny, layers: 2}\n")
    model = load_config_file(path).model
    assert (model.name, model.layers, model.hidden) == ("my-tiny", 2, 32)
