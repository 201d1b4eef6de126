"""Machine sounds standing in for DCASE 2024 Task 2: seven machine types, normal and anomalous recordings.

Each machine type is a small physical-ish model: rotation harmonics whose fundamental follows the unit's speed,
broadband flow or rolling noise, periodic mechanical events (valve clicks, slider end stops, rail joints) that
ring a structural resonance, plus a factory background at a random signal-to-noise ratio. A ``MachineUnit`` fixes
one machine's build (speeds, tooth and blade counts, resonances, spectra); every clip of it varies the way real
recordings do (speed, load, microphone distance, background level, phases). Anomalies are faults with a physical
signature (bearing defect impulse trains, imbalance modulation at the rotation rate, gear sidebands, squeal,
missing or extra valve events ...). Every clip's RMS is set to a level drawn from one distribution (-35 to -27
dBFS) whatever the anomaly, so loudness never gives an anomaly away; the peak stays below 0.95.

Rendering is vectorised: tonal parts are float32 sines in the time domain; noise and impact trains are built as
spectra (impacts through the analytic frequency response of damped resonances) and turned into sound, background
included, with one inverse FFT per clip (two when the whole machine is amplitude-modulated).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from audioicl.errors import AudioICLError

from .dsp import db_to_gain, rms

MACHINE_TYPES = ("ToyCar", "ToyTrain", "bearing", "fan", "gearbox", "slider", "valve")

ANOMALY_KINDS: dict[str, tuple[str, ...]] = {
    "ToyCar": ("bent_shaft", "gear_damage", "tire_damage", "voltage_change"),
    "ToyTrain": ("flat_wheel", "track_damage", "flange_squeal"),
    "bearing": ("outer_race", "inner_race", "imbalance", "looseness"),
    "fan": ("imbalance", "blade_damage", "clogging", "bearing_squeal"),
    "gearbox": ("tooth_crack", "wear", "misalignment"),
    "slider": ("rail_damage", "no_grease", "loose_belt"),
    "valve": ("missing_event", "extra_event", "leak", "contamination"),
}

_TWO_PI = np.float32(2.0 * np.pi)
_PEAK_LIMIT = 0.95
INAUDIBLE_HZ = 20.0  # every clip is silent below this (see _high_pass)


@dataclass(frozen=True)
class MachineUnit:
    """One machine's fixed build; what a field means depends on the type (in parentheses).

    ``rotation_hz``: nominal speed of the main rotating part (fan shaft, bearing shaft, gearbox input shaft, toy
    motor, slider motor at full travel speed, valve pump). ``order``: blades (fan), rolling elements (bearing),
    pinion teeth (gearbox), commutator segments (toys, slider), unused (valve). ``ratio``: motor turns per wheel
    turn (toys), gear ratio (gearbox), ball-to-pitch diameter ratio (bearing), unused otherwise.
    ``cycle_s``: event cycle: rail-joint spacing in seconds (ToyTrain), stroke period (slider), valve program
    period (valve), 0 otherwise. ``duty``: axle gap as a fraction of the joint spacing (ToyTrain), moving
    fraction of each stroke (slider), open fraction of the valve cycle (valve).
    """

    machine_type: str
    rotation_hz: float
    harmonic_db: tuple[float, ...]
    order: int
    ratio: float
    resonance_hz: float
    resonance_q: float
    noise_band_hz: tuple[float, float]
    noise_tilt_db: float
    tone_to_noise_db: float
    cycle_s: float
    duty: float
    background_tilt_db: float
    hum_hz: float


@dataclass(frozen=True)
class _Take:
    """One recording's normal variation, and the strength of its anomaly (if any)."""

    speed: float
    load_db: float
    mic_cutoff_hz: float
    snr_db: float
    level_db: float
    severity: float


def machine_unit(machine_type: str, rng: np.random.Generator) -> MachineUnit:
    """Draw one machine of ``machine_type`` (its fixed parameters)."""
    if machine_type not in _UNIT_RANGES:
        raise AudioICLError(f"unknown machine type {machine_type!r}; known: {', '.join(MACHINE_TYPES)}")
    r = _UNIT_RANGES[machine_type]
    u = rng.uniform
    harmonic_db = tuple(float(-6.0 * np.log2(k) * u(0.6, 1.4) + u(-3.0, 3.0) * (k > 1)) for k in range(1, 9))
    return MachineUnit(
        machine_type=machine_type,
        rotation_hz=float(u(*r.rotation_hz)),
        harmonic_db=harmonic_db,
        order=int(rng.integers(r.order[0], r.order[1] + 1)),
        ratio=float(u(*r.ratio)),
        resonance_hz=float(u(*r.resonance_hz)),
        resonance_q=float(u(*r.resonance_q)),
        noise_band_hz=(float(u(*r.noise_low_hz)), float(u(*r.noise_high_hz))),
        noise_tilt_db=float(u(-4.0, -1.0)),
        tone_to_noise_db=float(u(*r.tone_to_noise_db)),
        cycle_s=float(u(*r.cycle_s)),
        duty=float(u(*r.duty)),
        background_tilt_db=float(u(-6.0, -2.0)),
        hum_hz=float(rng.choice((50.0, 60.0))),
    )


