"""The ``hf`` backend on tiny random-weight checkpoints of the three families (``audioicl.testing``).

Everything runs the real transformers classes and processors; fp32 on the CPU so answers are exact.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import quiet

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("torchvision")

from audioicl import AudioICLError, RunOptions, read_meta, run  # noqa: E402
from audioicl.audio import SAMPLE_RATE, write_wav  # noqa: E402
from audioicl.backends import ModelSpec, load_backend  # noqa: E402
from audioicl.backends.base import GenerationConfig, Request  # noqa: E402
from audioicl.backends.families import FAMILIES, family_of  # noqa: E402
from audioicl.backends.families.base import AudioFamily  # noqa: E402
from audioicl.backends.rendering import render_chat  # noqa: E402
from audioicl.prompts.build import build_prompt  # noqa: E402
from audioicl.prompts.chat import AudioPart  # noqa: E402
from audioicl.prompts.clips import ClipStore  # noqa: E402

FAMILY_NAMES = ("qwen2-audio", "qwen2.5-omni", "qwen3-omni")


@pytest.fixture
def backends(tiny_backends):
    """family → loaded backend (fp32, CPU), shared by the session's tests."""
    return tiny_backends


def requests_for(dataset: Path, k: int = 2, family: str = "default") -> list[Request]:
    episodes = read_meta(dataset / "meta" / f"meta_k{k}.jsonl")
    store = ClipStore(dataset)
    out = []
    for ep in episodes:
        chat = build_prompt(ep, store, family=family).chat
        out.append(Request(f"{ep.id}@k{k}", ep.id, ep.task, k, chat))
    return out


def noise(seconds: float, seed: int = 0) -> AudioPart:
    rng = np.random.default_rng(seed)
    return AudioPart.of(
        (0.1 * rng.standard_normal(round(seconds * SAMPLE_RATE))).astype(np.float32), SAMPLE_RATE
    )


# --------------------------------------------------------------------------- loading


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_loads_the_text_model_of_each_family(backends, family):
    backend = backends[family]
    expected = FAMILIES.get(family)
    assert type(backend.model).__name__ == expected.model_class
    assert backend.family == expected.system_family
    assert backend.info["transformers"] and backend.info["torch"]
    assert backend.info["dtype"] == "float32" and backend.info["device"] == "cpu"
    assert len(backend.info["config_sha256"]) == 64


@pytest.mark.parametrize("family", ["qwen2.5-omni", "qwen3-omni"])
def test_thinker_only_layout_loads_the_same_weights(backends, tiny_thinker_checkpoints, family):
    thinker = load_backend(ModelSpec("hf", str(tiny_thinker_checkpoints[family])), dtype="fp32", device="cpu")
    full = backends[family]
    assert type(thinker.model) is type(full.model)
    ours = dict(thinker.model.named_parameters())
    for name, value in full.model.named_parameters():
        assert torch.equal(value, ours[name]), name
    thinker.close()


def test_window_comes_from_the_feature_extractor(backends):
    assert backends["qwen2-audio"].max_clip_seconds == 30.0
    assert backends["qwen2.5-omni"].max_clip_seconds == 300.0


def test_a_folder_whose_processor_is_a_bare_tokenizer_is_refused(tiny_checkpoints, tmp_path):
    from transformers import GPT2Config

    bare = tmp_path / "bare"  # a text model's folder: AutoProcessor gives its tokenizer, which ignores audio
    bare.mkdir()
    shutil.copy(tiny_checkpoints["qwen2-audio"] / "tokenizer.json", bare / "tokenizer.json")
    settings = json.loads((tiny_checkpoints["qwen2-audio"] / "tokenizer_config.json").read_text())
    settings.pop("processor_class")
    (bare / "tokenizer_config.json").write_text(json.dumps(settings))
    GPT2Config(n_layer=1, n_embd=16, n_head=2).save_pretrained(bare)
    with pytest.raises(AudioICLError, match="no audio feature extractor") as info:
        load_backend(ModelSpec("hf", str(bare)), dtype="fp32", device="cpu")
    assert str(bare) in str(info.value)
    # an audio model's folder that lost its processor files fails loudly too, naming the folder
    lost = tmp_path / "lost"
    shutil.copytree(tiny_checkpoints["qwen2-audio"], lost)
    (lost / "processor_config.json").unlink()
    with pytest.raises(AudioICLError, match=f"cannot load the processor of {lost}"):
        load_backend(ModelSpec("hf", str(lost)), dtype="fp32", device="cpu")


