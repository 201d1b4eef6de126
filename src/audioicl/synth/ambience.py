"""Environmental backgrounds: stand-ins for the ESC-50 classes 0-10 (animals, insects, rain) that
AudioCountHard mixes under percussion at 10-15 dB SNR.

Each family is a textured, non-stationary scene (slowly drifting levels, random event times, several
sources), rendered from the caller's generator. Backgrounds must not compete with the percussion that is
counted over them: events fade in over >= 8 ms, and a soft limiter keeps every peak within
``MAX_CREST`` times the clip's RMS. The result is scaled to RMS ``LEVEL_RMS``; ``dsp.mix_at_snr`` sets the
final level anyway.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .dsp import band_filter, filtered_noise, raised_cosine, resonance_gain, rms, shaped_noise, smooth_random

LEVEL_RMS = 0.1
MAX_CREST = 4.0  # peak / RMS after limiting (12 dB)

FAMILIES: tuple[str, ...] = ("rain", "wind", "insects", "birds", "frogs", "animal_calls", "traffic")


def background(family: str, rng: np.random.Generator, seconds: float, sr: int = 16000) -> np.ndarray:
    """``seconds`` of the ``family`` scene as float32 at RMS ``LEVEL_RMS``."""
    if family not in _RENDERERS:
        raise ValueError(f"unknown ambience family {family!r}; known: {', '.join(FAMILIES)}")
    n = int(round(seconds * sr))
    if n <= 0:
        raise ValueError(f"background length must be positive, got {seconds} s")
    scene = _RENDERERS[family](rng, n, sr)
    return _level(scene).astype(np.float32)


# ----------------------------------------------------------------------------------------------- shared parts


def _level(x: np.ndarray) -> np.ndarray:
    """Soft-limit peaks to ``MAX_CREST`` x RMS (limiting lowers the RMS, so a few passes), scale to ``LEVEL_RMS``."""
    for _ in range(3):
        x = x / max(rms(x), 1e-12)
        ceiling = MAX_CREST * 0.98
        knee = 0.7 * ceiling
        over = np.abs(x) > knee
        excess = (np.abs(x[over]) - knee) / (ceiling - knee)
        x[over] = np.sign(x[over]) * (knee + (ceiling - knee) * np.tanh(excess))
    return x * (LEVEL_RMS / max(rms(x), 1e-12))


def _drift(rng: np.random.Generator, n: int, sr: int, rate_hz: float, depth_db: float) -> np.ndarray:
    """A slowly wandering gain curve spanning ``depth_db`` (non-stationarity of a scene)."""
    return 10.0 ** (depth_db * (smooth_random(rng, n, sr, rate_hz) - 0.5) / 20.0)


def _event_times(rng: np.random.Generator, seconds: float, rate_hz: float, min_gap: float) -> np.ndarray:
    """Random event start times (a Poisson process thinned to keep ``min_gap`` between starts)."""
    count = rng.poisson(rate_hz * seconds * 1.5) + 1
    times = np.sort(rng.uniform(0.0, seconds, count))
    kept: list[float] = []
    for time in times:
        if not kept or time - kept[-1] >= min_gap:
            kept.append(float(time))
    return np.asarray(kept[: max(1, int(round(rate_hz * seconds)))])


def _soft_envelope(n: int, attack: int, release: int) -> np.ndarray:
    """Raised-cosine rise over ``attack`` samples, raised-cosine fall over ``release`` samples."""
    env = np.ones(n)
    attack, release = min(attack, n // 2), min(release, n - min(attack, n // 2))
    env[:attack] = raised_cosine(attack)
    if release:
        env[n - release :] = raised_cosine(release)[::-1]
    return env


def _place(out: np.ndarray, event: np.ndarray, start: int) -> None:
    """Add ``event`` into ``out`` at ``start``, cut at the end of ``out``."""
    stop = min(len(out), start + len(event))
    if stop > start:
        out[start:stop] += event[: stop - start]


def _gated_pulses(t: np.ndarray, rate_hz: float, duty: float) -> np.ndarray:
    """Smooth periodic pulses: sin^2 bumps occupying ``duty`` of each period (no sharp edges)."""
    phase = (t * rate_hz) % 1.0
    return np.where(phase < duty, np.sin(np.pi * phase / duty) ** 2, 0.0)


def _harmonic_tone(t, sr, f0: np.ndarray, rolloff: float, formants) -> np.ndarray:
    """A voiced sound: harmonics of the contour ``f0`` (Hz per sample) weighted by formant resonances."""
    phase = 2.0 * np.pi * np.cumsum(f0) / sr
    mean_f0 = float(np.mean(f0))
    harmonics = np.arange(1, int(min(0.45 * sr, 6000.0) / np.max(f0)) + 1)
    weights = harmonics**-rolloff * sum(resonance_gain(harmonics * mean_f0, c, q) for c, q in formants)
    out = np.zeros_like(t)
    for k, weight in zip(harmonics, weights, strict=True):
        out += weight * np.sin(k * phase)
    return out


# --------------------------------------------------------------------------------------------------- families


def _rain(rng, n, sr):
    seconds = n / sr
    bed = shaped_noise(rng, n, sr, rng.uniform(-3.0, 0.0), rng.uniform(150, 500), rng.uniform(4000, 7500))
    bed *= _drift(rng, n, sr, rng.uniform(0.05, 0.3), rng.uniform(6.0, 12.0))
    drops = np.zeros(n)
    for _ in range(8):  # eight kinds of drop, each with its own rising "plink", at random times and sizes
        rate = rng.uniform(10.0, 80.0)
        positions = rng.integers(0, n, rng.poisson(rate * seconds) + 1)
        sizes = rng.lognormal(0.0, 0.5, len(positions))
        length = int(rng.uniform(0.004, 0.015) * sr)
        k = np.arange(length) / sr
        pitch = rng.uniform(1200, 6000) * (1.0 + rng.uniform(0.0, 0.6) * k / k[-1])
        kernel = np.sin(2 * np.pi * np.cumsum(pitch) / sr) * np.exp(-k / rng.uniform(0.001, 0.004))
        kernel *= _soft_envelope(length, max(1, int(0.001 * sr)), length // 3)
        where = positions[:, None] + np.arange(length)
        inside = where < n
        drops += np.bincount(where[inside], (sizes[:, None] * kernel)[inside], minlength=n)
    drops = band_filter(drops, sr, 600.0, None)
    return bed + rng.uniform(0.3, 0.8) * drops / max(rms(drops), 1e-12)


def _wind(rng, n, sr):
    out = np.zeros(n)
    for centre in np.geomspace(rng.uniform(120, 250), rng.uniform(1200, 2500), 5):
        q = rng.uniform(1.5, 5.0)
        band = filtered_noise(rng, n, sr, lambda f, c=centre, q=q: resonance_gain(f, c, q))
        gust = _drift(rng, n, sr, rng.uniform(0.15, 0.6), rng.uniform(10.0, 22.0))
        out += band / max(rms(band), 1e-12) * gust
    rumble = shaped_noise(rng, n, sr, -6.0, 20.0, 150.0)
    out += rng.uniform(0.3, 1.0) * rumble * _drift(rng, n, sr, 0.2, 10.0)
    return out * _drift(rng, n, sr, rng.uniform(0.1, 0.4), rng.uniform(8.0, 16.0))  # gusts move every band


def _crickets(rng, t, sr):
    carrier = np.sin(2 * np.pi * rng.uniform(3500, 6500) * t + rng.uniform(0, 2 * np.pi))
    pulses = _gated_pulses(t, rng.uniform(18.0, 45.0), rng.uniform(0.35, 0.6))
    chirps = _gated_pulses(t + rng.uniform(0, 1), rng.uniform(0.8, 3.0), rng.uniform(0.2, 0.5))
    return carrier * pulses * (0.3 + 0.7 * chirps)


def _cicada(rng, t, sr):
    buzz = shaped_noise(rng, len(t), sr, 0.0, rng.uniform(3000, 4500), rng.uniform(5500, 7500), 3)
    tremolo = 0.6 + 0.4 * np.sin(2 * np.pi * rng.uniform(80, 250) * t)
    return buzz * tremolo * _drift(rng, len(t), sr, rng.uniform(0.1, 0.3), 14.0)


def _insects(rng, n, sr):
    t = np.arange(n) / sr
    voices = [_crickets(rng, t, sr) for _ in range(rng.integers(1, 4))]
    if rng.random() < 0.6:
        voices.append(_cicada(rng, t, sr))
    out = sum(v / max(rms(v), 1e-12) * rng.uniform(0.3, 1.0) for v in voices)
    return out + 0.15 * shaped_noise(rng, n, sr, -3.0, 100.0, 3000.0)


def _bird_call(rng, sr) -> np.ndarray:
    seconds = rng.uniform(0.06, 0.35)
    t = np.arange(int(seconds * sr)) / sr
    start, end = rng.uniform(1800, 6000), rng.uniform(1800, 6000)
    sweep = start + (end - start) * (t / seconds) ** rng.uniform(0.5, 2.0)
    trill = rng.uniform(0.0, 0.15) * sweep * np.sin(2 * np.pi * rng.uniform(15, 60) * t)
    phase = 2 * np.pi * np.cumsum(np.minimum(sweep + trill, 0.45 * sr)) / sr
    tone = np.sin(phase) + rng.uniform(0.0, 0.3) * np.sin(2 * phase)
    return tone * _soft_envelope(len(t), int(rng.uniform(0.008, 0.03) * sr), int(0.4 * len(t)))


def _birds(rng, n, sr):
    seconds = n / sr
    out = np.zeros(n)
    for _ in range(rng.integers(1, 4)):  # a few birds, each repeating its own call in phrases
        call_seed = int(rng.integers(2**32))
        level = rng.uniform(0.3, 1.0)
        for time in _event_times(rng, seconds, rng.uniform(0.8, 3.0), 0.12):
            call = _bird_call(np.random.default_rng(call_seed + int(rng.integers(3))), sr)
            _place(out, level * rng.uniform(0.6, 1.0) * call, int(time * sr))
    leaves = shaped_noise(rng, n, sr, -2.0, 300.0, 6000.0) * _drift(rng, n, sr, 0.3, 12.0)
    return out / max(rms(out), 1e-12) + rng.uniform(0.2, 0.5) * leaves


def _croak(rng, sr, f0: float, pulse_rate: float) -> np.ndarray:
    seconds = rng.uniform(0.15, 0.6)
    t = np.arange(int(seconds * sr)) / sr
    contour = f0 * (1.0 + rng.uniform(-0.1, 0.1) * t / seconds)
    formants = [(rng.uniform(400, 900), 2.0), (rng.uniform(1100, 2000), 3.0)]
    tone = _harmonic_tone(t, sr, contour, 1.0, formants)
    pulses = 0.15 + 0.85 * _gated_pulses(t, pulse_rate, rng.uniform(0.4, 0.7))
    return tone * pulses * _soft_envelope(len(t), int(0.015 * sr), int(0.05 * sr))


def _frogs(rng, n, sr):
    seconds = n / sr
    out = np.zeros(n)
    for _ in range(rng.integers(2, 5)):
        f0, pulse_rate, level = rng.uniform(90, 400), rng.uniform(8, 35), rng.uniform(0.3, 1.0)
        for time in _event_times(rng, seconds, rng.uniform(0.4, 1.5), 0.5):
            croak = _croak(rng, sr, f0 * rng.uniform(0.97, 1.03), pulse_rate)
            _place(out, level * croak / max(np.max(np.abs(croak)), 1e-12), int(time * sr))
    night = shaped_noise(rng, n, sr, -3.0, 80.0, 5000.0)
    return out / max(rms(out), 1e-12) + rng.uniform(0.15, 0.4) * night


_ANIMAL_FORMANTS = (
    ((300, 3.0), (800, 4.0)),  # low "moo"-like
    ((700, 3.0), (1200, 4.0), (2600, 5.0)),  # "baa"-like
    ((900, 3.0), (1800, 4.0), (3000, 5.0)),  # "meow"-like
    ((500, 2.0), (1500, 3.0)),  # grunt / coo
)


def _animal_call(rng, sr) -> np.ndarray:
    seconds = rng.uniform(0.4, 1.5)
    t = np.arange(int(seconds * sr)) / sr
    base = rng.uniform(110, 650)
    rise = np.sin(np.pi * (t / seconds) ** rng.uniform(0.6, 1.6))  # rise-fall pitch contour
    vibrato = 1.0 + rng.uniform(0.0, 0.04) * np.sin(2 * np.pi * rng.uniform(4, 8) * t)
    contour = base * (1.0 + rng.uniform(0.1, 0.5) * rise) * vibrato
    formants = _ANIMAL_FORMANTS[int(rng.integers(len(_ANIMAL_FORMANTS)))]
    tone = _harmonic_tone(t, sr, contour, rng.uniform(0.8, 1.6), formants)
    breath = shaped_noise(rng, len(t), sr, 0.0, 500.0, 4000.0) * rng.uniform(0.0, 0.3) * rms(tone)
    attack = int(rng.uniform(0.04, 0.12) * sr)
    return (tone + breath) * _soft_envelope(len(t), attack, int(0.3 * len(t)))


def _animal_calls(rng, n, sr):
    seconds = n / sr
    out = np.zeros(n)
    for time in _event_times(rng, seconds, rng.uniform(0.2, 0.6), 1.0):
        call = _animal_call(rng, sr)
        _place(out, rng.uniform(0.5, 1.0) * call / max(np.max(np.abs(call)), 1e-12), int(time * sr))
    yard = shaped_noise(rng, n, sr, -4.0, 60.0, 3000.0) * _drift(rng, n, sr, 0.3, 8.0)
    return out / max(rms(out), 1e-12) + rng.uniform(0.2, 0.5) * yard


def _vehicle_pass(rng, n, sr) -> np.ndarray:
    """One vehicle passing by: tyre noise and a Doppler-shifted engine hum under a bell-shaped envelope."""
    t = np.arange(n) / sr
    centre, width = rng.uniform(0.0, n / sr), rng.uniform(1.0, 3.5)
    envelope = 1.0 / (1.0 + ((t - centre) / width) ** 2)
    engine = rng.uniform(40, 120)
    doppler = 1.0 + 0.06 * np.tanh(-(t - centre) / (0.5 * width))
    phase = 2 * np.pi * np.cumsum(engine * doppler) / sr
    hum = sum(np.sin(k * phase) / k for k in range(1, 6))
    tyres = shaped_noise(rng, n, sr, -2.0, 200.0, rng.uniform(1500, 4000))
    return (0.5 * hum + tyres) * envelope


def _traffic(rng, n, sr):
    rumble = shaped_noise(rng, n, sr, -6.0, 25.0, rng.uniform(200, 500)) * _drift(rng, n, sr, 0.15, 6.0)
    passes = sum(_vehicle_pass(rng, n, sr) for _ in range(rng.integers(1, 5)))
    return rumble + rng.uniform(1.0, 2.5) * passes / max(rms(passes), 1e-12)


_RENDERERS: dict[str, Callable[[np.random.Generator, int, int], np.ndarray]] = {
    "rain": _rain,
    "wind": _wind,
    "insects": _insects,
    "birds": _birds,
    "frogs": _frogs,
    "animal_calls": _animal_calls,
    "traffic": _traffic,
}
