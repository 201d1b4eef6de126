"""Prompt rendering (layouts, styles, tags, Morse bank, prompt files) and padding."""

from __future__ import annotations

import shutil
from dataclasses import replace

import numpy as np
import pytest
import soundfile as sf

from audioicl import AudioICLError, Episode, read_meta
from audioicl.dataset.meta import write_meta
from audioicl.prompts.build import build_chat, build_prompt
from audioicl.prompts.chat import AudioPart, TextPart, render_text
from audioicl.prompts.clips import ClipStore, load_morse_bank, pad_chats
from audioicl.prompts.sets import (
    GENERAL_INSTRUCTION,
    QWEN_OMNI_SYSTEM,
    VARIANTS_DIR,
    PromptSet,
    load_prompt_set,
    read_structured_file,
    system_family,
)
from audioicl.records import Clip, Demo, Query
from audioicl.tasks import TASKS

COUNT = TASKS.get("AudioCount").instruction


def episode(root, task, k=2, number=0):
    return [ep for ep in read_meta(root / "meta" / f"meta_k{k}.jsonl") if ep.task == task][number]


def test_original_layout_specific_style(tiny_dataset):
    chat = build_chat(episode(tiny_dataset, "AudioCount"), tiny_dataset)
    assert render_text(chat) == (
        "system: You are a helpful assistant.\n"
        f"user: {COUNT}\n\n"
        "[Demo Audio 1] <audio> Label: 3\n"
        "[Demo Audio 2] <audio> Label: 5\n"
        "[Query Audio] <audio> Label:"
    )
    assert [m.role for m in chat.messages] == ["system", "user"]
    user = chat.messages[1].content
    assert [type(p) for p in user] == [
        TextPart,
        AudioPart,
        TextPart,
        AudioPart,
        TextPart,
        AudioPart,
        TextPart,
    ]
    assert user[-1] == TextPart(" Label:")
    assert [(i.kind, i.index, i.tag, i.label) for i in chat.items] == [
        ("demo", 1, "Demo Audio 1", "3"),
        ("demo", 2, "Demo Audio 2", "5"),
        ("query", 1, "Query Audio", None),
    ]


def test_general_and_none_styles(tiny_dataset):
    ep = episode(tiny_dataset, "AudioCount", k=1)
    general = render_text(build_chat(ep, tiny_dataset, style="general"))
    assert general == (
        "system: You are a helpful assistant.\n"
        f"user: {GENERAL_INSTRUCTION}\n\n"
        "[Demo Audio 1] <audio> Label: 3\n"
        "[Query Audio] <audio> Label:"
    )
    none = render_text(build_chat(ep, tiny_dataset, style="none"), placeholder="<|AUDIO|>")
    assert none == (
        "system: You are a helpful assistant.\nuser: [Demo Audio 1] <|AUDIO|> Label: 3\n[Query Audio] <|AUDIO|> Label:"
    )


