"""Every model family beyond the three Qwen ones, through the ``hf`` backend, on its tiny checkpoint
(``audioicl.testing.families``): what the model receives equals what the family's processor makes as its model
card does it (token for token, value for value); answers do not depend on the batch or its order; the stop
tokens hold the template's end of turn; an over-long and a corrupt clip are each their own error line; and a
user's run is in ``e2e/test_families_cli.py``.

The Qwen families have their own (``test_hf_backend``, ``test_reuse``, ``e2e/test_hf_cli``).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

for _module in ("torch", "transformers", "torchvision"):
    pytest.importorskip(_module)

import torch  # noqa: E402

from audioicl import AudioICLError, ModelSpec, RunOptions, audio, load_backend, read_meta, run  # noqa: E402
from audioicl.backends.base import GenerationConfig, Request  # noqa: E402
from audioicl.backends.families import FAMILIES  # noqa: E402
from audioicl.backends.hf.reuse.parts import PARTS  # noqa: E402
from audioicl.backends.rendering import end_of_turn_token  # noqa: E402
from audioicl.prompts.build import build_prompt  # noqa: E402
from audioicl.prompts.clips import ClipStore  # noqa: E402
from audioicl.testing import QWEN_FAMILIES  # noqa: E402
from audioicl.testing.families import TINY  # noqa: E402

# the families beyond the three Qwen ones, whose checkpoints tests/testing and tests/backends/hf cover
NAMES = [name for name in TINY.names() if name not in QWEN_FAMILIES]


@pytest.fixture(scope="module")
def backends(family_checkpoints):
    loaded = {
        name: load_backend(ModelSpec("hf", str(path)), dtype="fp32", device="cpu")
        for name, path in family_checkpoints.items()
    }
    yield loaded
    for backend in loaded.values():
        backend.close()


def _layout(backend) -> str:
    """The layout a run of ``backend``'s family takes: single-clip where it takes one clip a prompt."""
    return "single-clip" if backend.model_family.max_clips == 1 else "original"


def _requests(data: Path, backend, k: int = 2, limit: int = 6) -> list[Request]:
    """The first ``limit`` episodes' prompts at ``k``, as the runner lays them out for ``backend``."""
    store = ClipStore(data)
    episodes = read_meta(data / "meta" / f"meta_k{k}.jsonl")[:limit]
    layout = _layout(backend)
    return [
        Request(
            f"{ep.id}@k{k}",
            ep.id,
            ep.task,
            k,
            build_prompt(ep, store, family=backend.family, layout=layout).chat,
        )
        for ep in episodes
    ]


def _card_conversation(family, chat, rate: int) -> list[dict]:
    """The chat as a model card writes it: content parts, each audio part carrying its samples at the model's
    ``rate`` (a bare array is taken to be at the feature extractor's rate: Apertus 1.5's is 24 kHz)."""
    waves = iter(audio.resample(part.wave, part.sr, rate) for part in chat.audio_parts())
    messages = replace(family, rendering="parts").template_messages(chat)  # a fast-path family's card too
    for message in messages:
        if isinstance(message["content"], list):
            message["content"] = [
                {**part, "audio": next(waves)} if part["type"] == "audio" else part
                for part in message["content"]
            ]
    return messages


def _our_inputs(backend, request: Request) -> tuple[dict, int]:
    """What ``generate`` gets for ``request`` alone (the family's processor call, or the fast path's own
    tokens and cached features), and how many clips it holds."""
    (prepared,), failed = backend.prepare([request])
    assert not failed
    ours = (
        backend.scratch.model_inputs([prepared]) if backend.processed else backend.scratch._inputs([prepared])
    )
    return ours, len(prepared.clips)


def _with_the_cards_masked_frames(family, ours: dict, reference) -> dict:
    """``ours`` with as many feature frames as the card's call: the fast path keeps each clip's valid frames
    only (its encoder masks the rest), where the processor pads every clip of a call to the longest clip,
    rounded up (Gemma 4's to 128 samples). The frames it adds must be masked out and zero."""
    features_key, mask_key = family.feature_keys
    frames_at = 1 if family.features_frames_first else 2
    extra = reference[features_key].shape[frames_at] - ours[features_key].shape[frames_at]
    if extra <= 0:
        return ours
    assert not reference[mask_key][:, -extra:].any(), "the card's extra frames are valid ones"
    assert not reference[features_key].narrow(frames_at, -extra, extra).any()
    features = ours[features_key]
    pad = [0, 0, 0, extra] if family.features_frames_first else [0, extra]
    mask = torch.nn.functional.pad(ours[mask_key], [0, extra])
    return {**ours, features_key: torch.nn.functional.pad(features, pad), mask_key: mask}