def test_unknown_model_type_is_named(tiny_checkpoints, tmp_path):
    from transformers import GPT2Config

    folder = tmp_path / "gpt2-with-audio-processor"
    shutil.copytree(tiny_checkpoints["qwen2-audio"], folder)
    GPT2Config(n_layer=1, n_embd=16, n_head=2).save_pretrained(folder)
    with pytest.raises(AudioICLError, match="model_type 'gpt2'"):
        load_backend(ModelSpec("hf", str(folder)), dtype="fp32", device="cpu")


def test_options_are_checked(tmp_path):
    empty = str(tmp_path)  # a folder, but no checkpoint: the options are checked before it is read
    with pytest.raises(AudioICLError, match="dtype must be"):
        load_backend(ModelSpec("hf", empty), dtype="int3")
    with pytest.raises(AudioICLError, match="no option colour"):
        load_backend(ModelSpec("hf", empty), colour="red")
    with pytest.raises(AudioICLError, match=f"cannot load the checkpoint {empty}"):
        load_backend(ModelSpec("hf", empty), device="cpu")
    with pytest.raises(AudioICLError, match="^no such folder /nowhere"):  # before transformers is asked
        load_backend(ModelSpec("hf", "/nowhere"), device="cpu")


def test_a_checkpoint_under_the_home_folder_loads_by_its_tilde_path(tiny_checkpoints, tmp_path, monkeypatch):
    """Regression: ``hf:~/ckpt`` passed the folder check (which expands ``~``) and then went to transformers as
    written, which took it for a hub id. The backend gets the expanded folder; the results keep the spec."""
    monkeypatch.setenv("HOME", str(tmp_path))
    shutil.copytree(tiny_checkpoints["qwen2-audio"], tmp_path / "Qwen2-Audio-7B-Instruct")
    spec = ModelSpec("hf", "~/Qwen2-Audio-7B-Instruct")
    backend = load_backend(spec, dtype="fp32", device="cpu")
    assert backend.name == f"hf:{tmp_path / 'Qwen2-Audio-7B-Instruct'}"
    assert spec.file_name == "Qwen2-Audio-7B-Instruct"


# --------------------------------------------------------------------------- prompts


EXPECTED_TEMPLATE = {
    # (system turn written, audio placeholder) as the real chat templates render a string-content chat
    "qwen2-audio": "<|audio_bos|>{audio}<|audio_eos|>",
    "qwen2.5-omni": "<|audio_bos|>{audio}<|audio_eos|>",
    "qwen3-omni": "<|audio_start|>{audio}<|audio_end|>",
}


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_prompt_tokens_follow_the_original_layout(backends, tiny_dataset, family):
    """Token by token: system turn, instruction, one line per clip with the family's placeholder expanded
    to the clip's audio tokens, the query line ending in 'Label:', then the generation prompt."""
    backend = backends[family]
    spec = family_of(backend.info["model_type"])
    request = next(
        r for r in requests_for(tiny_dataset, k=2, family=spec.system_family) if r.task == "AudioCount"
    )
    text, parts = render_chat(request.chat, spec, backend.processor.apply_chat_template)
    prepared = backend._prepare_text(0, text, parts)
    tokens = backend.scratch._inputs([prepared])["input_ids"][0].tolist()

    system = request.chat.messages[0].content[0].text
    user_parts = request.chat.messages[1].content
    user = ""
    clips = iter(prepared.clips)
    for part in user_parts:
        if isinstance(part, AudioPart):
            user += EXPECTED_TEMPLATE[family].format(audio=spec.audio_token * next(clips).tokens)
        else:
            user += part.text
    expected = (
        f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    )
    assert tokens == backend.processor.tokenizer(expected)["input_ids"]
    lines = user.split("\n")
    assert lines[2].startswith(
        "[Demo Audio 1] " + EXPECTED_TEMPLATE[family].format(audio=spec.audio_token)[:12]
    )
    assert lines[-1].startswith("[Query Audio] ") and lines[-1].endswith(" Label:")
    assert sum(tokens.count(t) for t in [backend.audio_token_id]) == sum(c.tokens for c in prepared.clips)
    if family == "qwen2-audio":
        assert system == "You are a helpful assistant."
    else:
        assert system.startswith("You are Qwen, a virtual human developed by the Qwen Team")


