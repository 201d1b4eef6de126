"""Signal-processing measurements of clips that recover each task's ground truth from the audio alone.

Used by tests (every built label must be true of its clip) and by the built-in solvers, which answer from what
they hear. Nothing here reads the generator's bookkeeping: each function states what it assumes about the
clip recipe (SPEC section 2). Pure numpy.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from itertools import combinations

import numpy as np

_EPS = 1e-12

# ---------------------------------------------------------------------------------------------------------------
# shared building blocks


def _as_float(wave: np.ndarray) -> np.ndarray:
    return np.asarray(wave, dtype=np.float64).reshape(-1)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Half-open [start, end) index ranges where ``mask`` is True."""
    padded = np.concatenate(([False], np.asarray(mask, dtype=bool), [False]))
    edges = np.flatnonzero(np.diff(padded.astype(np.int8)))
    return [(int(s), int(e)) for s, e in zip(edges[::2], edges[1::2], strict=True)]


def _frame_rms(x: np.ndarray, hop: int) -> np.ndarray:
    """RMS of consecutive non-overlapping frames of ``hop`` samples (the last partial frame is dropped)."""
    n = len(x) // hop
    if n == 0:
        return np.zeros(0)
    return np.sqrt(np.mean(x[: n * hop].reshape(n, hop) ** 2, axis=1))


def _sliding_energy(x: np.ndarray, width: int) -> np.ndarray:
    """Energy of every window x[k : k + width], k = 0 .. len(x) - width."""
    c = np.concatenate(([0.0], np.cumsum(x * x)))
    return np.maximum(c[width:] - c[:-width], 0.0)