@pytest.mark.parametrize("name", NAMES)
def test_inputs_equal_the_model_cards_processor_call(backends, tiny_dataset, name):
    backend = backends[name]
    family = backend.model_family
    for request in _requests(tiny_dataset, backend, limit=4):
        ours, clips = _our_inputs(backend, request)
        reference = TINY.get(name).model_card_inputs(
            backend.processor, _card_conversation(family, request.chat, backend.sampling_rate)
        )
        shared = sorted(set(reference) & (backend.forward_names or set(ours)))
        assert {"input_ids", "attention_mask"} <= set(shared)
        if family.encoder_reads_valid_frames and not backend.processed:
            ours = _with_the_cards_masked_frames(family, ours, reference)
        assert set(ours) == set(shared), f"{name}: passed {sorted(ours)}, the card's call makes {shared}"
        for key in shared:
            expected = reference[key]
            if isinstance(expected, torch.Tensor):
                expected = expected.to(ours[key].dtype) if expected.is_floating_point() else expected
                assert torch.equal(ours[key], expected), f"{name}: {key} differs from the model card's"
            else:
                assert ours[key] == expected, f"{name}: {key} differs from the model card's"
        assert int((ours["input_ids"] == backend.audio_token_id).sum()) >= clips


@pytest.mark.parametrize("name", NAMES)
def test_answers_do_not_depend_on_the_batch_or_its_order(backends, tiny_dataset, name):
    backend = backends[name]
    requests = _requests(tiny_dataset, backend)
    alone = [backend.generate([r], GenerationConfig(max_new_tokens=6))[0] for r in requests]
    together = backend.generate(requests, GenerationConfig(max_new_tokens=6, batch_size=4))
    backwards = backend.generate(requests[::-1], GenerationConfig(max_new_tokens=6, batch_size=3))[::-1]
    assert all(r.error is None for r in alone), [r.error for r in alone]
    assert [r.text for r in together] == [r.text for r in alone]
    assert [r.text for r in backwards] == [r.text for r in alone]
    assert all(r.usage.audio_tokens > 0 for r in alone)


def _language_model_head(model) -> torch.nn.Module:
    head = model.get_output_embeddings()
    return head if head is not None else next(m for n, m in model.named_modules() if n.endswith("lm_head"))


@pytest.mark.parametrize("name", NAMES)
def test_a_model_that_would_generate_its_audio_token_still_answers(backends, tiny_dataset, name):
    """A model whose next token would be the audio placeholder (random weights do it) gets an answer line, not
    a failed call: Phi-4-multimodal's forward splices the clips' features wherever that token is, at every step
    (regression: each of its prompts was an error line, "shape mismatch: value tensor of shape [428, 64]")."""
    backend = backends[name]
    favoured = backend.audio_token_id
    if favoured >= _language_model_head(backend.model).out_features:
        pytest.skip(f"{name}: its LM head cannot produce the audio token (pruned to the text ids)")

    def favour_the_audio_token(module, args, logits):
        logits = logits.clone()
        logits[..., favoured] = logits.max() + 10
        return logits

    hook = _language_model_head(backend.model).register_forward_hook(favour_the_audio_token)
    try:
        (response,) = backend.generate(
            _requests(tiny_dataset, backend, limit=1), GenerationConfig(max_new_tokens=4)
        )
    finally:
        hook.remove()
    assert response.error is None, response.error
    if backend.model_family.suppress_audio_token:
        assert backend.info["suppressed_tokens"] == [backend.processor.audio_token]


@pytest.mark.parametrize("name", NAMES)
def test_stop_tokens_hold_the_templates_end_of_turn(backends, name):
    backend = backends[name]
    tokenizer = backend.processor.tokenizer
    end = end_of_turn_token(backend.processor, backend.model_family)
    if backend.model_family.tokenizes_chat and end is None:  # no text template (Voxtral's mistral-common)
        assert tokenizer.eos_token_id in backend.stop_ids  # its turns end with the end of sequence
        return
    assert end is not None, f"{name}: no end-of-turn token found in its chat template"
    assert tokenizer.convert_tokens_to_ids(end) in backend.stop_ids