def test_clips_of_one_length_are_extracted_together_as_each_alone_where_a_call_pads_to_its_longest(backends):
    """Qwen3-Omni's processor pads a call to its longest clip: ``prefetch`` extracts only clips of one length
    together (none then padded), each exactly as alone; a clip of another length is left to its prompt."""
    backend = backends["qwen3-omni"]
    assert not backend.model_family.features_independent_of_batch
    backend.clips.features.clear()
    same = [noise(2.0, seed) for seed in (11, 12, 13)]
    other = noise(1.3, 14)
    backend.clips.prefetch([*same, other])
    assert other.digest not in backend.clips.features
    for clip in same:
        cached = backend.clips.features.get(clip.digest)
        assert cached is not None, "not prefetched"
        (alone,) = backend.clips.extract([clip])
        assert torch.equal(cached.features, alone.features)
        assert (cached.valid, cached.tokens) == (alone.valid, alone.tokens)


def test_qwen3_omni_clip_features_are_its_processors_without_the_text(backends):
    """The feature extractor with the processor's audio kwargs gives what the processor's own call over one
    placeholder a clip gives: features, valid frames and audio tokens, bit for bit (a clip alone, clips of
    one length together, a clip past a 100-frame window's multiple, a very short one)."""
    backend = backends["qwen3-omni"]
    family, processor = backend.model_family, backend.processor
    for clips in ([noise(2.0, 1)], [noise(4.37, 2)], [noise(0.05, 3)], [noise(3.0, s) for s in (4, 5, 6)]):
        waves = [clip.wave for clip in clips]
        features, mask, tokens = family.clip_features(processor, waves, backend.sampling_rate)
        out = processor(
            text=[family.placeholder] * len(clips),
            audio=waves,
            sampling_rate=backend.sampling_rate,
            return_tensors="pt",
            padding=True,
        )
        assert torch.equal(features, out["input_features"])
        assert torch.equal(mask, out["feature_attention_mask"])
        assert tokens == (out["input_ids"] == backend.audio_token_id).sum(dim=1).tolist()
    assert AudioFamily.clip_features(family, processor, waves, backend.sampling_rate) is None  # the default


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("tokens", "count [1] audio tokens"),  # another release counting tokens otherwise
        ("features", "features differ"),  # other kwargs: other features
        ("signature", "TypeError"),  # another helper's signature
    ],
)
def test_clip_features_that_are_not_the_processors_turn_off_once_with_the_processors_features(
    backends, monkeypatch, caplog, fault, said
):
    """``clip_features`` are checked against the processor's own call on the first clips asked: where they
    differ (or cannot be made), the run takes the processor's call from then on, said once."""
    backend = backends["qwen3-omni"]
    family = type(backend.model_family)
    real = family.clip_features
    calls = []

    def other(self, processor, waves, sampling_rate, **extract):
        calls.append(len(waves))
        if fault == "signature":
            raise TypeError("_get_feat_extract_output_lengths() takes 1 positional argument but 2 were given")
        features, mask, tokens = real(self, processor, waves, sampling_rate, **extract)
        return (features + 1, mask, tokens) if fault == "features" else (features, mask, [1] * len(tokens))

    monkeypatch.setattr(family, "clip_features", other)
    monkeypatch.setattr(backend.clips, "_direct_features", None)
    clips = [noise(1.5, 21), noise(2.5, 22)]
    with caplog.at_level("WARNING", logger="audioicl.backends"):
        made = [backend.clips.extract([clip])[0] for clip in clips]
    assert calls == [1] and backend.clips._direct_features is False  # tried on the first clip only
    (warning,) = [r.getMessage() for r in caplog.records if "through its processor's call" in r.getMessage()]
    assert said in warning  # once, saying why
    monkeypatch.setattr(family, "clip_features", AudioFamily.clip_features)
    assert all(
        torch.equal(m.features, alone.features) and m.tokens == alone.tokens
        for m, alone in zip(made, (backend.clips.extract([clip])[0] for clip in clips), strict=True)
    )


