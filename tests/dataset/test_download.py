"""Tests of audioicl.dataset.download that need no hub: the folder rules, download.json, the client's absence.
Downloads themselves run against the local hub in tests/e2e/test_download_cli.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from audioicl import AudioICLError
from audioicl.dataset import download as download_module
from audioicl.dataset.download import (
    RemoteFile,
    Snapshot,
    _check_root,
    _write_source,
    dataset_source,
    missing_files,
    read_source,
    snapshot,
)
from audioicl.files import FOLDER_LOCK, folder_lock

SNAP = Snapshot(
    "hongzz-18/AudioICL-Bench",
    "main",
    "a" * 40,
    "https://huggingface.co",
    (RemoteFile("meta/meta_k1.jsonl", 3), RemoteFile("data/x.wav", 5)),
)


def test_download_json_records_the_commit_and_feeds_run_records(tmp_path):
    assert read_source(tmp_path) is None and dataset_source(tmp_path) is None
    _write_source(tmp_path, SNAP, complete=False)
    record = read_source(tmp_path)
    assert record["commit"] == "a" * 40 and record["revision"] == "main" and record["complete"] is False
    assert (record["files"], record["bytes"]) == (2, 8)
    assert dataset_source(tmp_path) == {"repo": "hongzz-18/AudioICL-Bench", "commit": "a" * 40}


@pytest.mark.parametrize("content", ["{oops", "[1, 2]", '{"repo": "x"}'])
def test_a_broken_download_json_names_its_file(tmp_path, content):
    (tmp_path / "download.json").write_text(content)
    with pytest.raises(AudioICLError) as caught:
        dataset_source(tmp_path)
    assert caught.value.file == str(tmp_path / "download.json")


def test_one_folder_holds_one_commit_and_nothing_else(tmp_path):
    _check_root(tmp_path / "new", SNAP)  # a new folder
    (tmp_path / "empty").mkdir()
    _check_root(tmp_path / "empty", SNAP)
    (tmp_path / "file").write_text("x")
    with pytest.raises(AudioICLError, match="not a folder"):
        _check_root(tmp_path / "file", SNAP)
    build = tmp_path / "build"
    (build / "meta").mkdir(parents=True)
    with pytest.raises(AudioICLError, match="not empty and holds no download.json"):
        _check_root(build, SNAP)
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    _write_source(earlier, SNAP, complete=False)
    _check_root(earlier, SNAP)  # the same commit, half done: resumed
    other = Snapshot(SNAP.repo, "v2", "b" * 40, SNAP.endpoint, SNAP.files)
    with pytest.raises(AudioICLError, match=f"at commit {'a' * 40}; .* revision v2 is commit {'b' * 40}"):
        _check_root(earlier, other)


def test_missing_files_are_absent_or_of_another_size(tmp_path):
    assert missing_files(tmp_path, SNAP) == list(SNAP.files)
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta/meta_k1.jsonl").write_bytes(b"abc")
    (tmp_path / "data").mkdir()
    (tmp_path / "data/x.wav").write_bytes(b"abc")  # cut short
    assert missing_files(tmp_path, SNAP) == [RemoteFile("data/x.wav", 5)]


def test_without_the_hub_extra_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if not installed
    with pytest.raises(AudioICLError, match=r"pip install 'audioicl\[hub\]'"):
        snapshot()


def test_run_records_carry_the_commit_and_refuse_a_changed_one(fresh_dataset, tmp_path):
    from audioicl import RunOptions, run

    _write_source(fresh_dataset, SNAP, complete=True)
    options = RunOptions(data=fresh_dataset, model="builtin:random", out=tmp_path / "out", shots=(1,))
    run(options, report=lambda _: None)
    record = json.loads((tmp_path / "out" / "random_run.json").read_text())
    assert record["dataset_source"] == {"repo": SNAP.repo, "commit": "a" * 40}
    _write_source(
        fresh_dataset, Snapshot(SNAP.repo, "v2", "b" * 40, SNAP.endpoint, SNAP.files), complete=True
    )
    # issue 53, item 6: which dataset each is, by folder and the start of each digest, not 1.4 KB of sha256
    with pytest.raises(
        AudioICLError, match=r"dataset: was .*, downloaded from .* at a{12}\), now .* at b{12}\)"
    ):
        run(options, report=lambda _: None)


def test_a_dataset_that_was_not_downloaded_records_no_source(fresh_dataset, tmp_path):
    from audioicl import RunOptions, run

    run(
        RunOptions(data=fresh_dataset, model="builtin:random", out=tmp_path, shots=(1,)),
        report=lambda _: None,
    )
    assert json.loads((tmp_path / "random_run.json").read_text())["dataset_source"] is None


def test_a_second_download_into_the_folder_is_refused_naming_the_first(tmp_path, monkeypatch):
    """One download per folder: the lock (ROOT/.audioicl.lock) names the holder; a stale lock alone is no
    reason to call the folder not empty."""
    monkeypatch.setattr(download_module, "snapshot", lambda repo, revision: SNAP)
    root = tmp_path / "orig"
    root.mkdir()
    refused = pytest.raises(AudioICLError, match=f"being written by process {os.getpid()} on ")
    with folder_lock(root), refused as caught:
        download_module.download(root)
    assert caught.value.file == str(root) and not (root / "download.json").exists()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    (root / FOLDER_LOCK).write_text(json.dumps({"host": socket.gethostname(), "pid": int(dead.stdout)}))
    _check_root(root, SNAP)  # a download killed before writing download.json: resumed, not refused
