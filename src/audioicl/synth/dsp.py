"""Small shared DSP helpers for the synthesizers (pure numpy, float32 mono waves).

Filters work in the frequency domain (zero phase, whole-signal FFT): the synthesizers filter noise
*before* applying an envelope, so the filters' non-causal smearing never softens an attack.
"""

from __future__ import annotations

import numpy as np

_EPS = 1e-12


def rms(x: np.ndarray) -> float:
    """Root mean square of the whole array (0.0 for an empty one)."""
    x = np.asarray(x, dtype=np.float64)
    return float(np.sqrt(np.mean(x * x))) if x.size else 0.0


def mix_at_snr(
    signal: np.ndarray, noise: np.ndarray, snr_db: float, signal_rms: float | None = None
) -> np.ndarray:
    """``signal`` plus ``noise`` scaled so that rms(signal) / rms(noise) is ``snr_db`` over the whole clip;
    a given ``signal_rms`` replaces rms(signal) as the level the SNR refers to.

    ``noise`` must be at least as long as ``signal`` (it is cut to length); both must be non-silent.
    """
    if len(noise) < len(signal):
        raise ValueError(f"noise has {len(noise)} samples, shorter than the signal's {len(signal)}")
    noise = np.asarray(noise[: len(signal)], dtype=np.float64)
    noise_rms = rms(noise)
    signal_rms = rms(signal) if signal_rms is None else signal_rms
    if signal_rms <= 0.0 or noise_rms <= 0.0:
        raise ValueError("mix_at_snr needs a non-silent signal and a non-silent noise")
    gain = signal_rms / (noise_rms * 10.0 ** (snr_db / 20.0))
    return (np.asarray(signal, dtype=np.float64) + gain * noise).astype(np.float32)


def raised_cosine(n: int, centred: bool = False) -> np.ndarray:
    """A rising half-cosine ramp of ``n`` samples towards 1. It starts at exactly 0, or, ``centred``, is
    sampled at sample centres so that no sample is zero (a keyed element stays audibly 'on')."""
    offset = 0.5 if centred else 0.0
    return (0.5 - 0.5 * np.cos(np.pi * (np.arange(n) + offset) / max(n, 1))).astype(np.float32)


