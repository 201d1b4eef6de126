import numpy as np
import pytest

from audioicl import AudioICLError
from audioicl.seeding import rng_for
from audioicl.synth.dsp import rms
from audioicl.synth.machines import ANOMALY_KINDS, MACHINE_TYPES, MachineUnit, machine_clip, machine_unit

SR = 16_000


def _unit(machine_type: str, seed: int = 0) -> MachineUnit:
    return machine_unit(machine_type, rng_for(seed, machine_type, "unit"))


def _clip(unit: MachineUnit, anomaly: str | None, *name: object) -> np.ndarray:
    return machine_clip(unit, rng_for(0, unit.machine_type, *name), anomaly)


def _features(x: np.ndarray) -> np.ndarray:
    """Spectral statistics a listener's ear roughly tracks: the mean and spread over time of 1/5-octave band
    levels, plus the envelope's modulation spectrum (rhythm, rotation-rate modulation, impact trains)."""
    n_fft, hop = 1024, 512
    frames = np.lib.stride_tricks.sliding_window_view(x, n_fft)[::hop] * np.hanning(n_fft)
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    edges = np.unique(np.geomspace(2, n_fft // 2, 41).astype(int))
    bands = np.log(np.add.reduceat(power, edges, axis=1)[:, :-1] + 1e-10)
    envelope = np.sqrt(np.mean(x[: len(x) // 32 * 32].reshape(-1, 32) ** 2, axis=1))
    modulation = np.abs(np.fft.rfft(envelope - envelope.mean())) ** 2
    mod_edges = np.unique(np.geomspace(2, len(modulation) - 1, 31).astype(int))
    mod = np.log(np.add.reduceat(modulation, mod_edges)[:-1] + 1e-10) - np.log(
        envelope.mean() ** 2 * len(envelope)
    )
    return np.concatenate([bands.mean(0) - bands.mean(), bands.std(0), 0.5 * mod])


def test_units_and_clips_are_deterministic():
    for machine_type in ("fan", "valve"):
        assert _unit(machine_type) == _unit(machine_type)
        assert _unit(machine_type, seed=1) != _unit(machine_type)
        unit = _unit(machine_type)
        kind = ANOMALY_KINDS[machine_type][0]
        np.testing.assert_array_equal(_clip(unit, kind, "a"), _clip(unit, kind, "a"))
        np.testing.assert_array_equal(_clip(unit, None, "a"), _clip(unit, None, "a"))
        assert not np.array_equal(_clip(unit, None, "a"), _clip(unit, None, "b"))


def test_every_type_and_anomaly_renders_a_clean_ten_second_clip():
    assert set(ANOMALY_KINDS) == set(MACHINE_TYPES)
    for machine_type in MACHINE_TYPES:
        assert len(ANOMALY_KINDS[machine_type]) >= 3
        unit = _unit(machine_type)
        for anomaly in (None, *ANOMALY_KINDS[machine_type]):
            wave = _clip(unit, anomaly, "render")
            assert wave.dtype == np.float32 and wave.shape == (10 * SR,), (machine_type, anomaly)
            assert np.all(np.isfinite(wave)), (machine_type, anomaly)
            assert np.max(np.abs(wave)) < 0.96, (machine_type, anomaly)  # never clips
            assert 10 ** (-36 / 20) < rms(wave) < 10 ** (-26 / 20), (machine_type, anomaly)


def test_other_lengths_and_rates():
    wave = machine_clip(_unit("gearbox"), rng_for(0, "short"), "wear", seconds=2.5, sr=8000)
    assert wave.shape == (20_000,) and np.all(np.isfinite(wave))


def test_unknown_type_or_anomaly_is_a_clear_error():
    with pytest.raises(AudioICLError, match="unknown machine type"):
        machine_unit("blender", rng_for(0))
    with pytest.raises(AudioICLError, match="no anomaly"):
        machine_clip(_unit("fan"), rng_for(0), "outer_race")


def test_anomalies_are_not_louder():
    for machine_type in MACHINE_TYPES:
        kinds = ANOMALY_KINDS[machine_type]
        normal, anomalous = [], []
        for i in range(6):
            unit = _unit(machine_type, seed=i)
            normal.append(20 * np.log10(rms(_clip(unit, None, "loud", i))))
            anomalous.append(20 * np.log10(rms(_clip(unit, kinds[i % len(kinds)], "loud", i))))
        assert max(normal) > min(anomalous) and max(anomalous) > min(normal), machine_type  # ranges overlap
        assert abs(np.median(normal) - np.median(anomalous)) < 3.0, machine_type


def _auc(negatives: list[float], positives: list[float]) -> float:
    return float(np.mean(np.asarray(positives)[:, None] > np.asarray(negatives)[None, :]))


def test_anomalies_are_audible_in_principle():
    """Distance to the nearest of five normal references (features scaled by the references' spread) ranks
    anomalous clips of the same unit above normal ones far better than chance, for every machine type."""
    for machine_type in MACHINE_TYPES:
        kinds = ANOMALY_KINDS[machine_type]
        unit = _unit(machine_type)
        references = np.array([_features(_clip(unit, None, "ref", i)) for i in range(5)])
        scale = references.std(axis=0) + 0.05

        def score(wave: np.ndarray, references=references, scale=scale) -> float:
            return float(np.min(np.linalg.norm((_features(wave) - references) / scale, axis=1)))

        normal = [score(_clip(unit, None, "query", i)) for i in range(8)]
        anomalous = [score(_clip(unit, kinds[i % len(kinds)], "query", i)) for i in range(8)]
        assert _auc(normal, anomalous) > 0.7, (machine_type, normal, anomalous)


def test_impacts_outside_the_clip_are_dropped_not_piled_onto_its_edges():
    """Regression: events before 0 s or after the end used to land on the first or last sample as clicks."""
    import numpy as np

    from audioicl.synth.machines import _Canvas

    canvas = _Canvas(16_000, 16_000, np.random.default_rng(0), 4000.0)
    response = np.ones(canvas.freqs.size, dtype=np.complex64)
    canvas.impacts(np.array([-0.2, -0.01, 1.0, 3.0]), np.ones(4), response, 0.0)
    assert not canvas.spectrum.any()
    canvas.impacts(np.array([-0.2, 0.5]), np.ones(2), response, 0.0)
    train = np.fft.irfft(canvas.spectrum, n=canvas.n)
    assert np.argmax(np.abs(train)) == 8_000