def machine_clip(
    unit: MachineUnit,
    rng: np.random.Generator,
    anomaly: str | None,
    seconds: float = 10.0,
    sr: int = 16_000,
) -> np.ndarray:
    """One recording of ``unit``: normal when ``anomaly`` is None, else with that fault (see ``ANOMALY_KINDS``)."""
    kinds = ANOMALY_KINDS[unit.machine_type]
    if anomaly is not None and anomaly not in kinds:
        raise AudioICLError(f"{unit.machine_type} has no anomaly {anomaly!r}; known: {', '.join(kinds)}")
    n = int(round(seconds * sr))
    take = _Take(
        speed=float(rng.uniform(0.97, 1.03)),
        load_db=float(rng.uniform(-3.0, 3.0)),
        mic_cutoff_hz=float(rng.uniform(3000.0, 8000.0)),
        snr_db=float(rng.uniform(6.0, 18.0)),
        level_db=float(rng.uniform(-35.0, -27.0)),
        severity=float(rng.uniform(0.6, 1.0)),
    )
    canvas = _Canvas(n, sr, rng, take.mic_cutoff_hz)
    _RENDERERS[unit.machine_type](unit, take, anomaly, canvas)
    mixed = np.fft.irfft(_rfft(canvas.render(unit, take.snr_db)) * _high_pass(n, sr), n=n)
    out = mixed * np.float32(db_to_gain(take.level_db) / rms(mixed))
    peak = float(np.max(np.abs(out)))
    if peak > _PEAK_LIMIT:  # rare: a very impulsive clip at the top of the level range
        out *= np.float32(_PEAK_LIMIT / peak)
    return out.astype(np.float32, copy=False)


# ---------------------------------------------------------------------------------------------------------------
# building blocks


