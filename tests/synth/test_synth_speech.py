import multiprocessing

import numpy as np
import pytest

from audioicl import AudioICLError
from audioicl.synth import speech
from audioicl.synth.dsp import frame_rms, rms
from audioicl.synth.speech import VOICES, Voice, speak, speak_digit

SR = 16_000


def _fresh(text: str, voice: Voice) -> np.ndarray:
    """Synthesise without the per-process cache, to prove the engine itself is deterministic."""
    wave, _ = speech._ENGINE.synthesize(text, voice)
    return wave


def _digit_in_child(d: int) -> bytes:
    return speak_digit(d, VOICES[d % len(VOICES)], SR).tobytes()


def test_synthesis_is_deterministic_whatever_was_spoken_before():
    # espeak-ng's pitch flutter, roughness and breath noise keep state between utterances unless disabled.
    for voice in VOICES:
        first = _fresh("seven", voice)
        _fresh("nine hundred and two", VOICES[(VOICES.index(voice) + 1) % len(VOICES)])
        _fresh("3", voice)
        assert first.size > 0
        np.testing.assert_array_equal(first, _fresh("seven", voice))


def test_all_digits_in_all_voices_are_trimmed_and_plausibly_long():
    for voice in VOICES:
        for d in range(10):
            wave = speak_digit(d, voice, SR)
            assert wave.dtype == np.float32 and wave.ndim == 1
            assert 0.15 <= len(wave) / SR <= 1.0, (voice, d, len(wave) / SR)
            assert np.all(np.isfinite(wave)) and np.max(np.abs(wave)) <= 1.0
            loudest = frame_rms(wave, SR, frame_ms=10.0).max()
            # Trimmed: the first and last 10 ms hold sound (within 50 dB of the loudest 10 ms); espeak's
            # own leading and trailing silence is digital zero.
            edge = int(0.010 * SR)
            assert rms(wave[:edge]) > loudest * 10 ** (-50 / 20), (voice, d)
            assert rms(wave[-edge:]) > loudest * 10 ** (-50 / 20), (voice, d)
            # 3 ms fades: the very first and last samples are (near) zero.
            assert abs(wave[0]) < 1e-3 and abs(wave[-1]) < 1e-3


def test_voices_are_distinct():
    assert len(set(VOICES)) == len(VOICES) >= 6
    waves = [speak("seven", voice, SR) for voice in VOICES]
    spectra = []
    for wave in waves:
        spectrum = np.abs(np.fft.rfft(wave, n=SR))[:4000]
        spectra.append(spectrum / np.linalg.norm(spectrum))
    for i in range(len(VOICES)):
        for j in range(i + 1, len(VOICES)):
            similarity = float(spectra[i] @ spectra[j])
            assert similarity < 0.9, (VOICES[i], VOICES[j], similarity)


def test_speak_resamples_and_returns_read_only_cached_arrays():
    wave16 = speak("three", VOICES[0], SR)
    wave8 = speak("three", VOICES[0], 8000)
    assert abs(len(wave16) / SR - len(wave8) / 8000) < 0.01
    assert speak("three", VOICES[0], SR) is wave16
    with pytest.raises(ValueError):
        wave16[0] = 1.0
    assert rms(wave16) > 0.01


def test_bad_digit_and_unknown_voice_are_clear_errors():
    with pytest.raises(AudioICLError, match="digit"):
        speak_digit(12, VOICES[0], SR)
    with pytest.raises(AudioICLError, match="no voice"):
        speak("one", Voice("xx-nonexistent", 160, 50), SR)


def test_forked_workers_speak_the_same_digits():
    expected = [_digit_in_child(d) for d in range(4)]
    with multiprocessing.get_context("fork").Pool(2) as pool:
        assert pool.map(_digit_in_child, range(4)) == expected


_ORDERED_DIGITS = """
import hashlib, json, random, sys
from audioicl.synth.speech import VOICES, speak_digit
order = [(d, i) for d in range(10) for i in range(len(VOICES))]
random.Random(int(sys.argv[1])).shuffle(order)
print(json.dumps({f"{d}/{i}": hashlib.sha256(speak_digit(d, VOICES[i]).tobytes()).hexdigest() for d, i in order}))
"""


def test_every_voice_speaks_each_digit_the_same_in_any_order():
    """Regression: some espeak-ng voices (the Scottish accent, the klatt synthesizer) carried state from one
    utterance to the next, so a build's digits depended on the order a worker spoke them in."""
    import json
    import subprocess
    import sys

    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", _ORDERED_DIGITS, str(seed)],
                capture_output=True,
                text=True,
                check=True,
                timeout=120,
            ).stdout
        )
        for seed in (1, 2, 3)
    ]
    assert len(runs[0]) == 10 * len(VOICES)
    assert runs[0] == runs[1] == runs[2]
