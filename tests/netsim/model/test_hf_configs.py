"""transformers config.json models beyond Llama (issue #27 item 6): gated activations by
architecture, other architectures' key names, a stated training sequence, sliding windows.
Published parameter counts are the model cards' and papers' (named per case)."""

from __future__ import annotations

import json

import pytest

from netsim.model.hf import model_from_hf
from netsim.model.models import MODELS
from netsim.workload.megascale_opts import model_pair_fraction, swa_pair_fraction

_LLAMA31_8B = {"model_type": "llama", "hidden_act": "silu", "hidden_size": 4096,
               "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
               "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False,
               "max_position_embeddings": 131072,
               "rope_scaling": {"factor": 8.0, "rope_type": "llama3"}}
_GEMMA_7B = {"model_type": "gemma", "hidden_act": "gelu", "hidden_activation": None,
             "hidden_size": 3072, "intermediate_size": 24576, "num_hidden_layers": 28,
             "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256,
             "vocab_size": 256000, "max_position_embeddings": 8192}
_GEMMA2_9B = {"model_type": "gemma2", "hidden_act": "gelu_pytorch_tanh",
              "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584,
              "intermediate_size": 14336, "num_hidden_layers": 42, "num_attention_heads": 16,
              "num_key_value_heads": 8, "head_dim": 256, "vocab_size": 256000,
              "max_position_embeddings": 8192, "sliding_window": 4096}
_GPT2 = {"model_type": "gpt2", "activation_function": "gelu_new", "n_embd": 768, "n_layer": 12,
         "n_head": 12, "n_positions": 1024, "n_inner": None, "vocab_size": 50257}
_BLOOM = {"model_type": "bloom", "n_embed": 14336, "n_layer": 70, "num_attention_heads": 112,
          "vocab_size": 250880}
_OPT_175B = {"model_type": "opt", "activation_function": "relu", "hidden_size": 12288,
             "ffn_dim": 49152, "num_hidden_layers": 96, "num_attention_heads": 96,
             "max_position_embeddings": 2048, "vocab_size": 50272, "word_embed_proj_dim": 12288}
_QWEN2_7B = {"model_type": "qwen2", "hidden_act": "silu", "hidden_size": 3584,
             "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
             "num_key_value_heads": 4, "vocab_size": 152064, "tie_word_embeddings": False,
             "max_position_embeddings": 131072, "sliding_window": 131072,
             "use_sliding_window": False, "max_window_layers": 28}
_MIXTRAL_8X7B = {"model_type": "mixtral", "hidden_act": "silu", "hidden_size": 4096,
                 "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
                 "num_key_value_heads": 8, "vocab_size": 32000, "tie_word_embeddings": False,
                 "max_position_embeddings": 32768, "num_local_experts": 8,
                 "num_experts_per_tok": 2, "sliding_window": None}


@pytest.mark.parametrize("cfg,published,rel", [
    (_GEMMA_7B, 8.54e9, 0.001),  # Gemma-7B model card: 8.54B (GeGLU: three matrices)
    (_GEMMA2_9B, 9.24e9, 0.002),  # Gemma 2 9B (arXiv:2408.00118 Table 1 sizes): 9.24B
    (_GPT2, 124_439_808, 1e-12),  # GPT-2 small, the released checkpoint's tensor count
    (_BLOOM, 176_247_271_424, 1e-6),  # BLOOM-176B card (its embedding LayerNorm not counted)
    (_OPT_175B, 175e9, 0.01),  # OPT-175B (arXiv:2205.01068 Table 1)
    # Qwen2-7B model card: 7.62B (its QKV biases, 129,024 parameters, are not counted)
    (_QWEN2_7B, 7.62e9, 0.001),
    (_MIXTRAL_8X7B, 46.7e9, 0.001),  # Mistral AI's Mixtral 8x7B release: 46.7B in total
])
def test_architectures_reproduce_published_parameter_counts(cfg, published, rel):
    assert model_from_hf(cfg, "x").params() == pytest.approx(published, rel=rel)


