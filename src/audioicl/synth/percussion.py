"""Procedural drum and percussion one-shots: stand-ins for the Freesound "one-shot percussive sounds" corpus.

``one_shot(seed, index)`` is sound number ``index`` of the bank for ``seed``: its family is
``FAMILIES[index % len(FAMILIES)]`` and its parameters (pitch, decay time and curve, noise colour and band,
FM index, mode ratios, drive ...) come from ``rng_for(seed, "percussion", index)``, so a sound never depends on
which other sounds were rendered or in what order.

Every sound is one clear event: a sharp attack (0.2-2 ms raised-cosine ramp) followed by a decay that
does not re-attack (the clap's bursts all fall within 30 ms), 30 ms to 1.2 s long, peak-normalised to 0.9.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from audioicl.seeding import rng_for

from .dsp import (
    butterworth_gain,
    filtered_noise,
    normalize_peak,
    phase_of,
    raised_cosine,
    resonance_gain,
    shaped_noise,
    spectral_filter,
)

MIN_SECONDS = 0.03
MAX_SECONDS = 1.2
PEAK = 0.9
_FIFTY_DB = np.log(10.0**2.5)  # exp(-x) reaches -50 dB at x = ln(316)

FAMILIES: tuple[str, ...] = (
    "kick",
    "snare",
    "tom",
    "hand_drum",
    "closed_hat",
    "open_hat",
    "cymbal",
    "clap",
    "rim",
    "cowbell",
    "wood_block",
    "shaker",
    "bell",
    "pluck",
    "blip",
    "zap",
)


@dataclass(frozen=True)
class OneShot:
    name: str
    family: str
    wave: np.ndarray


def one_shot(seed: int, index: int, sr: int = 16000) -> OneShot:
    """Sound number ``index`` (>= 0) of the percussion bank for ``seed``; name like ``kick_00016``."""
    if index < 0:
        raise ValueError(f"one-shot index must be >= 0, got {index}")
    family = FAMILIES[index % len(FAMILIES)]
    rng = rng_for(seed, "percussion", index)
    body = _RENDERERS[family](rng, sr)
    return OneShot(name=f"{family}_{index:05d}", family=family, wave=_finish(body, rng, sr))


# ----------------------------------------------------------------------------------------------- shared parts


def _uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(rng.uniform(low, high))


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(np.exp(rng.uniform(np.log(low), np.log(high))))


def _decay(t: np.ndarray, tau: float, curve: float = 1.0) -> np.ndarray:
    """exp(-(t/tau)^curve): curve < 1 falls fast then lingers, curve > 1 holds then falls."""
    return np.exp(-((t / tau) ** curve))


def _time_axis(sr: int, tau: float, curve: float = 1.0, extra: float = 0.0) -> np.ndarray:
    """Sample times up to where ``_decay(t, tau, curve)`` reaches -50 dB (plus ``extra`` s), within the limits."""
    seconds = min(MAX_SECONDS, max(MIN_SECONDS, extra + tau * _FIFTY_DB ** (1.0 / curve)))
    return np.arange(int(seconds * sr)) / sr


def _soft_square(phase: np.ndarray, drive: float) -> np.ndarray:
    """Sine (drive -> 0) to near-square (large drive), normalised to peak 1."""
    return np.tanh(drive * np.sin(phase)) / np.tanh(drive)


def _noise(rng, t, sr, slope=0.0, low=None, high=None, order=2) -> np.ndarray:
    return shaped_noise(rng, len(t), sr, slope, low, high, order)


def _random_colour(rng, low_range, high_range, centre_range) -> Callable[[np.ndarray], np.ndarray]:
    """A random magnitude response for noise sources: tilt, band edges and one resonant peak (0-18 dB)."""
    exponent = _uniform(rng, -3.0, 4.0) / 6.0206
    low, high = _log_uniform(rng, *low_range), _log_uniform(rng, *high_range)
    order = int(rng.integers(1, 4))
    centre, q, peak = _log_uniform(rng, *centre_range), _log_uniform(rng, 0.7, 8.0), _uniform(rng, 0.0, 7.0)

    def gain(freqs: np.ndarray) -> np.ndarray:
        tilt = (np.maximum(freqs, 1.0) / 1000.0) ** exponent
        return (
            tilt * butterworth_gain(freqs, low, high, order) * (1.0 + peak * resonance_gain(freqs, centre, q))
        )

    return gain


def _coloured(x: np.ndarray, sr: int, gain: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``x`` filtered by ``gain`` and scaled to unit RMS."""
    out = spectral_filter(x, sr, gain)
    return out / max(float(np.sqrt(np.mean(out * out))), 1e-12)


