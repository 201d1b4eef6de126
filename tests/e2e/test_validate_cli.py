"""``audioicl validate`` as a user runs it: a real subprocess on real folders, checking output and exit codes."""

from __future__ import annotations

import json
import shutil
from functools import partial
from pathlib import Path

import cli
import numpy as np
import pytest
from reference_data import REFERENCE

from audioicl import Episode
from audioicl.audio import write_wav
from audioicl.dataset.meta import write_meta
from audioicl.records import Clip, Demo, Query

audioicl_validate = partial(cli.audioicl, "validate", timeout=120)


def two_count_episodes(root: Path) -> Path:
    """Two nested AudioCount episodes at k = 1 and 2, with their audio."""
    episodes = []
    for n in (1, 2):
        demos = tuple(Demo((Clip(f"data/audiocount/easy/s{n}_{r}.wav", str(r)),)) for r in (1, 2))
        query = Query((Clip(f"data/audiocount/easy/s{n}_3.wav", "3"),), "3")
        episodes.append(Episode(f"AudioICL{n:05d}", "AudioCount", demos, query))
    for k in (1, 2):
        write_meta(root / "meta" / f"meta_k{k}.jsonl", [ep.with_shots(k) for ep in episodes])
    for ep in episodes:
        for clip in ep.clips():
            write_wav(root / clip.audio_path, np.full(3200, 0.1, dtype=np.float32))
    return root


def test_clean_dataset_exits_0_with_table_and_json(tmp_path: Path):
    root = two_count_episodes(tmp_path / "ds")
    done = audioicl_validate(root, "--json", tmp_path / "out" / "report.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no problems found" in done.stdout
    assert "AudioCount  nested: yes" in done.stdout
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("AudioCount ")]
    assert [row[:7] for row in rows] == [
        ["AudioCount", "1", "2", "4", "0.8", "0.20", "0.20"],
        ["AudioCount", "2", "2", "6", "1.2", "0.20", "0.20"],
    ]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["ok"] is True and report["problems"] == []
    assert [t["k"] for t in report["tables"]] == [1, 2]


def test_problems_exit_1_each_as_file_line_id(tmp_path: Path):
    root = two_count_episodes(tmp_path / "ds")
    meta = root / "meta" / "meta_k2.jsonl"
    lines = meta.read_text().splitlines()
    meta.write_text("\n".join(["{broken", lines[1].replace('"label": "3"', '"label": "11"')]) + "\n")
    wav = root / "data/audiocount/easy/s2_1.wav"
    wav.write_bytes(wav.read_bytes()[:100])
    done = audioicl_validate(root, "--quick")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{meta}:1: malformed JSON" in done.stdout
    assert f"{meta}:2 AudioICL00002: query label '11' is not in integers 1..8" in done.stdout
    assert (
        f"{root / 'meta' / 'meta_k1.jsonl'}:2 AudioICL00002: data/audiocount/easy/s2_1.wav: truncated"
        in done.stdout
    )
    assert "3 problems: 1 malformed, 1 label, 1 bad audio" in done.stdout


def test_usage_errors_exit_2(tmp_path: Path):
    done = audioicl_validate(tmp_path / "absent")
    assert done.returncode == 2 and "not a folder" in done.stderr
    done = audioicl_validate(tmp_path)
    assert done.returncode == 2 and "no meta files" in done.stderr


@pytest.mark.skipif(not (REFERENCE / "meta_k5.jsonl").exists(), reason="reference meta files absent")
def test_reference_meta_files_report_missing_audio_and_nesting(tmp_path: Path):
    (tmp_path / "meta").mkdir()
    for k in range(1, 6):
        shutil.copyfile(REFERENCE / f"meta_k{k}.jsonl", tmp_path / "meta" / f"meta_k{k}.jsonl")
    done = audioicl_validate(tmp_path, "--json", tmp_path / "r.json")
    assert done.returncode == 1, done.stderr
    assert done.stderr == ""
    report = json.loads((tmp_path / "r.json").read_text())
    assert set(report["problem_counts"]) == {"missing audio"}
    assert report["problem_counts"]["missing audio"] == report["audio_files"] > 12000
    assert len(report["tables"]) == 45 and all(row["episodes"] == 300 for row in report["tables"])
    assert "... and" in done.stdout and "more (--all shows every one)" in done.stdout
    nested = {n["task"]: n["nested"] for n in report["nesting"]}
    assert nested == {
        "AudioCount": True,
        "AudioCountHard": True,
        "AudioOperator": True,
        "AudioLength": True,
        "AudioLengthHard": True,
        "AudioOperatorHard": True,
        "MorseCode": True,
        "AudioRemap": False,
        "AnomalyDetect": False,
    }
    assert "AudioRemap         nested: no (1200 of 1200 episodes differ)" in done.stdout


def test_an_ids_terminal_escapes_are_shown_not_sent(tmp_path: Path):
    """Issue 53, item 8: an id holding ESC and CR reached the terminal raw from ``validate`` (``run`` escapes
    them): now they are shown as ``\\x1b`` and a space."""
    root = two_count_episodes(tmp_path / "ds")
    for k in (1, 2):
        path = root / "meta" / f"meta_k{k}.jsonl"
        text = path.read_text(encoding="utf-8").replace("AudioICL00001", "AudioICL\\u001b[2J\\rX")
        path.write_text(text.replace("s1_3.wav", "missing.wav"), encoding="utf-8")
    done = audioicl_validate(root)
    assert done.returncode == 1
    assert "\x1b" not in done.stdout and "\r" not in done.stdout
    assert "AudioICL\\x1b[2J X" in done.stdout
