import numpy as np
import pytest

from audioicl.seeding import rng_for
from audioicl.synth import dsp
from audioicl.synth.ambience import FAMILIES, LEVEL_RMS, MAX_CREST, background
from audioicl.synth.percussion import one_shot

SR = 16000
SECONDS = 6.0


@pytest.fixture(scope="module")
def scenes() -> dict[str, np.ndarray]:
    return {family: background(family, rng_for(1, "ambience", family), SECONDS, SR) for family in FAMILIES}


def test_there_are_at_least_six_families_and_unknown_ones_are_refused():
    assert len(FAMILIES) >= 6 and len(set(FAMILIES)) == len(FAMILIES)
    with pytest.raises(ValueError, match="rain"):
        background("thunder", rng_for(0, "x"), 1.0)


def test_scenes_have_the_length_level_and_bounded_peaks(scenes):
    for family, wave in scenes.items():
        assert wave.dtype == np.float32 and len(wave) == int(SECONDS * SR), family
        assert np.isfinite(wave).all(), family
        assert dsp.rms(wave) == pytest.approx(LEVEL_RMS, rel=1e-3), family
        assert np.max(np.abs(wave)) <= MAX_CREST * LEVEL_RMS, family


def test_scenes_are_never_silent_and_change_over_time(scenes):
    for family, wave in scenes.items():
        windows = dsp.frame_rms(wave, SR, 500.0)
        assert windows.min() > 0.03 * LEVEL_RMS, family  # no silent half-second
        quarter = 20 * np.log10(dsp.frame_rms(wave, SR, 250.0))
        assert quarter.std() > 0.3, family  # not a stationary hiss
        halves = np.abs(np.fft.rfft(wave[: len(wave) // 2])), np.abs(np.fft.rfft(wave[len(wave) // 2 :]))
        assert not np.allclose(halves[0], halves[1], rtol=0.05), family


def test_families_differ_in_spectrum(scenes):
    centroids = {}
    for family, wave in scenes.items():
        power = np.abs(np.fft.rfft(wave)) ** 2
        centroids[family] = float((np.fft.rfftfreq(len(wave), 1 / SR) * power).sum() / power.sum())
    assert len({round(c, -1) for c in centroids.values()}) == len(FAMILIES), centroids


def test_same_generator_state_gives_the_same_scene_and_another_differs():
    first = background("birds", rng_for(5, "b"), 2.0)
    assert np.array_equal(first, background("birds", rng_for(5, "b"), 2.0))
    assert not np.array_equal(first, background("birds", rng_for(6, "b"), 2.0))


@pytest.mark.parametrize("family", FAMILIES)
def test_eight_hits_mixed_at_10_db_stay_well_above_the_loudest_background_moment(family):
    """AudioCountHard's worst case: eight long hits, 10 dB SNR over the whole clip."""
    shot = one_shot(2, 12).wave  # a long, sustained bell
    canvas = np.zeros(10 * SR, dtype=np.float32)
    starts = [k * SR * 10 // 8 for k in range(8)]
    for start in starts:
        canvas[start : start + len(shot)] += shot
    scene = background(family, rng_for(3, "mix", family), 10.0, SR)
    mixed = dsp.mix_at_snr(canvas, scene, 10.0)
    hit_levels = dsp.frame_rms(mixed, SR, 20.0)
    noise_levels = dsp.frame_rms(mixed - canvas, SR, 20.0)
    quietest_hit = min(hit_levels[start // 320 : start // 320 + 3].max() for start in starts)
    assert 20 * np.log10(quietest_hit / noise_levels.max()) > 6.0


# ------------------------------------------------------------------------------------- shared DSP helpers


def test_mix_at_snr_sets_the_whole_clip_rms_ratio():
    rng = rng_for(0, "dsp")
    signal = rng.standard_normal(SR).astype(np.float32) * 0.3
    noise = rng.standard_normal(2 * SR).astype(np.float32)
    mixed = dsp.mix_at_snr(signal, noise, 12.5)
    assert len(mixed) == SR
    assert 20 * np.log10(dsp.rms(signal) / dsp.rms(mixed - signal)) == pytest.approx(12.5, abs=1e-4)
    with pytest.raises(ValueError):
        dsp.mix_at_snr(signal, noise[:100], 10.0)
    with pytest.raises(ValueError):
        dsp.mix_at_snr(np.zeros(SR), noise, 10.0)


def test_mix_at_snr_can_refer_to_a_given_level():
    """With ``signal_rms`` the noise level depends on that level only, not on how loud the signal is."""
    rng = rng_for(1, "dsp")
    noise = rng.standard_normal(SR).astype(np.float32)
    quiet, loud = (rng.standard_normal(SR).astype(np.float32) * gain for gain in (0.01, 0.5))
    added = [dsp.mix_at_snr(s, noise, 10.0, signal_rms=0.1) - s for s in (quiet, loud)]
    assert dsp.rms(added[0]) == pytest.approx(dsp.rms(added[1]), rel=1e-5)
    assert 20 * np.log10(0.1 / dsp.rms(added[0])) == pytest.approx(10.0, abs=1e-3)


def test_fade_trim_and_normalize():
    tone = np.sin(np.arange(SR) * 0.1).astype(np.float32)
    faded = dsp.fade(tone, SR, 10.0)
    assert faded[0] == 0.0 and abs(faded[-1]) < 1e-3 and np.array_equal(faded[SR // 2], tone[SR // 2])
    padded = np.concatenate([np.zeros(800), 0.5 * tone[:1600], np.full(800, 1e-4)])
    trimmed = dsp.trim_silence(padded, SR, threshold_db=-40.0)
    assert len(trimmed) == 1600 and np.array_equal(trimmed, 0.5 * tone[:1600])
    assert dsp.trim_silence(np.zeros(SR), SR).size == 0
    assert np.max(np.abs(dsp.normalize_peak(padded, 0.7))) == pytest.approx(0.7)
    assert not dsp.normalize_peak(np.zeros(10)).any()


def test_shaped_noise_has_unit_rms_and_the_requested_tilt():
    rng = rng_for(0, "noise")
    pink = dsp.shaped_noise(rng, 4 * SR, SR, -3.0)
    assert dsp.rms(pink) == pytest.approx(1.0)
    power = np.abs(np.fft.rfft(pink)) ** 2
    freqs = np.fft.rfftfreq(len(pink), 1 / SR)
    low = power[(freqs > 250) & (freqs < 500)].mean()
    high = power[(freqs > 2000) & (freqs < 4000)].mean()
    assert 10 * np.log10(low / high) == pytest.approx(9.0, abs=1.5)  # 3 octaves at -3 dB/octave