def test_opt_config_is_the_opt_preset_and_gpt2_keeps_its_position_table():
    opt = model_from_hf(_OPT_175B, "opt-175b", seq=2048)
    assert opt.params() == MODELS["opt-175b"].params() and not opt.gated and opt.bias
    gpt2 = model_from_hf(_GPT2, "gpt2")
    assert gpt2.seq == 1024 and gpt2.learned_positions and gpt2.ffn == 3072


@pytest.mark.parametrize("cfg,msg", [
    ({**_OPT_175B, "word_embed_proj_dim": 512}, "word_embed_proj_dim 512"),
    ({**_GPT2, "model_type": "t5"}, "encoder-decoder"),
    ({**_GPT2, "hidden_size": 1024}, "contradictory hidden_size, n_embd"),
])
def test_refusals_say_why(cfg, msg):
    with pytest.raises(ValueError, match=msg):
        model_from_hf(cfg, "x")


def test_sequence_is_a_stated_default_not_max_position_embeddings():
    m = model_from_hf(_LLAMA31_8B, "llama-3.1-8b")
    assert m.seq == 4096 and "default 4096" in m.seq_source and "131072" in m.seq_source
    assert model_from_hf(_LLAMA31_8B, "x", seq=8192).seq == 8192


def test_llama31_config_predicts_like_the_llama3_preset(tmp_path, capsys):
    from tuner.cli import main

    path = tmp_path / "config.json"
    path.write_text(json.dumps(_LLAMA31_8B))
    job = ["--gpus", "64", "--tp", "8", "--dp", "8", "--global-batch", "64", "--json"]
    outs = {}
    for name, extra in (("preset", ["--model", "llama3-8b"]), ("file", ["--model", str(path)]),
                        ("file8k", ["--model", str(path), "--seq", "8192"])):
        assert main(["predict", *extra, *job]) == 0
        outs[name] = json.loads(capsys.readouterr().out)
    assert outs["file8k"]["iteration_s"] == pytest.approx(outs["preset"]["iteration_s"])
    assert outs["file"]["sequence"]["seq"] == 4096
    assert "default 4096" in outs["file"]["sequence"]["source"]
    assert 0.3 < outs["file"]["iteration_s"] / outs["preset"]["iteration_s"] < 0.7
    assert main(["predict", "--model", str(path), *job[:-1]]) == 0
    assert "sequence 4096 tokens (default 4096 for a config.json" in capsys.readouterr().out


def test_sliding_windows_by_architecture():
    mistral = model_from_hf({**_LLAMA31_8B, "model_type": "mistral", "sliding_window": 4096},
                            "m", seq=16384)
    assert (mistral.sliding_window, mistral.sliding_layers) == (4096, 32)
    assert model_pair_fraction(mistral) == pytest.approx(swa_pair_fraction(16384, 4096))
    gemma2 = model_from_hf(_GEMMA2_9B, "g", seq=8192)
    assert gemma2.sliding_layers == 21
    assert model_pair_fraction(gemma2) == pytest.approx((1 + swa_pair_fraction(8192, 4096)) / 2)
    qwen = {**_LLAMA31_8B, "model_type": "qwen2", "sliding_window": 4096,
            "max_window_layers": 28}
    assert model_from_hf(qwen, "q").sliding_layers == 0  # use_sliding_window off by default
    assert model_from_hf({**qwen, "use_sliding_window": True}, "q").sliding_layers == 4
    mixtral = model_from_hf({**_LLAMA31_8B, "model_type": "mixtral", "sliding_window": None,
                             "num_local_experts": 8, "num_experts_per_tok": 2}, "mx")
    assert mixtral.sliding_window == 0 and mixtral.experts == 8


def test_a_sliding_window_makes_attention_cheaper_in_predict(tmp_path, capsys):
    from tuner.cli import main

    times = []
    for window in (None, 1024):
        path = tmp_path / f"w{window}.json"
        path.write_text(json.dumps({**_LLAMA31_8B, "model_type": "mistral",
                                    "sliding_window": window}))
        assert main(["predict", "--model", str(path), "--seq", "32768", "--gpus", "8",
                     "--tp", "8", "--global-batch", "8", "--json"]) == 0
        times.append(json.loads(capsys.readouterr().out)["iteration_s"])
    assert times[1] < 0.8 * times[0]
