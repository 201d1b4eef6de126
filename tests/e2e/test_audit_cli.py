"""``audioicl audit`` as a user runs it: on fresh default builds of every size (which must pass: a small build's
noise is not a shortcut), on builds with the original construction's shortcuts planted (which must fail), and
on the original meta files without their audio."""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path

import cli
import pytest
from reference_data import REFERENCE

SMALL = ["--episodes", "24", "--k", "1,5", "--seed", "3", "--workers", "2", "--quiet"]
DEMO = (20, 0)  # what `audioicl demo` builds: 20 episodes per task, seed 0, k = 1..5
# Fresh default builds (k = 1..5) that the audit of the previous version (a one-sided Wilson bound, no
# correction over its ~340 tests) failed, 4-12 rows each: noise read as shortcuts. The seed-0 builds hold all
# nine tasks (a task's episodes do not depend on which others are built); the others only tasks it failed.
CLEAN = [
    (*DEMO, ""),
    (20, 1, "AudioLength,AudioOperator,AnomalyDetect"),
    (10, 0, ""),
    (10, 2, "AudioLengthHard,AudioOperatorHard,AudioRemap"),
    (5, 0, ""),
    (5, 2, "AnomalyDetect,AudioLength,AudioOperator,AudioOperatorHard"),
]

audioicl = partial(cli.audioicl, timeout=600)


def rows(report: dict, task: str) -> dict[int, dict]:
    return {t["k"]: t for t in report["tasks"] if t["task"] == task}


def shortcut(task: dict, name: str) -> dict:
    return next(s for s in task["shortcuts"] if s["name"] == name)


class Builds:
    """Builds and their audits made once per session and shared by the tests that need them."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.built: dict[tuple, Path] = {}
        self.audited: dict[tuple, tuple] = {}

    def build(self, episodes: int, seed: int, *options: str) -> Path:
        key = (episodes, seed, *options)
        if key not in self.built:
            root = self.folder / "-".join(map(str, key)).replace("--", "")
            args = ("--episodes", episodes, "--seed", seed, "--workers", 2, "--quiet", *options)
            audioicl("build", "--out", root, *args, rc=0)
            self.built[key] = root
        return self.built[key]

    def audit(self, episodes: int, seed: int, *options: str):
        """The finished process, its report (the JSON) and the working folder it ran in."""
        key = (episodes, seed, *options)
        if key not in self.audited:
            root = self.build(episodes, seed, *options)
            cwd = root.with_name(root.name + "-audit")
            cwd.mkdir()
            done = audioicl("audit", root, "--workers", "2", "--json", cwd / "audit.json", cwd=cwd)
            assert done.returncode in (0, 1), done.stderr
            report = json.loads((cwd / "audit.json").read_text(encoding="utf-8"))
            assert done.returncode == (0 if report["ok"] else 1)
            self.audited[key] = (done, report, cwd)
        return self.audited[key]


@pytest.fixture(scope="session")
def builds(tmp_path_factory) -> Builds:
    return Builds(tmp_path_factory.mktemp("audit-builds"))


@pytest.mark.parametrize(
    ("episodes", "seed", "tasks"), CLEAN, ids=[f"{n}-episodes-seed-{s}" for n, s, _ in CLEAN]
)
def test_a_clean_build_passes_at_any_size(builds: Builds, episodes: int, seed: int, tasks: str):
    done, report, _ = builds.audit(episodes, seed, *(("--tasks", tasks) if tasks else ()))
    assert done.returncode == 0, done.stdout[-3000:]
    assert "no shortcut beats its baseline by more than 5 points significantly" in done.stdout
    assert done.stdout.strip().splitlines()[-1].startswith("verdict: PASS (")  # issue 53: the verdict last
    assert not [t for t in report["tasks"] if t["verdict"] == "FAIL" or t["failures"]]
    testing = report["testing"]
    assert testing["correction"].startswith("Holm") and testing["alpha"] == 0.05
    assert testing["test"] == "exact one-sided binomial test against the baseline"
    # the minimum n follows from the tests that can reach significance at all (Tarone's K >= those tested)
    assert 0 < testing["threshold"] <= 0.05 / testing["tested"] * (1 + 1e-9)
    anomaly = rows(report, "AnomalyDetect")
    need = math.ceil(math.log(testing["threshold"]) / math.log(0.5))  # 0.5^n <= alpha / K: 12-13
    assert len(anomaly) in (0, 5) and all(t["min_episodes"] == need for t in anomaly.values())
    if anomaly and episodes < need:  # not even a perfect shortcut could be significant: too few, not failed
        assert all(t["verdict"] == "too few" for t in anomaly.values())
        assert f"too few episodes to judge: {testing['too_few']} shortcuts" in done.stdout
        assert all(
            s["status"] in ("too few", "not judged") and s["p_value"] is None
            for t in anomaly.values()
            for s in t["shortcuts"]
        )
    elif anomaly:
        assert testing["tested"] == testing["judged"] and testing["too_few"] == 0
    for task in report["tasks"]:
        for s in task["shortcuts"]:
            if s["status"] in ("pass", "fail"):
                assert 0 <= s["p_value"] <= s["adjusted_p"] <= 1 and s["hits"] <= s["n"] == episodes


def test_audit_of_the_demo_build(builds: Builds):
    done, report, _ = builds.audit(*DEMO)
    assert report["paths_only"] is False and report["decoded"] == report["clips"]
    assert len(report["tasks"]) == 9 * 5
    lines = done.stdout.splitlines()
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith("audit of ")) :]  # after "wrote"
    assert lines[2].split()[:6] == ["task", "k", "n", "min", "n", "chance"]
    assert sum(line.startswith(("Audio", "Morse", "Anomaly")) and " 20 " in line for line in lines) == 45
    assert "Holm's correction over every shortcut tested (family-wise 5 %)" in done.stdout
    assert "too few episodes to judge" in done.stdout  # the legend's "?"
    # distinct counts (the default, as the original): elimination leaves 1/(8 - k), exactly, as the floor
    count = rows(report, "AudioCount")
    assert count[5]["floor"] == pytest.approx(1 / 3) and count[1]["floor"] == pytest.approx(1 / 7)
    assert count[5]["baseline"] == pytest.approx(1 / 3) and not shortcut(count[5], "text-only")["judged"]
    assert shortcut(count[5], "text-only")["status"] == "not judged"
    # every demo its own pair (the default): nothing to copy, the copy shortcut is the floor
    remap = rows(report, "AudioRemap")[5]
    assert remap["query_in_own_demos"] == 0
    assert shortcut(remap, "copy")["accuracy"] == pytest.approx(remap["floor"])
    length = rows(report, "AudioLength")[5]
    assert shortcut(length, "duration")["accuracy"] > 0.3 and not shortcut(length, "duration")["judged"]
    for task in report["tasks"]:
        assert all(s["accuracy"] is not None for s in task["shortcuts"])
        assert 0 <= task["floor"] <= 1 and task["labels"]["distinct"] >= 1


def test_the_original_construction_fails_at_20_episodes(builds: Builds):
    """``--construction original`` plants the original's shortcuts: labels in every file name, and the
    AudioRemap query MIX shown with its label among the episode's own demos."""
    done, report, _ = builds.audit(20, 0, "--construction", "original")
    assert done.returncode == 1, done.stdout[-3000:]
    assert all(t["verdict"] == "FAIL" for t in report["tasks"]) and len(report["tasks"]) == 45
    assert all(shortcut(t, "file names")["status"] == "fail" for t in report["tasks"])
    remap = rows(report, "AudioRemap")
    assert shortcut(remap[5], "copy")["status"] == "fail" and shortcut(remap[5], "copy")["accuracy"] > 0.6
    assert shortcut(remap[5], "copy")["adjusted_p"] < 1e-6
    assert "AudioRemap k=5: copy" in done.stdout and "MorseCode k=1: file names 100.0%" in done.stdout


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
    # issue 40, item 13: without --json nothing is written (it wrote ./audit.json, over the last one, unsaid)
    before = sorted(tmp_path.rglob("*"))
    done = cli.audioicl("audit", root, "--margin", "100", "--workers", "1", cwd=tmp_path, timeout=600)
    assert done.returncode == 0 and "wrote" not in done.stdout and sorted(tmp_path.rglob("*")) == before
    done = audioicl("audit", root, "--json", tmp_path / "b.json", "--margin", "100", "--workers", "1")
    assert f"wrote {tmp_path / 'b.json'} (replacing the earlier one)" in done.stdout


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
    assert all(shortcut(remap[k], "copy")["status"] == "fail" for k in range(1, 6))
    assert rows(report, "AudioCount")[5]["floor"] == pytest.approx(1 / 3)
    length = rows(report, "AudioLength")[1]
    assert (length["queries"]["clips"], length["queries"]["recurring"]) == (205, 77)
    assert length["labels"]["max_bits"] == pytest.approx(math.log2(20))
    assert shortcut(rows(report, "MorseCode")[1], "file names")["accuracy"] == 1.0
    assert all(s["accuracy"] is None for t in report["tasks"] for s in t["shortcuts"][5:])
    assert "MorseCode k=1: file names 100.0%" in done.stdout
    assert sum(bool(t["failures"]) for t in report["tasks"]) == 45  # file names everywhere