def _modes(t, sr, f0, ratios, amps, taus) -> np.ndarray:
    """Sum of exponentially decaying sine partials; partials above 0.45 * sr are dropped, and each one is
    only computed until it has decayed by 60 dB."""
    out = np.zeros_like(t)
    for ratio, amp, tau in zip(ratios, amps, taus, strict=True):
        freq = f0 * ratio
        if freq >= 0.45 * sr:
            continue
        stop = min(len(t), int(tau * np.log(1000.0) * sr) + 1)
        span = t[:stop]
        out[:stop] += amp * np.sin(2.0 * np.pi * freq * span) * np.exp(-span / tau)
    return out


def _metallic(rng, t, sr) -> np.ndarray:
    """Six detuned square-ish oscillators at inharmonic ratios (the classic analogue hi-hat source)."""
    base = _uniform(rng, 180.0, 560.0)
    ratios = np.array([1.0, 1.4827, 1.8007, 2.5470, 2.6306, 3.8988]) * rng.uniform(0.94, 1.06, 6)
    drive = _uniform(rng, 2.0, 8.0)
    return sum(_soft_square(2.0 * np.pi * base * r * t, drive) for r in ratios) / 6.0


def _finish(body: np.ndarray, rng: np.random.Generator, sr: int) -> np.ndarray:
    """Sharp raised-cosine attack, a fade to exact zero over the last 10% (>= 15 ms), peak normalisation."""
    wave = np.array(body, dtype=np.float64)
    attack = min(max(1, int(_uniform(rng, 0.2, 2.0) * sr / 1000.0)), len(wave) // 4)
    wave[:attack] *= raised_cosine(attack)
    tail = max(1, min(max(int(0.015 * sr), len(wave) // 10), len(wave) // 4))
    wave[len(wave) - tail :] *= raised_cosine(tail)[::-1]
    return normalize_peak(wave, PEAK)


# --------------------------------------------------------------------------------------------------- families


def _kick(rng, sr):
    tau, curve = _uniform(rng, 0.06, 0.3), _uniform(rng, 0.8, 1.6)
    t = _time_axis(sr, tau, curve)
    f_end = _uniform(rng, 38.0, 85.0)
    f_start = f_end * _uniform(rng, 2.0, 7.0)
    freq = f_end + (f_start - f_end) * np.exp(-t / _uniform(rng, 0.006, 0.06))
    body = np.sin(phase_of(freq, sr)) * _decay(t, tau, curve)
    click = _noise(rng, t, sr, _uniform(rng, -3, 3), _uniform(rng, 800, 3000)) * np.exp(
        -t / _uniform(rng, 0.002, 0.006)
    )
    drive = _uniform(rng, 0.5, 4.0)
    return np.tanh(drive * (body + _uniform(rng, 0.0, 0.5) * click)) / np.tanh(drive)


def _snare(rng, sr):
    tau, curve = _log_uniform(rng, 0.03, 0.15), _uniform(rng, 0.8, 1.5)
    t = _time_axis(sr, tau, curve)
    f0 = _uniform(rng, 140.0, 320.0)
    tone_tau = _uniform(rng, 0.02, 0.1)
    tone = _modes(
        t,
        sr,
        f0,
        [1.0, _uniform(rng, 1.45, 1.75)],
        [1.0, _uniform(rng, 0.2, 0.8)],
        [tone_tau, tone_tau * 0.7],
    )
    low, high = _uniform(rng, 300.0, 2500.0), _uniform(rng, 4000.0, 7800.0)
    snares = _noise(rng, t, sr, _uniform(rng, -3, 3), low, high) * _decay(t, tau, curve)
    mix = _uniform(rng, 0.3, 0.9)
    return (1.0 - mix) * tone + mix * 0.5 * snares


def _tom(rng, sr):
    tau, curve = _log_uniform(rng, 0.06, 0.3), _uniform(rng, 0.8, 1.4)
    t = _time_axis(sr, tau, curve)
    f0 = _log_uniform(rng, 65.0, 320.0)
    drop = _uniform(rng, 1.05, 1.7)
    freq = f0 * (1.0 + (drop - 1.0) * np.exp(-t / _uniform(rng, 0.02, 0.12)))
    phase = phase_of(freq, sr)
    env = _decay(t, tau, curve)
    second = _uniform(rng, 1.5, 1.72)
    body = np.sin(phase) * env + _uniform(rng, 0.05, 0.5) * np.sin(second * phase) * env**1.8
    thump = _noise(rng, t, sr, -3.0, None, _uniform(rng, 600, 3000)) * np.exp(-t / _uniform(rng, 0.004, 0.02))
    return body + _uniform(rng, 0.0, 0.3) * thump


def _hand_drum(rng, sr):
    tau = _log_uniform(rng, 0.04, 0.25)
    t = _time_axis(sr, tau)
    f0 = _log_uniform(rng, 170.0, 560.0)
    ratios = [
        1.0,
        1.59 * _uniform(rng, 0.97, 1.03),
        2.14 * _uniform(rng, 0.97, 1.03),
        2.65 * _uniform(rng, 0.97, 1.03),
    ]
    amps = [1.0, *rng.uniform(0.05, 0.7, 3)]
    damping = _uniform(rng, 0.3, 1.2)
    taus = [tau / r**damping for r in ratios]
    tone = _modes(t, sr, f0, ratios, amps, taus)
    slap = _noise(rng, t, sr, _uniform(rng, -2, 3), _uniform(rng, 500, 2000), _uniform(rng, 4000, 7500))
    return tone + _uniform(rng, 0.0, 0.8) * slap * np.exp(-t / _uniform(rng, 0.004, 0.02))


def _hat(rng, sr, tau_range, curve_range):
    tau, curve = _log_uniform(rng, *tau_range), _uniform(rng, *curve_range)
    t = _time_axis(sr, tau, curve)
    source = _uniform(rng, 0.0, 1.0) * _metallic(rng, t, sr) + _uniform(rng, 0.1, 0.7) * rng.standard_normal(
        len(t)
    )
    colour = _random_colour(rng, (1800.0, 7000.0), (6500.0, 12000.0), (2500.0, 7500.0))
    return _coloured(source, sr, colour) * _decay(t, tau, curve)


def _closed_hat(rng, sr):
    return _hat(rng, sr, (0.006, 0.045), (0.7, 1.8))


def _open_hat(rng, sr):
    return _hat(rng, sr, (0.06, 0.35), (0.7, 1.4))


def _cymbal(rng, sr):
    tau, curve = _log_uniform(rng, 0.06, 0.3), _uniform(rng, 0.7, 1.3)
    t = _time_axis(sr, tau, curve)
    metal = _metallic(rng, t, sr) * rng.standard_normal(len(t))  # ring-modulated: dense and noisy
    source = _uniform(rng, 0.2, 1.0) * metal + rng.standard_normal(len(t))
    colour = _random_colour(rng, (800.0, 5000.0), (5000.0, 12000.0), (1500.0, 7000.0))
    ping = _modes(t, sr, _uniform(rng, 1800, 4200), [1.0, 2.71], [1.0, 0.4], [tau * 0.7, tau * 0.4])
    return _coloured(source, sr, colour) * _decay(t, tau, curve) + _uniform(rng, 0.0, 1.2) * ping


def _clap(rng, sr):
    bursts = int(rng.integers(2, 5))
    starts = np.concatenate([[0.0], np.cumsum(rng.uniform(0.004, 0.028 / (bursts - 1), bursts - 1))])
    tail_tau = _log_uniform(rng, 0.02, 0.15)
    t = _time_axis(sr, tail_tau, 1.0, extra=starts[-1])
    burst_tau = _uniform(rng, 0.0015, 0.005)
    env = np.zeros_like(t)
    gains = np.concatenate([[1.0], rng.uniform(0.5, 0.9, bursts - 1)])  # the first burst is the loudest
    for start, gain in zip(starts, gains, strict=True):
        later = t >= start
        env[later] += gain * np.exp(-(t[later] - start) / burst_tau)
    after_last = t >= starts[-1]
    env[after_last] += _uniform(rng, 0.25, 0.6) * np.exp(-(t[after_last] - starts[-1]) / tail_tau)
    colour = _random_colour(rng, (150.0, 1200.0), (2500.0, 9000.0), (500.0, 3500.0))
    return filtered_noise(rng, len(t), sr, colour) * env


def _rim(rng, sr):
    tau = _uniform(rng, 0.004, 0.025)
    t = _time_axis(sr, tau)
    f0 = _uniform(rng, 380.0, 1900.0)
    tone = _modes(t, sr, f0, [1.0, _uniform(rng, 1.5, 2.8)], [1.0, _uniform(rng, 0.2, 0.9)], [tau, tau * 0.6])
    click = _noise(rng, t, sr, 2.0, _uniform(rng, 1500, 4000)) * np.exp(-t / _uniform(rng, 0.001, 0.004))
    return tone + _uniform(rng, 0.1, 0.8) * click


def _cowbell(rng, sr):
    slow = _log_uniform(rng, 0.04, 0.25)
    t = _time_axis(sr, slow)
    f1 = _uniform(rng, 460.0, 900.0)
    ratio = _uniform(rng, 1.38, 1.46)
    drive = _uniform(rng, 0.6, 3.0)
    tone = _soft_square(2.0 * np.pi * f1 * t, drive) + _soft_square(2.0 * np.pi * f1 * ratio * t, drive)
    centre, q = f1 * ratio * _uniform(rng, 1.0, 2.2), _uniform(rng, 0.8, 3.0)
    tone = spectral_filter(tone, sr, lambda f: resonance_gain(f, centre, q))
    fast_part = _uniform(rng, 0.3, 0.8)
    env = fast_part * np.exp(-t / _uniform(rng, 0.004, 0.02)) + (1.0 - fast_part) * np.exp(-t / slow)
    return tone * env


def _wood_block(rng, sr):
    tau = _uniform(rng, 0.008, 0.09)
    t = _time_axis(sr, tau)
    f0 = _log_uniform(rng, 450.0, 2600.0)
    ratios = [1.0, _uniform(rng, 2.4, 3.3), _uniform(rng, 4.4, 6.2)]
    amps = [1.0, _uniform(rng, 0.0, 0.6), _uniform(rng, 0.0, 0.3)]
    tone = _modes(t, sr, f0, ratios, amps, [tau, tau * 0.5, tau * 0.3])
    q = _uniform(rng, 1.0, 6.0)
    tick = filtered_noise(rng, len(t), sr, lambda f: resonance_gain(f, f0, q))
    tick *= np.exp(-t / _uniform(rng, 0.001, 0.004))
    return tone + _uniform(rng, 0.0, 0.5) * tick


def _shaker(rng, sr):
    tau, curve = _log_uniform(rng, 0.02, 0.2), _uniform(rng, 1.0, 2.5)
    t = _time_axis(sr, tau, curve)
    colour = _random_colour(rng, (1200.0, 5000.0), (5000.0, 12000.0), (2000.0, 7500.0))
    grain = 1.0 + _uniform(rng, 0.0, 0.4) * (np.abs(_noise(rng, t, sr, -6.0)) - 0.8)
    return filtered_noise(rng, len(t), sr, colour) * grain * _decay(t, tau, curve)


_BELL_TEMPLATES = (
    (1.0, 2.76, 5.40, 8.93),  # bar / tubular
    (1.0, 2.32, 4.25, 6.63),  # bowl
    (1.0, 2.0, 2.42, 3.0, 4.2),  # hand bell
    (1.0, 3.0, 5.1, 7.3),  # triangle-like
)


def _bell(rng, sr):
    tau = _log_uniform(rng, 0.08, 0.35)
    t = _time_axis(sr, tau)
    f0 = _log_uniform(rng, 300.0, 2000.0)
    if rng.random() < 0.5:
        ratios = np.array(_BELL_TEMPLATES[int(rng.integers(len(_BELL_TEMPLATES)))])
        ratios[1:] *= rng.uniform(0.97, 1.03, len(ratios) - 1)
        amps = np.concatenate([[1.0], rng.uniform(0.1, 0.9, len(ratios) - 1)])
        taus = tau / ratios ** _uniform(rng, 0.2, 0.9)
        return _modes(t, sr, f0, ratios, amps, taus)
    modulator = f0 * _uniform(rng, 1.4, 3.6)
    index = _uniform(rng, 0.5, 5.0) * np.exp(-t / (tau * _uniform(rng, 0.2, 0.8)))
    return np.sin(2.0 * np.pi * f0 * t + index * np.sin(2.0 * np.pi * modulator * t)) * np.exp(-t / tau)


def _pluck(rng, sr):
    tau = _log_uniform(rng, 0.06, 0.35)
    t = _time_axis(sr, tau)
    f0 = _log_uniform(rng, 70.0, 900.0)
    k = np.arange(1, max(2, min(24, int(0.45 * sr / f0))) + 1, dtype=np.float64)
    ratios = k * np.sqrt(1.0 + _uniform(rng, 0.0, 8e-4) * k * k)
    position = _uniform(rng, 0.06, 0.5)
    amps = k ** -_uniform(rng, 0.7, 2.0) * (0.15 + np.abs(np.sin(np.pi * k * position)))
    taus = tau / (1.0 + _uniform(rng, 0.05, 0.7) * (k - 1.0))
    return _modes(t, sr, f0, ratios, amps, taus)


def _blip(rng, sr):
    tau, curve = _uniform(rng, 0.02, 0.2), _uniform(rng, 1.0, 3.0)
    t = _time_axis(sr, tau, curve)
    f0 = _log_uniform(rng, 250.0, 3000.0)
    harmonic = float(rng.integers(1, 5))
    index = _uniform(rng, 0.0, 3.0) * _decay(t, tau * _uniform(rng, 0.3, 1.0))
    phase = 2.0 * np.pi * f0 * t + index * np.sin(2.0 * np.pi * f0 * harmonic * t)
    return _soft_square(phase, _uniform(rng, 0.3, 5.0)) * _decay(t, tau, curve)


def _zap(rng, sr):
    tau, curve = _uniform(rng, 0.04, 0.3), _uniform(rng, 0.8, 2.0)
    t = _time_axis(sr, tau, curve)
    high, low = _log_uniform(rng, 900.0, 6500.0), _log_uniform(rng, 50.0, 600.0)
    start, end = (high, low) if rng.random() < 0.8 else (low, high)
    freq = end + (start - end) * np.exp(-t / _uniform(rng, 0.01, 0.12))
    return _soft_square(phase_of(freq, sr), _uniform(rng, 0.3, 4.0)) * _decay(t, tau, curve)


_RENDERERS: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "kick": _kick,
    "snare": _snare,
    "tom": _tom,
    "hand_drum": _hand_drum,
    "closed_hat": _closed_hat,
    "open_hat": _open_hat,
    "cymbal": _cymbal,
    "clap": _clap,
    "rim": _rim,
    "cowbell": _cowbell,
    "wood_block": _wood_block,
    "shaker": _shaker,
    "bell": _bell,
    "pluck": _pluck,
    "blip": _blip,
    "zap": _zap,
}
