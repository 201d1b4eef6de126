"""``audioicl audit`` as a user runs it: on a small fresh build, on the original construction's leak, and on
the original meta files without their audio."""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path

import cli
import pytest
from reference_data import REFERENCE

SMALL = ["--episodes", "24", "--k", "1,5", "--seed", "3", "--workers", "2", "--quiet"]


audioicl = partial(cli.audioicl, timeout=600)


def rows(report: dict, task: str) -> dict[int, dict]:
    return {t["k"]: t for t in report["tasks"] if t["task"] == task}


def shortcut(task: dict, name: str) -> dict:
    return next(s for s in task["shortcuts"] if s["name"] == name)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("audit") / "bench"
    done = audioicl("build", "--out", root, *SMALL)
    assert done.returncode == 0, done.stderr
    return root


def test_audit_of_a_fresh_build(fresh: Path, tmp_path: Path):
    done = audioicl("audit", fresh, "--workers", "2", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    report = json.loads((tmp_path / "audit.json").read_text(encoding="utf-8"))
    assert done.returncode == (0 if report["ok"] else 1)
    assert report["paths_only"] is False and report["decoded"] == report["clips"]
    assert len(report["tasks"]) == 9 * 2
    lines = done.stdout.splitlines()
    assert lines[2].split()[:5] == ["task", "k", "n", "chance", "floor"]
    assert sum(line.startswith(("Audio", "Morse", "Anomaly")) and " 24 " in line for line in lines) == 18
    # distinct counts (the default, as the original): elimination leaves 1/(8 - k), exactly, as the floor
    count = rows(report, "AudioCount")
    assert count[5]["floor"] == pytest.approx(1 / 3) and count[1]["floor"] == pytest.approx(1 / 7)
    assert count[5]["baseline"] == pytest.approx(1 / 3) and not shortcut(count[5], "text-only")["judged"]
    # every demo its own pair (the default): nothing to copy, the copy shortcut is the floor
    remap = rows(report, "AudioRemap")[5]
    assert remap["query_in_own_demos"] == 0
    assert shortcut(remap, "copy")["accuracy"] == pytest.approx(remap["floor"])
    length = rows(report, "AudioLength")[5]
    assert shortcut(length, "duration")["accuracy"] > 0.3 and not shortcut(length, "duration")["judged"]
    for task in report["tasks"]:
        assert all(s["accuracy"] is not None for s in task["shortcuts"])
        assert 0 <= task["floor"] <= 1 and task["labels"]["distinct"] >= 1


def test_audit_fails_the_original_remap_construction_and_margin_lets_it_pass(tmp_path: Path):
    root = tmp_path / "same-pair"
    done = audioicl("build", "--out", root, "--tasks", "AudioRemap", "--remap-demos", "same-pair", *SMALL)
    assert done.returncode == 0, done.stderr
    done = audioicl("audit", root, "--json", tmp_path / "a.json", "--workers", "1")
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    k5 = rows(report, "AudioRemap")[5]
    assert k5["query_in_own_demos"] > 12  # the query MIX is one of 5 of the 6 demo MIX files, mostly
    assert shortcut(k5, "copy")["accuracy"] > 0.6
    assert any(f.startswith("copy ") for f in k5["failures"])
    assert "AudioRemap k=5: copy" in done.stdout
    done = audioicl("audit", root, "--json", tmp_path / "b.json", "--margin", "100", "--workers", "1")
    assert done.returncode == 0 and "no shortcut beats its baseline" in done.stdout


def test_audit_of_the_reference_meta_files_without_audio(tmp_path: Path):
    if not (REFERENCE / "meta_k5.jsonl").is_file():
        pytest.skip(f"reference meta files absent from {REFERENCE}")
    done = audioicl("audit", REFERENCE, "--json", tmp_path / "ref.json")
    assert done.returncode == 1, done.stderr
    assert "paths only" in done.stdout
    report = json.loads((tmp_path / "ref.json").read_text(encoding="utf-8"))
    assert report["paths_only"] is True and report["duplicates"] is None
    assert len(report["tasks"]) == 45
    remap = rows(report, "AudioRemap")
    # the query MIX is a demo MIX (answer shown) in 39, 80, 144, 204, 248 of 300 episodes
    assert [remap[k]["query_in_own_demos"] for k in range(1, 6)] == [39, 80, 144, 204, 248]
    assert shortcut(remap[5], "copy")["accuracy"] == pytest.approx((248 + 52 / 6) / 300)
    assert rows(report, "AudioCount")[5]["floor"] == pytest.approx(1 / 3)
    length = rows(report, "AudioLength")[1]
    assert (length["queries"]["clips"], length["queries"]["recurring"]) == (205, 77)
    assert length["labels"]["max_bits"] == pytest.approx(math.log2(20))
    assert shortcut(rows(report, "MorseCode")[1], "file names")["accuracy"] == 1.0
    assert all(s["accuracy"] is None for t in report["tasks"] for s in t["shortcuts"][5:])
    assert "MorseCode k=1: file names 100.0%" in done.stdout
