"""The labelled single-clip layout (``prompts/joined.py``, ``--layout single-clip``): one audio holding every
clip in order with a fixed separator, the text naming the sounds in order, and its own condition name."""

from __future__ import annotations

import numpy as np

from audioicl import RunOptions, read_meta
from audioicl.prompts.build import build_chat
from audioicl.prompts.chat import AudioPart, render_text
from audioicl.prompts.joined import joined_audio, separator
from audioicl.tasks import TASKS

COUNT = TASKS.get("AudioCount").instruction


def _episode(root, task, k=2):
    return next(ep for ep in read_meta(root / "meta" / f"meta_k{k}.jsonl") if ep.task == task)


def test_one_audio_and_the_sounds_named_in_order(tiny_dataset):
    chat = build_chat(_episode(tiny_dataset, "AudioCount"), tiny_dataset, layout="single-clip")
    assert render_text(chat) == (
        "system: You are a helpful assistant.\n"
        f"user: {COUNT}\n\n"
        "The audio below holds 3 sounds one after another, each separated from the next by a short chime: "
        "sound 1 to sound 3.\n<audio>\n"
        "Sound 1: [Demo Audio 1] Label: 3\n"
        "Sound 2: [Demo Audio 2] Label: 5\n"
        "Sound 3: [Query Audio] Label:"
    )
    (joined,) = chat.audio_parts()
    clips = [item.audio for item in chat.items]
    sep = separator()
    assert len(joined.wave) == sum(len(c.wave) for c in clips) + 2 * len(sep)
    first = len(clips[0].wave)
    assert np.array_equal(joined.wave[:first], clips[0].wave)
    assert np.array_equal(joined.wave[first : first + len(sep)], sep)
    assert np.array_equal(joined.wave[-len(clips[2].wave) :], clips[2].wave)


def test_the_separator_is_the_same_for_every_prompt_and_carries_no_clip():
    a = AudioPart.of(np.full(1600, 0.5, dtype=np.float32), 16_000)
    b = AudioPart.of(np.full(800, -0.5, dtype=np.float32), 16_000)
    one, two = joined_audio([a, b]), joined_audio([b, a])
    assert np.array_equal(one.wave[1600 : 1600 + len(separator())], two.wave[800 : 800 + len(separator())])
    assert np.array_equal(separator(), separator())
    assert float(np.abs(separator()).max()) <= 0.3 + 1e-6


def test_multi_clip_episodes_and_the_morse_bank_are_numbered_through(nine_tasks):
    from audioicl.prompts.clips import ClipStore, load_morse_bank

    store = ClipStore(nine_tasks)
    bank = load_morse_bank(nine_tasks, "auto")
    from audioicl.prompts.build import build_prompt

    chat = build_prompt(_episode(nine_tasks, "MorseCode"), store, layout="single-clip", bank=bank).chat
    text = render_text(chat)
    assert "Sound 1: [Letter A] Label: a" in text and "Sound 26: [Letter Z] Label: z" in text
    assert text.rstrip().endswith("[Query Audio] Label:")
    assert len(list(chat.audio_parts())) == 1


def test_the_layout_is_its_own_condition_in_file_names():
    plain = RunOptions(data="d", model="builtin:icl", out="o")
    joined = RunOptions(data="d", model="builtin:icl", out="o", layout="single-clip")
    control = RunOptions(data="d", model="builtin:icl", out="o", layout="single-clip", control="no-audio")
    assert plain.model_name == "icl"
    assert joined.model_name == "icl+single-clip"
    assert control.model_name == "icl+no-audio+single-clip"
