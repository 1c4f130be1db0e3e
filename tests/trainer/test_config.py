"""Config validation, presets and the FLOP formula against its closed forms."""

from __future__ import annotations

import pytest

from trainer.config import ModelConfig, ParallelConfig, TrainConfig, config_from_dict, preset
from trainer.flops import layer_forward_flops, mfu, parameter_count, training_flops


def test_parallel_config_names_the_bad_field():
    with pytest.raises(ValueError, match="global_batch"):
        ParallelConfig(dp=2, micro_batches=4, global_batch=6)
    with pytest.raises(ValueError, match="order"):
        ParallelConfig(order="tp-pp")
    with pytest.raises(ValueError, match="world size 8"):
        ParallelConfig(tp=2, pp=2, dp=1).check_world(8)


def test_model_must_split_over_the_layout():
    with pytest.raises(ValueError, match="layers"):
        TrainConfig(model=preset("tiny", layers=3), parallel=ParallelConfig(pp=2))
    with pytest.raises(ValueError, match="heads"):
        TrainConfig(model=preset("tiny"), parallel=ParallelConfig(tp=8))
    with pytest.raises(ValueError, match="hidden"):
        ModelConfig(layers=1, hidden=30, heads=4, seq=8, vocab=16)


def test_config_from_dict_accepts_preset_with_overrides():
    cfg = config_from_dict({"model": {"preset": "tiny", "layers": 8}, "parallel": {"pp": 4},
                            "steps": 2})
    assert cfg.model.layers == 8 and cfg.model.ffn_hidden == 4 * cfg.model.hidden
    with pytest.raises(ValueError, match="unknown config keys"):
        config_from_dict({"stepz": 1})


def test_gpt3_175b_has_175b_parameters():
    # Brown et al. 2020 Table 2.1: 175.0B parameters (our vocabulary is padded to 51200)
    n = parameter_count(preset("gpt3-175b"))
    assert abs(n - 175e9) / 175e9 < 0.01


def test_training_flops_match_narayanan_closed_form():
    # Narayanan et al. 2021 (no recomputation): 72 B s l h^2 (1 + s/(6h) + V/(12 l h))
    m, b = preset("gpt3-175b"), 1536
    s, h, n_l, v = m.seq, m.hidden, m.layers, m.vocab
    closed = 72 * b * s * n_l * h * h * (1 + s / (6 * h) + v / (12 * n_l * h))
    assert training_flops(m, b) == pytest.approx(closed, rel=1e-12)


def test_training_flops_close_to_six_n_t():
    # the 6 N T rule (Kaplan et al. 2020) leaves out the attention scores, a relative s/(6h)
    m, b = preset("gpt3-175b"), 8
    six_nt = 6 * parameter_count(m) * b * m.seq
    assert training_flops(m, b) / six_nt == pytest.approx(1 + m.seq / (6 * m.hidden), rel=0.01)


def test_layer_flops_scale_with_ffn_width():
    a, b = preset("tiny", ffn_hidden=64), preset("tiny", ffn_hidden=128)
    diff = layer_forward_flops(b, 2) - layer_forward_flops(a, 2)
    assert diff == 4 * 2 * a.seq * a.hidden * 64  # two GEMMs of 2 x b s h df each


def test_mfu_definition():
    assert mfu(1e15, 2.0, 4, 1e15) == pytest.approx(0.125)
    assert mfu(1e15, 2.0, 4, None) is None
