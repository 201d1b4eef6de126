"""Meta files, records and audio I/O: byte round trips, lossless extras, finding files, refusing bad paths."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from helpers import tone
from reference_data import REFERENCE

from audioicl import AudioICLError, Episode
from audioicl.audio import SAMPLE_RATE, load, pcm16_bytes, resample, write_wav
from audioicl.dataset.meta import (
    dumps_episode,
    episode_from_json,
    find_meta_files,
    iter_meta,
    k_of,
    read_meta,
    resolve_audio_path,
    scan_meta,
    write_meta,
)
from audioicl.records import Clip, Demo, Query

REFERENCE_FILES = sorted(REFERENCE.glob("meta_k*.jsonl"))


@pytest.mark.skipif(not REFERENCE_FILES, reason="reference meta files absent")
@pytest.mark.parametrize("path", REFERENCE_FILES, ids=lambda p: p.name)
def test_reference_files_round_trip_byte_for_byte(path: Path, tmp_path: Path):
    episodes = read_meta(path)
    assert len(episodes) == 2700
    out = tmp_path / path.name
    write_meta(out, episodes)
    assert out.read_bytes() == path.read_bytes()


def rich_episode() -> Episode:
    """Extra keys at every level, non-ASCII text, multi-clip demos and query."""
    demo = Demo(
        (
            Clip("data/x/a.wav", "P", "A", extra={"gain_db": -3.5}),
            Clip("data/x/b.wav", "Q", "B"),
            Clip("data/x/mix.wav", "PQP", "MIX", extra={"source": "café"}),
        ),
        multi=True,
        extra={"note": "demo note"},
    )
    query = Query(
        (Clip("data/x/a.wav", "P", "A"), Clip("data/x/b.wav", "Q", "B"), Clip("data/x/q.wav", None, "MIX")),
        "QQP",
        multi=True,
        extra={"pattern": "BBA"},
    )
    return Episode("AudioICL02101", "AudioRemap", (demo, demo), query, extra={"object": "ünïcode", "seed": 7})


def test_write_then_read_is_lossless_with_extra_fields(tmp_path: Path):
    single = Episode(
        "AudioICL00001",
        "AudioCount",
        (Demo((Clip("data/c/s_1.wav", "1", extra={"sr": 16000}),)),),
        Query((Clip("data/c/s_2.wav", "2"),), "2"),
    )
    path = tmp_path / "meta" / "meta_k2.jsonl"
    write_meta(path, [rich_episode(), single])
    assert read_meta(path) == [rich_episode(), single]
    text = path.read_text(encoding="utf-8")
    assert "café" in text and text.endswith("\n") and text.count("\n") == 2
    assert text.index('"object"') < text.index('"demos"') < text.index('"query"')
    assert not list(tmp_path.glob("meta/*.tmp"))


def test_episode_with_shots_keeps_the_first_demos():
    ep = rich_episode()
    assert ep.k == 2 and ep.with_shots(1).demos == ep.demos[:1]
    with pytest.raises(ValueError):
        ep.with_shots(3)


def test_k_of():
    assert k_of("meta/meta_k3.jsonl") == 3
    assert k_of("x_results_k12.jsonl") == 12
    assert k_of("meta_k0.jsonl") == 0
    with pytest.raises(AudioICLError, match="_k<k>"):
        k_of("meta.jsonl")


def test_find_meta_files_prefers_meta_folder(tmp_path: Path):
    for k in (2, 1, 10):
        (tmp_path / "meta").mkdir(exist_ok=True)
        (tmp_path / "meta" / f"meta_k{k}.jsonl").write_text("")
    (tmp_path / "meta" / "notes.jsonl").write_text("")
    (tmp_path / "meta_k4.jsonl").write_text("")
    found = find_meta_files(tmp_path)
    assert list(found) == [1, 2, 10]
    assert found[10] == tmp_path / "meta" / "meta_k10.jsonl"


def test_find_meta_files_falls_back_to_root_and_refuses_duplicates(tmp_path: Path):
    (tmp_path / "meta_k1.jsonl").write_text("")
    assert find_meta_files(tmp_path) == {1: tmp_path / "meta_k1.jsonl"}
    (tmp_path / "other_k1.jsonl").write_text("")
    with pytest.raises(AudioICLError, match="two meta files for k=1"):
        find_meta_files(tmp_path)


def test_find_meta_files_errors(tmp_path: Path):
    with pytest.raises(AudioICLError, match="not a folder"):
        find_meta_files(tmp_path / "absent")
    with pytest.raises(AudioICLError, match="no meta files"):
        find_meta_files(tmp_path)


def test_resolve_audio_path_refusals(tmp_path: Path):
    root = tmp_path / "root"
    (root / "data").mkdir(parents=True)
    assert resolve_audio_path(root, "data/a.wav") == (root / "data/a.wav").resolve()
    for bad, reason in [
        ("", "empty"),
        ("/etc/passwd", "absolute"),
        ("\\share\\x.wav", "absolute"),
        ("C:/x.wav", "absolute"),
        ("../x.wav", "leaves"),
        ("data/../../x.wav", "leaves"),
    ]:
        with pytest.raises(AudioICLError, match=reason):
            resolve_audio_path(root, bad)
    os.symlink(tmp_path, root / "data" / "escape")
    with pytest.raises(AudioICLError, match="through a link"):
        resolve_audio_path(root, "data/escape/x.wav")


def test_parse_errors_name_file_line_and_id(tmp_path: Path):
    with pytest.raises(AudioICLError) as info:
        episode_from_json(
            {"id": "AudioICL00009", "task": "AudioCount", "demos": [{"audio_path": "a.wav"}]},
            file="m_k1.jsonl",
            line=4,
        )
    assert str(info.value) == "m_k1.jsonl:4 AudioICL00009: record has no 'query'"


def test_iter_meta_stops_at_first_problem_scan_meta_collects_all(tmp_path: Path):
    good = dumps_episode(rich_episode())
    path = tmp_path / "meta_k2.jsonl"
    path.write_bytes(
        "\n".join([good, "[1, 2", "", good, '{"id": "X"}', "\xff"]).encode("utf-8")[:-2] + b"\xff\xfe\n"
    )
    with pytest.raises(AudioICLError) as info:
        list(iter_meta(path))
    assert info.value.line == 2 and "malformed JSON" in info.value.message
    lines, problems = scan_meta(path)
    assert [m.line for m in lines] == [1, 4]
    assert [(p.line, p.id) for p in problems] == [(2, None), (5, "X"), (6, None)]
    assert "not UTF-8" in problems[2].message


def test_unreadable_meta_file(tmp_path: Path):
    lines, problems = scan_meta(tmp_path / "missing_k1.jsonl")
    assert lines == [] and "cannot open" in problems[0].message
    with pytest.raises(AudioICLError, match="cannot open"):
        read_meta(tmp_path / "missing_k1.jsonl")


# --------------------------------------------------------------------------- audio


def test_write_wav_is_pcm16_and_loads_back(tmp_path: Path):
    wave = tone(0.25, amplitude=0.5)
    path = tmp_path / "sub" / "a.wav"
    write_wav(path, wave)
    info = sf.info(str(path))
    assert (info.samplerate, info.channels, info.subtype, info.frames) == (16000, 1, "PCM_16", 4000)
    loaded, sr = load(path)
    assert sr == SAMPLE_RATE and loaded.dtype == np.float32
    assert np.max(np.abs(loaded - wave)) < 1e-4
    assert path.read_bytes() == pcm16_bytes(wave)
    assert not list(path.parent.glob("*.tmp"))


def test_write_wav_clips_out_of_range_samples(tmp_path: Path):
    write_wav(tmp_path / "c.wav", np.array([2.0, -2.0, 0.0], dtype=np.float32))
    loaded, _ = load(tmp_path / "c.wav")
    assert loaded[0] == pytest.approx(32767 / 32768) and loaded[1] == pytest.approx(-32767 / 32768)


def test_load_mixes_stereo_and_resamples(tmp_path: Path):
    left, right = tone(1.0, 440.0, 44100, amplitude=0.5), np.zeros(44100, dtype=np.float32)
    sf.write(str(tmp_path / "s.wav"), np.stack([left, right], axis=1), 44100, subtype="FLOAT")
    wave, sr = load(tmp_path / "s.wav")
    assert sr == 16000 and wave.ndim == 1 and abs(len(wave) - 16000) <= 1
    assert np.sqrt(np.mean(wave**2)) == pytest.approx(0.5 / 2 / np.sqrt(2), rel=0.02)
    native, rate = load(tmp_path / "s.wav", sr=None)
    assert rate == 44100 and len(native) == 44100


def test_resample_keeps_a_tone_and_is_identity_at_same_rate():
    wave = tone(1.0, 1000.0, 48000, amplitude=0.5)
    assert resample(wave, 48000, 48000) is wave
    out = resample(wave, 48000, 16000)
    peak_hz = np.argmax(np.abs(np.fft.rfft(out))) * 16000 / len(out)
    assert len(out) == 16000 and peak_hz == pytest.approx(1000.0, abs=2)


def test_load_errors_name_the_file(tmp_path: Path):
    with pytest.raises(AudioICLError, match="not found"):
        load(tmp_path / "none.wav")
    (tmp_path / "bad.wav").write_bytes(b"garbage")
    with pytest.raises(AudioICLError, match="cannot decode") as info:
        load(tmp_path / "bad.wav")
    assert info.value.file == str(tmp_path / "bad.wav")
