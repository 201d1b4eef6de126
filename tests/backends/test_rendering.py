"""What the model backends share (``backends/rendering.py``) and the run's ``Workload``: the served chat
template renders an ``openai`` request as ``render_chat`` renders the chat, the prefix order, answer
decoding, and the clips-per-prompt count the ``vllm`` backend sizes its engine with."""

from __future__ import annotations

import io
import random

import numpy as np
import pytest
import soundfile as sf

from audioicl import audio, read_meta
from audioicl.backends import base
from audioicl.backends.base import ModelSpec, Workload, load_backend
from audioicl.inference.runner import workload
from audioicl.prompts.build import build_prompt
from audioicl.prompts.clips import ClipStore, load_morse_bank


def chats(dataset, ks=(1, 2, 3), family="default", layout="original"):
    store = ClipStore(dataset)
    bank = load_morse_bank(dataset, "auto")
    return [
        (ep.id, k, build_prompt(ep, store, family=family, layout=layout, bank=bank).chat)
        for k in ks
        for ep in read_meta(dataset / "meta" / f"meta_k{k}.jsonl")
    ]


# --------------------------------------------------------------------------- the served template


@pytest.mark.parametrize("family", ["qwen2-audio", "qwen2.5-omni", "qwen3-omni"])
@pytest.mark.parametrize("layout", ["original", "multiturn"])
def test_served_template_renders_a_request_as_the_offline_backends(
    tiny_checkpoints, tiny_dataset, family, layout
):
    pytest.importorskip("httpx")
    from audioicl.backends.families import FAMILIES
    from audioicl.backends.openai.backend import chat_messages
    from audioicl.backends.rendering import load_processor, render_chat, served_chat_template

    processor = load_processor(str(tiny_checkpoints[family]))
    spec = FAMILIES.get(family)
    template = served_chat_template(processor.chat_template, spec)
    for _, _, chat in chats(tiny_dataset, (2,), spec.system_family, layout):
        offline, _ = render_chat(chat, spec, processor.apply_chat_template)
        for audio_type in (
            "audio",
            "input_audio",
        ):  # vLLM hands the template {"type": "audio"}; others the part
            messages = [
                {**m, "content": [_as(p, audio_type) for p in m["content"]]}
                if isinstance(m["content"], list)
                else {**m, "content": [{"type": "text", "text": m["content"]}]}
                for m in chat_messages(chat)
            ]
            served = processor.apply_chat_template(
                messages, chat_template=template, tokenize=False, add_generation_prompt=True
            )
            assert served == offline


def _as(part: dict, audio_type: str) -> dict:
    return part if part["type"] == "text" else {"type": audio_type}


# --------------------------------------------------------------------------- prefix order


def _shared(a: list[str], b: list[str]) -> int:
    """Leading pieces (text and clips) two prompt keys share."""
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count


def test_prefix_order_puts_prompts_sharing_a_prefix_together(tiny_dataset):
    from audioicl.backends.families import FAMILIES
    from audioicl.backends.rendering import prefix_key
    from audioicl.prompts.chat import message_text

    spec = FAMILIES.get("qwen2-audio")
    keys = []
    for _, _, chat in chats(tiny_dataset):  # k = 1, then 2, then 3: the file order
        text = "".join(message_text(m, spec.placeholder) for m in chat.messages)
        keys.append(prefix_key(text, list(chat.audio_parts()), spec.placeholder))
    assert all(
        len(key) == 2 * len(list(chat.audio_parts())) + 1
        for key, (_, _, chat) in zip(keys, chats(tiny_dataset), strict=True)
    )
    ordered = sorted(random.Random(0).sample(keys, len(keys)))
    # each prompt shares with the one before it as much as with any earlier prompt: what a prefix cache reuses
    for position in range(1, len(ordered)):
        best = max(_shared(ordered[position], earlier) for earlier in ordered[:position])
        assert _shared(ordered[position], ordered[position - 1]) == best
    in_file_order = sum(_shared(a, b) for a, b in zip(keys, keys[1:], strict=False))
    assert sum(_shared(a, b) for a, b in zip(ordered, ordered[1:], strict=False)) > in_file_order


# --------------------------------------------------------------------------- answers