@pytest.mark.parametrize("family", ["qwen2-audio", "qwen2.5-omni"])
def test_cached_features_equal_the_processors_batched_output(backends, family):
    """Per-clip features from the cache give the model exactly what one processor call over the batch does."""
    backend = backends[family]
    spec = backend.model_family
    clips = [noise(1.0, 1), noise(2.5, 2), noise(0.4, 3)]
    texts = [f"one {spec.placeholder} two {spec.placeholder}", f"three {spec.placeholder}"]
    ours = backend.scratch._inputs(
        [
            backend._prepare_text(0, texts[0], clips[:2]),
            backend._prepare_text(1, texts[1], clips[2:]),
        ]
    )
    theirs = backend.processor(
        text=texts,
        audio=[c.wave for c in clips],
        sampling_rate=SAMPLE_RATE,
        return_tensors="pt",
        padding=True,
    )
    assert torch.equal(ours["input_ids"], theirs["input_ids"])
    assert torch.equal(ours["attention_mask"], theirs["attention_mask"])
    assert torch.equal(
        ours["feature_attention_mask"].long(),
        theirs["feature_attention_mask"][:, : ours["feature_attention_mask"].shape[1]].long(),
    )
    valid = theirs["feature_attention_mask"].bool()
    assert torch.equal(
        ours["input_features"].permute(0, 2, 1)[valid[:, : ours["input_features"].shape[2]]],
        theirs["input_features"].permute(0, 2, 1)[valid],
    )


# --------------------------------------------------------------------------- generation


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_answers_do_not_depend_on_batch_mates_or_size(backends, tiny_dataset, family):
    backend = backends[family]
    requests = requests_for(tiny_dataset, k=2, family=backend.family)
    alone = [backend.generate([r], GenerationConfig(max_new_tokens=6, batch_size=1))[0] for r in requests]
    together = backend.generate(list(reversed(requests)), GenerationConfig(max_new_tokens=6, batch_size=4))
    assert [r.text for r in alone] == [r.text for r in reversed(together)]
    assert all(r.error is None and r.usage.output_tokens for r in alone)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_each_clip_is_extracted_once(backends, tiny_dataset, family):
    backend = backends[family]
    backend.clips.features.clear()
    requests = requests_for(tiny_dataset, k=2, family=backend.family) + requests_for(
        tiny_dataset, k=3, family=backend.family
    )
    backend.generate(requests, GenerationConfig(max_new_tokens=2, batch_size=8))
    distinct = {part.digest for r in requests for part in r.chat.audio_parts()}
    assert backend.clips.features.misses == len(distinct)