@pytest.mark.parametrize("name", NAMES)
def test_an_overlong_and_a_corrupt_clip_are_each_their_own_error_line(
    backends, fresh_dataset, tmp_path, name
):
    backend = backends[name]
    limit = backend.max_clip_seconds
    meta = fresh_dataset / "meta" / "meta_k1.jsonl"
    episodes = read_meta(meta)
    corrupt = fresh_dataset / episodes[1].query.clips[0].audio_path
    corrupt.write_bytes(b"RIFF not a wave")
    overlong = None
    if limit is not None:
        import soundfile

        overlong = fresh_dataset / episodes[0].query.clips[0].audio_path
        soundfile.write(overlong, np.zeros(int((limit + 1) * 16_000), dtype=np.float32), 16_000)
    out = tmp_path / "results"
    run(
        RunOptions(data=fresh_dataset, model=f"hf:{name}", out=out, shots=(1,), layout=_layout(backend)),
        backend=backend,
    )
    lines = [json.loads(x) for x in next(out.glob("*_results_k1.jsonl")).read_text().splitlines()]
    by_id = {line["id"]: line for line in lines}
    assert len(by_id) == len(episodes)
    assert by_id[episodes[1].id]["status"] == "error"
    if overlong is not None:
        error = by_id[episodes[0].id]["error"]
        assert by_id[episodes[0].id]["status"] == "error" and f"{limit:g}" in error, error
    answered = [line for line in lines if line["id"] not in {episodes[0].id, episodes[1].id}]
    assert answered and all(line["status"] == "ok" for line in answered)


@pytest.mark.parametrize("name", NAMES)
def test_every_family_is_registered_for_the_backend(name):
    family = FAMILIES.get(name)
    assert family.checkpoints
    assert family.rendering == "parts" or family.name in PARTS  # inline: the fast path, reuse included


def test_a_speech_lora_the_checkpoint_ships_needs_peft(family_checkpoints, tmp_path):
    """A checkpoint with the family's speech LoRA folder is never run without it: peft loads it, and without
    peft the load stops, naming the adapter and what to install."""
    if "phi4-multimodal" not in family_checkpoints:
        pytest.skip("no Phi-4-multimodal tiny checkpoint")
    if importlib.util.find_spec("peft") is not None:
        pytest.skip("peft is installed: the refusal cannot be seen")
    checkpoint = tmp_path / "phi4"
    shutil.copytree(family_checkpoints["phi4-multimodal"], checkpoint)
    (checkpoint / "speech-lora").mkdir()
    (checkpoint / "speech-lora" / "adapter_config.json").write_text("{}")
    with pytest.raises(AudioICLError, match="speech LoRA .*speech-lora.*pip install peft"):
        load_backend(ModelSpec("hf", str(checkpoint)), dtype="fp32", device="cpu")


# Parameters of the public checkpoint, in billions, where a builder's count is checked against it (the builders'
# models hold the whole checkpoint: text model, audio encoder and, where the class has one, the vision tower).
PUBLISHED_BILLIONS = {"nemotron_h_omni": (31.6, 33.5)}


@pytest.mark.parametrize("name", [n for n in NAMES if TINY.get(n).full_size is not None])
def test_full_size_builders_make_the_real_shapes_without_memory(name):
    """Each full-size builder (the GPU measurements') builds its real configuration on the meta device, and
    cut to two layers still builds, smaller."""
    try:
        model, _ = TINY.get(name).full_size("meta", torch.bfloat16)
        small, _ = TINY.get(name).full_size("meta", torch.bfloat16, num_layers=2)
    except ImportError as exc:  # torchaudio, mistral-common: the family's own extras
        pytest.skip(f"{name}: {exc}")
    billions = sum(p.numel() for p in model.parameters()) / 1e9
    low, high = PUBLISHED_BILLIONS.get(name, (0.5, 40.0))
    assert low <= billions <= high, billions
    assert sum(p.numel() for p in small.parameters()) / 1e9 < billions


