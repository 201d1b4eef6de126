"""Every label of a fresh build is true of its audio: measured on the generated WAVs with signal processing
(``audioicl.perception``) and checked against what the meta records claim, never against the builder's
internal bookkeeping. File names hold no labels by default; where the audio cannot say how a clip was made
(a machine recording is normal or faulty), a build with the original's names, which say it, is the witness."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from audioicl import BuildOptions, Episode, build, read_meta
from audioicl.audio import SAMPLE_RATE, load
from audioicl.dataset.meta import find_meta_files
from audioicl.perception import measure as perception
from audioicl.records import Clip
from audioicl.tasks.operator import GAP_SECONDS

EPISODES = 3


@pytest.fixture(scope="module")
def root(nine_tasks: Path) -> Path:
    return nine_tasks


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
            assert perception.count_events(_wave(root, clip), SAMPLE_RATE) == int(label), clip.audio_path


def test_audiolength_label_is_the_file_duration(root, episodes):
    for episode in episodes["AudioLength"]:
        for clip, label in _single_clips(episode):
            wave = _wave(root, clip)
            assert len(wave) == int(label) * SAMPLE_RATE, clip.audio_path
            assert perception.digital_silence(wave, SAMPLE_RATE), "the short silence block is missing"


def test_audiolengthhard_label_is_the_non_silent_seconds(root, episodes):
    """Whole non-silent seconds (the fades next to the silence may round a few samples to zero)."""
    for episode in episodes["AudioLengthHard"]:
        for clip, label in _single_clips(episode):
            wave = _wave(root, clip)
            assert len(wave) % SAMPLE_RATE == 0
            assert abs(perception.non_silent_seconds(wave, SAMPLE_RATE) - int(label)) < 0.01, clip.audio_path


def test_morse_words_decode_to_their_labels(root, episodes):
    for episode in episodes["MorseCode"]:
        for clip, word in _single_clips(episode):
            assert perception.decode_morse(_wave(root, clip), SAMPLE_RATE) == word


def test_morse_alphabet_bank_letters(root):
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    decoded = [
        perception.decode_morse(load(root / f"data/MorseCode/alphabet/{c}.wav")[0], SAMPLE_RATE)
        for c in letters
    ]
    assert decoded == list(letters.lower())


def _evaluate(digits: tuple[int, ...], ops: tuple[str, ...]) -> int:
    """Normal precedence, written independently of the builder: Python evaluates the same expression."""
    symbols = {"add": "+", "sub": "-", "mul": "*"}
    return int(eval("".join(f"{d}{symbols[o]}" for d, o in zip(digits, ops, strict=False)) + str(digits[-1])))


def _filler_sounds(
    root: Path, clips: list[Clip], n_digits: int
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Each clip's spoken digits and which filler sound each of its fillers is (0: the one that sounds like
    the first clip's first filler)."""
    heard = []
    reference = None
    for clip in clips:
        wave = _wave(root, clip)
        expression = perception.spoken_expression(wave, SAMPLE_RATE, n_digits, GAP_SECONDS)
        fillers = [wave[s:e] for s, e in expression.fillers]
        reference = fillers[0] if reference is None else reference
        if len(fillers) == 1:
            heard.append((expression.digits, (0,)))
            continue
        first, second = (perception.peak_correlation(f, reference) for f in fillers)
        heard.append((expression.digits, (0, 1) if first >= second else (1, 0)))
    return heard


@pytest.mark.parametrize("task, n_digits", [("AudioOperator", 2), ("AudioOperatorHard", 3)])
def test_operator_labels_are_one_meaning_per_filler_applied_to_the_spoken_digits(
    root, episodes, task, n_digits
):
    """Some meaning of the episode's filler sound(s) (one operator each; AudioOperatorHard: one of them x,
    the other + or -) makes every label the value of the digits heard, with normal precedence."""
    meanings = [("add",), ("sub",), ("mul",)]
    if n_digits == 3:
        meanings = [(a, b) for other in ("add", "sub") for a, b in (("mul", other), (other, "mul"))]
    for episode in episodes[task]:
        pairs = _single_clips(episode)
        heard = _filler_sounds(root, [clip for clip, _ in pairs], n_digits)
        assert all(len(digits) == n_digits for digits, _ in heard)
        fits = [
            meaning
            for meaning in meanings
            if all(
                _evaluate(digits, tuple(meaning[s] for s in sounds)) == int(label)
                for (digits, sounds), (_, label) in zip(heard, pairs, strict=True)
            )
        ]
        assert fits, episode.id


def test_remap_mix_matches_its_references(root, episodes):
    for episode in episodes["AudioRemap"]:
        groups = [(demo.clips, demo.label) for demo in episode.demos] + [
            (episode.query.clips, episode.query.label)
        ]
        for (a, b, mix), label in groups:
            assert (a.role, b.role, mix.role) == ("A", "B", "MIX")
            refs = {"A": _wave(root, a), "B": _wave(root, b)}
            pattern = perception.match_sequence(_wave(root, mix), refs, SAMPLE_RATE)
            letters = {"A": a.label, "B": b.label}
            assert label == "".join(letters[c] for c in pattern)


def test_anomaly_labels_are_how_the_recordings_were_made(root, episodes, tmp_path_factory):
    """A build with the original's names (``..._normal_...`` under ``train/``, ``..._anomaly_...`` under
    ``test/``) is otherwise the same build: every recording of ours, found there by its audio, is named for
    the label our meta gives it."""
    witness = tmp_path_factory.mktemp("original-names") / "ds"
    build(witness, BuildOptions(episodes=EPISODES, tasks=("AnomalyDetect",), file_names="original"))
    named = {}
    for episode in read_meta(find_meta_files(witness)[5]):
        for clip in [c for d in episode.demos for c in d.clips] + [episode.query.target]:
            named[hashlib.sha256((witness / clip.audio_path).read_bytes()).hexdigest()] = clip.audio_path
    for episode in episodes["AnomalyDetect"]:
        clips = [(clip, clip.label) for demo in episode.demos for clip in demo.clips]
        clips.append((episode.query.target, episode.query.label))
        assert episode.object and all(f"data/anomalous/{episode.object}/" in c.audio_path for c, _ in clips)
        for clip, label in clips:
            original = named[hashlib.sha256((root / clip.audio_path).read_bytes()).hexdigest()]
            if label == "Normal":
                assert "_normal_" in original and "/train/" in original, (clip.audio_path, original)
            else:
                assert label == "Anomalous"
                assert "_anomaly_" in original and "/test/" in original, (clip.audio_path, original)
        assert len({c.audio_path for c, _ in clips}) == len(clips), "a recording is used twice"