def fade(x: np.ndarray, sr: int, ms: float) -> np.ndarray:
    """Raised-cosine fade-in and fade-out of ``ms`` milliseconds each (capped at half the length)."""
    out = np.array(x, dtype=np.float32, copy=True)
    n = min(int(round(sr * ms / 1000.0)), len(out) // 2)
    if n > 0:
        ramp = raised_cosine(n)
        out[:n] *= ramp
        out[len(out) - n :] *= ramp[::-1]
    return out


def frame_rms(x: np.ndarray, sr: int, frame_ms: float = 5.0) -> np.ndarray:
    """RMS of consecutive non-overlapping frames (the last partial frame is zero-padded)."""
    hop = max(1, int(round(sr * frame_ms / 1000.0)))
    x = np.asarray(x, dtype=np.float64)
    padded = np.zeros(-(-len(x) // hop) * hop)
    padded[: len(x)] = x
    return np.sqrt(np.mean(padded.reshape(-1, hop) ** 2, axis=1))


def trim_silence(x: np.ndarray, sr: int, threshold_db: float = -40.0) -> np.ndarray:
    """Cut leading and trailing 5 ms frames quieter than ``threshold_db`` relative to the loudest frame.

    An all-silent input gives an empty array.
    """
    frames = frame_rms(x, sr)
    if frames.size == 0 or frames.max() <= 0.0:
        return np.zeros(0, dtype=np.float32)
    loud = np.flatnonzero(frames >= frames.max() * 10.0 ** (threshold_db / 20.0))
    hop = max(1, int(round(sr * 5.0 / 1000.0)))
    return np.asarray(x[loud[0] * hop : (loud[-1] + 1) * hop], dtype=np.float32)


def normalize_peak(x: np.ndarray, peak: float = 0.9) -> np.ndarray:
    """Scale so that the largest absolute sample is ``peak``; silence stays silence."""
    x = np.asarray(x, dtype=np.float64)
    top = float(np.max(np.abs(x))) if x.size else 0.0
    return (x * (peak / top) if top > 0.0 else x).astype(np.float32)


def db_to_gain(db: float) -> float:
    return float(10.0 ** (db / 20.0))


def fft_size(n: int) -> int:
    """The next power of two >= ``n`` (fast FFTs; the zero padding also stops circular wrap-around)."""
    return 1 << max(0, int(n) - 1).bit_length()


def spectral_filter(x: np.ndarray, sr: int, gain_of_hz) -> np.ndarray:
    """Zero-phase filter: multiply the spectrum by ``gain_of_hz(freqs)`` (a vectorised magnitude response)."""
    size = fft_size(len(x))
    spectrum = np.fft.rfft(np.asarray(x, dtype=np.float64), n=size)
    freqs = np.fft.rfftfreq(size, 1.0 / sr)
    return np.fft.irfft(spectrum * gain_of_hz(freqs), n=size)[: len(x)]


def butterworth_gain(
    freqs: np.ndarray, low_hz: float | None, high_hz: float | None, order: int = 2
) -> np.ndarray:
    """Magnitude of a Butterworth high-pass at ``low_hz`` times a low-pass at ``high_hz`` (either may be None)."""
    gain = np.ones_like(freqs)
    if low_hz is not None:
        ratio = np.maximum(freqs, _EPS) / low_hz
        gain = gain / np.sqrt(1.0 + ratio ** (-2 * order))
    if high_hz is not None:
        gain = gain / np.sqrt(1.0 + (freqs / high_hz) ** (2 * order))
    return gain


def band_filter(
    x: np.ndarray, sr: int, low_hz: float | None, high_hz: float | None, order: int = 2
) -> np.ndarray:
    """Butterworth-shaped high-pass / low-pass / band-pass (zero phase)."""
    return spectral_filter(x, sr, lambda f: butterworth_gain(f, low_hz, high_hz, order))


def resonance_gain(freqs: np.ndarray, centre_hz: float, q: float) -> np.ndarray:
    """Magnitude of a second-order band-pass resonator (peak 1 at ``centre_hz``)."""
    ratio = np.maximum(freqs, _EPS) / centre_hz
    return 1.0 / np.sqrt(1.0 + q * q * (ratio - 1.0 / ratio) ** 2)


def filtered_noise(rng: np.random.Generator, n: int, sr: int, gain_of_hz) -> np.ndarray:
    """Unit-RMS Gaussian noise with magnitude response ``gain_of_hz(freqs)``.

    Drawn directly in the frequency domain (complex Gaussian bins times the response, one inverse FFT):
    the same statistics as filtering white noise, at half the cost.
    """
    if n == 0:
        return np.zeros(0)
    size = fft_size(n)
    freqs = np.fft.rfftfreq(size, 1.0 / sr)
    bins = rng.standard_normal(freqs.size) + 1j * rng.standard_normal(freqs.size)
    noise = np.fft.irfft(bins * gain_of_hz(freqs), n=size)[:n]
    return noise / max(rms(noise), _EPS)


def shaped_noise(
    rng: np.random.Generator,
    n: int,
    sr: int,
    slope_db_per_octave: float = 0.0,
    low_hz: float | None = None,
    high_hz: float | None = None,
    order: int = 2,
) -> np.ndarray:
    """Unit-RMS noise with a spectral tilt (0 white, -3 pink, -6 brown, +3 blue dB/octave, pivot 1 kHz) and
    an optional Butterworth-shaped band limit."""
    exponent = slope_db_per_octave / 6.0206

    def gain(freqs: np.ndarray) -> np.ndarray:
        return (np.maximum(freqs, 1.0) / 1000.0) ** exponent * butterworth_gain(freqs, low_hz, high_hz, order)

    return filtered_noise(rng, n, sr, gain)


def smooth_random(rng: np.random.Generator, n: int, sr: int, rate_hz: float) -> np.ndarray:
    """A smooth random curve (about ``rate_hz`` control points per second, cosine-interpolated), values in [0, 1].

    The curve is computed every 16 samples and linearly interpolated in between (it moves slowly anyway).
    """
    points = max(2, int(np.ceil(n / sr * rate_hz)) + 2)
    knots = rng.random(points)
    coarse_at = np.arange(0, n + 16, 16)
    position = coarse_at / sr * rate_hz
    idx = np.minimum(position.astype(np.int64), points - 2)
    weight = 0.5 - 0.5 * np.cos(np.pi * (position - idx))
    coarse = knots[idx] * (1.0 - weight) + knots[idx + 1] * weight
    return np.interp(np.arange(n), coarse_at, coarse)


def phase_of(freq_hz: np.ndarray, sr: int) -> np.ndarray:
    """Running phase (radians) of an oscillator whose instantaneous frequency is ``freq_hz`` per sample."""
    return 2.0 * np.pi * np.cumsum(freq_hz) / sr
