"""The results log's own operations (``inference/results.py``) by their exact effect on the files: a line's
identity, putting lines back in order, dropping error lines, closing the log, and merging shard folders."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audioicl import AudioICLError
from audioicl.inference.results import (
    LineKey,
    ResultsLog,
    drop_error_lines,
    iter_result_lines,
    iter_result_lines_or_none,
    merge_shards,
    restore_order,
)
from audioicl.prompts.draws import Variation


def text_of(*records: dict) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def line(episode: str, **fields: object) -> dict:
    return {"id": episode, "task": "AudioCount", "response": "3", "gt": "3", **fields}


def test_a_line_key_names_its_presentation_only_when_it_has_one():
    assert str(LineKey("e1")) == "e1"
    assert str(LineKey("e1", Variation(draw=2))) == "e1 (draw 2, order 0, variant 0)"


def test_restore_order_puts_lines_in_the_meta_files_order_byte_for_byte_or_leaves_the_file(tmp_path: Path):
    path = tmp_path / "m_results_k1.jsonl"
    ordered = text_of(line("e1"), line("e2", response="é"), line("e2", draw=1))
    path.write_text(ordered, encoding="utf-8")
    inode = path.stat().st_ino
    assert restore_order(path, ["e1", "e2"]) is False
    assert path.stat().st_ino == inode  # not rewritten
    shuffled = text_of(line("x9"), line("e2", draw=1), line("e1"), line("e2", response="é"))
    path.write_text(shuffled, encoding="utf-8")
    assert restore_order(path, ["e1", "e2"]) is True
    assert path.read_text(encoding="utf-8") == ordered + text_of(line("x9"))  # an id outside the order last
    assert restore_order(tmp_path / "absent.jsonl", ["e1"]) is False


def test_drop_error_lines_drops_only_the_asked_error_lines_and_rewrites_nothing_else(tmp_path: Path):
    path = tmp_path / "m_results_k1.jsonl"
    kept = [line("e1", status="error", error="x", draw=1), line("e2"), line("e3", status="error", error="y")]
    path.write_text(text_of(line("e1", status="error", error="x"), *kept), encoding="utf-8")
    assert drop_error_lines(path, {"e1", "e2"}) == 1
    assert path.read_text(encoding="utf-8") == text_of(*kept)
    inode = path.stat().st_ino
    assert drop_error_lines(path, {"e2"}) == 0
    assert path.stat().st_ino == inode  # nothing to drop: not rewritten
    assert drop_error_lines(tmp_path / "absent.jsonl", {"e1"}) == 0


def test_a_closed_log_lets_its_file_descriptor_go(tmp_path: Path):
    from audioicl.records import Result

    log = ResultsLog.open(tmp_path / "m_results_k1.jsonl")
    log.append([Result(id="e1", task="AudioCount", response="3", gt="3")])
    fd = log._fd
    assert fd is not None
    log.close()
    assert log._fd is None
    with pytest.raises(OSError):
        os.fstat(fd)
    log.close()  # twice is harmless


def shard(folder: Path, name: str, *records: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text_of(*records), encoding="utf-8")
    return folder


def test_merge_joins_every_folders_files_in_id_order_exactly(tmp_path: Path):
    a = shard(tmp_path / "a", "m_results_k2.jsonl", line("e2", response="ü"))
    shard(a, "m_results_k2.jsonl", line("e2", response="ü"))
    b = shard(tmp_path / "b", "m_results_k1.jsonl", line("e3"), line("e1"))
    shard(b, "m_results_k2.jsonl", line("e1"))
    out = tmp_path / "out"
    merged = merge_shards([a, b], out)
    assert sorted((m.path.name, m.lines, m.sources) for m in merged) == [
        ("m_results_k1.jsonl", 2, 1),
        ("m_results_k2.jsonl", 2, 2),
    ]
    assert (out / "m_results_k1.jsonl").read_text(encoding="utf-8") == text_of(line("e1"), line("e3"))
    assert (out / "m_results_k2.jsonl").read_bytes() == text_of(line("e1"), line("e2", response="ü")).encode()
    assert merge_shards([a, b], out)  # the same merge again: nothing differs, nothing refused
    (out / "m_results_k1.jsonl").write_text(text_of(line("e1")), encoding="utf-8")
    with pytest.raises(AudioICLError) as info:
        merge_shards([a, b], out)
    assert "already holds m_results_k1.jsonl with other content than this merge makes" in str(info.value)


def test_merge_refuses_what_it_cannot_join_by_exact_message(tmp_path: Path):
    a = shard(tmp_path / "a", "m_results_k1.jsonl", line("e1"))
    b = shard(tmp_path / "b", "m_results_k1.jsonl", line("e1"))
    with pytest.raises(AudioICLError) as info:
        merge_shards([a, b], tmp_path / "out")
    assert (
        str(info.value)
        == f"{b / 'm_results_k1.jsonl'}:1 e1: id given twice (also {a / 'm_results_k1.jsonl'}:1)"
    )
    with pytest.raises(AudioICLError) as info:
        merge_shards([a, tmp_path / "none"], tmp_path / "out")
    assert str(info.value) == f"{tmp_path / 'none'}: not a folder"
    (tmp_path / "empty").mkdir()
    with pytest.raises(AudioICLError, match="no results files"):
        merge_shards([a, tmp_path / "empty"], tmp_path / "out")
    (tmp_path / "file").write_text("")
    with pytest.raises(AudioICLError) as info:
        merge_shards([a], tmp_path / "file")
    assert str(info.value) == f"--out {tmp_path / 'file'} is a file, not a folder"


def test_merge_with_the_dataset_refuses_a_missing_episode_and_an_id_outside_it(tmp_path: Path):
    from helpers import write_bare_meta

    data = tmp_path / "data"
    episodes = [episode for episode, *_ in write_bare_meta(data, per_task=1)]
    every = [line(episode) for episode in episodes]
    a = shard(tmp_path / "a", "m_results_k1.jsonl", *every, line("AudioICL99999"))
    with pytest.raises(AudioICLError) as info:
        merge_shards([a], tmp_path / "out", data)
    assert "m_results_k1.jsonl: 1 id(s) are not in the dataset" in str(info.value)
    assert info.value.id == "AudioICL99999"
    b = shard(tmp_path / "b", "m_results_k1.jsonl", *every[1:])
    with pytest.raises(AudioICLError) as info:
        merge_shards([b], tmp_path / "out2", data)
    assert f"1 episode(s) of the dataset have no result (first: {episodes[0]})" in str(info.value)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "é", "\r", "\n", "\r\n", "\u2028", '{"x": 1}', ""]), max_size=30))
def test_lines_stream_as_the_whole_files_text_mode_split_gives_them(tmp_path_factory, pieces):
    """``raw_result_lines`` reads a line at a time (issue 53: ``score`` held every file whole, 2.4 KB a
    line) and splits as the original's text-mode reading: \\n, \\r\\n and \\r end a line, U+2028 does not."""
    text = "".join(pieces)
    path = tmp_path_factory.mktemp("lines") / "m_results_k1.jsonl"
    path.write_bytes(text.encode("utf-8"))
    whole = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    assert list(iter_result_lines(path)) == whole
    assert list(iter_result_lines_or_none(path)) == whole