def test_a_query_with_its_own_demos_bytes_and_one_content_with_two_labels_fail(tmp_path: Path):
    """Issue 40, item 9: byte-identical clips under other names were listed and passed (exit 0), and nothing
    checked that no query holds the bytes of its own episode's demo. Planted here in a clean build of
    AudioCount: an episode's query file overwritten with one of its demos' bytes (the answer shown under
    another name), and another episode's query with the bytes of a clip of another count."""
    import shutil

    from audioicl import read_meta

    root = tmp_path / "bench"
    done = audioicl("build", "--out", root, "--tasks", "AudioCount", *SMALL)
    assert done.returncode == 0, done.stderr
    episodes = read_meta(root / "meta" / "meta_k1.jsonl")
    first = episodes[0]
    shutil.copyfile(root / first.demos[0].clips[0].audio_path, root / first.query.target.audio_path)
    other = next(
        ep for ep in episodes[1:] if ep.query.label != episodes[2].query.label and ep is not episodes[2]
    )
    shutil.copyfile(root / other.query.target.audio_path, root / episodes[2].query.target.audio_path)
    done = audioicl("audit", root, "--json", tmp_path / "a.json", "--workers", "1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"FAIL query has the content of its own demo: AudioCount k=1 {first.id}: " in done.stdout
    assert "FAIL one content, two labels: AudioCount: " in done.stdout
    # issue 53, item 5: the last lines are the verdict with its reasons, not "no shortcut beats its baseline"
    # 40 lines below the FAIL
    verdict = done.stdout.strip().splitlines()[-3:]
    assert verdict[0] == "verdict: FAIL" and verdict[1].startswith(
        "  query has the content of its own demo: "
    )
    assert verdict[2].startswith("  one content, two labels: ")
    report = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    assert report["ok"] is False and report["duplicates"]["own_demo"] and report["duplicates"]["conflicts"]
    assert any(
        "query" in name and "AudioCount" in name
        for group in report["duplicates"]["examples"]
        for name in group
    )
