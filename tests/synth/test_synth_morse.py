import numpy as np
import pytest

from audioicl.synth.morse import (
    DEFAULT_TONE_HZ,
    DEFAULT_WPM,
    MORSE_CODE,
    WORDS_5,
    MorseStyle,
    key_text,
    unit_samples,
    unit_seconds,
)

SR = 16000


def runs(on: np.ndarray) -> list[tuple[bool, int]]:
    """Run-length encoding of a boolean array."""
    edges = np.flatnonzero(np.diff(on.astype(np.int8))) + 1
    bounds = np.concatenate([[0], edges, [len(on)]])
    return [(bool(on[a]), int(b - a)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def test_code_table_covers_letters_and_digits_with_unique_codes():
    assert set(MORSE_CODE) == set("abcdefghijklmnopqrstuvwxyz0123456789")
    assert len(set(MORSE_CODE.values())) == len(MORSE_CODE)
    assert MORSE_CODE["s"] == "..." and MORSE_CODE["o"] == "---" and MORSE_CODE["0"] == "-----"


def test_unit_is_itu_paris_timing():
    assert unit_seconds(20) == pytest.approx(0.06)
    assert unit_samples(DEFAULT_WPM, SR) == round(1.2 / DEFAULT_WPM * SR)
    assert 10 <= DEFAULT_WPM <= 30 and 400 <= DEFAULT_TONE_HZ <= 1000


def test_word_is_keyed_with_exact_itu_element_and_gap_lengths():
    unit = unit_samples(DEFAULT_WPM, SR)
    wave = key_text("sos", sr=SR, lead_s=0.1)
    segments = runs(wave != 0.0)
    lead = int(0.1 * SR)
    dot, dash, inner, letter = 1 * unit, 3 * unit, 1 * unit, 3 * unit
    expected = [(False, lead)]
    for code in ("...", "---", "..."):
        for i, symbol in enumerate(code):
            if i:
                expected.append((False, inner))
            expected.append((True, dot if symbol == "." else dash))
        expected.append((False, letter))
    expected[-1] = (False, lead)
    assert segments == expected


def test_words_are_separated_by_seven_units():
    unit = unit_samples(DEFAULT_WPM, SR)
    segments = runs(key_text("e e", sr=SR) != 0.0)
    assert segments[1:4] == [(True, unit), (False, 7 * unit), (True, unit)]
    # 'paris ' is the 50-unit standard word: 43 units of 'paris' plus the 7-unit word gap
    assert len(key_text("paris", sr=SR, lead_s=0.0)) == 43 * unit


def test_elements_have_raised_cosine_ramps_and_the_tone_frequency():
    style = MorseStyle(wpm=15, tone_hz=700.0, ramp_ms=5.0)
    wave = key_text("t", style, sr=SR, lead_s=0.0)  # one dash
    ramp = int(0.005 * SR)
    assert np.max(np.abs(wave[:10])) < 0.05 * np.max(np.abs(wave))  # starts from near zero, no click
    assert np.max(np.abs(wave[-10:])) < 0.05 * np.max(np.abs(wave))
    assert np.max(np.abs(wave[ramp // 2 - 20 : ramp // 2 + 20])) < 0.8 * np.max(np.abs(wave))
    spectrum = np.abs(np.fft.rfft(wave))
    assert np.fft.rfftfreq(len(wave), 1 / SR)[np.argmax(spectrum)] == pytest.approx(700.0, abs=3.0)
    assert np.max(np.abs(wave)) <= 1.0 and wave.dtype == np.float32


def test_case_is_ignored_and_unknown_characters_are_refused():
    assert np.array_equal(key_text("A"), key_text("a"))
    with pytest.raises(ValueError, match="'#'"):
        key_text("ab#")
    with pytest.raises(ValueError):
        key_text("   ")


def test_word_list_is_large_clean_sorted_and_unique():
    assert len(WORDS_5) >= 500
    assert list(WORDS_5) == sorted(set(WORDS_5))
    assert all(len(w) == 5 and w.isascii() and w.isalpha() and w.islower() for w in WORDS_5)
    assert all(key_text(w).size for w in WORDS_5[:5])
