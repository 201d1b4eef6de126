"""Perception recovers the ground truth of clips assembled from the real synth modules (and plain signals)."""

from __future__ import annotations

import numpy as np
import pytest

from audioicl.perception import measure as P
from audioicl.synth import dsp
from audioicl.synth.ambience import background
from audioicl.synth.morse import MorseStyle, key_text
from audioicl.synth.percussion import FAMILIES, one_shot
from audioicl.synth.speech import VOICES, speak_digit

SR = 16_000
CANVAS = 10 * SR


def pcm16(x: np.ndarray) -> np.ndarray:
    """What a clip becomes once written and read back."""
    return (np.round(np.clip(x, -1, 1) * 32767) / 32767).astype(np.float32)


def place(sound: np.ndarray, r: int, rng: np.random.Generator, min_gap: int = 0) -> np.ndarray:
    """``r`` copies at random non-overlapping positions; ``min_gap=0`` lets copies touch."""
    free = CANVAS - r * len(sound) - (r - 1) * min_gap
    starts = np.sort(rng.integers(0, free + 1, r)) + np.arange(r) * (len(sound) + min_gap)
    canvas = np.zeros(CANVAS, dtype=np.float32)
    for s in starts:
        canvas[s : s + len(sound)] += sound
    return canvas


def sound_of(family: str, k: int = 0) -> np.ndarray:
    index = FAMILIES.index(family) + k * len(FAMILIES)
    return one_shot(5, index).wave


# ----------------------------------------------------------------------------------------------- counting


@pytest.mark.parametrize("family", FAMILIES)
def test_count_is_exact_on_clean_canvases_of_every_family(family):
    rng = np.random.default_rng(FAMILIES.index(family))
    sound = sound_of(family)
    for r in (1, 3, 8):
        assert P.count_events(pcm16(place(sound, r, rng, min_gap=800)), SR) == r


def test_count_handles_copies_that_touch_and_long_ringing_tails():
    rng = np.random.default_rng(1)
    for family in ("bell", "open_hat", "cymbal", "clap", "pluck"):
        sound = sound_of(family, 1)
        for r in (2, 6, 8):
            assert P.count_events(pcm16(place(sound, r, rng, min_gap=0)), SR) == r, (family, r)


def test_count_on_plain_signals_and_edges():
    t = np.arange(int(0.3 * SR)) / SR
    ring = (np.sin(2 * np.pi * 440 * t) * np.exp(-t / 0.08)).astype(np.float32)  # pure decaying tone
    burst = (np.random.default_rng(0).standard_normal(len(t)) * np.exp(-t / 0.03)).astype(np.float32)
    rng = np.random.default_rng(2)
    for sound in (ring, burst):
        for r in range(1, 9):
            assert P.count_events(place(sound, r, rng, min_gap=160), SR) == r
    assert P.count_events(np.zeros(CANVAS, dtype=np.float32), SR) == 0
    edge = np.zeros(CANVAS, dtype=np.float32)
    edge[: len(burst)] += burst  # first copy at sample 0, last one ending at the canvas end
    edge[-len(burst) :] += burst
    assert P.count_events(edge, SR) == 2


def test_count_with_background_is_mostly_right():
    rng = np.random.default_rng(3)
    right = total = 0
    for i, family in enumerate(("kick", "snare", "bell", "clap", "cowbell", "shaker")):
        sound = sound_of(family)
        for r in (1, 4, 7):
            noise = background(("rain", "wind", "insects", "birds")[i % 4], rng, 10.0, SR)
            clip = pcm16(dsp.mix_at_snr(place(sound, r, rng, min_gap=800), noise, 12.0))
            right += P.count_events(clip, SR, background=True) == r
            total += 1
    assert right >= 0.8 * total  # measured ~99 % on 768 clips (see the report)


# ----------------------------------------------------------------------------------------------- lengths


def test_non_silent_seconds_counts_everything_but_digital_silence():
    rng = np.random.default_rng(4)
    for total, silence in ((7, 3), (5, 0), (4, 4), (12, 1)):
        clip = (rng.standard_normal(total * SR) * 0.02).astype(np.float32)
        start = int(rng.integers(0, (total - silence) * SR + 1))
        clip[start : start + silence * SR] = 0.0
        clip = pcm16(clip)
        assert P.duration_seconds(clip, SR) == total
        assert round(P.non_silent_seconds(clip, SR)) == total - silence
    assert P.non_silent_seconds(np.zeros(3 * SR, dtype=np.float32), SR) == 0.0


# ----------------------------------------------------------------------------------------------- Morse