def test_multiturn_layout(tiny_dataset):
    chat = build_chat(episode(tiny_dataset, "AudioCount"), tiny_dataset, layout="multiturn", style="none")
    assert [m.role for m in chat.messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert render_text(chat) == (
        "system: You are a helpful assistant.\n"
        "user: [Demo Audio 1] <audio> Label:\n"
        "assistant: 3\n"
        "user: [Demo Audio 2] <audio> Label:\n"
        "assistant: 5\n"
        "user: [Query Audio] <audio> Label:"
    )
    with_instruction = build_chat(episode(tiny_dataset, "AudioCount"), tiny_dataset, layout="multiturn")
    assert render_text(with_instruction).startswith(
        f"system: You are a helpful assistant.\nuser: {COUNT}\n\n[Demo Audio 1]"
    )


def test_continuation_layout_is_one_text_with_each_label_on_its_own_line(tiny_dataset):
    """``--layout continuation`` (issue 42): no system message, no roles; the instruction (where the style has
    one), then each clip's line and its label's, the query's label line left open for the model to finish."""
    chat = build_chat(episode(tiny_dataset, "AudioCount"), tiny_dataset, layout="continuation", style="none")
    assert [m.role for m in chat.messages] == ["user"] and chat.frame.layout == "continuation"
    assert render_text(chat) == (
        "[Demo Audio 1] <audio>\nLabel: 3\n[Demo Audio 2] <audio>\nLabel: 5\n[Query Audio] <audio>\nLabel:"
    )
    assert [type(part).__name__ for part in chat.messages[0].content].count("AudioPart") == 3
    with_instruction = build_chat(episode(tiny_dataset, "AudioCount"), tiny_dataset, layout="continuation")
    assert render_text(with_instruction).startswith(f"{COUNT}\n\n[Demo Audio 1] <audio>\nLabel: 3\n")
    remap = build_chat(
        episode(tiny_dataset, "AudioRemap", k=1), tiny_dataset, layout="continuation", style="none"
    )
    assert render_text(remap) == (
        "[Demo 1 A] <audio>\nLabel: A\n[Demo 1 B] <audio>\nLabel: H\n[Demo 1 MIX] <audio>\nLabel: AAH\n"
        "[Query A] <audio>\nLabel: A\n[Query B] <audio>\nLabel: H\n[Query MIX] <audio>\nLabel:"
    )


def test_without_demonstrations_the_instruction_opens_the_query_turn_in_every_layout(tiny_dataset):
    """A zero-shot prompt (the study's zero-shot condition): no demo turn to carry the instruction."""
    ep = replace(episode(tiny_dataset, "AudioCount"), demos=())
    query = "[Query Audio] <audio> Label:"
    assert render_text(build_chat(ep, tiny_dataset, layout="multiturn")) == (
        f"system: You are a helpful assistant.\nuser: {COUNT}\n\n{query}"
    )
    assert (
        render_text(build_chat(ep, tiny_dataset))
        == f"system: You are a helpful assistant.\nuser: {COUNT}\n\n{query}"
    )
    assert render_text(build_chat(ep, tiny_dataset, layout="continuation")) == (
        f"{COUNT}\n\n[Query Audio] <audio>\nLabel:"
    )


def test_the_single_clip_layout_names_each_sound_of_the_one_joined_clip(tiny_dataset):
    """``--layout single-clip`` (a family that takes one clip a prompt): one user turn, one joined clip, then
    each sound named in order with its label, the query's left open."""
    chat = build_chat(
        episode(tiny_dataset, "AudioRemap", k=1), tiny_dataset, layout="single-clip", style="none"
    )
    assert [m.role for m in chat.messages] == ["system", "user"]
    assert [type(part) for part in chat.messages[1].content] == [TextPart, AudioPart, TextPart]
    assert render_text(chat) == (
        "system: You are a helpful assistant.\nuser: The audio below holds 6 sounds one after another, each "
        "separated from the next by a short chime: sound 1 to sound 6.\n<audio>\n"
        "Sound 1: [Demo 1 A] Label: A\nSound 2: [Demo 1 B] Label: H\nSound 3: [Demo 1 MIX] Label: AAH\n"
        "Sound 4: [Query A] Label: A\nSound 5: [Query B] Label: H\nSound 6: [Query MIX] Label:"
    )


def test_an_unknown_layout_or_style_is_refused_not_taken_for_the_originals(tiny_dataset):
    ep = episode(tiny_dataset, "AudioCount")
    with pytest.raises(ValueError, match="unknown prompt layout 'multi-turn': one of original, multiturn"):
        build_chat(ep, tiny_dataset, layout="multi-turn")
    with pytest.raises(ValueError, match="unknown prompt style 'specifc': one of specific, general, none"):
        build_chat(ep, tiny_dataset, style="specifc")


def test_a_prompt_is_frozen_and_its_bank_items_are_the_letters_in_order(tiny_dataset):
    ep = episode(tiny_dataset, "MorseCode", k=1)
    prompt = build_prompt(ep, ClipStore(tiny_dataset), bank=load_morse_bank(tiny_dataset, "auto"))
    with pytest.raises(AttributeError):
        prompt.chat = None  # type: ignore[misc]
    bank = [item for item in prompt.chat.items if item.kind == "bank"]
    assert [(i.kind, i.index, i.role, i.tag, i.label) for i in bank[:2]] == [
        ("bank", 1, None, "Letter A", "a"),
        ("bank", 2, None, "Letter B", "b"),
    ]
    assert len(bank) == 26 and bank[-1].tag == "Letter Z" and bank[-1].index == 26
    assert [item.kind for item in prompt.chat.items[26:]] == ["demo", "query"]


def test_multi_clip_tags_remap(tiny_dataset):
    ep = episode(tiny_dataset, "AudioRemap", k=1)
    chat = build_chat(ep, tiny_dataset, style="none")
    assert render_text(chat) == (
        "system: You are a helpful assistant.\n"
        "user: [Demo 1 A] <audio> Label: A\n"
        "[Demo 1 B] <audio> Label: H\n"
        "[Demo 1 MIX] <audio> Label: AAH\n"
        "[Query A] <audio> Label: A\n"
        "[Query B] <audio> Label: H\n"
        "[Query MIX] <audio> Label:"
    )
    assert ep.query.label == "HHA"
    assert chat.items[-1].label is None and chat.items[-1].role == "MIX"
    multiturn = build_chat(ep, tiny_dataset, style="none", layout="multiturn")
    assert render_text(multiturn) == (
        "system: You are a helpful assistant.\n"
        "user: [Demo 1 A] <audio> Label: A\n[Demo 1 B] <audio> Label: H\n[Demo 1 MIX] <audio> Label:\n"
        "assistant: AAH\n"
        "user: [Query A] <audio> Label: A\n[Query B] <audio> Label: H\n[Query MIX] <audio> Label:"
    )


def test_multi_clip_tags_anomaly(tiny_dataset):
    chat = build_chat(episode(tiny_dataset, "AnomalyDetect", k=2), tiny_dataset, style="none")
    assert [i.tag for i in chat.items] == [
        "Demo 1 Normal",
        "Demo 1 Anomalous",
        "Demo 2 Normal",
        "Demo 2 Anomalous",
        "Query Query",
    ]
    assert render_text(chat).endswith(
        "[Demo 2 Anomalous] <audio> Label: Anomalous\n[Query Query] <audio> Label:"
    )


def test_morse_bank_modes(tiny_dataset, tmp_path):
    ep = episode(tiny_dataset, "MorseCode", k=1)
    bank = load_morse_bank(tiny_dataset, "auto")
    assert len(bank) == 26
    prompt = build_prompt(ep, ClipStore(tiny_dataset), style="none", bank=bank)
    assert prompt.audio_paths[:2] == ("data/MorseCode/alphabet/A.wav", "data/MorseCode/alphabet/B.wav")
    text = render_text(prompt.chat)
    lines = text.split("\n")
    assert lines[0] == "system: You are a helpful assistant."
    assert lines[1] == "user: [Letter A] <audio> Label: a"
    assert lines[26] == "[Letter Z] <audio> Label: z"
    assert lines[27:] == ["[Demo Audio 1] <audio> Label: apple", "[Query Audio] <audio> Label:"]
    # the bank belongs to MorseCode only
    count = build_chat(episode(tiny_dataset, "AudioCount", k=1), tiny_dataset, bank=bank)
    assert all(item.kind != "bank" for item in count.items)
    assert load_morse_bank(tiny_dataset, "off") == ()
    # a dataset without the bank: auto shows none, on refuses
    bare = tmp_path / "bare"
    shutil.copytree(tiny_dataset, bare)
    shutil.rmtree(bare / "data" / "MorseCode" / "alphabet")
    assert load_morse_bank(bare, "auto") == ()
    with pytest.raises(AudioICLError, match="26 letter clips"):
        load_morse_bank(bare, "on")


def test_system_prompt_per_family(tiny_dataset):
    ep = episode(tiny_dataset, "AudioCount", k=1)
    assert system_family("Qwen/Qwen2.5-Omni-7B") == "qwen2.5-omni"
    assert system_family("/ckpt/Qwen3-Omni-30B-A3B-Instruct") == "qwen3-omni"
    assert system_family("Qwen2-Audio-7B-Instruct") == "qwen2-audio"
    assert system_family("random") == "default"
    omni = build_chat(ep, tiny_dataset, family="qwen3-omni")
    assert omni.messages[0].content == (TextPart(QWEN_OMNI_SYSTEM),)
    qwen2 = build_chat(ep, tiny_dataset, family="qwen2-audio")
    assert qwen2.messages[0].content == (TextPart("You are a helpful assistant."),)


def test_prompt_file_overrides(tiny_dataset, tmp_path):
    path = tmp_path / "prompts.yaml"
    path.write_text(
        "system:\n  qwen2-audio: Be brief.\ninstructions:\n  AudioCount: Count the hits.\ngeneral: Give a number.\n",
        encoding="utf-8",
    )
    prompts = load_prompt_set(path)
    ep = episode(tiny_dataset, "AudioCount", k=1)
    chat = build_chat(ep, tiny_dataset, family="qwen2-audio", prompt_set=prompts)
    assert render_text(chat).startswith("system: Be brief.\nuser: Count the hits.\n\n[Demo Audio 1]")
    general = build_chat(ep, tiny_dataset, style="general", prompt_set=prompts)
    assert render_text(general).startswith("system: You are a helpful assistant.\nuser: Give a number.\n\n")
    # tasks not in the file keep their own instruction
    morse = build_chat(episode(tiny_dataset, "MorseCode", k=1), tiny_dataset, prompt_set=prompts)
    assert TASKS.get("MorseCode").instruction in render_text(morse)
    json_path = tmp_path / "prompts.json"
    json_path.write_text('{"instructions": {"AudioRemap": "Spell it."}}', encoding="utf-8")
    assert load_prompt_set(json_path).instructions == {"AudioRemap": "Spell it."}


@pytest.mark.parametrize(
    ("text", "suffix", "message"),
    [
        (
            "instruction:\n  AudioCount: x\n",
            ".yaml",
            "unknown key.*instruction.*known: system, general, instructions",
        ),
        ("instructions:\n  AudioCounts: x\n", ".yaml", "unknown task in 'instructions': AudioCounts"),
        ("system:\n  gpt: x\n", ".yaml", "unknown model family in 'system': gpt"),
        ("instructions:\n  AudioCount: [a, b]\n", ".yaml", "instructions.AudioCount must be a string"),
        ("general: 3\n", ".yaml", "'general' must be a string"),
        ("- a\n- b\n", ".yaml", "must hold a mapping"),
        ("system:\n  default: 'open\n", ".yml", "malformed YAML"),
        ('{"general": }', ".json", "malformed JSON"),
    ],
)
def test_bad_prompt_file(tmp_path, text, suffix, message):
    path = tmp_path / f"bad{suffix}"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(AudioICLError, match=message) as info:
        load_prompt_set(path)
    assert info.value.file == str(path)


def _alias_bomb(levels: int) -> str:
    """The "billion laughs": each level a list of nine aliases of the one below (9^levels strings)."""
    lines = ["l0: &l0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + f"\ngeneral: *l{levels - 1}\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_alias_bomb(9), "unusable YAML: its aliases expand it to over 100,000 values"),
        ("general: &x [*x]\n", "unusable YAML: an alias refers to the value that holds it"),
    ],
)
def test_yaml_that_expands_without_bound_is_refused_naming_the_file(tmp_path, text, message):
    """Issue 39, item 10: an alias bomb in --config (or a prompt file) gave a traceback after expanding. Aliases
    are counted as they expand, each object once, and refused past the bound, in one line naming the file."""
    path = tmp_path / "bomb.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(AudioICLError, match=message) as info:
        read_structured_file(path, "config file")
    assert info.value.file == str(path)


