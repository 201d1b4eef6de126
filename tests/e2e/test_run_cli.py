"""``audioicl run`` and ``audioicl merge`` as subprocesses on the tiny fixture dataset."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from audioicl.meta import read_meta

TIMING = ("seconds",)


def cli(*args: object, check_rc: int | None = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "audioicl.cli", *map(str, args)], capture_output=True, text=True, timeout=120
    )
    if check_rc is not None:
        assert proc.returncode == check_rc, proc.stderr + proc.stdout
    return proc


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def without_timing(lines: list[dict]) -> list[dict]:
    return [{k: v for k, v in line.items() if k not in TIMING} for line in lines]


def results_of(folder: Path) -> dict[str, list[dict]]:
    return {p.name: without_timing(rows(p)) for p in sorted(folder.glob("*_results_k*.jsonl"))}


@pytest.fixture
def dataset(fresh_dataset) -> Path:
    return fresh_dataset


def test_run_all_ks_and_summary(dataset, tmp_path):
    out = tmp_path / "out"
    proc = cli("run", "--data", dataset, "--model", "builtin:random", "--out", out, "--batch-size", 5)
    assert "k=1: 12 written (0 errors), 0 skipped" in proc.stdout
    assert "k=2: 12 written (0 errors), 0 skipped" in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == ["random_results_k1.jsonl", "random_results_k2.jsonl", "run.json"]
    for k in (1, 2):
        lines = rows(out / f"random_results_k{k}.jsonl")
        assert [line["id"] for line in lines] == [ep.id for ep in read_meta(dataset / "meta" / f"meta_k{k}.jsonl")]
    again = cli("run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "1")
    assert "k=1: 0 written (0 errors), 12 skipped as already done" in again.stdout


def _wait_for_lines(path: Path, count: int, proc: subprocess.Popen) -> None:
    while not (path.exists() and path.read_bytes().count(b"\n") >= count):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)


def test_resume_after_sigkill(dataset, tmp_path):
    """Kill the run while it waits on an audio file (a FIFO that nobody writes), cut the last line in
    half, then rerun: every id once, equal to an uninterrupted run."""
    episodes = read_meta(dataset / "meta" / "meta_k1.jsonl")
    blocked = episodes[9]
    assert blocked.task == "AnomalyDetect"
    fifo = dataset / blocked.query.target.audio_path
    real_bytes = fifo.read_bytes()
    fifo.unlink()
    os.mkfifo(fifo)

    out = tmp_path / "out"
    results = out / "random_results_k1.jsonl"
    args = ["run", "--data", dataset, "--model", "builtin:random", "--out", out, "--batch-size", 1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "audioicl.cli", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        _wait_for_lines(results, 9, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert (out / "random_results_k1.jsonl.lock").exists()
    data = results.read_bytes()
    assert data.count(b"\n") == 9
    cut = data.rstrip(b"\n").rfind(b"\n") + 40  # half of line 9 stays
    results.write_bytes(data[:cut])

    fifo.unlink()
    fifo.write_bytes(real_bytes)
    resumed = cli(*args)
    assert "took over the stale lock" in resumed.stderr
    assert "cut a half-written last line" in resumed.stderr
    assert "k=1: 4 written (0 errors), 8 skipped as already done" in resumed.stdout
    assert not (out / "random_results_k1.jsonl.lock").exists()

    fresh = tmp_path / "fresh"
    cli("run", "--data", dataset, "--model", "builtin:random", "--out", fresh, "--batch-size", 1)
    assert results_of(out) == results_of(fresh)
    ids = [line["id"] for line in rows(results)]
    assert ids == [ep.id for ep in episodes]


def test_second_writer_is_refused(dataset, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    lock = out / "random_results_k1.jsonl.lock"
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))
    proc = cli("run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "1", check_rc=2)
    assert f"being written by process {os.getpid()}" in proc.stderr
    assert not (out / "random_results_k1.jsonl").exists()
    assert lock.exists()


def test_shards_merge_to_a_single_run(dataset, tmp_path):
    single = tmp_path / "single"
    cli("run", "--data", dataset, "--model", "builtin:majority", "--out", single)
    sharded = tmp_path / "sharded"
    for i in (1, 2, 3):
        cli("run", "--data", dataset, "--model", "builtin:majority", "--out", sharded, "--shard", f"{i}/3")
    shards = [sharded / f"shard-{i}-of-3" for i in (1, 2, 3)]
    sizes = [len(rows(s / "majority_results_k1.jsonl")) for s in shards]
    assert sum(sizes) == 12 and all(sizes)

    merged = tmp_path / "merged"
    proc = cli("merge", *shards, "--out", merged, "--data", dataset)
    assert "majority_results_k1.jsonl: 12 lines from 3 folder(s)" in proc.stdout
    assert results_of(merged) == results_of(single)
    assert json.loads((merged / "run.json").read_text())["selection"]["shard"] is None
    # merging again into the same folder would clobber it
    assert "merge into an empty folder" in cli("merge", *shards, "--out", merged, check_rc=2).stderr

    # an incomplete set of shards (the other refusals are tested in tests/test_runner.py)
    proc = cli("merge", *shards[:2], "--out", tmp_path / "m2", check_rc=2)
    assert "shard(s) 3/3 not given" in proc.stderr


def test_unreadable_audio_is_an_error_line(dataset, tmp_path):
    episodes = read_meta(dataset / "meta" / "meta_k1.jsonl")
    broken = episodes[0]
    (dataset / broken.query.target.audio_path).write_bytes(b"RIFF\x00\x00garbage")
    out = tmp_path / "out"
    proc = cli("run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "1", check_rc=1)
    assert "k=1: 12 written (1 errors)" in proc.stdout
    lines = {line["id"]: line for line in rows(out / "random_results_k1.jsonl")}
    assert len(lines) == 12
    bad = lines[broken.id]
    assert bad["status"] == "error" and bad["response"] is None and bad["gt"] == broken.query.label
    assert "cannot decode audio" in bad["error"] and broken.query.target.audio_path in bad["error"]
    assert all(line["status"] == "ok" for i, line in lines.items() if i != broken.id)
    # a rerun still reports the error line it skips
    again = cli("run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "1", check_rc=1)
    assert "1 error lines from an earlier run" in again.stdout
