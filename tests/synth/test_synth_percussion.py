import re

import numpy as np
import pytest

from audioicl.synth import dsp
from audioicl.synth.percussion import FAMILIES, MAX_SECONDS, MIN_SECONDS, PEAK, OneShot, one_shot

SR = 16000


def envelope_db(x: np.ndarray, sr: int, window_ms: float = 30.0, hop_ms: float = 5.0) -> np.ndarray:
    """Sliding-window energy in dB relative to its maximum (30 ms windows smooth out the lowest pitches)."""
    win, hop = int(sr * window_ms / 1000), int(sr * hop_ms / 1000)
    cumulative = np.concatenate([[0.0], np.cumsum(np.asarray(x, float) ** 2)])
    starts = np.arange(0, max(1, len(x) - win + 1), hop)
    energy = (cumulative[np.minimum(starts + win, len(x))] - cumulative[starts]) / win
    level = 10 * np.log10(energy + 1e-12)
    return level - level.max()


def largest_rerise_db(level: np.ndarray, skip: int, floor_db: float = -35.0) -> float:
    """How far the envelope climbs back above its running minimum after ``skip`` frames (a re-attack)."""
    worst, lowest = 0.0, level[min(skip, len(level) - 1)]
    for value in level[skip + 1 :]:
        if value < floor_db:
            break
        lowest = min(lowest, value)
        worst = max(worst, value - lowest)
    return worst


@pytest.fixture(scope="module")
def sample_shots() -> list[OneShot]:
    """Three sounds of every family."""
    return [one_shot(3, i, SR) for i in range(3 * len(FAMILIES))]


def test_families_are_many_and_all_produced(sample_shots):
    assert len(FAMILIES) >= 12 and len(set(FAMILIES)) == len(FAMILIES)
    assert {s.family for s in sample_shots} == set(FAMILIES)


def test_same_seed_and_index_give_identical_sound_regardless_of_order():
    later_first = [one_shot(11, 40), one_shot(11, 7)]
    assert np.array_equal(one_shot(11, 7).wave, later_first[1].wave)
    assert one_shot(11, 7).name == later_first[1].name
    assert not np.array_equal(one_shot(11, 7).wave[:400], one_shot(11, 7 + len(FAMILIES)).wave[:400])
    assert not np.array_equal(one_shot(11, 7).wave[:400], one_shot(12, 7).wave[:400])


def test_names_are_unique_and_file_name_safe(sample_shots):
    names = [s.name for s in sample_shots]
    assert len(set(names)) == len(names)
    for shot in sample_shots:
        assert re.fullmatch(r"[a-z_]+_\d{5}", shot.name) and shot.name.startswith(shot.family), shot.name


def test_waves_are_finite_bounded_and_within_duration_limits(sample_shots):
    for shot in sample_shots:
        assert shot.wave.dtype == np.float32 and shot.wave.ndim == 1
        assert np.isfinite(shot.wave).all(), shot.name
        assert MIN_SECONDS * SR - 1 <= len(shot.wave) <= MAX_SECONDS * SR, shot.name
        assert np.max(np.abs(shot.wave)) == pytest.approx(PEAK, abs=1e-4), shot.name
        assert abs(shot.wave[0]) < 1e-3 and abs(shot.wave[-1]) < 1e-3, shot.name


def test_each_sound_is_one_event_with_a_sharp_attack(sample_shots):
    for shot in sample_shots:
        level = envelope_db(shot.wave, SR)
        first_loud_ms = np.flatnonzero(level >= -6.0)[0] * 5
        assert first_loud_ms <= 30, (shot.name, first_loud_ms)  # the clap's bursts stay within 30 ms
        assert largest_rerise_db(level, skip=7) < 4.0, shot.name  # no re-attack after the first 35 ms


def test_the_envelope_check_catches_a_double_hit():
    wave = one_shot(3, FAMILIES.index("snare")).wave
    offset = int(0.3 * SR)
    double = np.zeros(len(wave) + offset)
    double[: len(wave)] += wave
    double[offset:] += wave
    assert largest_rerise_db(envelope_db(double, SR), skip=7) > 8.0


def test_negative_index_is_refused():
    with pytest.raises(ValueError):
        one_shot(0, -1)


def timbre_features(wave: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """24 mel-band levels (dB re total, floored at -60) and log2 times to -10/-20/-40 dB of the envelope."""
    size = 32768
    power = np.abs(np.fft.rfft(wave, size)) ** 2
    freqs = np.fft.rfftfreq(size, 1 / SR)
    mel = 2595 * np.log10(1 + freqs / 700)
    edges = np.linspace(2595 * np.log10(1 + 40 / 700), mel[-1], 25)
    band = np.clip(np.searchsorted(edges, mel, side="right") - 1, -1, 24)
    inside = (band >= 0) & (band < 24)
    bands = np.bincount(band[inside], weights=power[inside], minlength=24)
    levels = np.maximum(10 * np.log10(bands / bands.sum() + 1e-12), -60.0)
    frames = 20 * np.log10(dsp.frame_rms(wave, SR, 5.0) + 1e-9)
    frames -= frames.max()
    times = [np.log2(5.0 * (np.flatnonzero(frames >= -drop)[-1] + 1)) for drop in (10, 20, 40)]
    return levels, np.array(times)


def test_at_least_1000_of_the_first_1200_sounds_are_clearly_distinct():
    """Distinct: the nearest other sound differs by >= 1 in units of (3 dB RMS mel-band level difference,
    half an octave of decay time), combined as a Euclidean distance."""
    features = [timbre_features(one_shot(0, i).wave) for i in range(1200)]
    levels = np.array([f[0] for f in features])
    times = np.array([f[1] for f in features])
    squared = (levels**2).sum(1)
    spectral = np.sqrt(np.maximum(squared[:, None] + squared[None, :] - 2 * levels @ levels.T, 0) / 24)
    temporal = np.abs(times[:, None, :] - times[None, :, :]).max(-1)
    distance = np.hypot(spectral / 3.0, temporal / 0.5)
    np.fill_diagonal(distance, np.inf)
    distinct = int((distance.min(1) >= 1.0).sum())
    assert distinct >= 1000, distinct