@pytest.mark.parametrize("wpm", [8.0, 15.0, 20.0, 32.0, 45.0])
def test_decode_morse_reads_words_at_any_speed(wpm):
    for word, tone in (("paris", 550.0), ("quick", 700.0), ("eerie", 900.0), ("tempt", 450.0)):
        clip = pcm16(key_text(word, MorseStyle(wpm=wpm, tone_hz=tone), SR))
        assert P.decode_morse(clip, SR) == word


def test_decode_morse_reads_every_letter_of_the_alphabet_bank():
    for letter in "abcdefghijklmnopqrstuvwxyz":
        assert P.decode_morse(key_text(letter, sr=SR), SR) == letter
    # a lone mark cannot tell its own speed: the hint decides
    slow_e = key_text("e", MorseStyle(wpm=6.0), SR)  # a dot as long as a dash at the default speed
    assert P.decode_morse(slow_e, SR) == "t"
    assert P.decode_morse(slow_e, SR, unit_s=1.2 / 6.0) == "e"
    assert P.decode_morse(np.zeros(SR, dtype=np.float32), SR) == ""


def test_keyed_codes_give_dots_and_dashes_per_word():
    clip = key_text("sos", MorseStyle(wpm=25.0), SR)
    assert P.keyed_codes(clip, SR) == [["...", "---", "..."]]


# ----------------------------------------------------------------------------------------------- operator


def operator_clip(digits: list[int], fillers: list[np.ndarray], voice) -> tuple[np.ndarray, list[int]]:
    gap = np.zeros(int(0.025 * SR), dtype=np.float32)
    parts = [speak_digit(digits[0], voice, SR)]
    for filler, d in zip(fillers, digits[1:], strict=True):
        parts += [gap, dsp.fade(dsp.trim_silence(filler, SR), SR, 3.0), gap, speak_digit(d, voice, SR)]
    starts = list(np.cumsum([0] + [len(p) for p in parts])[::2])
    return pcm16(np.concatenate(parts)), [int(s) for s in starts]


def test_split_into_ignores_the_closure_inside_six_and_eight():
    voice = VOICES[0]
    kick, clap = sound_of("kick"), sound_of("clap")
    for digits, fillers in (([6, 8], [kick]), ([8, 6, 6], [clap, kick]), ([3, 8, 1], [kick, kick])):
        clip, starts = operator_clip(digits, fillers, voice)
        parts = P.split_into(clip, SR, len(starts), gap_s=0.025)
        assert len(parts) == len(starts)
        assert all(abs(s - truth) < 200 for (s, _), truth in zip(parts, starts, strict=True))
        for d, (s, e) in zip(digits, parts[::2], strict=True):
            assert P.recognize_digit(clip[s:e], SR, digits=tuple(range(1, 10))) == d
        fills = [clip[s:e] for s, e in parts[1::2]]
        if len(fills) == 2:
            assert P.same_sound(fills[0], fills[1], SR) == (fillers[0] is fillers[1])


