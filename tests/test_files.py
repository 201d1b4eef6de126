"""``audioicl.files``: atomic writes leave no temporary file whatever fails; output paths checked up front;
folders made by ``create_folder`` taken back by ``remove_empty_folders``."""

from __future__ import annotations

import os
import re

import pytest

from audioicl.errors import AudioICLError, NotWritable
from audioicl.files import (
    check_output,
    create_folder,
    remove_empty_folders,
    temporary_name,
    write_atomic,
)


def test_write_atomic_over_a_folder_is_one_error_and_leaves_no_temporary_file(tmp_path):
    folder = tmp_path / "report.json"
    folder.mkdir()
    with pytest.raises(AudioICLError, match="cannot write") as info:
        write_atomic(folder, "{}\n")
    assert str(folder) in str(info.value)
    assert not temporary_name(folder).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_write_atomic_removes_its_temporary_file_when_the_write_fails(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old\n")
    with pytest.raises(UnicodeEncodeError):  # a bug, not a user error: it keeps its type
        write_atomic(path, "\ud800")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
    assert path.read_text() == "old\n"


def test_write_atomic_into_a_missing_folder_leaves_nothing(tmp_path):
    with pytest.raises(AudioICLError, match="cannot write"):
        write_atomic(tmp_path / "no-such" / "x.json", "{}")
    assert list(tmp_path.iterdir()) == []


def refused(path, folder: bool, problem: str, error: type[AudioICLError] = AudioICLError) -> None:
    """``check_output(path)`` refuses it with ``--out PATH PROBLEM`` (and the remedy, for a place not writable)."""
    remedy = "; make it writable, or name another" if error is NotWritable else ""
    with pytest.raises(error, match=rf"^--out {re.escape(str(path))} {re.escape(problem + remedy)}$"):
        check_output(path, "--out", folder=folder)


def test_output_problems(tmp_path):
    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    check_output(tmp_path / "f", "--out", folder=False)
    check_output(tmp_path / "d", "--out", folder=True)
    check_output(tmp_path / "new" / "deeper" / "x.csv", "--out", folder=False)
    refused(tmp_path / "d", False, "is a folder, not a file")
    refused(tmp_path / "f", True, "is a file, not a folder")
    refused(tmp_path / "f" / "sub", True, f"cannot be created: {tmp_path / 'f'} is not a folder")
    with pytest.raises(AudioICLError, match=r"^--out .*/f is a file, not a folder$"):
        check_output(tmp_path / "f", "--out", folder=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "f"]  # nothing created


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a folder without write permission")
def test_output_in_a_folder_without_write_permission(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        refused(locked / "x", True, f"cannot be created: {locked} is not writable", NotWritable)
        refused(locked, True, f"cannot be written: {locked} is not writable", NotWritable)
    finally:
        locked.chmod(0o755)


def test_create_folder_and_take_it_back(tmp_path):
    (tmp_path / "a").mkdir()
    created = create_folder(tmp_path / "a" / "b" / "c")
    assert created == [tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"]
    remove_empty_folders(created)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a"]
    created = create_folder(tmp_path / "a" / "b" / "c")
    (tmp_path / "a" / "b" / "kept.txt").write_text("x")
    remove_empty_folders(created)  # stops at the first folder that holds something
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "a",
        "a/b",
        "a/b/kept.txt",
    ]
    with pytest.raises(AudioICLError, match="cannot create the folder"):
        create_folder(tmp_path / "a" / "b" / "kept.txt" / "sub")