def test_yaml_aliases_within_the_bound_are_read():
    """The shipped prompt variants share instructions by alias: they still load, alias and all."""
    assert VARIANTS_DIR.is_dir() and "&" in "".join(p.read_text() for p in VARIANTS_DIR.glob("*.yaml"))
    for path in VARIANTS_DIR.glob("*.yaml"):
        load_prompt_set(path)


def test_missing_prompt_file(tmp_path):
    with pytest.raises(AudioICLError, match="cannot read prompt file"):
        load_prompt_set(tmp_path / "nope.yaml")


def test_audio_is_mono_16k(tmp_path):
    rng = np.random.default_rng(0)
    stereo = (0.1 * rng.standard_normal((44_100, 2))).astype(np.float32)
    (tmp_path / "data").mkdir()
    sf.write(tmp_path / "data" / "s.wav", stereo, 44_100)
    sf.write(tmp_path / "data" / "q.wav", stereo[:22_050], 44_100)
    ep = Episode(
        "X1", "AudioCount", (Demo((Clip("data/s.wav", "1"),)),), Query((Clip("data/q.wav", "2"),), "2")
    )
    write_meta(tmp_path / "meta" / "meta_k1.jsonl", [ep])
    chat = build_chat(ep, tmp_path)
    parts = list(chat.audio_parts())
    assert [p.sr for p in parts] == [16_000, 16_000]
    assert [p.wave.ndim for p in parts] == [1, 1]
    assert [len(p.wave) for p in parts] == [16_000, 8_000]