def test_split_segments_finds_tone_bursts():
    tone = np.sin(2 * np.pi * 300 * np.arange(SR // 5) / SR).astype(np.float32)
    clip = np.concatenate([tone, np.zeros(SR // 10), tone, np.zeros(SR // 100), tone])
    assert len(P.split_segments(clip, SR, min_gap_s=0.02)) == 2  # the 10 ms gap is too short
    assert len(P.split_segments(clip, SR, min_gap_s=0.005)) == 3
    assert P.split_segments(np.zeros(SR), SR) == []


@pytest.mark.parametrize("voice", VOICES[::3], ids=lambda v: v.name)
def test_recognize_digit_is_exact_on_our_voices(voice):
    rng = np.random.default_rng(5)
    for d in range(10):
        spoken = speak_digit(d, voice, SR) * rng.uniform(0.2, 1.0)
        padded = np.concatenate(
            [np.zeros(int(rng.integers(0, 800))), spoken, np.zeros(int(rng.integers(0, 800)))]
        )
        assert P.recognize_digit(pcm16(padded), SR) == d


# ----------------------------------------------------------------------------------------------- remap


@pytest.mark.parametrize("gap_samples", [2400, 0, 40])
def test_match_sequence_spells_every_pattern(gap_samples):
    a, b = sound_of("snare", 2), sound_of("tom", 2)
    for pattern in ("AAB", "ABA", "BAB", "BAA", "ABB", "BBA"):
        parts = []
        for c in pattern:
            parts += [a if c == "A" else b, np.zeros(gap_samples, dtype=np.float32)]
        mix = pcm16(np.concatenate(parts[:-1]))
        assert P.match_sequence(mix, {"A": a, "B": b}, SR) == pattern


def test_match_sequence_when_a_sound_has_a_pause_longer_than_the_gaps():
    burst = sound_of("rim", 3)
    a = np.concatenate([burst, np.zeros(SR // 10, dtype=np.float32), burst])  # "ta .. ta", one sound
    b = sound_of("cowbell", 3)
    for pattern in ("ABA", "BBA", "AAB"):
        mix = np.concatenate([a if c == "A" else b for c in pattern])
        assert P.match_sequence(mix, {"A": a, "B": b}, SR) == pattern


def test_sound_distance_tells_copies_from_other_sounds():
    a, b = sound_of("hand_drum"), sound_of("hand_drum", 1)
    shifted = np.concatenate([np.zeros(500), 0.3 * a, np.zeros(100)])
    assert P.sound_distance(a, shifted, SR) < 0.01
    assert P.same_sound(a, shifted, SR)
    assert not P.same_sound(a, b, SR)
    assert P.nearest_reference(0.5 * b, {"A": a, "B": b}, SR) == "B"


# ----------------------------------------------------------------------------------------------- anomaly


def test_clip_features_have_a_fixed_length_and_separate_kinds_of_sound():
    rng = np.random.default_rng(6)
    t = np.arange(2 * SR) / SR
    hum = [np.sin(2 * np.pi * f * t) * 0.3 + rng.standard_normal(len(t)) * 0.01 for f in (100, 110, 120)]
    clatter = [
        place(sound_of("rim"), 8, rng)[: 2 * SR] + rng.standard_normal(len(t)) * 0.01 for _ in range(3)
    ]
    feats = [P.clip_features(x.astype(np.float32), SR) for x in hum + clatter]
    assert all(f.shape == (P.CLIP_FEATURE_SIZE,) and np.isfinite(f).all() for f in feats)
    assert P.clip_features(np.zeros(100, dtype=np.float32), SR).shape == (P.CLIP_FEATURE_SIZE,)
    ref = np.array(feats[1:3] + feats[4:6])
    labels = [0, 0, 1, 1]
    for query, truth in ((feats[0], 0), (feats[3], 1)):
        assert labels[int(np.argmin(np.linalg.norm(ref - query, axis=1)))] == truth


def _machine_takes(machine_type: str, anomaly: str | None, count: int) -> list[np.ndarray]:
    from audioicl.synth.machines import machine_clip, machine_unit

    unit = machine_unit(machine_type, np.random.default_rng(3))
    seed = 0 if anomaly is None else 100
    return [
        P.anomaly_features(machine_clip(unit, np.random.default_rng(seed + i), anomaly), SR)
        for i in range(count)
    ]


def test_anomaly_features_have_a_fixed_length_and_are_level_free():
    rng = np.random.default_rng(2)
    x = rng.standard_normal(3 * SR).astype(np.float32) * 0.1
    feats = P.anomaly_features(x, SR)
    assert feats.shape == P.anomaly_features(x[: 2 * SR], SR).shape == (P.ANOMALY_FEATURE_SIZE,)
    assert np.isfinite(feats).all()
    assert np.allclose(P.anomaly_features(4 * x, SR), feats)
    assert P.ANOMALY_NORMAL_SPREAD.shape == (P.ANOMALY_FEATURE_SIZE,) and (P.ANOMALY_NORMAL_SPREAD > 0).all()
    assert not P.anomaly_features(np.zeros(SR, dtype=np.float32), SR).any()
    assert not P.anomaly_features(x[:100], SR).any()


@pytest.mark.parametrize(
    ("machine_type", "anomaly"),
    [
        ("bearing", "outer_race"),
        ("fan", "imbalance"),
        ("valve", "missing_event"),
        ("ToyTrain", "flange_squeal"),
    ],
)
def test_anomaly_features_move_far_more_for_a_fault_than_between_normal_takes(machine_type, anomaly):
    """In units of the prior normal spread, a fault moves some measurement well past what another normal take
    of the same machine moves any (this ToyTrain unit's normal takes differ by 8 spreads in one)."""
    normal = _machine_takes(machine_type, None, 3)
    faulty = _machine_takes(machine_type, anomaly, 1)[0]
    spread = P.ANOMALY_NORMAL_SPREAD
    between_normals = max(np.max(np.abs(normal[0] - other) / spread) for other in normal[1:])
    assert np.max(np.abs(faulty - normal[0]) / spread) > max(1.5 * between_normals, 8.0)
