"""The dataset checker on small generated datasets: each check must find its problem and only its problem."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from audioicl import AudioICLError, Episode
from audioicl.audio import write_wav
from audioicl.dataset.meta import dumps_episode, write_meta
from audioicl.dataset.validate import (
    ALPHABET,
    BAD_AUDIO,
    BAD_PATH,
    DUPLICATE_ID,
    EMPTY_META,
    K_MISMATCH,
    LABEL,
    MALFORMED,
    MANIFEST,
    MISSING_AUDIO,
    SHAPE,
    SHOWN_PER_KIND,
    UNKNOWN_TASK,
    LostEpisodes,
    Report,
    check_audio,
    format_report,
    validate,
)
from audioicl.records import Clip, Demo, Query

# --------------------------------------------------------------------------- a small clean dataset


def count_episode(ep_id: str = "AudioICL00001", k: int = 2) -> Episode:
    demos = tuple(Demo((Clip(f"data/audiocount/easy/hit_{r}.wav", str(r)),)) for r in (1, 2)[:k])
    return Episode(ep_id, "AudioCount", demos, Query((Clip("data/audiocount/easy/hit_3.wav", "3"),), "3"))


def remap_demo(a: str, b: str, mix: str, pattern: str) -> Demo:
    return Demo(
        (
            Clip("data/one_shot/one_shot_percussive_sounds/0/a.wav", a, "A"),
            Clip("data/one_shot/one_shot_percussive_sounds/1/b.wav", b, "B"),
            Clip(f"data/audioremap/MIX__{pattern}__x.wav", mix, "MIX"),
        ),
        multi=True,
    )


def remap_episode(k: int = 2) -> Episode:
    demos = (remap_demo("P", "Q", "PQP", "ABA"), remap_demo("P", "Q", "PPQ", "AAB"))[:k]
    query_clips = (
        Clip("data/one_shot/one_shot_percussive_sounds/0/a.wav", "P", "A"),
        Clip("data/one_shot/one_shot_percussive_sounds/1/b.wav", "Q", "B"),
        Clip("data/audioremap/MIX__BBA__x.wav", None, "MIX"),
    )
    return Episode("AudioICL02101", "AudioRemap", demos, Query(query_clips, "QQP", multi=True))


def anomaly_episode(k: int = 2) -> Episode:
    demos = tuple(
        Demo(
            (
                Clip(f"data/anomalous/fan/train/normal_{i}.wav", "Normal", "Normal"),
                Clip(f"data/anomalous/fan/test/anomaly_{i}.wav", "Anomalous", "Anomalous"),
            ),
            multi=True,
        )
        for i in range(k)
    )
    query = Query((Clip("data/anomalous/fan/test/query.wav", None, "Query"),), "Normal", multi=True)
    return Episode("AudioICL02401", "AnomalyDetect", demos, query, extra={"object": "fan"})


def episodes(k: int) -> list[Episode]:
    return [count_episode(k=k), remap_episode(k), anomaly_episode(k)]


def write_audio(root: Path, eps: list[Episode]) -> None:
    for ep in eps:
        for clip in ep.clips():
            if not (root / clip.audio_path).exists():
                write_wav(root / clip.audio_path, np.full(1600, 0.1, dtype=np.float32))


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    for k in (1, 2):
        write_meta(root / "meta" / f"meta_k{k}.jsonl", episodes(k))
    write_audio(root, episodes(2))
    for letter in "ABCDEFGHIJKLMNOPQRSTUVWXYZ":
        write_wav(root / "data/MorseCode/alphabet" / f"{letter}.wav", np.full(800, 0.1, dtype=np.float32))
    return root


def meta_path(root: Path, k: int) -> Path:
    return root / "meta" / f"meta_k{k}.jsonl"


def write_lines(root: Path, k: int, lines: list[str]) -> None:
    meta_path(root, k).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def kinds(report: Report) -> list[str]:
    return [p.kind for p in report.problems]


# --------------------------------------------------------------------------- clean data


def test_clean_dataset_has_no_problems_and_full_tables(dataset: Path):
    report = validate(dataset)
    assert report.problems == [], format_report(report)
    assert report.ok
    assert [(r.task, r.k, r.episodes) for r in report.tables] == [
        ("AudioCount", 1, 1),
        ("AudioCount", 2, 1),
        ("AudioRemap", 1, 1),
        ("AudioRemap", 2, 1),
        ("AnomalyDetect", 1, 1),
        ("AnomalyDetect", 2, 1),
    ]
    count_k2 = report.tables[1]
    assert count_k2.clips == 3
    assert count_k2.seconds == pytest.approx(0.3)
    assert count_k2.min_seconds == count_k2.max_seconds == pytest.approx(0.1)
    assert count_k2.query_labels == {"3": 1}
    assert {n.task: n.nested for n in report.nesting} == {
        "AudioCount": True,
        "AudioRemap": True,
        "AnomalyDetect": True,
    }
    # 3 + 5 + 5 distinct meta paths, and the 26 alphabet letters
    assert report.audio_files == 3 + 5 + 5 + 26
    assert "no problems found" in format_report(report)


def test_missing_root_and_missing_meta_are_usage_errors(tmp_path: Path):
    with pytest.raises(AudioICLError, match="not a folder"):
        validate(tmp_path / "nope")
    with pytest.raises(AudioICLError, match="no meta files"):
        validate(tmp_path)


# --------------------------------------------------------------------------- meta lines


def test_malformed_lines_do_not_hide_the_others(dataset: Path):
    good = [dumps_episode(ep) for ep in episodes(2)]
    bad_label = good[0].replace('"label": "1"', '"label": 1')
    no_query = json.dumps({"id": "AudioICL00002", "task": "AudioCount", "demos": []})
    outside = dumps_episode(count_episode("AudioICL00003")).replace('"label": "3"', '"label": "9"')
    write_lines(dataset, 2, ["{not json", bad_label, good[1], no_query, outside, good[2]])
    report = validate(dataset)
    k2 = str(meta_path(dataset, 2))
    found = [(p.kind, p.file, p.line) for p in report.problems if p.file == k2]
    assert (MALFORMED, k2, 1) in found
    assert (MALFORMED, k2, 2) in found
    assert (MALFORMED, k2, 4) in found
    assert (LABEL, k2, 5) in found
    messages = {p.line: p.message for p in report.problems if p.file == k2}
    assert "malformed JSON" in messages[1]
    assert "demo 1: 'label' must be a string, got int" in messages[2]
    assert "no 'query'" in messages[4]
    assert "'9'" in messages[5] and "integers 1..8" in messages[5]
    lines = [p.line for p in report.problems if p.file == k2]
    assert lines == sorted(lines)


def test_problem_lines_read_file_line_id(dataset: Path):
    line = dumps_episode(count_episode()).replace('"label": "3"', '"label": "9"')
    write_lines(dataset, 2, [line])
    report = validate(dataset)
    [problem] = [p for p in report.problems if p.kind == LABEL]
    assert str(problem) == (
        f"{meta_path(dataset, 2)}:1 AudioICL00001: query label '9' is not in integers 1..8"
    )


def test_unknown_task_names_the_near_one_or_lists_known_ones(dataset: Path):
    ep = count_episode()
    write_meta(meta_path(dataset, 2), [Episode(ep.id, "AudioCounting", ep.demos, ep.query)])
    [problem] = [p for p in validate(dataset).problems if p.kind == UNKNOWN_TASK]
    assert problem.message == "unknown task 'AudioCounting' (did you mean AudioCount?)"
    write_meta(meta_path(dataset, 2), [Episode(ep.id, "Zzz", ep.demos, ep.query)])
    [problem] = [p for p in validate(dataset).problems if p.kind == UNKNOWN_TASK]
    assert "'Zzz'" in problem.message
    assert "AudioCount, AudioCountHard" in problem.message and "AnomalyDetect" in problem.message


def test_empty_meta_file(dataset: Path):
    meta_path(dataset, 2).write_text("", encoding="utf-8")
    report = validate(dataset)
    assert kinds(report) == [EMPTY_META]
    assert report.problems[0].file == str(meta_path(dataset, 2))


def test_duplicate_id_and_k_mismatch(dataset: Path):
    write_meta(
        meta_path(dataset, 2), [count_episode(k=2), count_episode(k=2), count_episode("AudioICL00002", k=1)]
    )
    report = validate(dataset)
    dup = [p for p in report.problems if p.kind == DUPLICATE_ID]
    assert [(p.line, p.id) for p in dup] == [(2, "AudioICL00001")]
    assert "first at line 1" in dup[0].message
    mismatch = [p for p in report.problems if p.kind == K_MISMATCH]
    assert [(p.line, p.id, p.message) for p in mismatch] == [(3, "AudioICL00002", "1 demos in a k=2 file")]


def test_single_clip_task_with_multi_clip_demo(dataset: Path):
    ep = count_episode()
    write_meta(meta_path(dataset, 2), [Episode(ep.id, ep.task, remap_episode().demos, ep.query)])
    report = validate(dataset)
    assert SHAPE in kinds(report)
    assert any("single-clip task" in p.message for p in report.problems)


def test_remap_mix_label_must_use_its_own_letters(dataset: Path):
    ep = remap_episode()
    bad = Episode(ep.id, ep.task, (ep.demos[0], remap_demo("P", "Q", "PZP", "ABA")), ep.query)
    write_meta(meta_path(dataset, 2), [bad])
    report = validate(dataset)
    [problem] = report.problems
    assert problem.kind == LABEL and problem.line == 1
    assert "demo 2 MIX label 'PZP' is not spelled with its letters P/Q" in problem.message


def test_remap_query_roles_and_target_label(dataset: Path):
    ep = remap_episode()
    clips = ep.query.clips
    labelled_target = Query((*clips[:2], Clip(clips[2].audio_path, "QQP", "MIX")), "QQP", multi=True)
    wrong_roles = Query(clips[:2], "QQP", multi=True)
    write_meta(
        meta_path(dataset, 2),
        [
            Episode(ep.id, ep.task, ep.demos, labelled_target),
            Episode("AudioICL02102", ep.task, ep.demos, wrong_roles),
        ],
    )
    report = validate(dataset)
    messages = {p.line: p.message for p in report.problems if p.kind == SHAPE}
    assert "carries a label" in messages[1]
    assert "has roles (A, B), expected (A, B, MIX)" in messages[2]


def test_anomaly_needs_object_and_role_labels(dataset: Path):
    ep = anomaly_episode()
    swapped = Demo(
        (
            Clip("data/anomalous/fan/train/normal_0.wav", "Anomalous", "Normal"),
            Clip("data/anomalous/fan/test/anomaly_0.wav", "Anomalous", "Anomalous"),
        ),
        multi=True,
    )
    write_meta(
        meta_path(dataset, 2),
        [Episode(ep.id, ep.task, (swapped, ep.demos[1]), ep.query, extra={"object": "toaster"})],
    )
    report = validate(dataset)
    found = {(p.kind, p.message) for p in report.problems}
    assert (LABEL, "demo 1 Normal clip is labelled 'Anomalous'") in found
    assert any(kind == SHAPE and "'toaster'" in message and "ToyCar" in message for kind, message in found)


# --------------------------------------------------------------------------- audio


def test_audio_paths_that_leave_the_root_are_refused(dataset: Path):
    ep = count_episode()
    outside = dataset.parent / "outside.wav"
    write_wav(outside, np.zeros(160, dtype=np.float32))
    query_dotdot = Query((Clip("data/../../outside.wav", "3"),), "3")
    query_abs = Query((Clip(str(outside), "3"),), "3")
    write_meta(
        meta_path(dataset, 2),
        [
            Episode(ep.id, ep.task, ep.demos, query_dotdot),
            Episode("AudioICL00002", ep.task, ep.demos, query_abs),
        ],
    )
    report = validate(dataset)
    bad = sorted((p.line, p.message) for p in report.problems if p.kind == BAD_PATH)
    assert len(bad) == 2
    assert "leaves the dataset root" in bad[0][1]
    assert "absolute" in bad[1][1]


def test_truncated_and_missing_audio(dataset: Path):
    wav = dataset / "data/audiocount/easy/hit_2.wav"
    wav.write_bytes(wav.read_bytes()[:1000])
    (dataset / "data/anomalous/fan/test/query.wav").unlink()
    report = validate(dataset)
    assert sorted(kinds(report)) == [BAD_AUDIO, MISSING_AUDIO]
    truncated = next(p for p in report.problems if p.kind == BAD_AUDIO)
    # first referenced by k2, line 1 (the k1 file holds only the first demo)
    assert (truncated.file, truncated.line, truncated.id) == (str(meta_path(dataset, 2)), 1, "AudioICL00001")
    assert "data/audiocount/easy/hit_2.wav: truncated" in truncated.message
    missing = next(p for p in report.problems if p.kind == MISSING_AUDIO)
    assert missing.message == "missing audio data/anomalous/fan/test/query.wav (2 references)"
    assert missing.file == str(meta_path(dataset, 1))


def test_quick_mode_still_catches_truncation_and_garbage(dataset: Path):
    wav = dataset / "data/audiocount/easy/hit_2.wav"
    wav.write_bytes(wav.read_bytes()[:1000])
    (dataset / "data/audiocount/easy/hit_1.wav").write_bytes(b"not audio at all")
    report = validate(dataset, quick=True)
    messages = sorted(p.message for p in report.problems if p.kind == BAD_AUDIO)
    assert len(messages) == 2
    assert "hit_1.wav: cannot decode" in messages[0]
    assert "hit_2.wav: truncated" in messages[1]


def test_check_audio_reports_duration_and_empty_files(tmp_path: Path):
    write_wav(tmp_path / "a.wav", np.zeros(8000, dtype=np.float32))
    write_wav(tmp_path / "empty.wav", np.zeros(0, dtype=np.float32))
    assert check_audio(tmp_path / "a.wav").seconds == pytest.approx(0.5)
    assert check_audio(tmp_path / "empty.wav").error == "no samples"
    assert check_audio(tmp_path / "none.wav").missing
    assert check_audio(tmp_path).error == "not a file"


def test_many_missing_files_are_listed_20_per_kind_unless_all(dataset: Path):
    eps = [count_episode(f"AudioICL{i:05d}") for i in range(1, 31)]
    eps = [
        Episode(ep.id, ep.task, ep.demos, Query((Clip(f"data/audiocount/easy/gone_{i}.wav", "3"),), "3"))
        for i, ep in enumerate(eps)
    ]
    write_meta(meta_path(dataset, 2), eps)
    report = validate(dataset)
    assert kinds(report) == [MISSING_AUDIO] * 30
    short = format_report(report)
    assert f"... and {30 - SHOWN_PER_KIND} more" in short
    assert short.count("missing audio data/") == SHOWN_PER_KIND
    assert format_report(report, show_all=True).count("missing audio data/") == 30


def test_alphabet_bank_needs_all_letters(dataset: Path):
    (dataset / "data/MorseCode/alphabet/Q.wav").unlink()
    (dataset / "data/MorseCode/alphabet/Z.wav").unlink()
    report = validate(dataset)
    assert kinds(report) == [ALPHABET]
    assert report.problems[0].message == "Morse alphabet bank lacks Q.wav, Z.wav"


# --------------------------------------------------------------------------- nesting


def test_non_nested_episodes_are_information_not_problems(dataset: Path):
    ep = count_episode(k=1)
    other_query = Query((Clip("data/audiocount/easy/hit_2.wav", "2"),), "2")
    write_meta(
        meta_path(dataset, 1),
        [Episode(ep.id, ep.task, ep.demos, other_query), remap_episode(1), anomaly_episode(1)],
    )
    report = validate(dataset)
    assert report.ok
    nesting = {n.task: n for n in report.nesting}
    assert nesting["AudioCount"].nested is False
    assert nesting["AudioCount"].describe() == "no (1 of 1 episodes differ)"
    assert nesting["AudioRemap"].nested is True
    text = format_report(report)
    assert "AudioCount     nested: no (1 of 1 episodes differ)" in text
    assert "no problems found" in text


def test_nesting_matches_by_query_when_ids_are_renumbered(dataset: Path):
    ep = count_episode(k=1)
    write_meta(meta_path(dataset, 1), [Episode("AudioICL00301", ep.task, ep.demos, ep.query)])
    report = validate(dataset)
    assert {n.task: n.nested for n in report.nesting}["AudioCount"] is True


# --------------------------------------------------------------------------- manifest


def write_manifest(root: Path, files: list[str], key: str = "files") -> None:
    entries = {
        rel: {
            "sha256": hashlib.sha256((root / rel).read_bytes()).hexdigest(),
            "bytes": (root / rel).stat().st_size,
        }
        for rel in files
    }
    (root / "manifest.json").write_text(json.dumps({"version": 1, key: entries}), encoding="utf-8")


def test_manifest_sizes_always_hashes_on_request(dataset: Path):
    rel = "data/audiocount/easy/hit_1.wav"
    write_manifest(dataset, [rel, "meta/meta_k1.jsonl"])
    assert validate(dataset).ok
    wav = dataset / rel
    data = bytearray(wav.read_bytes())
    data[-1] ^= 0xFF  # same size, different content
    wav.write_bytes(bytes(data))
    assert validate(dataset).ok
    report = validate(dataset, verify_hashes=True)
    assert kinds(report) == [MANIFEST]
    assert "sha256 differs" in report.problems[0].message
    wav.write_bytes(bytes(data) + b"\0\0")
    assert "manifest says" in next(p.message for p in validate(dataset).problems if p.kind == MANIFEST)


def test_manifest_with_another_key_and_listed_missing_file(dataset: Path):
    rel = "data/audiocount/easy/hit_1.wav"
    write_manifest(dataset, [rel], key="entries")
    (dataset / rel).unlink()
    report = validate(dataset)
    assert any(p.kind == MANIFEST and "listed file is missing" in p.message for p in report.problems)


def test_unreadable_manifest(dataset: Path):
    (dataset / "manifest.json").write_text("{", encoding="utf-8")
    assert kinds(validate(dataset)) == [MANIFEST]


def test_episodes_lost_to_missing_and_broken_clips_are_counted_per_task_and_k(dataset: Path):
    """What a run will record as error lines, before it runs: per task and k, with the files to blame."""
    assert validate(dataset).lost == []
    wav = dataset / "data/audiocount/easy/hit_2.wav"  # demo 2 of AudioCount: used at k = 2 only
    wav.write_bytes(wav.read_bytes()[:1000])
    (dataset / "data/anomalous/fan/test/query.wav").unlink()  # the AnomalyDetect query: every k
    report = validate(dataset)
    assert report.lost == [
        LostEpisodes("AudioCount", 2, episodes=1, lost=1, missing_files=0, broken_files=1),
        LostEpisodes("AnomalyDetect", 1, episodes=1, lost=1, missing_files=1, broken_files=0),
        LostEpisodes("AnomalyDetect", 2, episodes=1, lost=1, missing_files=1, broken_files=0),
    ]
    text = format_report(report)
    table = text.split("by task and k:\n")[1].split("\n\n")[0].splitlines()
    assert [row.split() for row in table] == [
        ["task", "k", "episodes", "lost", "missing", "files", "broken", "files"],
        ["AudioCount", "2", "1", "1", "0", "1"],
        ["AnomalyDetect", "1", "1", "1", "1", "0"],
        ["AnomalyDetect", "2", "1", "1", "1", "0"],
    ]
    assert report.to_json()["lost"][0] == {
        "task": "AudioCount",
        "k": 2,
        "episodes": 1,
        "lost": 1,
        "missing_files": 0,
        "broken_files": 1,
    }