def test_the_checkpoints_own_generation_settings_do_not_change_greedy_answers(
    backends, tiny_checkpoints, tiny_dataset, tmp_path
):
    """A real checkpoint's generation_config.json may hold sampling and penalty settings (Qwen2-Audio-Instruct's
    has a repetition penalty and top-p): transformers' ``generate`` would apply them, the reuse path and vLLM
    do not, and the protocol is plain greedy. They are set aside, and recorded."""
    folder = tmp_path / "with-settings"
    shutil.copytree(tiny_checkpoints["qwen2-audio"], folder)
    settings = json.loads((folder / "generation_config.json").read_text())
    settings |= {
        "repetition_penalty": 1.5,
        "no_repeat_ngram_size": 1,
        "top_p": 0.5,
        "top_k": 3,
        "do_sample": True,
    }
    (folder / "generation_config.json").write_text(json.dumps(settings))
    requests = requests_for(tiny_dataset, k=1, family=backends["qwen2-audio"].family)[:6]
    config = GenerationConfig(max_new_tokens=8, batch_size=3)
    expected = [r.text for r in backends["qwen2-audio"].generate(requests, config)]
    for reuse in ("off", "prefix"):
        backend = load_backend(ModelSpec("hf", str(folder)), dtype="fp32", device="cpu", reuse=reuse)
        assert [r.text for r in backend.generate(requests, config)] == expected, reuse
        set_aside = backend.info["generation_config_set_aside"]
        assert set_aside["repetition_penalty"] == 1.5 and set_aside["no_repeat_ngram_size"] == 1
        backend.close()


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_generate_samples_at_temperature_alone(backends, temperature):
    """Sampling is plain temperature sampling (as vLLM's): transformers would add a top-k of 50 to an
    argument left unset. Greedy passes no sampling flag, which transformers would warn about on every call
    ("generation flags are not valid and may be ignored: ['top_k']"; strict validation raises on it)."""
    backend = backends["qwen2-audio"]
    kwargs = backend.scratch._generation_kwargs(GenerationConfig(max_new_tokens=4, temperature=temperature))
    resolved, _ = backend.model._prepare_generation_config(None, **kwargs)
    assert resolved.do_sample is (temperature > 0)
    assert resolved.repetition_penalty == 1.0
    if temperature > 0:
        assert resolved.top_k in (0, None) and resolved.top_p == 1.0
    resolved.validate(strict=True)


def test_out_of_memory_halves_the_batch_down_to_one(tiny_checkpoints, tiny_dataset, monkeypatch):
    backend = load_backend(
        ModelSpec("hf", str(tiny_checkpoints["qwen2-audio"])), dtype="fp32", device="cpu", reuse="off"
    )
    requests = requests_for(tiny_dataset, k=1, family=backend.family)[:5]
    expected = [r.text for r in backend.generate(requests, GenerationConfig(max_new_tokens=4, batch_size=1))]
    real = backend.scratch._generate_batch
    sizes: list[int] = []

    def fault(batch, config):  # the fault hook: more than two prompts run out of memory
        sizes.append(len(batch))
        assert sys.exc_info() == (None, None, None)  # a retry must not hold the failed attempt's memory
        if len(batch) > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return real(batch, config)

    monkeypatch.setattr(backend.scratch, "_generate_batch", fault)
    responses = backend.generate(requests, GenerationConfig(max_new_tokens=4, batch_size=8))
    assert [r.text for r in responses] == expected
    assert sizes == [5, 2, 3, 1, 2]  # halved until each part fits

    def always(batch, config):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(backend.scratch, "_generate_batch", always)
    failed = backend.generate(requests[:2], GenerationConfig(max_new_tokens=4, batch_size=8))
    assert all(r.text is None and "out of memory on the smallest batch" in r.error for r in failed)


@pytest.mark.parametrize(("reuse", "method"), [("off", "_generate_batch"), ("prefix", "_generate_rows")])
def test_stop_returns_the_batches_answered_before_it(
    tiny_checkpoints, tiny_dataset, monkeypatch, reuse, method
):
    """``stop()`` (a signal, through the runner) ends the call after the batch in hand: ``GenerationStopped``
    holds that batch's answers, the same as an unstopped call's; later calls stop at once."""
    from audioicl.backends.base import GenerationStopped

    backend = load_backend(
        ModelSpec("hf", str(tiny_checkpoints["qwen2-audio"])), dtype="fp32", device="cpu", reuse=reuse
    )
    requests = requests_for(tiny_dataset, k=1, family=backend.family)[:5]
    config = GenerationConfig(max_new_tokens=4, batch_size=2)
    expected = [r.text for r in backend.generate(requests, config)]
    owner = backend.scratch if method == "_generate_batch" else backend.path
    real = getattr(owner, method)

    def then_a_signal(*args):
        answers = real(*args)
        backend.stop()
        return answers

    monkeypatch.setattr(owner, method, then_a_signal)
    with pytest.raises(GenerationStopped) as info:
        backend.generate(requests, config)
    answered = info.value.answered
    assert 0 < len(answered) < len(requests)
    assert {i: r.text for i, r in answered.items()} == {i: expected[i] for i in answered}
    with pytest.raises(GenerationStopped) as again:
        backend.generate(requests, config)
    assert again.value.answered == {}