def _correlate_valid(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """sum_n t[n] x[k + n] for every k where the template fits (FFT based)."""
    n = len(x) + len(t) - 1
    size = 1 << (n - 1).bit_length()
    spec = np.fft.rfft(x, size) * np.conj(np.fft.rfft(t, size))
    return np.fft.irfft(spec, size)[: len(x) - len(t) + 1]


def normalized_cross_correlation(x: np.ndarray, template: np.ndarray) -> np.ndarray:
    """Gain-invariant similarity of ``template`` with every window of ``x`` it fits in, in [-1, 1]."""
    x, t = _as_float(x), _as_float(template)
    if len(t) == 0 or len(x) < len(t):
        return np.zeros(0)
    energy, t_energy = _sliding_energy(x, len(t)), float(t @ t)
    audible = energy > 1e-9 * t_energy  # silence would otherwise divide FFT round-off by almost nothing
    score = np.zeros(len(energy))
    score[audible] = _correlate_valid(x, t)[audible] / np.sqrt(energy[audible] * t_energy)
    return score


def _nms_peaks(score: np.ndarray, radius: int, threshold: float) -> list[int]:
    """Greedy non-maximum suppression: indices above ``threshold``, best first, none within ``radius``."""
    order = np.argsort(-score)
    order = order[score[order] >= threshold]
    taken: list[int] = []
    blocked = np.zeros(len(score), dtype=bool)
    for i in order:
        if blocked[i]:
            continue
        taken.append(int(i))
        blocked[max(0, i - radius) : i + radius + 1] = True
    return sorted(taken)


@functools.lru_cache(maxsize=16)
def _mel_filterbank(sr: int, n_fft: int, n_mels: int) -> np.ndarray:
    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + np.asarray(f) / 700.0)

    def mel_to_hz(m):
        return 700.0 * (10.0 ** (np.asarray(m) / 2595.0) - 1.0)

    edges = mel_to_hz(np.linspace(hz_to_mel(40.0), hz_to_mel(sr / 2 * 0.95), n_mels + 2))
    freqs = np.linspace(0, sr / 2, n_fft // 2 + 1)
    bank = np.zeros((n_mels, len(freqs)))
    for i in range(n_mels):
        lo, mid, hi = edges[i], edges[i + 1], edges[i + 2]
        rising = (freqs - lo) / max(mid - lo, _EPS)
        falling = (hi - freqs) / max(hi - mid, _EPS)
        bank[i] = np.clip(np.minimum(rising, falling), 0.0, None)
    return bank


def log_mel(wave: np.ndarray, sr: int, n_mels: int = 40, win_s: float = 0.025, hop_s: float = 0.010) -> np.ndarray:
    """Log-mel spectrogram, shape (frames, n_mels); a clip shorter than one window gives one zero-padded frame."""
    x = _as_float(wave)
    win, hop = int(round(win_s * sr)), int(round(hop_s * sr))
    n_fft = 1 << (win - 1).bit_length()
    if len(x) < win:
        x = np.pad(x, (0, win - len(x)))
    n_frames = 1 + (len(x) - win) // hop
    idx = np.arange(win)[None, :] + hop * np.arange(n_frames)[:, None]
    frames = x[idx] * np.hanning(win)[None, :]
    power = np.abs(np.fft.rfft(frames, n_fft, axis=1)) ** 2
    return np.log(power @ _mel_filterbank(sr, n_fft, n_mels).T + 1e-10)


# ---------------------------------------------------------------------------------------------------------------
# AudioCount / AudioCountHard


@dataclass(frozen=True)
class EventTemplate:
    """The reference event that counting matches against: where it starts and how long it stays loud."""

    onset: int  # sample index of the event's attack
    length: int  # samples from the attack until the level stays 30 dB under the event peak


_COUNT_HOP_S = 0.005
_COUNT_PRE_S = 0.020
_COUNT_THRESHOLD_CLEAN = 0.9
_COUNT_THRESHOLD_NOISY = 0.45


def _strongest_event(env: np.ndarray, hop: int, floor: float) -> EventTemplate:
    """Attack and extent of the loudest event in a frame envelope.

    The attack is the last frame before the peak under 10% of the peak level (or under twice the floor); the
    event ends where the level falls under max(peak - 30 dB, 3 x floor) and then stays there for 30 ms or jumps
    back up by 10 dB (the start of another event placed right behind it).
    """
    peak_i = int(np.argmax(env))
    peak = env[peak_i]
    on_level = max(0.1 * peak, 2.0 * floor)
    start = peak_i
    while start > 0 and env[start - 1] >= on_level:
        start -= 1
    off_level = max(peak * 10 ** (-30 / 20), 3.0 * floor)
    hold = int(round(0.030 / _COUNT_HOP_S))
    end = len(env)
    for i in range(peak_i, len(env)):
        if env[i] >= off_level:
            continue
        ahead = env[i : i + hold]
        loud = np.flatnonzero(ahead >= off_level)
        if loud.size == 0 or ahead[loud[0]] >= 10 ** (10 / 20) * max(ahead[: loud[0]].min(), _EPS):
            end = i
            break
    return EventTemplate(onset=start * hop, length=max(hop, (end - start) * hop))


def event_onsets(wave: np.ndarray, sr: int, background: bool = False) -> list[int]:
    """Sample positions where copies of one sound start (AudioCount canvases).

    Assumes the clip holds r copies of the same one-shot (any gain each), non-overlapping, on silence
    (``background=False``) or on a steady environmental background (``background=True``). The loudest event is
    the template: its attack together with the 20 ms before it is slid over the clip by normalised
    cross-correlation; copies are the correlation peaks, at least one event length apart. Including the quiet
    lead-in keeps points inside a long ringing tail (bells, open hats) from matching the attack.
    """
    x = _as_float(wave)
    hop = max(1, int(round(_COUNT_HOP_S * sr)))
    env = _frame_rms(x, hop)
    if env.size == 0 or env.max() <= 0:
        return []
    floor = float(np.median(env)) if background else 0.0
    event = _strongest_event(env, hop, floor)
    pre = int(round(_COUNT_PRE_S * sr))
    post = int(np.clip(event.length, 0.020 * sr, 0.250 * sr))
    start = max(0, event.onset - pre)
    template = x[start : event.onset + post]
    lead = event.onset - start
    # zero padding lets a copy at the very start or end of the canvas line up with the whole template
    padded = np.concatenate((np.zeros(lead), x, np.zeros(len(template) - lead)))
    score = normalized_cross_correlation(padded, template)
    radius = max(int(0.9 * event.length), int(0.010 * sr))
    threshold = _COUNT_THRESHOLD_NOISY if background else _COUNT_THRESHOLD_CLEAN
    return _nms_peaks(score, radius, threshold)


def count_events(wave: np.ndarray, sr: int, background: bool = False) -> int:
    """How many times the one sound of an AudioCount clip occurs (see ``event_onsets`` for the assumptions)."""
    return len(event_onsets(wave, sr, background=background))


# ---------------------------------------------------------------------------------------------------------------
# AudioLength / AudioLengthHard


def duration_seconds(wave: np.ndarray, sr: int) -> float:
    """Total duration (AudioLength's label is this, rounded)."""
    return len(wave) / sr


def digital_silence(wave: np.ndarray, sr: int, min_s: float = 0.05) -> list[tuple[int, int]]:
    """Runs of exact zeros at least ``min_s`` long, as [start, end) sample ranges.

    AudioLength clips carry a white-noise floor (RMS 0.02, about 650 PCM16 steps) everywhere except the silence
    block, which is exact digital zeros; a run of zeros longer than a few samples never happens in the floor.
    """
    x = np.asarray(wave).reshape(-1)
    min_len = max(1, int(round(min_s * sr)))
    return [(s, e) for s, e in _runs(x == 0) if e - s >= min_len]


def non_silent_seconds(wave: np.ndarray, sr: int) -> float:
    """Seconds that are not digital silence (AudioLengthHard's label is this, rounded); all-silent gives 0."""
    silent = sum(e - s for s, e in digital_silence(wave, sr))
    return (len(wave) - silent) / sr


# ---------------------------------------------------------------------------------------------------------------
# MorseCode

_MORSE_TO_LETTER_CACHE: dict[str, str] = {}


def _morse_table() -> dict[str, str]:
    if not _MORSE_TO_LETTER_CACHE:
        from .synth.morse import MORSE_CODE

        _MORSE_TO_LETTER_CACHE.update({code: ch for ch, code in MORSE_CODE.items()})
    return _MORSE_TO_LETTER_CACHE


def _default_unit_seconds() -> float:
    from .synth.morse import DEFAULT_WPM, unit_seconds

    return unit_seconds(DEFAULT_WPM)


@dataclass(frozen=True)
class KeyedRuns:
    """Tone-on and tone-off durations (seconds) of a keyed clip, in order; off runs exclude lead and tail."""

    on: list[float]
    off: list[float]


def keyed_runs(wave: np.ndarray, sr: int) -> KeyedRuns:
    """On/off run lengths of a keyed tone: 2 ms RMS envelope, smoothed over 6 ms, thresholded at half its peak."""
    x = _as_float(wave)
    hop = max(1, int(round(0.002 * sr)))
    env = _frame_rms(x, hop)
    if env.size == 0 or env.max() <= 0:
        return KeyedRuns([], [])
    env = np.convolve(env, np.ones(3) / 3, mode="same")
    on_runs = _runs(env >= 0.5 * env.max())
    on = [(e - s) * hop / sr for s, e in on_runs]
    off = [(s2 - e1) * hop / sr for (_, e1), (s2, _) in zip(on_runs, on_runs[1:], strict=False)]
    return KeyedRuns(on, off)


def estimate_unit(runs: KeyedRuns) -> float | None:
    """The Morse unit (seconds) from the run lengths, or None when they cannot tell (a single mark).

    Dots, intra-letter gaps are 1 unit, dashes and letter gaps 3, word gaps 7. The shortest run is 1 unit unless
    every run is of one class (all marks dashes and no gap at all): then the clip does not say.
    """
    durations = np.array(runs.on + runs.off)
    if durations.size == 0:
        return None
    shortest = durations.min()
    ones = durations[durations < 2.0 * shortest]
    if len(runs.off) == 0 and len(set(np.round(np.array(runs.on) / shortest))) == 1:
        return None
    return float(np.median(ones))


def decode_morse(wave: np.ndarray, sr: int, unit_s: float | None = None) -> str:
    """The lowercase text keyed in a Morse clip ('?' for a code that is not a letter or digit).

    Timing follows ITU (dot 1 unit, dash 3, gaps 1/3/7); the unit comes from the clip itself, so any speed
    decodes. ``unit_s`` is used only when the clip cannot tell (a lone dot or dash, as in the alphabet bank's E
    and T); it defaults to the generator's default speed.
    """
    runs = keyed_runs(wave, sr)
    if not runs.on:
        return ""
    unit = estimate_unit(runs) or unit_s or _default_unit_seconds()
    table = _morse_table()
    words: list[str] = []
    letters: list[str] = []
    code = ""
    for i, mark in enumerate(runs.on):
        code += "." if mark < 2.0 * unit else "-"
        gap = runs.off[i] if i < len(runs.off) else None
        if gap is None or gap >= 2.0 * unit:
            letters.append(table.get(code, "?"))
            code = ""
        if gap is None or gap >= 5.0 * unit:
            words.append("".join(letters))
            letters = []
    return " ".join(words)


# ---------------------------------------------------------------------------------------------------------------
# AudioOperator: segments and digits


def _active_mask(x: np.ndarray, threshold_db: float) -> np.ndarray:
    peak = np.abs(x).max() if x.size else 0.0
    if peak <= 0:
        return np.zeros(len(x), dtype=bool)
    return np.abs(x) > peak * 10 ** (threshold_db / 20)


def _gaps(wave: np.ndarray, threshold_db: float) -> list[tuple[int, int]]:
    """Quiet runs strictly between the first and last active sample."""
    x = _as_float(wave)
    quiet = _runs(~_active_mask(x, threshold_db))
    return [(s, e) for s, e in quiet if s > 0 and e < len(x)]


def split_segments(
    wave: np.ndarray, sr: int, min_gap_s: float = 0.02, threshold_db: float = -60.0
) -> list[tuple[int, int]]:
    """Non-silent [start, end) sample ranges separated by quiet gaps of at least ``min_gap_s``.

    Quiet means under ``threshold_db`` relative to the clip peak. A word with a stop closure (the pause inside
    "eight" or "six") can split in two here; when the number of parts is known, use ``split_into``.
    """
    x = _as_float(wave)
    active = np.flatnonzero(_active_mask(x, threshold_db))
    if active.size == 0:
        return []
    min_gap = int(round(min_gap_s * sr))
    cuts = [(s, e) for s, e in _gaps(x, threshold_db) if e - s >= min_gap]
    bounds = [int(active[0])] + [b for gap in cuts for b in gap] + [int(active[-1]) + 1]
    return list(zip(bounds[::2], bounds[1::2], strict=True))


def split_into(wave: np.ndarray, sr: int, n_parts: int, threshold_db: float = -60.0) -> list[tuple[int, int]]:
    """Exactly ``n_parts`` segments, cut at the ``n_parts - 1`` longest quiet gaps (fewer gaps: fewer parts).

    AudioOperator clips are digit, 25 ms of zeros, filler, 25 ms of zeros, digit (and two more parts for the
    Hard variant). Gaps that are exact digital zeros are preferred over merely quiet ones, since the recipe's
    gaps are zeros and a pause inside a spoken word is usually not.
    """
    x = _as_float(wave)
    active = np.flatnonzero(_active_mask(x, threshold_db))
    if active.size == 0:
        return []
    gaps = _gaps(x, threshold_db)

    def rank(gap: tuple[int, int]) -> tuple[int, int]:
        s, e = gap
        longest_zero = max((b - a for a, b in _runs(x[s:e] == 0)), default=0)
        return (longest_zero, e - s)

    chosen = sorted(sorted(gaps, key=rank, reverse=True)[: max(0, n_parts - 1)])
    bounds = [int(active[0])] + [b for gap in chosen for b in gap] + [int(active[-1]) + 1]
    return list(zip(bounds[::2], bounds[1::2], strict=True))
