"""Tiny and full-size random-weight checkpoints (``audioicl.testing``) through the real transformers classes."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("torchvision")

from audioicl.prompts.sets import DEFAULT_SYSTEM  # noqa: E402
from audioicl.testing import QWEN_FAMILIES, family, templates, tiny_checkpoint  # noqa: E402
from audioicl.testing import build as checkpoints  # noqa: E402

SR = checkpoints.SAMPLE_RATE
# Audio tokens per second of the real encoders: 25 (Qwen2-Audio, Qwen2.5-Omni), 13 (Qwen3-Omni).
TOKENS_PER_SECOND = {"qwen2-audio": 25, "qwen2.5-omni": 25, "qwen3-omni": 13}


def noise(seconds: float, seed: int = 0) -> np.ndarray:
    return (0.1 * np.random.default_rng(seed).standard_normal(round(seconds * SR))).astype(np.float32)


def user_text(placeholder: str) -> str:
    return f"Infer the rule.\n\n[Demo Audio 1] {placeholder} Label: 3\n[Query Audio] {placeholder} Label:"


def load(path, name: str):
    spec = family(name)
    processor = transformers.AutoProcessor.from_pretrained(path)
    model = getattr(transformers, spec.model_class).from_pretrained(path)
    return spec, processor, model


@pytest.mark.parametrize("name", QWEN_FAMILIES)
def test_tiny_checkpoint_renders_processes_and_generates(tiny_checkpoints, name):
    spec, processor, model = load(tiny_checkpoints[name], name)
    assert type(processor).__name__ == spec.processor_class
    extractor = processor.feature_extractor
    assert (extractor.feature_size, extractor.sampling_rate) == (128, SR)
    assert extractor.n_samples == spec.chunk_length * SR

    system = DEFAULT_SYSTEM[name]
    chat = [
        {"role": "system", "content": system},
        {"role": "user", "content": user_text(spec.audio_placeholder)},
    ]
    text = processor.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    assert text == (
        f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user_text(spec.audio_placeholder)}"
        "<|im_end|>\n<|im_start|>assistant\n"
    )

    inputs = processor(text=[text], audio=[noise(1.0), noise(3.0, 1)], return_tensors="pt", padding=True)
    ids = inputs["input_ids"][0]
    audio_id = processor.tokenizer.convert_tokens_to_ids(spec.audio_token)
    assert int((ids == audio_id).sum()) == 4 * TOKENS_PER_SECOND[name]  # 1 s + 3 s of audio
    # The config's token ids are the tokenizer's: the model finds the placeholders the processor wrote.
    config = model.config
    assert getattr(config, "audio_token_id", None) == audio_id
    bos, eos = spec.audio_placeholder.split(spec.audio_token)
    if name != "qwen2-audio":
        assert config.audio_start_token_id == processor.tokenizer.convert_tokens_to_ids(bos)
        assert config.audio_end_token_id == processor.tokenizer.convert_tokens_to_ids(eos)
        assert config.vision_start_token_id == processor.tokenizer.convert_tokens_to_ids(
            spec.named_tokens["vision_bos_token"]
        )
    assert int(ids.max()) < config.get_text_config().vocab_size

    out = model.generate(**inputs, max_new_tokens=4, do_sample=False)
    assert out.shape == (1, ids.shape[0] + 4)


@pytest.mark.parametrize("name", QWEN_FAMILIES)
def test_audio_tokens_matches_the_processor(tiny_checkpoints, name):
    spec = family(name)
    processor = transformers.AutoProcessor.from_pretrained(tiny_checkpoints[name])
    audio_id = processor.tokenizer.convert_tokens_to_ids(spec.audio_token)

    def count(*clips: int) -> list[int]:
        text = [spec.audio_placeholder] * len(clips)
        audio = [np.zeros(n, np.float32) for n in clips]
        ids = processor(text=text, audio=audio, sampling_rate=SR, return_tensors="pt", padding=True)[
            "input_ids"
        ]
        return [int((row == audio_id).sum()) for row in ids]

    for samples in (160 * 34 + 1, SR, int(2.37 * SR)):
        assert count(samples) == [checkpoints.audio_tokens(name, samples)], samples
    # Next to a longer clip, a clip keeps its last started frame (Qwen3-Omni: one token more at 16001 samples).
    short, long_ = 160 * 100 + 1, 2 * SR
    assert count(short, long_) == [
        checkpoints.audio_tokens(name, short, long_),
        checkpoints.audio_tokens(name, long_),
    ]
    if name == "qwen3-omni":
        assert checkpoints.audio_tokens(name, short, long_) == checkpoints.audio_tokens(name, short) + 1
    # Qwen2-Audio sees at most 30 s: a longer clip costs what 30 s cost (its processor cuts it silently).
    if name == "qwen2-audio":
        assert count(31 * SR) == [checkpoints.audio_tokens(name, 31 * SR)] == [750]


@pytest.mark.parametrize("name", [n for n in QWEN_FAMILIES if family(n).full_class])
def test_omni_layouts_full_and_thinker_only(tiny_checkpoints, tiny_thinker_checkpoints, name):
    full = json.loads((tiny_checkpoints[name] / "config.json").read_text())
    thinker = json.loads((tiny_thinker_checkpoints[name] / "config.json").read_text())
    assert full["model_type"] == {"qwen2.5-omni": "qwen2_5_omni", "qwen3-omni": "qwen3_omni_moe"}[name]
    assert full["thinker_config"]["model_type"] == thinker["model_type"]
    assert (
        thinker["model_type"]
        == {"qwen2.5-omni": "qwen2_5_omni_thinker", "qwen3-omni": "qwen3_omni_moe_thinker"}[name]
    )
    # Both load into the thinker class with the same weights (the full folder also holds talker and vocoder).
    a = load(tiny_checkpoints[name], name)[2].state_dict()
    b = load(tiny_thinker_checkpoints[name], name)[2].state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_same_seed_same_checkpoint(tmp_path):
    from safetensors.torch import load_file

    # Qwen3-Omni in the full layout: transformers leaves its talker's experts uninitialised (5.24).
    first = tiny_checkpoint("qwen3-omni", tmp_path / "a", seed=3)
    templates._bpe.cache_clear()  # the tokenizer is trained again, and must come out the same
    second = tiny_checkpoint("qwen3-omni", tmp_path / "b", seed=3)
    other = tiny_checkpoint("qwen3-omni", tmp_path / "c", seed=4)
    for name in ("tokenizer.json", "config.json", "model.safetensors"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    a, c = load_file(first / "model.safetensors"), load_file(other / "model.safetensors")
    assert a.keys() == c.keys()
    assert not any(torch.equal(a[k], c[k]) for k in a if k.endswith("proj.weight"))
    assert not any(bool(v.isnan().any()) for v in a.values() if v.is_floating_point())


def test_thinker_only_needs_an_omni_family(tmp_path):
    with pytest.raises(ValueError, match="thinker_only"):
        tiny_checkpoint("qwen2-audio", tmp_path, thinker_only=True)
    with pytest.raises(ValueError, match="unknown model family 'qwen9'"):
        tiny_checkpoint("qwen9", tmp_path)


# Cited full-size shapes (see the module): text (hidden, layers, heads, KV heads, vocab), audio encoder output.
FULL = {
    "qwen2-audio": (4096, 32, 32, 32, 156032),
    "qwen2.5-omni": (3584, 28, 28, 4, 152064),
    "qwen3-omni": (2048, 48, 32, 4, 152064),
}


@pytest.mark.parametrize("name", QWEN_FAMILIES)
def test_full_size_configuration(name):
    spec = family(name)
    config = checkpoints.full_size_config(name)
    text = config.get_text_config()
    assert (
        text.hidden_size,
        text.num_hidden_layers,
        text.num_attention_heads,
        text.num_key_value_heads,
        text.vocab_size,
    ) == FULL[name]
    assert config.audio_config.d_model == 1280 and config.audio_config.encoder_layers == 32
    assert config.audio_token_id == spec.special_tokens[spec.audio_token]
    if name == "qwen2.5-omni":
        assert text.rope_parameters["mrope_section"] == [16, 24, 24]
        assert config.vision_start_token_id == 151652
    if name == "qwen3-omni":
        assert text.rope_parameters["mrope_section"] == [24, 20, 20] and text.rope_parameters["interleaved"]
        assert (text.head_dim, text.num_experts, text.num_experts_per_tok, text.moe_intermediate_size) == (
            128,
            128,
            8,
            768,
        )
        assert config.audio_config.output_dim == 2048 and config.vision_start_token_id == 151652


@pytest.mark.parametrize("name", QWEN_FAMILIES)
def test_full_size_model_on_meta(name):
    spec = family(name)
    model, processor = checkpoints.full_size_model(name, device="meta", num_layers=2)
    assert type(model).__name__ == spec.model_class
    params = list(model.parameters())
    assert all(p.device.type == "meta" and p.dtype == torch.bfloat16 for p in params)
    text = model.config.get_text_config()
    assert text.num_hidden_layers == 2 and text.hidden_size == FULL[name][0]
    # A prompt rendered and processed by the returned processor is valid input for the full-size model.
    chat = [{"role": "user", "content": user_text(spec.audio_placeholder)}]
    text_in = processor.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    inputs = processor(text=[text_in], audio=[noise(1.0), noise(2.0, 1)], return_tensors="pt")
    ids = inputs["input_ids"][0]
    assert int((ids == model.config.audio_token_id).sum()) == 3 * TOKENS_PER_SECOND[name]
    assert int(ids.max()) < text.vocab_size