def test_a_prompt_the_processor_refuses_fails_alone(backends, tiny_dataset):
    backend = backends["qwen2-audio"]
    good = requests_for(tiny_dataset, k=1, family=backend.family)[:2]
    spec = backend.model_family
    broken_chat = good[0].chat
    # a chat whose text holds an extra placeholder: the template writes more placeholders than clips
    from dataclasses import replace

    from audioicl.prompts.chat import Message, TextPart

    user = broken_chat.messages[1]
    broken = replace(
        good[0],
        key="broken",
        chat=replace(
            broken_chat,
            messages=(broken_chat.messages[0], Message("user", (TextPart(spec.placeholder), *user.content))),
        ),
    )
    responses = backend.generate([good[0], broken, good[1]], GenerationConfig(max_new_tokens=3))
    assert responses[0].error is None and responses[2].error is None
    assert responses[1].text is None and "audio placeholders" in responses[1].error


# --------------------------------------------------------------------------- through the runner and CLI


def test_over_long_clip_is_an_error_line(tiny_checkpoints, tmp_path, tiny_dataset):
    data = tmp_path / "data"
    shutil.copytree(tiny_dataset, data)
    episodes = read_meta(data / "meta" / "meta_k1.jsonl")
    target = episodes[0].query.target.audio_path
    write_wav(data / target, noise(31.0).wave)
    summary = run(
        RunOptions(
            data=data,
            model=f"hf:{tiny_checkpoints['qwen2-audio']}",
            out=tmp_path / "out",
            shots=(1,),
            limit=1,
            backend_options={"dtype": "fp32", "device": "cpu"},
        ),
        report=quiet,
    )
    lines = [
        json.loads(x) for x in (tmp_path / "out" / "qwen2-audio_results_k1.jsonl").read_text().splitlines()
    ]
    bad = next(x for x in lines if x["id"] == episodes[0].id)
    assert (
        bad["status"] == "error"
        and f"clip {target} is 31.00 s long" in bad["error"]
        and "30 s" in bad["error"]
    )
    assert summary.errors == 1
    assert all(x["status"] == "ok" for x in lines if x["id"] != episodes[0].id)


