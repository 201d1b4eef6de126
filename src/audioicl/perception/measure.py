"""Signal-processing measurements of clips that recover each task's ground truth from the audio alone.

Used by tests (every built label must be true of its clip) and by the built-in solvers, which answer from what
they hear. Nothing here reads the generator's bookkeeping: each function states what it assumes about the
clip recipe (SPEC section 2). Pure numpy.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

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


def log_mel(
    wave: np.ndarray, sr: int, n_mels: int = 40, win_s: float = 0.025, hop_s: float = 0.010
) -> np.ndarray:
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
_COUNT_THRESHOLD_NOISY = 0.88


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


def _copies_of(x: np.ndarray, event: EventTemplate, sr: int, threshold: float) -> list[int]:
    """Onsets of every copy of ``event`` in ``x``: peaks of the normalised cross-correlation of its first
    20-250 ms (``post``) with the quiet stretch before it (``pre``, half as long, 20 ms at least).

    A point inside the event's own ringing tail matches the attack part but not the quiet part, which caps
    its score near 1/sqrt(1.5) = 0.82; peaks closer than ``pre`` (the side lobes of one match) are merged.
    """
    post = int(np.clip(event.length, 0.020 * sr, 0.250 * sr))
    pre = max(int(round(_COUNT_PRE_S * sr)), post // 2)
    start = max(0, event.onset - pre)
    template = x[start : event.onset + post]
    lead = event.onset - start
    pad = len(
        template
    )  # zero padding lets a copy at either end of the canvas line up with the whole template
    score = normalized_cross_correlation(np.pad(x, pad), template)
    radius = max(min(int(0.9 * event.length), pre), int(0.010 * sr))
    return [max(0, k - pad + lead) for k in _nms_peaks(score, radius, threshold)]


def event_onsets(wave: np.ndarray, sr: int, background: bool = False) -> list[int]:
    """Sample positions where copies of one sound start (AudioCount canvases).

    Assumes the clip holds r copies of the same one-shot (any gain each), non-overlapping, on silence
    (``background=False``) or on an environmental background (``background=True``). The loudest event is the
    template: its attack together with the 20 ms before it is slid over the clip by normalised
    cross-correlation; copies are the correlation peaks, at least one event length apart. Including the quiet
    lead-in keeps points inside a long ringing tail (bells, open hats) from matching the attack. With a
    background, the known failure is a background event (an animal call) louder than the sound: it is then
    the template and the count comes out 1. Trying other templates made matters worse (backgrounds repeat
    croaks and chirps well enough to pass for copies).
    """
    x = _as_float(wave)
    hop = max(1, int(round(_COUNT_HOP_S * sr)))
    env = _frame_rms(x, hop)
    if env.size == 0 or env.max() <= 0:
        return []
    floor = float(np.median(env)) if background else 0.0
    threshold = _COUNT_THRESHOLD_NOISY if background else _COUNT_THRESHOLD_CLEAN
    return _copies_of(x, _strongest_event(env, hop, floor), sr, threshold)


def count_events(wave: np.ndarray, sr: int, background: bool = False) -> int:
    """How many times the one sound of an AudioCount clip occurs (see ``event_onsets`` for the assumptions)."""
    return len(event_onsets(wave, sr, background=background))


# ---------------------------------------------------------------------------------------------------------------
# AudioLength / AudioLengthHard


def duration_seconds(wave: np.ndarray, sr: int) -> float:
    """Total duration (AudioLength's label is this, rounded)."""
    return len(wave) / sr


SILENCE_LEVEL = 1.5 / 32767  # under two 16-bit PCM steps: digital silence, or an all-silent clip's floor


def digital_silence(wave: np.ndarray, sr: int, min_s: float = 0.05) -> list[tuple[int, int]]:
    """Runs of samples within one 16-bit PCM step of zero (``SILENCE_LEVEL``) at least ``min_s`` long, as
    [start, end) sample ranges.

    AudioLength clips carry a white-noise floor (RMS 0.02, about 650 PCM16 steps) everywhere except the silence
    block, which is exact digital zeros (an all-silent clip: a floor of -1, 0, +1 steps, ``tasks.length``); a
    run of such samples longer than a few never happens in the noise floor.
    """
    x = np.asarray(wave).reshape(-1)
    min_len = max(1, int(round(min_s * sr)))
    return [(s, e) for s, e in _runs(np.abs(x) < SILENCE_LEVEL) if e - s >= min_len]


def non_silent_seconds(wave: np.ndarray, sr: int) -> float:
    """Seconds that are not digital silence (AudioLengthHard's label is this, rounded); all-silent gives 0."""
    silent = sum(e - s for s, e in digital_silence(wave, sr))
    return (len(wave) - silent) / sr


# ---------------------------------------------------------------------------------------------------------------
# MorseCode


@functools.cache
def _morse_table() -> dict[str, str]:
    """Dot-dash code -> character (ITU, as keyed by ``synth.morse``)."""
    from audioicl.synth.morse import MORSE_CODE

    return {code: ch for ch, code in MORSE_CODE.items()}


def _default_unit_seconds() -> float:
    from audioicl.synth.morse import DEFAULT_WPM, unit_seconds

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


def keyed_codes(wave: np.ndarray, sr: int, unit_s: float | None = None) -> list[list[str]]:
    """The dot-dash code of every letter of a keyed clip, grouped by word (e.g. ``[[".--.", ".-.."]]``).

    Timing follows ITU (dot 1 unit, dash 3, gaps 1/3/7); the unit comes from the clip itself, so any speed
    reads. ``unit_s`` is used only when the clip cannot tell (a lone dot or dash, as in the alphabet bank's E
    and T); it defaults to the generator's default speed. No code table is involved: a solver that has to
    learn the table from examples starts from these.
    """
    runs = keyed_runs(wave, sr)
    if not runs.on:
        return []
    unit = estimate_unit(runs) or unit_s or _default_unit_seconds()
    words: list[list[str]] = []
    letters: list[str] = []
    code = ""
    for i, mark in enumerate(runs.on):
        code += "." if mark < 2.0 * unit else "-"
        gap = runs.off[i] if i < len(runs.off) else None
        if gap is None or gap >= 2.0 * unit:
            letters.append(code)
            code = ""
        if gap is None or gap >= 5.0 * unit:
            words.append(letters)
            letters = []
    return words


def decode_morse(wave: np.ndarray, sr: int, unit_s: float | None = None) -> str:
    """The lowercase text keyed in a Morse clip ('?' for a code that is not a letter or digit), read with the
    ITU table from ``keyed_codes`` (same timing rules and ``unit_s``)."""
    return itu_letters(keyed_codes(wave, sr, unit_s))


def itu_letters(codes: list[list[str]]) -> str:
    """Dot-dash codes grouped by word read with the ITU table ('?' for an unknown code), words apart by a space."""
    table = _morse_table()
    return " ".join("".join(table.get(code, "?") for code in word) for word in codes)


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


def split_into(
    wave: np.ndarray, sr: int, n_parts: int, gap_s: float | None = None, threshold_db: float = -60.0
) -> list[tuple[int, int]]:
    """Exactly ``n_parts`` segments, cut at ``n_parts - 1`` of the quiet gaps (fewer gaps: fewer parts).

    AudioOperator clips are digit, 25 ms of exact zeros, filler, 25 ms of zeros, digit (two more parts in the
    Hard variant), and a spoken 6 or 8 holds a stop closure that PCM16 turns into 35-45 ms of zeros too. With
    ``gap_s`` (the recipe's gap) the cuts are the gaps whose run of exact zeros is closest to that length;
    without it, the gaps with the longest run of zeros (then the longest quiet stretch).
    """
    x = _as_float(wave)
    active = np.flatnonzero(_active_mask(x, threshold_db))
    if active.size == 0:
        return []
    gaps = _gaps(x, threshold_db)
    zeros = {gap: max((e - s for s, e in _runs(x[gap[0] : gap[1]] == 0)), default=0) for gap in gaps}
    if gap_s is None:
        ranked = sorted(gaps, key=lambda g: (zeros[g], g[1] - g[0]), reverse=True)
    else:
        target = gap_s * sr
        ranked = sorted(gaps, key=lambda g: (zeros[g] == 0, abs(zeros[g] - target), -(g[1] - g[0])))
    chosen = sorted(ranked[: max(0, n_parts - 1)])
    bounds = [int(active[0])] + [b for gap in chosen for b in gap] + [int(active[-1]) + 1]
    return list(zip(bounds[::2], bounds[1::2], strict=True))


def _speech_features(wave: np.ndarray, sr: int) -> np.ndarray:
    """Log-mel frames of the part above -40 dB, floored 60 dB under the loudest cell, the utterance mean removed
    per band (so loudness, leading/trailing silence and channel do not matter)."""
    x = _as_float(wave)
    active = np.flatnonzero(_active_mask(x, -40.0))
    if active.size:
        x = x[active[0] : active[-1] + 1]
    feats = log_mel(x, sr, n_mels=32)
    feats = np.maximum(feats, feats.max() - np.log(10.0**6))
    return feats - feats.mean(axis=0, keepdims=True)


@dataclass(frozen=True)
class _DigitTemplates:
    digits: np.ndarray  # (T,) the digit each template says
    frames: np.ndarray  # (T, M, F) features, zero padded to the longest
    lengths: np.ndarray  # (T,) frames used in each


@functools.lru_cache(maxsize=4)
def _digit_templates(sr: int) -> _DigitTemplates:
    """Every digit 0-9 in every voice of ``synth.speech.VOICES`` (rendered once per process)."""
    from audioicl.synth.speech import VOICES, speak_digit

    feats, digits = [], []
    for voice in VOICES:
        for d in range(10):
            feats.append(_speech_features(speak_digit(d, voice, sr), sr))
            digits.append(d)
    longest = max(len(f) for f in feats)
    frames = np.zeros((len(feats), longest, feats[0].shape[1]))
    for i, f in enumerate(feats):
        frames[i, : len(f)] = f
    return _DigitTemplates(np.array(digits), frames, np.array([len(f) for f in feats]))


def _dtw_costs(query: np.ndarray, frames: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Length-normalised DTW cost of ``query`` (n, F) against each padded template (T, M, F).

    Steps (1,1), (1,2), (2,1) keep the warp between half and double speed, and need only earlier rows, so a
    whole row of every template is computed at once.
    """
    n = len(query)
    cost = np.sqrt(((frames[:, None, :, :] - query[None, :, None, :]) ** 2).sum(axis=-1))  # (T, n, M)
    total = np.full((frames.shape[0], n + 2, frames.shape[1] + 2), np.inf)  # two rows/cols of inf padding
    total[:, 2, 2] = cost[:, 0, 0]
    for i in range(1, n):
        prev, prev2 = total[:, i + 1], total[:, i]
        best = np.minimum(np.minimum(prev[:, 1:-1], prev[:, :-2]), prev2[:, 1:-1])
        total[:, i + 2, 2:] = cost[:, i] + best
    ends = total[np.arange(len(lengths)), n + 1, lengths + 1]
    return ends / (n + lengths)


def digit_scores(segment: np.ndarray, sr: int) -> np.ndarray:
    """Best DTW cost per digit 0-9 (lower is closer) against the espeak-ng renderings in every voice."""
    templates = _digit_templates(sr)
    costs = _dtw_costs(_speech_features(segment, sr), templates.frames, templates.lengths)
    return np.array([costs[templates.digits == d].min() for d in range(10)])


def recognize_digit(segment: np.ndarray, sr: int, digits: tuple[int, ...] = tuple(range(10))) -> int:
    """The spoken digit in ``segment`` (one word, trimmed or not), chosen among ``digits``.

    Template matching: log-mel frames + DTW against every digit in every voice of ``synth.speech.VOICES``;
    exact on the generator's own voices, approximate on other speech.
    """
    scores = digit_scores(segment, sr)
    return min(digits, key=lambda d: scores[d])


@dataclass(frozen=True)
class SpokenExpression:
    """An operator clip cut into digit, sound, digit (, sound, digit): the digits heard and the
    [start, end) sample range of each sound between them."""

    digits: tuple[int, ...]
    fillers: tuple[tuple[int, int], ...]


def spoken_expression(wave: np.ndarray, sr: int, n_digits: int, gap_s: float) -> SpokenExpression:
    """Cut at the quiet gaps closest to ``gap_s`` of zeros (``split_into``) and recognise the digits 1-9."""
    parts = split_into(wave, sr, 2 * n_digits - 1, gap_s=gap_s)
    digits = tuple(recognize_digit(wave[s:e], sr, tuple(range(1, 10))) for s, e in parts[::2])
    return SpokenExpression(digits, tuple(parts[1::2]))


# ---------------------------------------------------------------------------------------------------------------
# AudioRemap and filler identity: which sound is this?


def peak_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Highest normalised cross-correlation of two sounds over every lag, in [0, 1] (1: one is a gain-scaled,
    shifted or silence-trimmed copy of the other)."""
    a, b = _as_float(a), _as_float(b)
    norm = np.sqrt(float(a @ a) * float(b @ b))
    if norm <= 0:
        return 0.0
    size = 1 << (len(a) + len(b) - 2).bit_length()
    full = np.fft.irfft(np.fft.rfft(a, size) * np.conj(np.fft.rfft(b, size)), size)
    return float(np.clip(full.max() / norm, 0.0, 1.0))


def sound_distance(a: np.ndarray, b: np.ndarray, sr: int) -> float:
    """0 for the same sound (at any gain, trimmed or shifted), towards 1 for unrelated sounds.

    Waveform based (1 - peak normalised cross-correlation): the tasks reuse exact copies of one-shots, and a
    waveform match separates two sounds of one family that a spectral summary would confuse. ``sr`` is part
    of the signature for symmetry with the other measures.
    """
    del sr
    return 1.0 - peak_correlation(a, b)


def same_sound(a: np.ndarray, b: np.ndarray, sr: int, threshold: float = 0.9) -> bool:
    """Whether two clips are copies of one sound (e.g. the filler of two AudioOperator clips)."""
    return sound_distance(a, b, sr) <= 1.0 - threshold


def nearest_reference(part: np.ndarray, references: dict[str, np.ndarray], sr: int) -> str:
    """Name of the reference closest to ``part`` by ``sound_distance``."""
    return min(references, key=lambda name: sound_distance(part, references[name], sr))


def _sequential_parts(mix: np.ndarray, references: dict[str, np.ndarray], sr: int, n: int) -> list[str]:
    """For sounds placed back to back without a gap: from each part's onset, the reference whose beginning
    matches the mix best (prefix correlation, +-10 ms lag) is the part; its length says where the next begins."""
    x = _as_float(mix)
    active = _active_mask(x, -60.0)
    pos = int(np.argmax(active))
    lag = int(0.010 * sr)
    names: list[str] = []
    for _ in range(n):
        best, best_score, best_at = next(iter(references)), -1.0, pos
        for name, ref in references.items():
            r = _as_float(ref)
            m = min(len(r), len(x) - pos)
            if m <= 0:
                continue
            window = x[max(0, pos - lag) : pos + m + lag]
            score = normalized_cross_correlation(window, r[:m])
            if score.size and score.max() > best_score:
                best, best_score = name, float(score.max())
                best_at = max(0, pos - lag) + int(np.argmax(score))
        names.append(best)
        pos = best_at + len(references[best])
        next_sound = np.flatnonzero(active[pos:])
        pos = pos + int(next_sound[0]) if next_sound.size else pos
    return names


def match_sequence(mix: np.ndarray, references: dict[str, np.ndarray], sr: int, n: int = 3) -> str:
    """Which reference each of the ``n`` sounds of an AudioRemap MIX is, e.g. "ABA" for keys "A" and "B".

    Assumes MIX is ``n`` copies of the references, each possibly trimmed or rescaled, in order: separated by
    quiet gaps (then each part is matched to its nearest reference), or back to back (then parts are found
    one after the other by aligning each reference's beginning).
    """
    x = _as_float(mix)
    parts = [x[s:e] for s, e in split_into(x, sr, n)]
    if len(parts) == n:
        names = [nearest_reference(part, references, sr) for part in parts]
        # a pause inside one sound can pass for a gap between two: then some part matches nothing well
        if all(sound_distance(p, references[name], sr) < 0.2 for p, name in zip(parts, names, strict=True)):
            return "".join(names)
    return "".join(_sequential_parts(x, references, sr, n))


# ---------------------------------------------------------------------------------------------------------------
# AnomalyDetect: a fixed-length description of a clip


def _kurtosis(x: np.ndarray) -> float:
    centred = x - x.mean()
    var = float(np.mean(centred**2))
    return float(np.mean(centred**4) / (var * var)) if var > 0 else 0.0


def clip_features(wave: np.ndarray, sr: int) -> np.ndarray:
    """A fixed-length descriptor of a clip for nearest-neighbour comparison (CLIP_FEATURE_SIZE values).

    Mean and spread of 32 log-mel bands (level removed from the means), level and its spread, spectral
    centroid, bandwidth, flatness and their spreads, amplitude modulation energy in four rate bands (0.5-2,
    2-8, 8-20, 20-50 Hz) of the frame envelope, and impulsiveness (waveform kurtosis, crest factor).
    """
    x = _as_float(wave)
    mel = log_mel(x, sr, n_mels=32)
    level = mel.mean(axis=1)
    power = np.exp(mel)
    bands = np.arange(mel.shape[1], dtype=float)
    weights = power / (power.sum(axis=1, keepdims=True) + _EPS)
    centroid = weights @ bands
    bandwidth = np.sqrt(np.maximum(weights @ bands**2 - centroid**2, 0.0))
    flatness = np.exp(mel.mean(axis=1)) / (power.mean(axis=1) + _EPS)
    envelope = np.sqrt(power.sum(axis=1))
    envelope = envelope / (envelope.mean() + _EPS) - 1.0
    spectrum = np.abs(np.fft.rfft(envelope)) ** 2
    rates = np.fft.rfftfreq(len(envelope), d=0.010)
    modulation = [
        np.log(spectrum[(rates >= lo) & (rates < hi)].sum() / (spectrum.sum() + _EPS) + 1e-6)
        for lo, hi in ((0.5, 2.0), (2.0, 8.0), (8.0, 20.0), (20.0, 50.0))
    ]
    peak, rms = np.abs(x).max(initial=0.0), np.sqrt(np.mean(x**2)) if x.size else 0.0
    scalars = [
        level.mean(),
        level.std(),
        centroid.mean(),
        centroid.std(),
        bandwidth.mean(),
        bandwidth.std(),
        np.log(flatness.mean() + 1e-6),
        np.log(flatness.std() + 1e-6),
        np.log(_kurtosis(x) + 1e-6),
        np.log(peak / rms + 1e-6) if rms > 0 else 0.0,
    ]
    return np.concatenate(
        [mel.mean(axis=0) - level.mean(), mel.std(axis=0), np.array(scalars), np.array(modulation)]
    ).astype(np.float64)


CLIP_FEATURE_SIZE = 32 + 32 + 10 + 4


# ---------------------------------------------------------------------------------------------------------------
# AnomalyDetect: measurements of the physical faults a machine recording can carry

_ANOMALY_EDGE_S = 0.050
_MODULATION_CENTRES_HZ = (0.55, 1.7, 5.5, 17.0, 55.0, 170.0, 550.0)
_ENVELOPE_BANDS_HZ = ((40.0, 1000.0), (1000.0, 8000.0), (40.0, 8000.0))


def _welch_power(x: np.ndarray, n_fft: int, hop: int) -> np.ndarray:
    """Power spectrum of every Hann-windowed frame, shape (frames, n_fft // 2 + 1)."""
    n_frames = 1 + (len(x) - n_fft) // hop
    idx = np.arange(n_fft)[None, :] + hop * np.arange(n_frames)[:, None]
    return np.abs(np.fft.rfft(x[idx] * np.hanning(n_fft), axis=1)) ** 2


def _smooth_log_spectrum(x: np.ndarray, sr: int) -> np.ndarray:
    """Long-term spectrum (dB, mean removed) at 48 centres 50-7500 Hz, each a Gaussian of 1/6 octave in log
    frequency: a rotation tone moved by the normal +-3 % speed change stays in the same bands."""
    psd = _welch_power(x, 4096, 2048).mean(axis=0)
    octaves = np.log2(np.maximum(np.fft.rfftfreq(4096, 1 / sr), 1.0))
    centres = np.log2(np.geomspace(50.0, 7500.0, 48))
    weights = np.exp(-0.5 * ((octaves[None, :] - centres[:, None]) * 6.0) ** 2)
    level = 10 * np.log10((weights @ psd) / weights.sum(axis=1) + _EPS)
    return level - level.mean()


def _intermittent_tonality(x: np.ndarray, sr: int) -> np.ndarray:
    """Squeal: tones in 1-7 kHz that come and go or wander. In 32 ms frames, each bin's log power over its
    10th percentile across frames (steady tones, the machine's harmonics, cancel), and per frame the highest of
    these over their median; returned are its median and 95th percentile over frames (not in between: where a
    machine is loud only part of the time, as a valve is, a middle percentile flips between its loud and quiet
    frames from take to take)."""
    n_fft = 512
    frames = len(x) // n_fft
    power = np.abs(np.fft.rfft(x[: frames * n_fft].reshape(frames, n_fft) * np.hanning(n_fft), axis=1)) ** 2
    freqs = np.fft.rfftfreq(n_fft, 1 / sr)
    band = power[:, (freqs >= 1000.0) & (freqs < 7000.0)]
    band = np.log((band[:, :-2] + band[:, 1:-1] + band[:, 2:]) / 3 + _EPS)
    rise = band - np.percentile(band, 10, axis=0)
    prominence = rise.max(axis=1) - np.median(rise, axis=1)
    return np.percentile(prominence, [50, 95])


def _band_dynamics(x: np.ndarray, sr: int) -> np.ndarray:
    """Impulses and intermittent sounds per band (12 log-spaced bands 250-7800 Hz, 16 ms frames at an 8 ms
    hop): log spectral kurtosis (impacts ringing a resonance), then the spread of the band's log energy over
    64 ms frames."""
    power = _welch_power(x, 256, 128)
    magnitude = np.sqrt(power)
    freqs = np.fft.rfftfreq(256, 1 / sr)
    centred = magnitude - magnitude.mean(axis=0)
    kurtosis = (centred**4).mean(axis=0) / ((centred**2).mean(axis=0) ** 2 + _EPS)
    edges = np.geomspace(250.0, 7800.0, 13)
    spectral_kurtosis, spread = [], []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        inside = (freqs >= lo) & (freqs < hi)
        spectral_kurtosis.append(np.log(kurtosis[inside].mean()))
        energy = power[:, inside].sum(axis=1)
        blocks = len(energy) // 8
        energy = energy[: blocks * 8].reshape(blocks, 8).mean(axis=1)
        spread.append(np.std(np.log(energy + _EPS)))
    return np.concatenate([spectral_kurtosis, spread])


def _band_envelope(spectrum: np.ndarray, freqs: np.ndarray, band: tuple[float, float], n: int, hop: int):
    """Power envelope (analytic signal) of one band of a clip whose rfft is ``spectrum``, averaged over ``hop``."""
    analytic = np.zeros(n, dtype=complex)
    m = len(spectrum)
    analytic[:m] = np.where((freqs >= band[0]) & (freqs < band[1]), spectrum, 0.0)
    analytic[1 : m - 1 if n % 2 == 0 else m] *= 2.0
    power = np.abs(np.fft.ifft(analytic)) ** 2
    frames = n // hop
    return power[: frames * hop].reshape(frames, hop).mean(axis=1)


def _event_statistics(envelope: np.ndarray, rate: float) -> np.ndarray:
    """Mechanical events (valve clicks, rail joints, knocks) in a 10 ms envelope: the log count of rises past
    halfway (in log) from its median to its 99.9th percentile (starts closer than 40 ms merged), and how
    periodic the envelope is: the highest autocorrelation of its log at lags 0.3-4 s (a missing or an extra
    valve event breaks the cycle)."""
    level = np.log(envelope + _EPS)
    floor = np.median(level)
    above = level > floor + 0.5 * (np.percentile(level, 99.9) - floor)
    times: list[int] = []
    for start, _ in _runs(above):
        if not times or start - times[-1] > 0.040 * rate:
            times.append(start)
    centred = level - level.mean()
    size = 1 << (2 * len(centred) - 1).bit_length()
    autocorrelation = np.fft.irfft(np.abs(np.fft.rfft(centred, size)) ** 2, size)[: len(centred)]
    autocorrelation /= np.arange(len(centred), 0, -1)  # unbiased: each lag's own overlap
    lags = np.arange(len(centred)) / rate
    cycle = autocorrelation[(lags >= 0.3) & (lags <= 4.0)]
    periodicity = cycle.max() / autocorrelation[0] if cycle.size and autocorrelation[0] > 0 else 0.0
    return np.array([np.log(len(times) + 1), periodicity])


@functools.lru_cache(maxsize=4)
def _rate_weights(size: int, rate: float) -> np.ndarray:
    """Weights (rows sum to 1) of the modulation rate bands over the rfft bins of ``size`` envelope samples
    taken at ``rate``."""
    octaves = np.log2(np.maximum(np.fft.rfftfreq(size, 1 / rate), 1e-3))
    centres = np.log2(np.array(_MODULATION_CENTRES_HZ))
    weights = np.exp(-0.5 * ((octaves[None, :] - centres[:, None]) / 0.75) ** 2)
    return weights / weights.sum(axis=1, keepdims=True)


def _modulation(x: np.ndarray, sr: int) -> np.ndarray:
    """Envelope spectra of three bands (below 1 kHz, above, all) at a 0.5 ms hop: energy in log-spaced rate
    bands 0.3-1000 Hz (imbalance modulates at the shaft rate, defects tick at their pass rates), each band's
    strongest 2-400 Hz line over the median (a periodic fault), and event statistics of the upper band. The
    rate bands are Gaussians of 0.75 octave in log rate, so a stroke or shaft rate near a band's edge moving
    with the normal speed change barely changes them."""
    n = len(x)
    spectrum = np.fft.rfft(x)
    freqs = np.fft.rfftfreq(n, 1 / sr)
    hop = 8
    rate = sr / hop
    energies, lines, events = [], [], np.zeros(2)
    for band in _ENVELOPE_BANDS_HZ:
        envelope = _band_envelope(spectrum, freqs, band, n, hop)
        fluctuation = envelope / (envelope.mean() + _EPS) - 1.0
        power = np.abs(np.fft.rfft(fluctuation)) ** 2 / len(fluctuation)
        rates = np.fft.rfftfreq(len(fluctuation), 1 / rate)
        energies += list(np.log(_rate_weights(len(fluctuation), rate) @ power + 1e-9))
        line = power[(rates >= 2.0) & (rates < 400.0)]
        lines.append(np.log(line.max() / (np.median(line) + _EPS)))
        if band[0] == 1000.0:
            blocks = len(envelope) // 20
            events = _event_statistics(envelope[: blocks * 20].reshape(blocks, 20).mean(axis=1), rate / 20)
    return np.concatenate([energies, lines, events])


def _impulsiveness(x: np.ndarray, sr: int) -> np.ndarray:
    """Log kurtosis and crest factor of the clip and of its part above 1 kHz."""
    spectrum = np.fft.rfft(x)
    high = np.fft.irfft(np.where(np.fft.rfftfreq(len(x), 1 / sr) >= 1000.0, spectrum, 0.0), len(x))
    return np.array(
        [
            np.log(_kurtosis(x)),
            np.log(np.abs(x).max()),
            np.log(_kurtosis(high)),
            np.log(np.abs(high).max() / (high.std() + _EPS)),
        ]
    )


def anomaly_features(wave: np.ndarray, sr: int) -> np.ndarray:
    """Measurements aimed at the faults of machine recordings (ANOMALY_FEATURE_SIZE values, level-free).

    Smoothed long-term spectrum (harmonic levels, sidebands, clogging's darker flow, wear's mesh overtones),
    high-band tonality (squeal), per-band spectral kurtosis and energy spread (impacts, intermittent sounds),
    envelope spectra and their strongest line (imbalance, bearing and gear defect rates), event statistics
    (missing or extra valve events, knocks), waveform kurtosis and crest factor. The first and last 50 ms are
    left out (a recording's edges cut events in two; the synthetic machines also pile events that fall
    outside the clip onto its first and last sample). A clip shorter than 0.4 s or silent gives zeros.
    """
    x = _as_float(wave)
    edge = int(_ANOMALY_EDGE_S * sr)
    x = x[edge : len(x) - edge]
    rms = np.sqrt(np.mean(x**2)) if x.size else 0.0
    if len(x) < 0.3 * sr or rms <= 0:
        return np.zeros(ANOMALY_FEATURE_SIZE)
    x = x / rms
    return np.concatenate(
        [
            _smooth_log_spectrum(x, sr),
            _intermittent_tonality(x, sr),
            _band_dynamics(x, sr),
            _modulation(x, sr),
            _impulsiveness(x, sr),
        ]
    )


ANOMALY_FEATURE_SIZE = 48 + 2 + 12 + 12 + 21 + 3 + 2 + 4

# How much each of ``anomaly_features`` varies between normal recordings of one machine: per measurement, the
# 90th percentile over 21 machine units (the seven synthetic types of seeds 1, 2 and 3, other units than the
# default seed 0's) of the standard deviation over the unit's 40 normal takes. It is the prior spread for a
# deviation test when an episode shows too few normal clips to measure it.
ANOMALY_NORMAL_SPREAD = np.array(
    [
        # spectrum (dB)
        *(3.14, 3.04, 2.91, 2.4, 1.89, 1.67, 1.46, 1.55, 1.37, 1.36, 1.25, 1.12),
        *(0.99, 0.981, 1.01, 1.02, 0.933, 0.829, 0.887, 0.937, 0.873, 0.884, 0.891, 0.989),
        *(1.22, 1.09, 1.13, 0.988, 0.777, 0.811, 0.771, 1.56, 1.44, 0.82, 0.789, 0.733),
        *(0.762, 0.793, 0.824, 0.869, 0.919, 0.988, 1.07, 1.14, 1.22, 1.3, 1.39, 1.49),
        # intermittent tonality
        *(0.0266, 0.102),
        # spectral kurtosis
        *(0.405, 0.111, 0.0993, 0.0915, 0.0827, 0.0587, 0.0539, 0.0718, 0.0649, 0.0688, 0.0579, 0.0686),
        # energy spread
        *(0.244, 0.24, 0.247, 0.286, 0.315, 0.329, 0.347, 0.357, 0.382, 0.406, 0.424, 0.447),
        # modulation energies
        *(0.474, 0.419, 0.396, 0.381, 0.26, 0.196, 0.135, 0.337, 0.213, 0.16, 0.171, 0.157),
        *(0.136, 0.0865, 0.436, 0.327, 0.286, 0.272, 0.208, 0.172, 0.113),
        # strongest envelope line
        *(0.914, 0.28, 0.932),
        # events
        *(0.209, 0.0489),
        # impulsiveness
        *(0.0814, 0.0964, 0.0644, 0.0757),
    ]
)


# ---------------------------------------------------------------------------------------------------------------
# trivial level measurements (what ``audit`` tries as shortcuts)

LOW_FREQUENCY_HZ = 20.0  # below the range of hearing
_FLOOR_FRAME_S = 0.050
_FLOOR_QUANTILE = 0.05


@dataclass(frozen=True)
class LevelFeatures:
    """Duration (s), RMS, background level (the 5th percentile of the RMS of 50 ms frames) and the share of
    the content below 20 Hz (its RMS over the clip's RMS, DC excluded from both): measurements that should
    not tell a clip's label unless the task's rule is about them."""

    seconds: float
    rms: float
    floor: float
    low_share: float


def level_features(wave: np.ndarray, sr: int) -> LevelFeatures:
    x = _as_float(wave)
    if x.size == 0:
        return LevelFeatures(0.0, 0.0, 0.0, 0.0)
    hop = max(1, int(_FLOOR_FRAME_S * sr))
    frames = _frame_rms(x, hop) if x.size >= hop else np.array([np.sqrt(np.mean(x**2))])
    spectrum = np.abs(np.fft.rfft(x)) ** 2
    low = np.fft.rfftfreq(x.size, 1 / sr) < LOW_FREQUENCY_HZ
    low[0] = False
    rms = float(np.sqrt(np.mean(x**2)))
    ac_rms = float(np.std(x))  # the share leaves DC out of both sides
    low_rms = float(np.sqrt(2 * spectrum[low].sum()) / x.size)
    return LevelFeatures(
        seconds=x.size / sr,
        rms=rms,
        floor=float(np.quantile(frames, _FLOOR_QUANTILE)),
        low_share=low_rms / ac_rms if ac_rms > 0 else 0.0,
    )