def test_towers_that_take_only_eager_attention_load_eager_beside_the_runs_text_attention():
    """Apertus 1.5's vision and audio tokenizers and Gemma 4's audio tower refuse sdpa at load; the text model
    keeps the run's choice."""
    from audioicl.backends.hf.load import attention_implementation

    apertus = FAMILIES.get("apertus1p5")
    assert attention_implementation(apertus, "sdpa") == {
        "text_config": "sdpa",
        "vision_config": "eager",
        "audio_config": "eager",
    }
    assert attention_implementation(apertus, "eager")["text_config"] == "eager"
    gemma4 = attention_implementation(FAMILIES.get("gemma4"), "sdpa")  # its text model was eager too before
    assert gemma4 == {"text_config": "sdpa", "audio_config": "eager"}
    assert attention_implementation(FAMILIES.get("qwen2-audio"), "flash_attention_2") == "flash_attention_2"


@pytest.mark.parametrize("name", ["gemma4", "apertus1p5"])
def test_clips_extracted_ahead_in_calls_of_near_lengths_are_each_as_extracted_alone(
    backends, monkeypatch, name
):
    """Where a clip's features do not depend on its batch mates, clips are extracted ahead longest first, so a
    call pads its clips little (Gemma 4's numpy extractor computes the padding too): each clip's features, valid
    frames and tokens are bit for bit those of the clip alone, and each call's clips are of near lengths."""
    from audioicl.backends.hf import features
    from audioicl.prompts.chat import AudioPart

    featurizer = backends[name].clips
    assert featurizer.model_family.features_independent_of_batch and not featurizer.on_device
    monkeypatch.setattr(features, "PREFETCH_CLIPS", 3)
    calls = []
    extract = features.ClipFeaturizer.extract

    def noted(self, clips):
        calls.append([len(clip.wave) for clip in clips])
        return extract(self, clips)

    monkeypatch.setattr(features.ClipFeaturizer, "extract", noted)
    rng = np.random.default_rng(5)
    rate = featurizer.sampling_rate
    clips = [
        AudioPart.of((0.1 * rng.standard_normal(int(rate * seconds))).astype(np.float32), rate)
        for seconds in (0.3, 2.2, 0.9, 1.7, 0.31, 1.2, 2.0, 0.6, 1.45, 0.75, 1.05)
    ]
    featurizer.features.clear()
    featurizer.prefetch(clips)
    lengths = [length for call in calls for length in call]
    assert len(calls) == 4 and lengths == sorted(lengths, reverse=True)
    for clip in clips:
        cached = featurizer.features.get(clip.digest)
        assert cached is not None, "not extracted ahead"
        (alone,) = extract(featurizer, [clip])
        assert torch.equal(cached.features, alone.features)
        assert (cached.valid, cached.tokens) == (alone.valid, alone.tokens)


def test_apertus_codec_is_prepared_at_load_and_recorded(backends):
    """Apertus 1.5's WavTokenizer convolutions are prepared at load (``backends.hf.codec``: their padding
    numbers on the CPU, weights normalised once) and the run record says how many; a model without a codec
    has none. Its answers on the tiny checkpoint are the model card's (the tests above)."""
    apertus = backends["apertus1p5"]
    assert apertus.info["codec_convs"] > 0
    convs = [m for m in apertus.model.modules() if type(m).__name__ == "WavTokenizerConv1d"]
    assert convs and all(m.padding_total.device.type == "cpu" for m in convs)
    assert backends["gemma4"].info["codec_convs"] == 0


def test_apertus_tokenizes_the_clips_as_the_processor_made_them_in_a_bf16_model(
    family_checkpoints, tiny_dataset
):
    """Regression: the waveforms went to the model in its dtype, so in bf16 WavTokenizer (kept in fp32: a
    rounded waveform flips codes) read them rounded to 8 bits of mantissa. The model card passes them as the
    processor makes them, float32."""
    checkpoint = str(family_checkpoints["apertus1p5"])
    for reuse in ("off", "prefix"):  # the processor's call per batch; the fast path's cached features
        backend = load_backend(ModelSpec("hf", checkpoint), dtype="bf16", device="cpu", reuse=reuse)
        try:
            assert backend.model.dtype == torch.bfloat16
            (request,) = _requests(tiny_dataset, backend, limit=1)
            inputs, _ = _our_inputs(backend, request)
            assert inputs["input_values"].dtype == torch.float32
            card = TINY.get("apertus1p5").model_card_inputs(
                backend.processor,
                _card_conversation(backend.model_family, request.chat, backend.sampling_rate),
            )
            assert torch.equal(inputs["input_values"], card["input_values"])
        finally:
            backend.close()


