"""``audioicl export ROOT --out DIR`` against the real ``datasets``, offline: ``load_dataset(DIR, "k2")`` gives one
row per episode whose audio bytes are the WAV files' bytes and whose labels are the meta file's; the dataset card
carries the ``configs:`` header the hub's viewer reads.

Needs the ``datasets`` extra (skipped without it).
"""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import pytest
import yaml

datasets = pytest.importorskip("datasets")
pytest.importorskip("pyarrow")

import cli  # noqa: E402

from audioicl.dataset.meta import dumps_episode, episode_from_json, find_meta_files, read_meta  # noqa: E402
from audioicl.integrations.lmms_eval import RowClips  # noqa: E402
from audioicl.prompts.clips import ClipStore, morse_bank_paths  # noqa: E402

audioicl = partial(cli.audioicl, timeout=300)


def _load(folder, config, cache):
    ds = datasets.load_dataset(str(folder), config, split="test", cache_dir=str(cache))
    undecoded = datasets.List(datasets.Audio(decode=False))
    return ds, ds.cast_column("audio", undecoded) if config != "morse_bank" else ds


def test_export_loads_with_the_files_bytes_and_the_meta_labels(tiny_dataset, tmp_path):
    out = tmp_path / "export"
    proc = audioicl("export", tiny_dataset, "--out", out, "--rows-per-file", "5", rc=0)
    assert "k1 (12 rows), k2 (12 rows), k3 (12 rows), morse_bank (26 rows)" in proc.stdout
    assert sorted(p.name for p in (out / "k2").iterdir()) == [
        f"test-0000{i}-of-00003.parquet" for i in range(3)
    ]

    header = yaml.safe_load((out / "README.md").read_text().split("---\n")[1])
    assert [c["config_name"] for c in header["configs"]] == ["k1", "k2", "k3", "morse_bank"]
    assert header["configs"][1]["data_files"] == [{"split": "test", "path": "k2/test-*.parquet"}]
    record = json.loads((out / "export.json").read_text())
    assert record["configs"] == {"k1": 12, "k2": 12, "k3": 12, "morse_bank": 26}

    store = ClipStore(tiny_dataset)
    for k, meta in find_meta_files(tiny_dataset).items():
        decoded, rows = _load(out, f"k{k}", tmp_path / "cache")
        assert isinstance(decoded.features["audio"].feature, datasets.Audio)  # the hub's Audio feature
        episodes = read_meta(meta)
        assert len(rows) == len(episodes)
        lines = meta.read_text(encoding="utf-8").splitlines()
        for row, episode, line in zip(rows, episodes, lines, strict=True):
            assert row["episode"] == line == dumps_episode(episode)
            assert episode_from_json(json.loads(row["episode"])) == episode
            assert (row["id"], row["task"], row["k"], row["label"]) == (
                episode.id,
                episode.task,
                k,
                episode.query.label,
            )
            assert row["object"] == episode.object
            clips = list(episode.clips())
            assert row["audio_path"] == [c.audio_path for c in clips]
            assert row["role"] == [c.role for c in clips]
            for clip, stored in zip(clips, row["audio"], strict=True):
                assert stored["bytes"] == (tiny_dataset / clip.audio_path).read_bytes()
                assert stored["path"] == clip.audio_path
            demo_labels = [c.label for d in episode.demos for c in d.clips]
            query_labels = [c.label for c in episode.query.clips[:-1]] + [None]
            assert row["shown_label"] == demo_labels + query_labels
            assert row["part"] == ["demo"] * len(demo_labels) + ["query"] * len(query_labels)
            # decoded from the row's bytes, the samples audioicl run reads from the file
            decoded_clips = RowClips(
                dict(zip(row["audio_path"], (a["bytes"] for a in row["audio"]), strict=True))
            )
            for clip in clips:
                assert np.array_equal(
                    decoded_clips.load(clip.audio_path).wave, store.load(clip.audio_path).wave
                )

    _, bank = _load(out, "morse_bank", tmp_path / "cache")
    bank = bank.cast_column("audio", datasets.Audio(decode=False))
    assert [r["letter"] for r in bank] == list("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    for row, path in zip(bank, morse_bank_paths(), strict=True):
        assert row["audio"]["bytes"] == (tiny_dataset / path).read_bytes()


def test_export_keeps_the_card_and_refuses_what_it_should(fresh_dataset, tmp_path):
    (fresh_dataset / "README.md").write_text(
        "---\nlicense: mit\n---\n\n# My build\n\nNotes.\n", encoding="utf-8"
    )
    out = tmp_path / "export"
    audioicl("export", fresh_dataset, "--out", out, "--k", "2", rc=0)
    card = (out / "README.md").read_text()
    header = yaml.safe_load(card.split("---\n")[1])
    assert header["license"] == "mit"
    assert [c["config_name"] for c in header["configs"]] == ["k2", "morse_bank"]
    assert "# My build\n\nNotes." in card

    again = audioicl("export", fresh_dataset, "--out", out, rc=2)
    assert "not empty" in again.stderr
    audioicl("export", fresh_dataset, "--out", out, "--overwrite", rc=0)
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["k1", "k2", "morse_bank"]
    inside = audioicl("export", fresh_dataset, "--out", fresh_dataset / "export", rc=2)
    assert "inside the dataset root" in inside.stderr
    missing = audioicl("export", fresh_dataset, "--out", tmp_path / "other", "--k", "4", rc=2)
    assert "no meta file for k=4" in missing.stderr


def test_run_on_an_export_gives_the_same_audio_and_scores(tmp_path):
    root, export = tmp_path / "bench", tmp_path / "export"
    tasks = "AudioCount,AudioRemap,MorseCode,AnomalyDetect"
    audioicl(
        "build", "--out", root, "--episodes", 2, "--k", "1,2", "--tasks", tasks, "--quiet", "--workers", 1
    )
    audioicl("export", root, "--out", export, rc=0)

    summaries = {}
    for name, data in (("root", root), ("export", export)):
        out = tmp_path / f"results-{name}"
        audioicl("run", "--model", "builtin:icl", "--data", data, "--out", out, rc=0)
        summaries[name] = tmp_path / f"summary-{name}.csv"
        audioicl("score", "--in", out, "--out", summaries[name], rc=0)
    assert summaries["export"].read_bytes() == summaries["root"].read_bytes()

    folder = export / ".audioicl-dataset"
    assert (folder / ".complete").is_file()
    run_record = json.loads((tmp_path / "results-export" / "icl_run.json").read_text())
    assert run_record["data"] == str(folder.resolve())
    assert run_record["dataset_source"]["repo"] == str(export.resolve())
    # every meta file byte for byte, every clip (and the Morse bank) with the original file's bytes
    originals = find_meta_files(root)
    assert sorted(find_meta_files(folder)) == sorted(originals)
    for meta in originals.values():
        assert (folder / meta.relative_to(root)).read_bytes() == meta.read_bytes()
        for episode in read_meta(meta):
            for clip in episode.clips():
                assert (folder / clip.audio_path).read_bytes() == (root / clip.audio_path).read_bytes()
    for path in morse_bank_paths():
        assert (folder / path).read_bytes() == (root / path).read_bytes()

    # reused while complete: a second run does not rewrite it
    stamp = (folder / ".complete").stat().st_mtime_ns
    audioicl("run", "--model", "builtin:icl", "--data", export, "--out", tmp_path / "again", rc=0)
    assert (folder / ".complete").stat().st_mtime_ns == stamp


def test_an_export_row_that_leaves_the_folder_is_refused(tiny_dataset, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    export = tmp_path / "export"
    audioicl("export", tiny_dataset, "--out", export, "--k", "1", rc=0)
    (parquet,) = (export / "k1").iterdir()
    table = pq.read_table(parquet).to_pylist()
    table[0]["audio"][0]["path"] = "../outside.wav"
    pq.write_table(pa.Table.from_pylist(table, schema=pq.read_schema(parquet)), parquet)
    proc = audioicl("run", "--model", "builtin:icl", "--data", export, "--out", tmp_path / "out", rc=2)
    assert "leaves the dataset root" in proc.stderr
    assert not (tmp_path / "outside.wav").exists()
    assert not (export / ".audioicl-dataset").exists()