def test_decode_answer_stops_cuts_and_drops_an_unfinished_character(tiny_checkpoints):
    from audioicl.backends.rendering import decode_answer, load_processor, stop_token_ids

    tokenizer = load_processor(str(tiny_checkpoints["qwen2-audio"])).tokenizer
    stops = stop_token_ids(tokenizer, None)
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in stops
    words = tokenizer("Answer: 7\nmore", add_special_tokens=False).input_ids
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert decode_answer(tokenizer, [*words, end, *words], stops, ()) == ("Answer: 7\nmore", len(words))
    assert decode_answer(tokenizer, words, stops, ("\n",))[0] == "Answer: 7"
    euro = tokenizer("€", add_special_tokens=False).input_ids  # three bytes, one token each or merged
    first_byte = tokenizer.convert_tokens_to_ids(tokenizer.convert_ids_to_tokens(euro)[0][:1])
    text, count = decode_answer(tokenizer, [*words, first_byte], stops, ())
    assert text == "Answer: 7\nmore" and count == len(words) + 1


def test_stop_ids_keep_an_end_of_sequence_that_is_also_the_unknown_token(tiny_checkpoints):
    """Regression: Granite's ``<|end_of_text|>`` is its eos and its unk; the stop ids dropped every unknown-token
    id, so they were empty and its answers ran to the token limit. An end of turn the vocabulary lacks still
    adds nothing."""
    from audioicl.backends.rendering import load_processor, stop_token_ids

    tokenizer = load_processor(str(tiny_checkpoints["qwen2-audio"])).tokenizer
    eos = tokenizer.eos_token
    tokenizer.unk_token = eos
    assert tokenizer.unk_token_id == tokenizer.eos_token_id
    assert stop_token_ids(tokenizer, None) == [tokenizer.eos_token_id]
    assert stop_token_ids(tokenizer, None, eos) == [tokenizer.eos_token_id]
    assert stop_token_ids(tokenizer, None, "<no_such_token>") == [tokenizer.eos_token_id]


# --------------------------------------------------------------------------- the workload


def test_workload_counts_clips_per_prompt(tiny_dataset):
    selected = {k: read_meta(tiny_dataset / "meta" / f"meta_k{k}.jsonl") for k in (1, 3)}
    bank = load_morse_bank(tiny_dataset, "auto")
    assert workload(selected, bank) == Workload(prompts=24, max_audio_per_prompt=26 + 3 + 1)
    assert workload(selected, ()) == Workload(prompts=24, max_audio_per_prompt=3 * 3 + 3)  # AudioRemap, k=3
    assert workload({}, bank) == Workload(0, 0)


def test_a_kind_registered_from_elsewhere_gets_its_parsed_settings_and_the_workload(monkeypatch, tmp_path):
    """A kind declared outside audioicl (``register_kind``): its factory is imported by its path and called
    with the parsed options and the run's workload."""
    from audioicl.backends.kinds import Kind, Option, whole

    module = tmp_path / "elsewhere_kind.py"
    module.write_text(
        "seen = {}\n"
        "def make(name, settings, workload):\n"
        "    seen.update(name=name, width=settings.width, workload=workload)\n"
        "    return object()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    kind = Kind(
        "elsewhere",
        "A kind of elsewhere.",
        "elsewhere:NAME",
        "elsewhere_kind:make",
        (Option("width", whole(1), 2, "how wide"),),
    )
    monkeypatch.setitem(base.KINDS._items, "elsewhere", kind)
    load_backend(ModelSpec("elsewhere", "x"), Workload(5, 7), width="3")
    import elsewhere_kind

    assert elsewhere_kind.seen == {"name": "x", "width": 3, "workload": Workload(5, 7)}
    assert "elsewhere" in base.backend_kinds()


# --------------------------------------------------------------------------- the API's WAV


def test_wav_for_the_api_reads_back_bit_exactly(tmp_path):
    wave = (np.random.default_rng(0).uniform(-1, 1, 16_000)).astype(np.float32)
    audio.write_wav(tmp_path / "clip.wav", wave)
    decoded, rate = audio.load(tmp_path / "clip.wav")
    sent = audio.pcm16_bytes(decoded, rate, scale=32768.0)
    again, _ = sf.read(io.BytesIO(sent), dtype="float32")
    assert np.array_equal(again, decoded)
    full_scale = np.array([1.0, -1.0], dtype=np.float32)
    assert sf.read(io.BytesIO(audio.pcm16_bytes(full_scale, scale=32768.0)), dtype="int16")[0].tolist() == [
        32767,
        -32768,
    ]