def test_unreadable_audio_names_episode(tiny_dataset):
    ep = episode(tiny_dataset, "AudioCount", k=1)
    broken = Episode(ep.id, ep.task, ep.demos, Query((Clip("data/missing.wav", "1"),), "1"))
    with pytest.raises(AudioICLError, match="not found") as info:
        build_chat(broken, tiny_dataset)
    assert info.value.id == ep.id


def _lengths(chat):
    return [len(p.wave) for p in chat.audio_parts()]


def test_padding_modes(tiny_dataset):
    chats = [build_chat(episode(tiny_dataset, "AudioCount", k=2, number=n), tiny_dataset) for n in (0, 1)]
    originals = [[p.wave.copy() for p in chat.audio_parts()] for chat in chats]
    assert pad_chats(chats, "none") == chats

    per_episode = pad_chats(chats, "episode")
    for chat, padded, waves in zip(chats, per_episode, originals, strict=True):
        longest = max(len(w) for w in waves)
        assert len(set(_lengths(chat))) > 1  # the fixture's clips differ in length
        assert _lengths(padded) == [longest] * len(waves)
        for part, wave in zip(padded.audio_parts(), waves, strict=True):
            np.testing.assert_array_equal(part.wave[: len(wave)], wave)
            assert not part.wave[len(wave) :].any()
        # the structured view holds the same padded audio as the messages
        assert [len(i.audio.wave) for i in padded.items] == _lengths(padded)

    per_batch = pad_chats(chats, "batch")
    longest = max(len(w) for waves in originals for w in waves)
    assert all(_lengths(chat) == [longest] * len(chat.items) for chat in per_batch)
    assert max(_lengths(per_episode[0]) + _lengths(per_episode[1])) == longest
    assert min(max(_lengths(c)) for c in per_episode) < longest  # batch padding is really longer
    # pure: the inputs are unchanged
    for chat, waves in zip(chats, originals, strict=True):
        assert _lengths(chat) == [len(w) for w in waves]


def test_prompt_set_defaults():
    defaults = PromptSet()
    assert defaults.instruction("AudioCount", "specific") == COUNT
    assert defaults.instruction("AudioCount", "none") is None
    assert defaults.system_prompt("qwen2.5-omni") == QWEN_OMNI_SYSTEM


def test_a_prompt_sets_digest_follows_its_wording_not_its_source(tmp_path):
    """``PromptSet.sha256`` names the wording: the built-in set has one; a file that restates a task's own
    instruction gives the same digest; one changed word, in any family's system prompt or any instruction,
    gives another."""
    builtin = PromptSet().sha256()
    assert len(builtin) == 64 and builtin == PromptSet().sha256()
    same = tmp_path / "same.yaml"
    same.write_text(
        f"instructions:\n  AudioCount: {TASKS.get('AudioCount').instruction!r}\n", encoding="utf-8"
    )
    assert load_prompt_set(same).sha256() == builtin
    other = tmp_path / "other.yaml"
    other.write_text("system:\n  qwen3-omni: You are a listener.\n", encoding="utf-8")
    assert load_prompt_set(other).sha256() != builtin
    assert PromptSet(general=PromptSet().general + " ").sha256() != builtin
