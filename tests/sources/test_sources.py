"""Real corpora in the original layouts (``--source KIND=DIR``), built from tiny folders written here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import tone

from audioicl import AudioICLError, BuildOptions, build, read_meta
from audioicl.audio import SAMPLE_RATE, load, write_wav
from audioicl.sources.banks import parse_sources


def plucked(seconds: float, hz: float, seed: int) -> np.ndarray:
    """A decaying tone with a little noise of its own (``seed``): a stand-in for a recorded sound."""
    return tone(seconds, hz, amplitude=0.5, decay=3.0, noise_seed=seed)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("corpora")
    one_shots = root / "one_shot_percussive_sounds"
    for i, (family, name) in enumerate([("1", "78301"), ("1", "26056"), ("5", "425266"), ("5", "143883")]):
        write_wav(one_shots / family / f"{name}.wav", plucked(0.2 + 0.05 * i, 300 + 100 * i, i))
    digits = root / "fsdd"
    for d in range(10):
        for take in range(2):
            write_wav(
                digits / f"{d}_jackson_{take}.wav",
                np.concatenate([np.zeros(800), plucked(0.3, 200 + 40 * d, d)]),
            )
    write_wav(digits / "3_theo_0.wav", plucked(0.3, 500, 0))  # incomplete speaker: ignored
    backgrounds = root / "esc50"
    write_wav(backgrounds / "1-100032-A-0.wav", plucked(5.0, 120, 1) + 0.05)
    write_wav(
        backgrounds / "1-17367-A-10.wav", np.random.default_rng(2).standard_normal(5 * SAMPLE_RATE) * 0.1
    )
    write_wav(backgrounds / "1-115545-A-48.wav", np.zeros(SAMPLE_RATE))  # class 48: not a background class
    machines = root / "dcase"
    for j in range(4):
        write_wav(
            machines / "fan/train" / f"section_00_source_train_normal_{j:04d}_noAttribute.wav",
            plucked(10, 90, j),
        )
        write_wav(
            machines / "fan/test" / f"section_00_source_test_anomaly_{j:04d}_noAttribute.wav",
            plucked(10, 95, j),
        )
    (machines / "notes").mkdir()
    return {"one-shots": one_shots, "digits": digits, "backgrounds": backgrounds, "machines": machines}


def test_parse_sources_checks_kind_and_folder(tmp_path):
    assert parse_sources([f"digits={tmp_path}"]) == (("digits", str(tmp_path.resolve())),)
    with pytest.raises(AudioICLError, match="unknown source kind"):
        parse_sources([f"voices={tmp_path}"])
    with pytest.raises(AudioICLError, match="not a folder"):
        parse_sources([f"digits={tmp_path / 'missing'}"])
    with pytest.raises(AudioICLError, match="KIND=DIR"):
        parse_sources(["digits"])


def test_build_from_real_corpora(corpora, tmp_path):
    sources = parse_sources([f"{kind}={folder}" for kind, folder in corpora.items()])
    tasks = ("AudioCount", "AudioCountHard", "AudioOperator", "AudioRemap", "AnomalyDetect")
    root = tmp_path / "ds"
    build(root, BuildOptions(episodes=3, shots=(1, 2), tasks=tasks, sources=sources), workers=1)
    episodes = read_meta(root / "meta/meta_k2.jsonl")
    by_task = {t: [e for e in episodes if e.task == t] for t in tasks}
    stems = {"78301", "26056", "425266", "143883"}
    for ep in by_task["AudioCount"]:
        name = ep.query.target.audio_path.split("/")[-1]
        assert name.split("_")[1] in stems  # <episode>_<corpus file>_<r>.wav
        wave, _ = load(root / ep.query.target.audio_path)
        assert len(wave) == 10 * SAMPLE_RATE
    for ep in by_task["AudioRemap"]:
        for clip in ep.demos[0].clips[:2]:
            family, name = clip.audio_path.split("/")[-2:]
            assert family in ("1", "5") and name.split("__")[0] in stems  # <corpus file>__<pair>.wav
    recordings = {
        label: [load(path)[0] for path in sorted((corpora["machines"] / "fan" / split).iterdir())]
        for label, split in (("Normal", "train"), ("Anomalous", "test"))
    }
    for ep in by_task["AnomalyDetect"]:
        assert ep.object == "fan"
        for clip in ep.demos[0].clips:  # copied as they are, under neutral names
            assert clip.audio_path.startswith("data/anomalous/fan/test/section_00_")
            copied, _ = load(root / clip.audio_path)
            assert any(np.allclose(copied, r, atol=1 / 32767) for r in recordings[clip.label or ""])
    assert (root / "README.md").read_text().count(str(corpora["digits"])) == 1


def test_unusable_corpora_are_refused(corpora, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(AudioICLError, match="no .wav files"):
        build(
            tmp_path / "a",
            BuildOptions(episodes=1, tasks=("AudioCount",), sources=(("one-shots", str(empty)),)),
        )
    with pytest.raises(AudioICLError, match="every digit 1-9"):
        build(
            tmp_path / "b",
            BuildOptions(
                episodes=1, tasks=("AudioOperator",), sources=(("digits", str(corpora["one-shots"])),)
            ),
        )
    with pytest.raises(
        AudioICLError, match="fan has 4 normal and 4 anomalous recordings; k = 5 demos"
    ) as caught:
        build(
            tmp_path / "c",
            BuildOptions(
                episodes=1, tasks=("AnomalyDetect",), sources=(("machines", str(corpora["machines"])),)
            ),
            workers=2,
        )
    assert caught.value.id == "AudioICL00009"  # the location survives the trip from a worker process
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