def test_voxtrals_fast_path_reads_the_ids_and_clip_windows_of_its_processors_own_call(backends, tiny_dataset):
    """Voxtral tokenizes chats (mistral-common): its fast path takes each prompt's ids from the tokenizer's
    side of ``chat_inputs`` and each clip's 30 s windows from a call of its own; both equal what the whole
    call makes of the prompt (``tests/backends/hf/test_reuse.py`` then checks the answers)."""
    backend = backends["voxtral"]
    assert backend.reuse == "prefix" and not backend.processed
    frames = backend.model.model.audio_tower.config.max_source_positions * 2
    for request in _requests(tiny_dataset, backend, limit=4):
        (prepared,), failed = backend.prepare([request])
        assert not failed
        whole = backend.model_family.chat_inputs(backend.processor, [request.chat], backend.sampling_rate)
        assert prepared.ids == whole["input_ids"][0].tolist()
        windows = [
            clip.features.reshape(clip.features.shape[0], -1, frames).transpose(0, 1)
            for clip in prepared.clips
        ]
        assert torch.equal(torch.cat(windows), whole["input_features"].float())
        assert sum(clip.tokens for clip in prepared.clips) == int(
            (whole["input_ids"] == backend.audio_token_id).sum()
        )


def test_a_family_added_as_this_page_says_is_registered(tmp_path):
    """docs/models.md's "Adding a family": its module, written as the page shows it into a folder of the
    families package, is imported, found by its model_type and listed by ``audioicl models``."""
    import re
    import subprocess
    import sys

    page = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text(encoding="utf-8")
    section = page.split("## Adding a family", 1)[1]
    (example,) = re.findall(r"```python\n(.*?)```", section, re.S)[:1]
    (tmp_path / "my_audio.py").write_text(example, encoding="utf-8")
    code = (
        "import importlib, audioicl.backends.families as families\n"
        f"families.__path__.append({str(tmp_path)!r})\n"
        "importlib.import_module('audioicl.backends.families.my_audio')\n"
        "from audioicl.backends.families.registry import family_of, model_rows\n"
        "found = family_of('my_audio')\n"
        "print(found.name, found.model_class, any(row['family'] == 'My-Audio' for row in model_rows()))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["my-audio", "MyAudioForConditionalGeneration", "True"]


def _continuation_requests(data: Path, backend, k: int = 2, limit: int = 4) -> list[Request]:
    store = ClipStore(data)
    episodes = read_meta(data / "meta" / f"meta_k{k}.jsonl")[:limit]
    return [
        Request(f"{ep.id}@k{k}", ep.id, ep.task, k, build_prompt(ep, store, layout="continuation").chat)
        for ep in episodes
        if backend.model_family.max_clips is None or len(ep.demos) < backend.model_family.max_clips
    ]


@pytest.mark.parametrize("name", TINY.names())
def test_a_continuation_prompt_is_what_the_processor_makes_of_its_text_and_clips(request, tiny_dataset, name):
    """``--layout continuation`` (issue 42): for every family whose processor expands a clip's placeholder in
    plain text, the prompt's token ids (the fast path's own, audio tokens expanded) equal the processor's call
    over the continuation text and its clips, token for token, its special tokens added as the processor adds
    them; every other family refuses the layout, naming why."""
    backend = (
        request.getfixturevalue("tiny_backends")
        if name in QWEN_FAMILIES
        else request.getfixturevalue("backends")
    )[name]
    family = backend.model_family
    requests = _continuation_requests(tiny_dataset, backend)
    prepared, failed = backend.prepare(requests)
    if family.text_placeholder is None:
        assert not prepared and len(failed) == len(requests)
        assert all("places clips only through its chat template" in r.error for r in failed.values())
        return
    assert not failed and not backend.processed  # every family that takes it has the fast path
    tokenizer = backend.processor.tokenizer
    for item, req in zip(sorted(prepared, key=lambda p: p.index), requests, strict=True):
        body = "".join(
            part.text if hasattr(part, "text") else family.text_placeholder
            for part in req.chat.messages[0].content
        )
        waves = [audio.resample(p.wave, p.sr, backend.sampling_rate) for p in req.chat.audio_parts()]
        reference = backend.processor(
            text=[body], audio=waves, sampling_rate=backend.sampling_rate, return_tensors="pt"
        )["input_ids"][0].tolist()
        assert list(item.ids) == reference, f"{name}: the continuation prompt differs from the processor's"
        assert tokenizer.decode(item.ids).rstrip().endswith("Label:")