@functools.lru_cache(maxsize=4)
def _grid(n: int, sr: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sample times (float64 and float32 seconds) and rfft bin frequencies for ``n`` samples at ``sr``
    (read-only, shared between clips)."""
    t = np.arange(n, dtype=np.float64) / sr
    arrays = (t, t.astype(np.float32), np.fft.rfftfreq(n, 1.0 / sr))
    for array in arrays:
        array.setflags(write=False)
    return arrays


def _read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@functools.lru_cache(maxsize=64)
def _resonance(n: int, sr: int, centre_hz: int, q10: int) -> np.ndarray:
    """Complex response of a causal two-pole band-pass peaking at 1 at ``centre_hz`` (Q = ``q10`` / 10): what an
    impact rings. Cached: parameters are rounded integers, and a unit's resonances repeat in every clip."""
    f = np.maximum(_grid(n, sr)[2], 1e-3)
    return _read_only((1.0 / (1.0 + 1j * (q10 / 10) * (f / centre_hz - centre_hz / f))).astype(np.complex64))


@functools.lru_cache(maxsize=64)
def _band(n: int, sr: int, low_hz: int, high_hz: int, tilt_db10: int = 0) -> np.ndarray:
    """Magnitude of a band-pass with second-order skirts and a spectral tilt of ``tilt_db10`` / 10 dB per octave
    (referenced to 1 kHz). Cached like ``_resonance``."""
    f = np.maximum(_grid(n, sr)[2], 1e-3)
    gain = 1.0 / np.sqrt((1.0 + (low_hz / f) ** 4) * (1.0 + (f / high_hz) ** 4))
    if tilt_db10:
        gain = gain * (f / 1000.0) ** (tilt_db10 / 10 / 6.0206)
    return _read_only(gain.astype(np.float32))


@functools.lru_cache(maxsize=4)
def _high_pass(n: int, sr: int) -> np.ndarray:
    """The microphone's low end: nothing below ``INAUDIBLE_HZ``, a raised-cosine rise to full level at twice
    that. Rotation and wheel rates below 20 Hz (fan and bearing shafts, toy wheels, gearbox output) are
    heard through what they do to audible sound (modulation, harmonics, impacts), never as infrasound that
    a microphone or a feature extractor could pick up while a listener cannot."""
    f = _grid(n, sr)[2]
    rise = np.clip((f - INAUDIBLE_HZ) / INAUDIBLE_HZ, 0.0, 1.0)
    return _read_only((0.5 - 0.5 * np.cos(np.pi * rise)).astype(np.float32))


@functools.lru_cache(maxsize=32)
def _mic(n: int, sr: int, cutoff_hz: int) -> np.ndarray:
    """First-order low-pass: a more distant microphone hears less of the high end."""
    return _read_only((1.0 / np.sqrt(1.0 + (_grid(n, sr)[2] / cutoff_hz) ** 2)).astype(np.float32))


def _rfft(x: np.ndarray) -> np.ndarray:
    """Spectrum of a float32 signal, scale arbitrary (callers normalise levels). numpy 2.4's single-precision
    forward FFT is several times slower with its default (unscaled) normalisation than with "ortho"."""
    return np.fft.rfft(x, norm="ortho")


def _periodic_times(
    rng: np.random.Generator, rate_hz: float, seconds: float, jitter: float = 0.0
) -> np.ndarray:
    """Event times at ``rate_hz`` from a random phase, each moved by up to ``jitter`` of a period."""
    period = 1.0 / rate_hz
    times = rng.uniform(0.0, period) + np.arange(0.0, seconds, period)
    if jitter:
        times = times + rng.uniform(-jitter, jitter, times.size) * period
    return times[(times >= 0.0) & (times < seconds)]


def _poisson_times(rng: np.random.Generator, rate_hz: float, seconds: float) -> np.ndarray:
    return np.sort(rng.uniform(0.0, seconds, rng.poisson(rate_hz * seconds)))


class _Canvas:
    """Accumulates one machine's sound: tonal parts in the time domain, noise and impacts as spectra.

    Component levels are RMS in dB relative to 1 (before the microphone's distance low-pass); the final clip is
    renormalised, so only the ratios matter. Stationary noise only accumulates a power spectrum: all of it, the
    background included, comes from one draw of complex Gaussian bins at the end.
    """

    def __init__(self, n: int, sr: int, rng: np.random.Generator, mic_cutoff_hz: float):
        self.n, self.sr, self.rng = n, sr, rng
        self.t, self.t32, self.freqs = _grid(n, sr)
        self.seconds = n / sr
        self.mic_cutoff_hz = 250 * round(mic_cutoff_hz / 250)
        self.spectrum = np.zeros(self.freqs.size, dtype=np.complex64)  # impacts, time-shaped noise
        self.noise_power = np.zeros(self.freqs.size, dtype=np.float32)  # stationary noise, per bin
        self.tonal = np.zeros(n, dtype=np.float32)
        self.modulation: np.ndarray | None = None
        self._scratch = (np.empty(n), np.empty(n))
        self._frac, self._phase, self._part = (np.empty(n, dtype=np.float32) for _ in range(3))
        # Slow speed drift shared by every rotating part: "warped time" whose derivative is 1 +- about 0.5 %.
        drift = np.zeros(n, dtype=np.float32)
        for _ in range(2):
            rate, depth = rng.uniform(0.1, 0.7), rng.uniform(0.001, 0.003)
            phase = np.float32(rng.uniform(0, 7))
            drift += np.float32(depth / (2 * np.pi * rate)) * np.sin(
                _TWO_PI * np.float32(rate) * self.t32 + phase
            )
        self.warped = self.t + drift

    # -- shapes (cached per rounded parameters) ----------------------------------------------------------------
    def band(self, low_hz: float, high_hz: float, tilt_db: float = 0.0) -> np.ndarray:
        return _band(self.n, self.sr, round(low_hz), round(high_hz), round(tilt_db * 10))

    def ring(self, centre_hz: float, q: float) -> np.ndarray:
        return _resonance(self.n, self.sr, round(centre_hz), round(q * 10))

    def _fraction(self, cycles: np.ndarray, scale: float, out: np.ndarray) -> np.ndarray:
        """The fractional part of ``scale * cycles`` (float64 in) as float32 in ``out``. Works in preallocated
        scratch: fresh megabyte-sized temporaries cost more in page faults than the arithmetic does."""
        wide, whole = self._scratch
        np.multiply(cycles, scale, out=wide)
        np.floor(wide, out=whole)
        np.subtract(wide, whole, out=wide)
        out[...] = wide
        return out

    # -- tonal parts -------------------------------------------------------------------------------------------
    def harmonics(
        self,
        fundamental_hz: float,
        levels_db: dict[float, float],
        level_db: float,
        envelope: np.ndarray | None = None,
        cycles: np.ndarray | None = None,
    ) -> None:
        """Partials at multiples ``k`` (keys) of ``fundamental_hz`` with relative levels (values, dB), together
        at RMS ``level_db``, random phases; ``cycles`` (fundamental periods elapsed) overrides the steady speed."""
        scale = 1.0
        if cycles is None:
            cycles, scale = self.warped, fundamental_hz
        frac = self._fraction(cycles, scale, self._frac)
        amps = np.array([db_to_gain(v) for v in levels_db.values()])
        amps *= db_to_gain(level_db) / np.sqrt(np.sum(amps**2) / 2.0)
        part = self.tonal
        if envelope is not None:
            part = self._part
            part.fill(0.0)
        phase = self._phase
        for k, amp in zip(levels_db, amps, strict=True):
            mic = 1.0 / np.sqrt(1.0 + (k * fundamental_hz / self.mic_cutoff_hz) ** 2)
            if float(k).is_integer():
                np.multiply(frac, np.float32(k), out=phase)
            else:
                self._fraction(cycles, scale * k, phase)
            phase += np.float32(self.rng.random())
            phase *= _TWO_PI
            np.sin(phase, out=phase)
            phase *= np.float32(amp * mic)
            part += phase
        if envelope is not None:
            part *= envelope
            self.tonal += part

    def squeal(self, centre_hz: float, level_db: float, envelope: np.ndarray | None = None) -> None:
        """Friction squeal: a wandering near-tonal partial and its octave, sounding where ``envelope`` is 1
        (by default it comes and goes every few seconds)."""
        wander = np.float32(centre_hz * 0.02) * np.sin(
            _TWO_PI * np.float32(self.rng.uniform(2, 6)) * self.t32
        )
        cycles = np.cumsum(np.float64(centre_hz) + wander) / self.sr
        if envelope is None:
            rate = np.float32(self.rng.uniform(0.2, 0.5))
            envelope = np.clip(np.sin(_TWO_PI * rate * self.t32 + self.rng.uniform(0, 7)) * 2 + 0.5, 0, 1)
        self.harmonics(centre_hz, {1: 0.0, 2: -8.0}, level_db, envelope=envelope, cycles=cycles)

    def modulate(self, depth: float, rate_hz: float) -> None:
        """Amplitude modulation of the whole machine at ``rate_hz`` (e.g. imbalance at the rotation rate)."""
        phase = self._fraction(self.warped, rate_hz, np.empty(self.n, dtype=np.float32))
        phase += np.float32(self.rng.random())
        env = 1.0 + np.float32(depth) * np.sin(_TWO_PI * phase)
        self.modulation = env if self.modulation is None else self.modulation * env

    # -- noise and impacts (spectral) --------------------------------------------------------------------------
    def _mean_square(self, power: np.ndarray) -> float:
        """Mean square of the real signal whose rfft bins have (expected) squared magnitude ``power``."""
        return 2.0 * float(np.sum(power, dtype=np.float64)) / self.n**2

    def noise(self, gain: np.ndarray, level_db: float, envelope: np.ndarray | None = None) -> None:
        """Gaussian noise with magnitude response ``gain`` (per rfft bin), optionally shaped in time first."""
        if envelope is None:
            power = gain * gain
            # complex bins with unit-variance real and imaginary parts: expected |X|^2 is 2 |gain|^2
            self.noise_power += power * np.float32(db_to_gain(2 * level_db) / self._mean_square(2 * power))
        else:
            white = self.rng.standard_normal(self.n, dtype=np.float32) * envelope.astype(np.float32)
            self._add_spectrum(_rfft(white) * gain, level_db)

    def impacts(self, times: np.ndarray, amps: np.ndarray, response: np.ndarray, level_db: float) -> None:
        """Impulses at ``times`` (s) with ``amps`` ringing the complex frequency ``response``; events outside
        the clip are dropped (piling them onto its first or last sample made loud clicks at the edges)."""
        idx = np.round(np.asarray(times) * self.sr).astype(np.int64)
        inside = (idx >= 0) & (idx < self.n)
        weights = np.broadcast_to(np.asarray(amps, dtype=np.float64), idx.shape)[inside]
        train = np.bincount(idx[inside], weights=weights, minlength=self.n)
        self._add_spectrum(_rfft(train.astype(np.float32)) * response, level_db)

    def _add_spectrum(self, spectrum: np.ndarray, level_db: float) -> None:
        mean_square = self._mean_square(spectrum.real**2 + spectrum.imag**2)
        if mean_square > 0.0:
            self.spectrum += spectrum * np.float32(db_to_gain(level_db) / np.sqrt(mean_square))

    # -- the clip ----------------------------------------------------------------------------------------------
    def render(self, unit: MachineUnit, snr_db: float) -> np.ndarray:
        """The machine plus the factory background at ``snr_db`` (machine power estimated from the parts)."""
        mic = _mic(self.n, self.sr, self.mic_cutoff_hz)
        spectrum = self.spectrum * mic
        noise_power = self.noise_power * (mic * mic)
        machine_ms = (
            self._mean_square(spectrum.real**2 + spectrum.imag**2)
            + self._mean_square(2 * noise_power)
            + float(np.dot(self.tonal, self.tonal)) / self.n
        )
        if self.modulation is not None:
            machine_ms *= float(np.dot(self.modulation, self.modulation)) / self.n
        # the background's tilt varies a little between clips, in coarse steps that keep the shape cache small
        tilt_db = unit.background_tilt_db + 0.5 * int(self.rng.integers(-2, 3))
        background = self.band(30.0, 7000.0, tilt_db) ** 2
        background *= np.float32(machine_ms / 10 ** (snr_db / 10) / self._mean_square(2 * background))
        hum = self._hum(unit.hum_hz, np.sqrt(machine_ms) * db_to_gain(-snr_db - 20.0))
        if self.modulation is None:  # one inverse FFT for everything
            spectrum += self._gaussian_bins() * np.sqrt(noise_power + background)
            return np.fft.irfft(spectrum, n=self.n) + self.tonal + hum
        spectrum += self._gaussian_bins() * np.sqrt(noise_power)
        machine = (np.fft.irfft(spectrum, n=self.n) + self.tonal) * self.modulation
        return machine + np.fft.irfft(self._gaussian_bins() * np.sqrt(background), n=self.n) + hum

    def _gaussian_bins(self) -> np.ndarray:
        size = self.freqs.size
        bins = np.empty(size, dtype=np.complex64)
        bins.real = self.rng.standard_normal(size, dtype=np.float32)
        bins.imag = self.rng.standard_normal(size, dtype=np.float32)
        return bins

    def _hum(self, mains_hz: float, amplitude: float) -> np.ndarray:
        """Faint mains hum (fundamental and two harmonics) at peak ``amplitude``."""
        hum = np.zeros(self.n, dtype=np.float32)
        for k in (1, 2, 3):
            phase = np.float32(self.rng.uniform(0, 7))
            hum += np.float32(amplitude * db_to_gain(-6.0 * (k - 1))) * np.sin(
                _TWO_PI * np.float32(k * mains_hz) * self.t32 + phase
            )
        return hum


# ---------------------------------------------------------------------------------------------------------------
# machine types


def _rotation_levels(unit: MachineUnit, count: int, load_db: float = 0.0) -> dict[float, float]:
    """Relative levels of rotation harmonics 1..count; load tilts energy towards the higher ones."""
    return {k: unit.harmonic_db[k - 1] + load_db * (k - 1) / 8 for k in range(1, count + 1)}


def _fan(unit: MachineUnit, take: _Take, anomaly: str | None, c: _Canvas) -> None:
    s = take.severity
    speed = take.speed * (1.0 - 0.05 * s if anomaly == "clogging" else 1.0)
    shaft = unit.rotation_hz * speed
    blade_pass = unit.order * shaft
    low, high = unit.noise_band_hz
    tone_db = unit.tone_to_noise_db + take.load_db
    if anomaly == "clogging":  # choked flow: darker, rumblier flow noise and a stronger, lower blade tone
        low, high, tone_db = low * 0.6, high * 0.55, tone_db + 4.0 * s
        c.noise(c.band(20.0, 200.0), -6.0 + 3 * s)
    c.noise(c.band(low, high, unit.noise_tilt_db), 0.0)
    c.noise(np.abs(c.ring(unit.resonance_hz, unit.resonance_q)), -14.0)
    c.harmonics(blade_pass, _rotation_levels(unit, 4, take.load_db), tone_db)
    shaft_db = tone_db - 14.0 + (14.0 * s if anomaly == "imbalance" else 0.0)
    c.harmonics(shaft, {1: 0.0, 2: -6.0}, shaft_db)
    if anomaly == "imbalance":
        c.modulate(0.25 + 0.2 * s, shaft)
    elif anomaly == "blade_damage":  # a tick once per revolution and sidebands around the blade-pass tone
        times = _periodic_times(c.rng, shaft, c.seconds, jitter=0.01)
        c.impacts(times, np.ones(times.size), c.ring(unit.resonance_hz, 6.0), -12.0 + 6 * s)
        c.harmonics(shaft, {unit.order - 1: 0.0, unit.order + 1: 0.0}, tone_db - 8.0 + 4 * s)
    elif anomaly == "bearing_squeal":
        c.squeal(c.rng.uniform(2500.0, 5500.0), -11.0 + 6 * s)


def _bearing(unit: MachineUnit, take: _Take, anomaly: str | None, c: _Canvas) -> None:
    s = take.severity
    shaft = unit.rotation_hz * take.speed
    outer = unit.order / 2 * (1 - unit.ratio) * shaft  # ball-pass frequency, outer race
    inner = unit.order / 2 * (1 + unit.ratio) * shaft  # ball-pass frequency, inner race
    ring = c.ring(unit.resonance_hz, unit.resonance_q)
    c.noise(c.band(*unit.noise_band_hz, unit.noise_tilt_db), 0.0)
    c.noise(np.abs(ring), -6.0)
    levels = _rotation_levels(unit, 5, take.load_db)
    if anomaly == "looseness":  # half-order and raised higher orders
        levels = {0.5: -4.0, **{k: v + 8.0 for k, v in levels.items()}}
    shaft_db = unit.tone_to_noise_db + take.load_db + (12.0 * s if anomaly == "imbalance" else 0.0)
    c.harmonics(shaft, levels, shaft_db)
    c.harmonics(2 * unit.hum_hz, {1: 0.0, 2: -10.0}, unit.tone_to_noise_db - 6.0)
    if anomaly == "outer_race":
        times = _periodic_times(c.rng, outer, c.seconds, jitter=0.02)
        c.impacts(times, c.rng.uniform(0.8, 1.2, times.size), ring, -7.0 + 6 * s)
    elif anomaly == "inner_race":  # the defect passes through the load zone once per revolution
        times = _periodic_times(c.rng, inner, c.seconds, jitter=0.02)
        load_zone = 0.5 + 0.5 * np.cos(2 * np.pi * shaft * times)
        c.impacts(times, load_zone, ring, -7.0 + 6 * s)
    elif anomaly == "imbalance":
        c.modulate(0.2 + 0.2 * s, shaft)
    elif anomaly == "looseness":  # rattling: irregular knocks clustered in bursts
        bursts = _poisson_times(c.rng, 1.5, c.seconds)
        times = (bursts[:, None] + np.cumsum(c.rng.uniform(0.005, 0.03, (bursts.size, 6)), axis=1)).ravel()
        c.impacts(times, c.rng.uniform(0.3, 1.0, times.size), c.ring(900.0, 4.0), -18.0 + 6 * s)


def _gearbox(unit: MachineUnit, take: _Take, anomaly: str | None, c: _Canvas) -> None:
    s = take.severity
    shaft = unit.rotation_hz * take.speed
    mesh = unit.order * shaft
    output = shaft / unit.ratio
    tone_db = unit.tone_to_noise_db + take.load_db
    mesh_levels = {1.0: 0.0, 2.0: -8.0 + take.load_db, 3.0: -14.0}
    if anomaly == "wear":  # worn flanks: stronger mesh overtones and rough noise around the mesh frequency
        mesh_levels = {1.0: 0.0, 2.0: 2.0 * s + take.load_db, 3.0: -6.0 + 4.0 * s}
        c.noise(np.abs(c.ring(2 * mesh, 3.0)), -10.0 + 6 * s)
    c.noise(c.band(*unit.noise_band_hz, unit.noise_tilt_db), 0.0)
    c.noise(np.abs(c.ring(unit.resonance_hz, unit.resonance_q)), -10.0)
    c.harmonics(mesh, mesh_levels, tone_db)
    c.harmonics(
        shaft, _rotation_levels(unit, 3), tone_db - 14.0 + (14.0 * s if anomaly == "misalignment" else 0.0)
    )
    # Sidebands: mesh +- shaft orders are always faintly there (eccentricity); faults raise them.
    sideband_db = {"tooth_crack": 10.0, "wear": 6.0, "misalignment": 8.0}.get(anomaly or "", 0.0) * s
    sidebands = {unit.order + d: 0.0 for d in (-2, -1, 1, 2)}
    c.harmonics(shaft, sidebands, tone_db - 20.0 + sideband_db)
    c.harmonics(output, {1: 0.0, 2: -6.0}, tone_db - 18.0 + (8.0 * s if anomaly == "wear" else 0.0))
    if anomaly == "tooth_crack":  # one knock per input-shaft revolution
        times = _periodic_times(c.rng, shaft, c.seconds, jitter=0.005)
        c.impacts(times, np.ones(times.size), c.ring(unit.resonance_hz, 8.0), -7.0 + 6 * s)
    elif anomaly == "misalignment":
        c.modulate(0.15 + 0.15 * s, 2 * shaft)


def _toy_car(unit: MachineUnit, take: _Take, anomaly: str | None, c: _Canvas) -> None:
    s = take.severity
    speed = take.speed * (
        1.0 + (0.08 + 0.06 * s) * c.rng.choice((-1, 1)) if anomaly == "voltage_change" else 1.0
    )
    motor = unit.rotation_hz * speed
    wheel = motor / unit.ratio
    levels = _rotation_levels(unit, 8, take.load_db)
    levels[unit.order] += 6.0  # commutator whine
    if anomaly == "voltage_change":  # brush arcing: brighter whine
        levels = {k: v + (2.0 * s if k > 3 else 0.0) for k, v in levels.items()}
    c.noise(c.band(*unit.noise_band_hz, unit.noise_tilt_db), 0.0)
    c.harmonics(motor, levels, unit.tone_to_noise_db + take.load_db)
    c.harmonics(motor, {10.0: 0.0, 20.0: -8.0}, unit.tone_to_noise_db - 10.0)  # pinion mesh, 10 teeth
    if anomaly == "bent_shaft":
        c.modulate(0.2 + 0.2 * s, wheel)
        c.harmonics(wheel, {1: 0.0, 2: -4.0}, unit.tone_to_noise_db - 12.0 + 6 * s)
    elif anomaly == "gear_damage":  # a broken tooth on the intermediate gear (a third of the motor speed)
        times = _periodic_times(c.rng, motor / 3.0, c.seconds, jitter=0.01)
        c.impacts(times, np.ones(times.size), c.ring(unit.resonance_hz * 2.5, 6.0), -8.0 + 6 * s)
    elif anomaly == "tire_damage":  # a thump every wheel turn
        times = _periodic_times(c.rng, wheel, c.seconds, jitter=0.01)
        c.impacts(times, np.ones(times.size), c.ring(unit.resonance_hz * 0.4, 3.0), -8.0 + 6 * s)


def _rail_click(c: _Canvas, unit: MachineUnit) -> np.ndarray:
    return c.ring(unit.resonance_hz, unit.resonance_q) + 0.7 * c.ring(350.0, 2.0)


def _toy_train(unit: MachineUnit, take: _Take, anomaly: str | None, c: _Canvas) -> None:
    s = take.severity
    motor = unit.rotation_hz * take.speed
    wheel = motor / unit.ratio
    c.noise(c.band(*unit.noise_band_hz, unit.noise_tilt_db), 0.0)
    c.harmonics(motor, _rotation_levels(unit, 6, take.load_db), unit.tone_to_noise_db + take.load_db)
    # Rail joints: each joint clicks twice (the two axles of a bogie pass it).
    joints = _periodic_times(c.rng, take.speed / unit.cycle_s, c.seconds, jitter=0.01)
    gap = unit.duty * unit.cycle_s / take.speed
    times = np.concatenate([joints, joints + gap])
    amps = np.concatenate([np.ones(joints.size), np.full(joints.size, 0.8)]) * c.rng.uniform(
        0.9, 1.1, 2 * joints.size
    )
    c.impacts(times, amps, _rail_click(c, unit), -11.0)
    if anomaly == "track_damage":  # broken rail: dull clacks between the joints, both axles again
        extra = _poisson_times(c.rng, 2.0 + 1.5 * s, c.seconds)
        clack = c.ring(unit.resonance_hz * 0.5, 6.0) + c.ring(200.0, 3.0)
        c.impacts(np.concatenate([extra, extra + gap]), np.ones(2 * extra.size), clack, -12.0 + 6 * s)
    elif anomaly == "flat_wheel":  # a flat spot hits the rail every wheel turn
        hits = _periodic_times(c.rng, wheel, c.seconds, jitter=0.01)
        c.impacts(hits, np.ones(hits.size), c.ring(800.0, 4.0), -8.0 + 6 * s)
    elif anomaly == "flange_squeal":
        c.squeal(c.rng.uniform(2000.0, 5000.0), -12.0 + 6 * s)


def _stroke_profile(c: _Canvas, half: float, moving: float) -> tuple[np.ndarray, float]:
    """Slider travel: a stroke starts every ``half`` seconds (alternating direction) from a random offset and
    moves for ``moving`` seconds. Returns the velocity (0..1, a raised-sine bump per stroke) and the offset."""
    offset = c.rng.uniform(0.0, half)
    position = (c.t32 - np.float32(offset)) / np.float32(half)
    u = np.minimum((position - np.floor(position)) * np.float32(half / moving), np.float32(1.0))
    velocity = np.sin(np.float32(np.pi) * u)
    velocity *= velocity  # sin(pi u)^2, zero from u = 1 until the next stroke
    return velocity, offset


def _slider(unit: MachineUnit, take: _Take, anomaly: str | None, c: _Canvas) -> None:
    s = take.severity
    half = unit.cycle_s / 2 / take.speed
    moving = unit.duty * half
    velocity, offset = _stroke_profile(c, half, moving)
    motor_hz = unit.rotation_hz * take.speed
    speed_curve = velocity
    if anomaly == "loose_belt":  # slipping belt: the motor speed wobbles
        wobble = np.sin(_TWO_PI * np.float32(c.rng.uniform(4, 8)) * c.t32)
        speed_curve = velocity * (1.0 + np.float32(0.15 * s) * wobble)
    cycles = np.cumsum(speed_curve) * (motor_hz / c.sr)
    levels = _rotation_levels(unit, 6, take.load_db)
    levels[unit.order] += 6.0
    c.harmonics(motor_hz, levels, unit.tone_to_noise_db + take.load_db, envelope=velocity, cycles=cycles)
    low, high = unit.noise_band_hz
    rough_db = 0.0
    if anomaly == "no_grease":  # dry rail: rougher, brighter rolling noise and squeal while moving
        low, high, rough_db = low * 1.5, high * 1.2, 3.0 * s
        c.squeal(c.rng.uniform(1500.0, 4000.0), -8.0 + 6 * s, envelope=velocity)
    c.noise(c.band(low, high, unit.noise_tilt_db), rough_db, envelope=velocity)
    c.noise(c.band(100.0, 6000.0, -3.0), -18.0)  # drive electronics, always on
    starts = offset + half * np.arange(-1, int(c.seconds / half) + 2)
    stops = starts + moving
    stop_amps = c.rng.uniform(0.8, 1.2, stops.size)
    clunk = c.ring(unit.resonance_hz, unit.resonance_q) + 0.5 * c.ring(250.0, 2.0)
    c.impacts(stops, stop_amps, clunk, -18.0)
    if anomaly == "loose_belt":  # belt slap when the motion starts
        c.impacts(starts + 0.02, np.ones(starts.size), c.ring(400.0, 6.0), -18.0 + 6 * s)
    elif anomaly == "rail_damage":  # a dent the carriage rolls over, at the same place in both directions
        place = c.rng.uniform(0.3, 0.7)
        u = np.linspace(0.0, 1.0, 257)
        travelled = u - np.sin(2 * np.pi * u) / (2 * np.pi)  # integral of sin^2 bump, normalised
        forward = np.interp(place, travelled, u) * moving
        backward = np.interp(1.0 - place, travelled, u) * moving
        hits = starts + np.where(np.arange(starts.size) % 2 == 0, forward, backward)
        c.impacts(hits, np.ones(hits.size), c.ring(1800.0, 20.0), -16.0 + 6 * s)


def _valve(unit: MachineUnit, take: _Take, anomaly: str | None, c: _Canvas) -> None:
    s = take.severity
    period = unit.cycle_s * c.rng.uniform(0.99, 1.01)
    open_s = unit.duty * period
    opens = c.rng.uniform(-period, 0.0) + period * np.arange(int(c.seconds / period) + 2)
    closes = opens + open_s
    bounces = np.zeros(0)
    if anomaly == "missing_event":  # the valve sticks: whole cycles do not happen
        inside = np.flatnonzero((opens > 0.0) & (opens < c.seconds - open_s))
        drop = c.rng.choice(inside, size=min(inside.size, 1 + int(s > 0.8)), replace=False)
        keep = np.setdiff1d(np.arange(opens.size), drop)
        opens, closes = opens[keep], closes[keep]
    elif anomaly == "extra_event":  # spurious short openings while the valve should be closed
        cycles = c.rng.choice(opens.size, size=3 + int(3 * s))
        extra = closes[cycles] + c.rng.uniform(0.1, 0.8, cycles.size) * (period - open_s - 0.2)
        opens = np.concatenate([opens, extra])
        closes = np.concatenate([closes, extra + c.rng.uniform(0.06, 0.15, extra.size)])
    elif anomaly == "contamination":  # debris: sluggish closing that bounces, and a whistle through the seat
        closes = closes + c.rng.uniform(0.0, 0.12 * s, closes.size)
        bounces = closes + c.rng.uniform(0.015, 0.04, closes.size)
    gate = _open_gate(c.t, opens, closes)
    c.harmonics(unit.rotation_hz * take.speed, _rotation_levels(unit, 6, take.load_db), unit.tone_to_noise_db)
    leak = db_to_gain(-10.0 + 6 * s) if anomaly == "leak" else 0.0
    c.noise(c.band(*unit.noise_band_hz, unit.noise_tilt_db), 0.0, envelope=np.maximum(gate, leak))
    if anomaly == "contamination":
        c.squeal(c.rng.uniform(2000.0, 4000.0), -6.0 + 6 * s, envelope=gate)
    click = c.ring(unit.resonance_hz, unit.resonance_q) + 0.8 * c.ring(220.0, 2.0)
    times = np.concatenate([opens, closes, bounces])
    amps = np.concatenate([np.ones(opens.size), np.full(closes.size, 0.7), np.full(bounces.size, 0.4)])
    c.impacts(times, amps * c.rng.uniform(0.9, 1.1, times.size), click, -16.0)


def _open_gate(t: np.ndarray, opens: np.ndarray, closes: np.ndarray, ramp_s: float = 0.015) -> np.ndarray:
    """1 while the valve is open (between an open and the next close), with short linear ramps."""
    gate = np.zeros(t.size, dtype=np.float32)
    sr = 1.0 / (t[1] - t[0])
    for start, stop in zip(opens, closes, strict=True):
        a, b = max(int(start * sr), 0), min(int((stop + ramp_s) * sr), t.size)
        if b <= a:
            continue
        segment = t[a:b]
        up = np.clip((segment - start) / ramp_s, 0.0, 1.0)
        down = np.clip((stop + ramp_s - segment) / ramp_s, 0.0, 1.0)
        gate[a:b] = np.maximum(gate[a:b], np.minimum(up, down))
    return gate


@dataclass(frozen=True)
class _UnitRanges:
    rotation_hz: tuple[float, float]
    order: tuple[int, int]
    ratio: tuple[float, float]
    resonance_hz: tuple[float, float]
    resonance_q: tuple[float, float]
    noise_low_hz: tuple[float, float]
    noise_high_hz: tuple[float, float]
    tone_to_noise_db: tuple[float, float]
    cycle_s: tuple[float, float] = (0.0, 0.0)
    duty: tuple[float, float] = (0.0, 0.0)


# The ranges a unit's build is drawn from (see MachineUnit for what each field means per type).
_UNIT_RANGES: dict[str, _UnitRanges] = {
    "ToyCar": _UnitRanges(
        rotation_hz=(80, 160),
        order=(3, 5),
        ratio=(10, 25),
        resonance_hz=(600, 1500),
        resonance_q=(3, 6),
        noise_low_hz=(150, 300),
        noise_high_hz=(4000, 6500),
        tone_to_noise_db=(-2, 4),
    ),
    "ToyTrain": _UnitRanges(
        rotation_hz=(60, 140),
        order=(3, 5),
        ratio=(8, 16),
        resonance_hz=(2000, 4000),
        resonance_q=(8, 15),
        noise_low_hz=(150, 300),
        noise_high_hz=(3500, 6000),
        tone_to_noise_db=(-4, 2),
        cycle_s=(0.4, 0.9),
        duty=(0.1, 0.25),
    ),
    "bearing": _UnitRanges(
        rotation_hz=(15, 50),
        order=(7, 12),
        ratio=(0.15, 0.3),
        resonance_hz=(2500, 5000),
        resonance_q=(8, 20),
        noise_low_hz=(200, 400),
        noise_high_hz=(5000, 7500),
        tone_to_noise_db=(-14, -8),
    ),
    "fan": _UnitRanges(
        rotation_hz=(12, 25),
        order=(5, 9),
        ratio=(1, 1),
        resonance_hz=(1500, 3500),
        resonance_q=(4, 8),
        noise_low_hz=(50, 120),
        noise_high_hz=(4000, 7000),
        tone_to_noise_db=(-10, -4),
    ),
    "gearbox": _UnitRanges(
        rotation_hz=(15, 40),
        order=(15, 35),
        ratio=(1.5, 3.0),
        resonance_hz=(1000, 3000),
        resonance_q=(6, 12),
        noise_low_hz=(100, 200),
        noise_high_hz=(4000, 6500),
        tone_to_noise_db=(0, 6),
    ),
    "slider": _UnitRanges(
        rotation_hz=(120, 250),
        order=(2, 4),
        ratio=(1, 1),
        resonance_hz=(700, 1500),
        resonance_q=(8, 16),
        noise_low_hz=(300, 600),
        noise_high_hz=(4000, 6500),
        tone_to_noise_db=(-2, 4),
        cycle_s=(1.2, 2.5),
        duty=(0.5, 0.8),
    ),
    "valve": _UnitRanges(
        rotation_hz=(20, 50),
        order=(1, 1),
        ratio=(1, 1),
        resonance_hz=(2500, 5000),
        resonance_q=(15, 30),
        noise_low_hz=(800, 1500),
        noise_high_hz=(5000, 7500),
        tone_to_noise_db=(-8, -2),
        cycle_s=(1.5, 3.5),
        duty=(0.15, 0.35),
    ),
}

_RENDERERS: dict[str, Callable[[MachineUnit, _Take, str | None, _Canvas], None]] = {
    "ToyCar": _toy_car,
    "ToyTrain": _toy_train,
    "bearing": _bearing,
    "fan": _fan,
    "gearbox": _gearbox,
    "slider": _slider,
    "valve": _valve,
}
