"""Every label of a fresh build is true of its audio: measured on the generated WAVs with signal processing
(``audioicl.perception``), checked against what the file names and meta records claim, never against the
builder's internal bookkeeping."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from audioicl import perception
from audioicl.audio import SAMPLE_RATE, load
from audioicl.backends.perceiving import read_expression
from audioicl.build import build
from audioicl.meta import find_meta_files, read_meta
from audioicl.records import Clip, Episode
from audioicl.tasks.context import BuildOptions

EPISODES = 3


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """All nine tasks, 3 episodes each, k = 1..5 (shared with test_perceiving: same folder, same options)."""
    out = tmp_path_factory.getbasetemp() / f"nine-tasks-{EPISODES}"
    build(out, BuildOptions(episodes=EPISODES), workers=2)
    return out


@pytest.fixture(scope="module")
def episodes(root: Path) -> dict[str, list[Episode]]:
    """The k = 5 episodes by task (nested: they hold every clip of the smaller k)."""
    by_task: dict[str, list[Episode]] = {}
    for episode in read_meta(find_meta_files(root)[5]):
        by_task.setdefault(episode.task, []).append(episode)
    return by_task


def _single_clips(episode: Episode) -> list[tuple[Clip, str]]:
    """(clip, label) for every clip of a single-clip episode, the query with its answer."""
    return [(demo.clips[0], demo.label or "") for demo in episode.demos] + [
        (episode.query.target, episode.query.label)
    ]


def _wave(root: Path, clip: Clip) -> np.ndarray:
    wave, sr = load(root / clip.audio_path)
    assert sr == SAMPLE_RATE
    return wave


def test_every_task_is_built(episodes):
    assert len(episodes) == 9
    assert all(len(eps) == EPISODES for eps in episodes.values())


def test_audiocount_events_counted_by_onsets(root, episodes):
    for episode in episodes["AudioCount"]:
        for clip, label in _single_clips(episode):
            assert clip.audio_path.endswith(f"_{label}.wav")
            assert perception.count_events(_wave(root, clip), SAMPLE_RATE) == int(label), clip.audio_path


def test_audiolength_label_is_the_file_duration(root, episodes):
    for episode in episodes["AudioLength"]:
        for clip, label in _single_clips(episode):
            wave = _wave(root, clip)
            assert len(wave) == int(label) * SAMPLE_RATE, clip.audio_path
            assert Path(clip.audio_path).stem.split("_")[0] == label
            assert perception.digital_silence(wave, SAMPLE_RATE), "the short silence block is missing"


def test_audiolengthhard_label_is_the_non_silent_seconds(root, episodes):
    for episode in episodes["AudioLengthHard"]:
        for clip, label in _single_clips(episode):
            wave = _wave(root, clip)
            named_label, silence, _ = Path(clip.audio_path).stem.split("_")
            assert named_label == label
            assert perception.non_silent_seconds(wave, SAMPLE_RATE) == int(label), clip.audio_path
            assert len(wave) == (int(label) + int(silence)) * SAMPLE_RATE


def test_morse_words_decode_to_their_labels(root, episodes):
    for episode in episodes["MorseCode"]:
        for clip, word in _single_clips(episode):
            assert Path(clip.audio_path).stem == word
            assert perception.decode_morse(_wave(root, clip), SAMPLE_RATE) == word


def test_morse_alphabet_bank_letters(root):
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    decoded = [
        perception.decode_morse(load(root / f"data/MorseCode/alphabet/{c}.wav")[0], SAMPLE_RATE)
        for c in letters
    ]
    assert decoded == list(letters.lower())


def _named_expression(path: str) -> tuple[list[int], list[str], int]:
    """Digits, operators and answer written in an operator file name (``...__expr-8add4mul8__ans-40__...``)."""
    match = re.search(r"__expr-([0-9a-z]+)__ans-(-?\d+)__", path) or re.search(
        r"__([0-9]+(?:(?:add|sub|mul)[0-9]+)+)__ans-(-?\d+)__", path
    )
    assert match, path
    tokens = re.findall(r"\d+|add|sub|mul", match.group(1))
    return [int(t) for t in tokens[::2]], tokens[1::2], int(match.group(2))


def _evaluate(digits: list[int], ops: list[str]) -> int:
    """Normal precedence, written independently of the builder: Python evaluates the same expression."""
    symbols = {"add": "+", "sub": "-", "mul": "*"}
    return int(eval("".join(f"{d}{symbols[o]}" for d, o in zip(digits, ops, strict=False)) + str(digits[-1])))


@pytest.mark.parametrize("task, n_digits", [("AudioOperator", 2), ("AudioOperatorHard", 3)])
def test_operator_arithmetic_and_spoken_digits(root, episodes, task, n_digits):
    for episode in episodes[task]:
        for clip, label in _single_clips(episode):
            digits, ops, answer = _named_expression(clip.audio_path)
            assert len(digits) == n_digits
            assert _evaluate(digits, ops) == answer == int(label), clip.audio_path
            heard = read_expression(_wave(root, clip), SAMPLE_RATE, n_digits)
            assert list(heard.digits) == digits, clip.audio_path


def test_operator_filler_is_one_sound_per_episode(root, episodes):
    """AudioOperator: every clip of an episode carries the same filler (so it can stand for one operation)."""
    for episode in episodes["AudioOperator"]:
        fillers = []
        for clip, _ in _single_clips(episode):
            wave = _wave(root, clip)
            ((start, end),) = read_expression(wave, SAMPLE_RATE, 2).fillers
            fillers.append(wave[start:end])
        assert all(perception.same_sound(fillers[0], other, SAMPLE_RATE) for other in fillers[1:])


def test_remap_mix_matches_its_references(root, episodes):
    for episode in episodes["AudioRemap"]:
        groups = [(demo.clips, demo.label) for demo in episode.demos] + [
            (episode.query.clips, episode.query.label)
        ]
        for (a, b, mix), label in groups:
            assert (a.role, b.role, mix.role) == ("A", "B", "MIX")
            named = re.search(r"MIX__([AB]{3})__", mix.audio_path)
            assert named, mix.audio_path
            refs = {"A": _wave(root, a), "B": _wave(root, b)}
            pattern = perception.match_sequence(_wave(root, mix), refs, SAMPLE_RATE)
            assert pattern == named.group(1), mix.audio_path
            letters = {"A": a.label, "B": b.label}
            assert label == "".join(letters[c] for c in pattern)


def test_anomaly_labels_follow_file_naming(episodes):
    for episode in episodes["AnomalyDetect"]:
        clips = [(clip, clip.label) for demo in episode.demos for clip in demo.clips]
        clips.append((episode.query.target, episode.query.label))
        assert episode.object and all(f"data/anomalous/{episode.object}/" in c.audio_path for c, _ in clips)
        for clip, label in clips:
            name = Path(clip.audio_path).name
            if label == "Normal":
                assert "_normal_" in name and "/train/" in clip.audio_path, clip.audio_path
            else:
                assert label == "Anomalous"
                assert "_anomaly_" in name and "/test/" in clip.audio_path, clip.audio_path
        assert len({c.audio_path for c, _ in clips}) == len(clips), "a recording is used twice"
