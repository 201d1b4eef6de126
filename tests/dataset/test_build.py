"""The builder: layout, nesting, ids, manifest, determinism across workers, refusal and resume."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from audioicl import AudioICLError, read_meta
from audioicl.audio import load
from audioicl.dataset.build import BuildOptions, _jobs, _work_units, build, normalized
from audioicl.dataset.manifest import read_fingerprint
from audioicl.dataset.meta import find_meta_files, resolve_audio_path
from audioicl.tasks.context import CONSTRUCTION

TASKS = ("AudioCount", "AudioLengthHard", "MorseCode", "AudioRemap")
OPTIONS = BuildOptions(seed=3, episodes=2, shots=(0, 1, 3), tasks=TASKS)


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("one") / "ds"
    build(root, OPTIONS, workers=1)
    return root


def test_meta_files_per_k_nested_with_original_id_blocks(built):
    files = find_meta_files(built)
    assert sorted(files) == [0, 1, 3] and files[1].name == "meta_k1.jsonl"
    by_k = {k: read_meta(path) for k, path in files.items()}
    ids = [ep.id for ep in by_k[3]]
    # blocks of --episodes (2) in benchmark order: AudioCount 0, AudioLengthHard 4, MorseCode 6, AudioRemap 7
    assert ids == ["AudioICL00001", "AudioICL00002", "AudioICL00009", "AudioICL00010"] + [
        "AudioICL00013",
        "AudioICL00014",
        "AudioICL00015",
        "AudioICL00016",
    ]
    for k, episodes in by_k.items():
        assert [ep.id for ep in episodes] == ids
        for ep, full in zip(episodes, by_k[3], strict=True):
            assert ep.k == k and ep.demos == full.demos[:k] and ep.query == full.query


def test_every_clip_exists_and_decodes(built):
    for ep in read_meta(find_meta_files(built)[3]):
        for clip in ep.clips():
            wave, sr = load(resolve_audio_path(built, clip.audio_path), sr=None)
            assert sr == 16000 and wave.size > 0
    alphabet = sorted(p.name for p in (built / "data/MorseCode/alphabet").iterdir())
    assert alphabet == [f"{c}.wav" for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"]


def test_manifest_lists_every_file_with_its_hash(built):
    manifest = json.loads((built / "manifest.json").read_text())
    assert manifest["seed"] == 3 and manifest["options"]["tasks"] == list(TASKS)
    listed = {e["path"]: e for e in manifest["files"]}
    on_disk = {str(p.relative_to(built)) for p in (built / "data").rglob("*") if p.is_file()}
    on_disk |= {str(p.relative_to(built)) for p in (built / "meta").iterdir()}
    assert set(listed) == on_disk
    for path, entry in listed.items():
        data = (built / path).read_bytes()
        assert entry["bytes"] == len(data) and entry["sha256"] == hashlib.sha256(data).hexdigest()
    lines = "".join(
        f"{e['sha256']}  {e['path']}\n" for e in sorted(manifest["files"], key=lambda e: e["path"])
    )
    assert manifest["fingerprint"] == hashlib.sha256(lines.encode()).hexdigest() == read_fingerprint(built)
    assert "meta/transcripts.jsonl" in listed  # the transcripts sidecar, beside the three meta files
    assert manifest["totals"]["audio_files"] == len(on_disk) - 4


def test_transcripts_sidecar_covers_every_clip_but_machine_recordings(built):
    """One line per audio file, sorted by path; machine recordings are measured when asked, not listed."""
    lines = [json.loads(line) for line in (built / "meta/transcripts.jsonl").read_text().splitlines()]
    paths = [line["audio_path"] for line in lines]
    assert paths == sorted(paths) and all(set(line) == {"audio_path", "transcript"} for line in lines)
    audio = {str(p.relative_to(built)) for p in (built / "data").rglob("*.wav")}
    assert set(paths) == {p for p in audio if not p.startswith("data/anomalous/")}


def test_card_describes_each_task(built):
    card = (built / "README.md").read_text()
    for task in TASKS:
        assert f"### {task}" in card
    assert "own-pair" in card and "Query labels:" in card and read_fingerprint(built) in card


def test_card_states_which_construction_was_built(built):
    card = (built / "README.md").read_text()
    for choice in CONSTRUCTION:  # all defaults here
        value = choice.values[0]
        assert f"| `{choice.flag} {value}` |" in card and choice.builds[value] in card
    assert "| `--file-names neutral` | ours (default) |" in card
    assert "| `--count-labels distinct` | the original's (default) |" in card


ALL_TASKS_SMALL = BuildOptions(seed=1, episodes=2, shots=(1, 2))


@pytest.fixture(scope="module")
def neutral_and_original(tmp_path_factory) -> tuple[Path, Path]:
    neutral, original = tmp_path_factory.mktemp("neutral") / "ds", tmp_path_factory.mktemp("original") / "ds"
    build(neutral, ALL_TASKS_SMALL, workers=2)
    build(original, dataclasses.replace(ALL_TASKS_SMALL, file_names="original"), workers=1)
    return neutral, original


def test_neutral_names_only_rename_the_files(neutral_and_original):
    """The same episodes, labels and audio, clip by clip; only the paths differ (and hold no label)."""
    neutral, original = neutral_and_original
    for ours, theirs in zip(
        read_meta(neutral / "meta/meta_k2.jsonl"), read_meta(original / "meta/meta_k2.jsonl"), strict=True
    ):
        assert (ours.id, ours.task, ours.query.label) == (theirs.id, theirs.task, theirs.query.label)
        for a, b in zip(ours.clips(), theirs.clips(), strict=True):
            assert (a.label, a.role) == (b.label, b.role)
            assert (neutral / a.audio_path).read_bytes() == (original / b.audio_path).read_bytes()
        renamed = [a.audio_path != b.audio_path for a, b in zip(ours.clips(), theirs.clips(), strict=True)]
        assert any(renamed), ours.id


def test_all_nine_tasks_are_byte_identical_whatever_the_workers(neutral_and_original, tmp_path):
    """Task-wide plans (balanced labels, reserved query recordings) are computed alike in every worker."""
    other = tmp_path / "ds"
    build(other, ALL_TASKS_SMALL, workers=3)
    assert tree_bytes(other) == tree_bytes(neutral_and_original[0])


@pytest.mark.parametrize("workers", [2, 3])  # 3: AudioCount and AudioRemap are cut into two jobs each
def test_output_is_byte_identical_whatever_the_workers(built, tmp_path, workers):
    other = tmp_path / "ds"
    build(other, OPTIONS, workers=workers)
    assert tree_bytes(other) == tree_bytes(built)


@pytest.mark.parametrize("workers", [1, 2, 4, 8])
def test_jobs_hold_every_unit_once_one_family_each_largest_first(workers):
    options = normalized(BuildOptions(episodes=300))
    jobs = _jobs(options, workers)
    units = [unit for job in jobs for unit in job.units]
    assert sorted(units, key=repr) == sorted(_work_units(options), key=repr)
    families = {"AudioCount": "count", "AudioCountHard": "count", "MorseCode": "morse"}
    for job in jobs:
        assert all(job.start <= u.start < job.stop for u in job.units)
        assert all(families.get(u.task, job.family) == job.family for u in job.units)
    assert [job.cost_ms for job in jobs] == sorted((job.cost_ms for job in jobs), reverse=True)
    if workers <= 2:  # no family is over half of the default build: none is cut
        assert len(jobs) == len({job.family for job in jobs}) == 6
    count_jobs = [job for job in jobs if job.family == "count"]
    assert all({u.task for u in job.units} == {"AudioCount", "AudioCountHard"} for job in count_jobs)


def test_refuses_a_foreign_folder_and_other_options(tmp_path, built):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(AudioICLError, match="not empty"):
        build(foreign, OPTIONS)
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]
    with pytest.raises(AudioICLError, match="episodes: 2 there, 3 now"):
        build(built, BuildOptions(seed=3, episodes=3, shots=(0, 1, 3), tasks=TASKS))


def test_rerun_completes_an_interrupted_build(built, tmp_path):
    copy = tmp_path / "ds"
    original = tree_bytes(built)
    for rel, data in original.items():
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_bytes(data)
    wavs = sorted((copy / "data").rglob("*.wav"))
    removed = wavs[::3]
    for path in removed:
        path.unlink()
    (copy / "manifest.json").unlink()
    (copy / "meta/meta_k3.jsonl").unlink()
    (copy / "data/audiocount/easy/.half.wav.123.tmp").write_bytes(b"partial")
    summary = build(copy, OPTIONS, workers=2)
    assert summary.rendered == len(removed)
    assert tree_bytes(copy) == original


def test_same_pair_option_is_recorded_and_changes_remap_only(tmp_path):
    root = tmp_path / "ds"
    build(root, BuildOptions(episodes=1, shots=(2,), tasks=("AudioRemap",), remap_demos="same-pair"))
    (ep,) = read_meta(root / "meta/meta_k2.jsonl")
    assert ep.demos[0].clips[0] == ep.demos[1].clips[0]
    assert "`--remap-demos same-pair` | the original's |" in (root / "README.md").read_text()


def test_impossible_options_are_refused(tmp_path):
    with pytest.raises(AudioICLError, match="count-labels independent"):
        build(tmp_path / "a", BuildOptions(episodes=1, shots=(8,), tasks=("AudioCount",)))
    with pytest.raises(AudioICLError, match="unknown task"):
        build(tmp_path / "b", BuildOptions(episodes=1, tasks=("AudioCounting",)))
    assert not (tmp_path / "a").exists()
