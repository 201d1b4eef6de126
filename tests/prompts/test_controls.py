"""Study conditions as prompt transformations (``controls``), checked on episodes the builder made.

Each control is applied to the prompt ``build_prompt`` makes and checked for what it removes, replaces or
redraws, that the query's label is never shown, and that its randomness comes from the seed and the episode
(the same at every k, another with another seed).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from audioicl import AudioICLError, Episode, read_meta
from audioicl.audio import SAMPLE_RATE
from audioicl.dataset.meta import find_meta_files
from audioicl.dataset.sidecar import Sidecar, load_sidecar
from audioicl.prompts.build import Prompt, build_prompt
from audioicl.prompts.chat import AudioPart, render_text
from audioicl.prompts.clips import NOISE_PATH, ClipStore, load_morse_bank
from audioicl.prompts.controls import CONTROLS, NOISE_SECONDS, ControlContext, swap_partners
from audioicl.synth.morse import WORDS_5
from audioicl.tasks import TASKS, task_names
from audioicl.tasks.remap import PATTERNS
from audioicl.tasks.transcripts import read


@pytest.fixture(scope="module")
def root(nine_tasks: Path) -> Path:
    return nine_tasks


@pytest.fixture(scope="module")
def episodes(root) -> dict[int, list[Episode]]:
    return {k: read_meta(path) for k, path in find_meta_files(root).items()}


@pytest.fixture(scope="module")
def clips(root) -> ClipStore:
    return ClipStore(root)


def prompt_of(root: Path, clips: ClipStore, episode: Episode) -> Prompt:
    return build_prompt(episode, clips, bank=load_morse_bank(root, "auto"))


def apply(name: str, prompt: Prompt, episode: Episode, clips: ClipStore, **context) -> Prompt:
    return CONTROLS.get(name).apply(prompt, ControlContext(context.pop("seed", 0), episode, clips, **context))


def shows_query_label(prompt: Prompt) -> bool:
    """Whether the clip the prompt asks about carries a label (it never may): the prompt ends in 'Label:'."""
    target = prompt.chat.items[-1]
    return target.label is not None or not render_text(prompt.chat).endswith("Label:")


def test_every_control_is_registered_with_a_summary():
    assert CONTROLS.names() == ["random-labels", "no-audio", "noise-query", "swapped-query", "transcript"]
    assert all(control.summary for _, control in CONTROLS.items())
    with pytest.raises(AudioICLError, match="unknown control 'shuffle'.*random-labels"):
        CONTROLS.get("shuffle")


# --------------------------------------------------------------------------- random labels


def test_random_labels_are_drawn_from_each_task_label_space(root, episodes, clips):
    changed = 0
    for episode in episodes[5]:
        prompt = prompt_of(root, clips, episode)
        redrawn = apply("random-labels", prompt, episode, clips)
        spec = TASKS.get(episode.task)
        assert not shows_query_label(redrawn)
        assert redrawn.audio_paths == prompt.audio_paths
        for before, after in zip(prompt.chat.items, redrawn.chat.items, strict=True):
            assert (before.kind, before.tag, before.audio) == (after.kind, after.tag, after.audio)
            if before.kind != "demo" or before.label not in spec.labels:
                assert after.label == before.label  # bank letters, AudioRemap's A/B letters, the query
                continue
            changed += after.label != before.label
            assert after.label in spec.labels
            if episode.task == "MorseCode":
                assert after.label in WORDS_5
        if episode.task == "AudioRemap":  # each MIX spelled with its own demo's letters, one of the patterns
            items = redrawn.chat.items
            for a, b, mix in zip(items[0::3], items[1::3], items[2::3], strict=False):
                if mix.kind == "demo":
                    spellings = {"".join(a.label if c == "A" else b.label for c in p) for p in PATTERNS}
                    assert mix.label in spellings
        shown = render_text(redrawn.chat)
        assert all(f"Label: {item.label}" in shown for item in redrawn.chat.items if item.label)
    assert changed > len(episodes[5])  # most labels change


def test_random_labels_are_redrawn_not_shuffled(root, episodes, clips):
    """Drawn from the whole label space: labels appear that no demo of the episode had (a shuffle keeps
    the set, and with it AudioCount's elimination shortcut)."""
    new = 0
    for episode in (e for e in episodes[5] if e.task == "AudioCount"):
        redrawn = apply("random-labels", prompt_of(root, clips, episode), episode, clips)
        before = {d.label for d in episode.demos}
        new += len({i.label for i in redrawn.chat.items if i.kind == "demo"} - before)
    assert new > 0


def test_random_labels_depend_on_seed_and_episode_not_on_k(root, episodes, clips):
    for short, full in zip(episodes[2], episodes[5], strict=True):
        labels_2 = [
            i.label for i in apply("random-labels", prompt_of(root, clips, short), short, clips).chat.items
        ]
        labels_5 = [
            i.label for i in apply("random-labels", prompt_of(root, clips, full), full, clips).chat.items
        ]
        demo_items = sum(1 for i in prompt_of(root, clips, short).chat.items if i.kind != "query")
        assert (
            labels_2[:demo_items] == labels_5[:demo_items]
        )  # nested: demo 2's label is the same at k = 2 and 5
    other_seed = [
        [i.label for i in apply("random-labels", prompt_of(root, clips, e), e, clips, seed=1).chat.items]
        for e in episodes[5]
    ]
    same_seed = [
        [i.label for i in apply("random-labels", prompt_of(root, clips, e), e, clips).chat.items]
        for e in episodes[5]
    ]
    assert other_seed != same_seed


# --------------------------------------------------------------------------- no audio


def test_no_audio_removes_every_clip_and_keeps_tags_and_labels(root, episodes, clips):
    for episode in episodes[3]:
        prompt = prompt_of(root, clips, episode)
        bare = apply("no-audio", prompt, episode, clips)
        assert list(bare.chat.audio_parts()) == [] and all(i.audio is None for i in bare.chat.items)
        text = render_text(bare.chat)
        assert "<audio>" not in text and not shows_query_label(bare)
        for item in prompt.chat.items:
            assert f"[{item.tag}]" in text
            if item.label is not None:
                assert f"[{item.tag}] Label: {item.label}" in text
        assert bare.chat.messages[0] == prompt.chat.messages[0]  # the system prompt and instruction stay
        assert bare.chat.messages[1].content[0].text.startswith(prompt.chat.frame.instruction)


# --------------------------------------------------------------------------- the query's audio


def test_noise_query_is_fixed_length_noise_the_same_at_every_k(root, episodes, clips):
    seen: dict[str, str] = {}
    for k in (1, 5):
        for episode in episodes[k]:
            prompt = prompt_of(root, clips, episode)
            noisy = apply("noise-query", prompt, episode, clips)
            target = noisy.chat.items[-1]
            assert len(target.audio.wave) == int(NOISE_SECONDS * SAMPLE_RATE)  # whatever the clip's length
            rms = float(np.sqrt(np.mean(target.audio.wave**2)))
            assert 0.05 < rms < 0.2 and np.count_nonzero(target.audio.wave == 0) < 10  # noise, not silence
            assert noisy.audio_paths[-1] == f"{NOISE_PATH}/{episode.id}"
            assert noisy.audio_paths[:-1] == prompt.audio_paths[:-1]
            assert [i.audio for i in noisy.chat.items[:-1]] == [i.audio for i in prompt.chat.items[:-1]]
            assert not shows_query_label(noisy)
            assert seen.setdefault(episode.id, target.audio.digest) == target.audio.digest
    assert len(set(seen.values())) == len(seen)  # each episode its own noise


def test_swap_partners_are_another_episode_of_the_task_and_follow_the_seed(episodes):
    partners = swap_partners(episodes[3], seed=0)
    assert set(partners) == {e.id for e in episodes[3]}
    for episode in episodes[3]:
        partner = partners[episode.id]
        assert partner.task == episode.task and partner.id != episode.id
    assert {i: p.id for i, p in swap_partners(list(reversed(episodes[3])), 0).items()} == {
        i: p.id for i, p in partners.items()
    }  # the order of the file does not matter
    assert {i: p.id for i, p in swap_partners(episodes[5], 0).items()} == {
        i: p.id for i, p in partners.items()
    }
    others = [swap_partners(episodes[3], seed)[e.id].id for seed in range(1, 6) for e in episodes[3]]
    assert others != [partners[e.id].id for e in episodes[3]] * 5
    assert swap_partners(episodes[3][:1], 0) == {}  # alone in its task: no partner


def test_swapped_query_hears_the_partner_query_under_its_own_label(root, episodes, clips):
    partners = swap_partners(episodes[2], seed=0)
    for episode in episodes[2]:
        prompt = prompt_of(root, clips, episode)
        partner = partners[episode.id]
        swapped = apply("swapped-query", prompt, episode, clips, partner=partner)
        assert swapped.audio_paths[-1] == partner.query.target.audio_path != prompt.audio_paths[-1]
        assert swapped.chat.items[-1].audio.digest == clips.load(partner.query.target.audio_path).digest
        assert swapped.chat.items[:-1] == prompt.chat.items[:-1] and not shows_query_label(swapped)
    with pytest.raises(AudioICLError, match="no other episode"):
        apply("swapped-query", prompt, episode, clips)


# --------------------------------------------------------------------------- transcripts


def test_transcript_replaces_every_clip_by_the_builder_transcript(root, episodes, clips):
    sidecar = load_sidecar(root)
    assert sidecar is not None and sidecar.path == root / "meta" / "transcripts.jsonl"
    for episode in episodes[2]:
        prompt = prompt_of(root, clips, episode)
        text = apply("transcript", prompt, episode, clips, sidecar=sidecar)
        assert list(text.chat.audio_parts()) == [] and not shows_query_label(text)
        rendered = render_text(text.chat)
        for item, path in zip(text.chat.items, text.audio_paths, strict=True):
            expected = sidecar.transcripts.get(path)
            if episode.task == "AnomalyDetect":
                assert expected is None and item.transcript.startswith("10.00 s machine sound, measured:")
            else:
                assert item.transcript == expected
            assert f"[{item.tag}] (transcript: {item.transcript})" in rendered


def test_transcripts_carry_what_is_heard_never_the_label(root, episodes):
    """The rule applied to the transcript gives the label (perfect perception), and the transcript holds no
    more than the audio: no count, sum, decoded word or verdict, only events, digits, codes and sounds."""
    sidecar = load_sidecar(root)
    for episode in episodes[5]:
        for clip in episode.clips():
            if clip.audio_path not in sidecar.transcripts:
                assert episode.task == "AnomalyDetect"
                continue
            text = sidecar.transcripts[clip.audio_path]
            said = read(text)
            task, label = episode.task, clip.label
            if label is None or clip.role in ("A", "B"):
                continue
            if task in ("AudioCount", "AudioCountHard"):
                assert said.kind == "events" and len(said.onsets) == int(label) and "times" not in text
            elif task == "AudioLength":
                assert said.kind == "timeline" and round(said.seconds) == int(label)
            elif task == "AudioLengthHard":
                assert said.kind == "timeline" and round(said.non_silent) == int(label)
            elif task in ("AudioOperator", "AudioOperatorHard"):
                assert said.kind == "spoken" and "+" not in text and "times" not in text
                assert all(isinstance(p, int) == (i % 2 == 0) for i, p in enumerate(said.spoken))
            elif task == "MorseCode":
                assert said.kind == "morse" and set(text.removeprefix("Morse tone: ")) <= set(".- /")
            elif task == "AudioRemap":
                assert said.kind == "sounds" and len(said.sounds) == 3
                assert not any(letter in said.sounds for letter in label)


def said_alike(built, heard) -> bool:
    """Whether two readings of one clip agree on what the task's rule needs."""
    if built.kind == "events":
        return len(built.onsets) == len(heard.onsets)
    if built.kind == "timeline":
        return (round(built.seconds), round(built.non_silent)) == (
            round(heard.seconds),
            round(heard.non_silent),
        )
    if built.kind == "spoken":
        return [p for p in built.spoken if isinstance(p, int)] == [
            p for p in heard.spoken if isinstance(p, int)
        ]
    if built.kind == "morse":
        return built.codes == heard.codes
    return [built.sounds.index(x) for x in built.sounds] == [heard.sounds.index(x) for x in heard.sounds]


def test_perceived_transcripts_agree_with_the_builder(root, episodes, clips):
    """A dataset without a sidecar (the released one) gets transcripts perceived from the audio; where the
    rule needs it they say what the builder's say (counts, durations, digits, codes, patterns)."""
    sidecar = load_sidecar(root)
    agree = total = 0
    names: dict[str, set[tuple[str, str]]] = {}
    for episode in episodes[2]:
        if episode.task == "AnomalyDetect":
            continue
        prompt = prompt_of(root, clips, episode)
        perceived = apply("transcript", prompt, episode, clips, sidecar=None)
        for item, path in zip(perceived.chat.items, perceived.audio_paths, strict=True):
            built, heard = read(sidecar.transcripts[path]), read(item.transcript)
            assert built.kind == heard.kind
            total += 1
            agree += said_alike(built, heard)
            if built.kind == "sounds":  # one perceived name per built sound, across the episode
                names.setdefault(episode.id, set()).update(zip(built.sounds, heard.sounds, strict=True))
    assert agree >= 0.95 * total
    for pairs in names.values():
        assert len({b for b, _ in pairs}) == len({h for _, h in pairs}) == len(pairs)


def test_a_partial_sidecar_is_completed_by_perception(root, episodes, clips):
    sidecar = load_sidecar(root)
    episode = next(e for e in episodes[1] if e.task == "AudioCount")
    prompt = prompt_of(root, clips, episode)
    partial = Sidecar(
        sidecar.path, "x", {p: t for p, t in sidecar.transcripts.items() if p != prompt.audio_paths[-1]}
    )
    text = apply("transcript", prompt, episode, clips, sidecar=partial)
    assert text.chat.items[0].transcript == sidecar.transcripts[prompt.audio_paths[0]]
    assert text.chat.items[-1].transcript.startswith("10.00 s: a sound at ")  # perceived: no sound name
    silent = replace(prompt.chat.items[-1], audio=None)
    broken = Prompt(replace(prompt.chat, items=(*prompt.chat.items[:-1], silent)), prompt.audio_paths)
    with pytest.raises(AudioICLError, match="no audio to transcribe"):
        apply("transcript", broken, episode, clips, sidecar=partial)


def test_controls_compose_with_the_multiturn_layout(root, episodes, clips):
    episode = next(e for e in episodes[2] if e.task == "AudioRemap")
    prompt = build_prompt(episode, clips, layout="multiturn")
    redrawn = apply("random-labels", prompt, episode, clips)
    assert [m.role for m in redrawn.chat.messages] == [m.role for m in prompt.chat.messages]
    answers = [m.content[0].text for m in redrawn.chat.messages if m.role == "assistant"]
    assert answers == [i.label for i in redrawn.chat.items if i.kind == "demo" and i.role == "MIX"]


def test_a_chat_without_a_frame_cannot_be_laid_out_again(root, episodes, clips):
    prompt = prompt_of(root, clips, episodes[1][0])
    frameless = Prompt(replace(prompt.chat, frame=None), prompt.audio_paths)
    with pytest.raises(ValueError, match="no frame"):
        apply("no-audio", frameless, episodes[1][0], clips)


def test_noise_clip_is_an_audio_part_named_by_content():
    from audioicl.prompts.controls import noise_clip

    a, b = noise_clip(0, "AudioICL00001"), noise_clip(0, "AudioICL00001")
    assert isinstance(a, AudioPart) and a.digest == b.digest != noise_clip(1, "AudioICL00001").digest


@pytest.mark.parametrize("task", task_names())
def test_every_task_has_a_label_space_random_labels_can_draw_from(task):
    from audioicl.prompts.controls import draw_label

    rng = np.random.default_rng(0)
    drawn = {draw_label(task, rng, [], ["x"]) for _ in range(50)}
    assert len(drawn) > 1 and all(label in TASKS.get(task).labels for label in drawn)