@pytest.mark.parametrize("reuse", ["off", "prefix"])
def test_a_prompt_past_the_models_context_is_an_error_response(
    backends, tiny_checkpoints, tiny_dataset, tmp_path, reuse
):
    """A prompt whose tokens and new tokens do not fit the language model's context (``max_position_embeddings``)
    is refused with its length, never run past the positions the model knows; the others are answered."""
    requests = requests_for(tiny_dataset, k=2, family=backends["qwen2-audio"].family)[:9]
    config = GenerationConfig(max_new_tokens=8, batch_size=4)
    lengths = {item.index: len(item.ids) for item in backends["qwen2-audio"].prepare(requests)[0]}
    context = sorted(lengths.values())[len(lengths) // 2] + config.max_new_tokens
    expected = [r.text for r in backends["qwen2-audio"].generate(requests, config)]
    folder = tmp_path / "short-context"
    shutil.copytree(tiny_checkpoints["qwen2-audio"], folder)
    settings = json.loads((folder / "config.json").read_text())
    settings["text_config"]["max_position_embeddings"] = context
    (folder / "config.json").write_text(json.dumps(settings))
    backend = load_backend(ModelSpec("hf", str(folder)), dtype="fp32", device="cpu", reuse=reuse)
    responses = backend.generate(requests, config)
    backend.close()
    for index, response in enumerate(responses):
        if lengths[index] + config.max_new_tokens > context:
            assert response.error is not None and f"{lengths[index]} prompt tokens" in response.error
            assert f"context of {context} tokens" in response.error
        else:
            assert response.error is None and response.text == expected[index]
    assert any(r.error for r in responses) and any(r.error is None for r in responses)


@pytest.mark.parametrize("reuse", ["off", "prefix"])
def test_an_answer_the_tokenizer_cannot_decode_is_that_prompts_error_line(
    tiny_checkpoints, tiny_dataset, monkeypatch, reuse
):
    """Regression (full-size Voxtral with random weights on the GPU): mistral-common's tokenizer raised
    ``KeyError: 'Invalid token for decoding: 9022'`` on a generated id, and the whole run stopped. An answer that
    cannot be decoded is now its prompt's error line; the other prompts keep their answers."""
    backend = load_backend(
        ModelSpec("hf", str(tiny_checkpoints["qwen2-audio"])), dtype="fp32", device="cpu", reuse=reuse
    )
    requests = requests_for(tiny_dataset, k=1, family=backend.family)[:3]
    expected = [r.text for r in backend.generate(requests, GenerationConfig(max_new_tokens=4))]
    tokenizer = backend.processor.tokenizer
    real, calls = tokenizer.decode, []

    def fault(tokens, **kwargs):  # the fault hook: the first answer holds an id the tokenizer does not know
        calls.append(tokens)
        if len(calls) == 1:
            raise KeyError("Invalid token for decoding: 9022")
        return real(tokens, **kwargs)

    monkeypatch.setattr(tokenizer, "decode", fault)
    responses = backend.generate(requests, GenerationConfig(max_new_tokens=4))
    failed = [r for r in responses if r.error]
    assert len(failed) == 1 and failed[0].text is None
    assert "cannot decode the answer" in failed[0].error and "9022" in failed[0].error
    assert sorted(r.text for r in responses if not r.error) == sorted(
        t for r, t in zip(responses, expected, strict=True) if not r.error
    )


def test_the_allocator_option_is_checked_applied_on_cuda_only_and_recorded(tiny_checkpoints, monkeypatch):
    from audioicl.backends.hf import KIND as HF
    from audioicl.backends.hf.load import configure_allocator

    assert HF.parse({}).allocator == "auto"
    with pytest.raises(AudioICLError, match="allocator must be auto, expandable or default"):
        HF.parse({"allocator": "big"})
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert configure_allocator("auto", cpu) == {"asked": "auto", "used": "default"}
    assert configure_allocator("expandable", cpu)["fallback"].startswith("expandable segments are for CUDA")
    assert configure_allocator("default", cuda) == {"asked": "default", "used": "default"}
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:512")  # the user's setting stands
    assert configure_allocator("auto", cuda)["used"] == "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512"
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF")
    assert configure_allocator("auto", cuda)["used"] == "expandable_segments"
    backend = load_backend(ModelSpec("hf", str(tiny_checkpoints["qwen2-audio"])), dtype="fp32", device="cpu")
    assert backend.info["allocator"] == {"asked": "auto", "used": "default"}


def test_hub_kernels_are_not_swapped_into_the_model(tiny_checkpoints, monkeypatch):
    """transformers >= 5.25 replaces layers with kernels fetched from the hub unless ``use_kernels=False``:
    other numerics than the checkpoint's code, and no load at all without network (seen on a GPU machine)."""
    import transformers

    from audioicl.backends.hf import KIND as HF
    from audioicl.backends.hf.load import load_checkpoint

    seen: dict = {}
    cls = transformers.Qwen2AudioForConditionalGeneration
    real = cls.from_pretrained.__func__

    def spy(klass, name, **kwargs):
        seen.update(kwargs)
        return real(klass, name, **kwargs)

    monkeypatch.setattr(cls, "from_pretrained", classmethod(spy))
    settings = HF.parse({"dtype": "fp32", "device": "cpu"})
    load_checkpoint(str(tiny_checkpoints["qwen2-audio"]), settings, torch.device("cpu"))
    assert seen["device_map"] == {"": "cpu"}
    assert seen.get("use_kernels", False) is False
    if hasattr(transformers.PreTrainedModel, "use_kernels"):
        assert seen["use_kernels"] is False
