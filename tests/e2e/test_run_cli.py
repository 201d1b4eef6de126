"""``audioicl run`` and ``audioicl merge`` as subprocesses on the tiny fixture dataset."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from functools import partial
from pathlib import Path

import cli
import pytest
from helpers import read_jsonl

from audioicl import read_meta

TIMING = ("seconds",)


audioicl = partial(cli.audioicl, timeout=120, rc=0)


def without_timing(lines: list[dict]) -> list[dict]:
    return [{k: v for k, v in line.items() if k not in TIMING} for line in lines]


def results_of(folder: Path) -> dict[str, list[dict]]:
    return {p.name: without_timing(read_jsonl(p)) for p in sorted(folder.glob("*_results_k*.jsonl"))}


@pytest.fixture
def dataset(fresh_dataset) -> Path:
    return fresh_dataset


def test_run_all_ks_and_summary(dataset, tmp_path):
    out = tmp_path / "out"
    proc = audioicl("run", "--data", dataset, "--model", "builtin:random", "--out", out, "--batch-size", 5)
    assert "k=1: 12 written (0 errors), 0 skipped" in proc.stdout
    assert "k=2: 12 written (0 errors), 0 skipped" in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == [
        "random_results_k1.jsonl",
        "random_results_k2.jsonl",
        "random_run.json",
    ]
    for k in (1, 2):
        lines = read_jsonl(out / f"random_results_k{k}.jsonl")
        assert [line["id"] for line in lines] == [
            ep.id for ep in read_meta(dataset / "meta" / f"meta_k{k}.jsonl")
        ]
    again = audioicl("run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "1")
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
    args = [
        "run",
        "--data",
        dataset,
        "--model",
        "builtin:random",
        "--out",
        out,
        "--batch-size",
        1,
        "--window",
        1,
    ]
    proc = subprocess.Popen(
        cli.command(*args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
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
    resumed = audioicl(*args)
    assert "took over the stale lock" in resumed.stderr
    assert "cut a half-written last line" in resumed.stderr
    assert "k=1: 4 written (0 errors), 8 skipped as already done" in resumed.stdout
    assert not (out / "random_results_k1.jsonl.lock").exists()

    fresh = tmp_path / "fresh"
    audioicl("run", "--data", dataset, "--model", "builtin:random", "--out", fresh, "--batch-size", 1)
    assert results_of(out) == results_of(fresh)
    ids = [line["id"] for line in read_jsonl(results)]
    assert ids == [ep.id for ep in episodes]


def test_second_writer_is_refused(dataset, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    lock = out / "random_results_k1.jsonl.lock"
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))
    proc = audioicl("run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "1", rc=2)
    assert f"being written by process {os.getpid()}" in proc.stderr
    assert not (out / "random_results_k1.jsonl").exists()
    assert lock.exists()


def test_shards_merge_to_a_single_run(dataset, tmp_path):
    """Three shard runs at once next to a single run; their merge equals the single run."""
    single, sharded = tmp_path / "single", tmp_path / "sharded"
    common = ["run", "--data", dataset, "--model", "builtin:majority"]
    jobs = [[*common, "--out", single]] + [
        [*common, "--out", sharded, "--shard", f"{i}/3"] for i in (1, 2, 3)
    ]
    procs = [
        subprocess.Popen(
            cli.command(*job),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for job in jobs
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    shards = [sharded / f"shard-{i}-of-3" for i in (1, 2, 3)]
    sizes = [len(read_jsonl(s / "majority_results_k1.jsonl")) for s in shards]
    assert sum(sizes) == 12 and all(sizes)

    merged = tmp_path / "merged"
    proc = audioicl("merge", *shards, "--out", merged, "--data", dataset)
    assert "majority_results_k1.jsonl: 12 lines from 3 folder(s)" in proc.stdout
    assert results_of(merged) == results_of(single)
    assert json.loads((merged / "majority_run.json").read_text())["shard"] is None
    # merging again would clobber the merged files (the other refusals: tests/test_runner.py)
    assert "merge into an empty folder" in audioicl("merge", *shards, "--out", merged, rc=2).stderr


def test_unreadable_audio_is_an_error_line(dataset, tmp_path):
    episodes = read_meta(dataset / "meta" / "meta_k1.jsonl")
    broken = episodes[0]
    (dataset / broken.query.target.audio_path).write_bytes(b"RIFF\x00\x00garbage")
    out = tmp_path / "out"
    proc = audioicl("run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "1", rc=1)
    assert "k=1: 12 written (1 errors)" in proc.stdout
    lines = {line["id"]: line for line in read_jsonl(out / "random_results_k1.jsonl")}
    assert len(lines) == 12
    bad = lines[broken.id]
    assert bad["status"] == "error" and bad["response"] is None and bad["gt"] == broken.query.label
    assert "cannot decode audio" in bad["error"] and broken.query.target.audio_path in bad["error"]
    assert all(line["status"] == "ok" for i, line in lines.items() if i != broken.id)
    # a rerun still reports the error line it skips
    again = audioicl("run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "1", rc=1)
    assert "1 error lines from an earlier run" in again.stdout


def test_retry_errors_runs_error_lines_again(dataset, tmp_path):
    """A missing clip gives error lines; once the clip is back, --retry-errors replaces them by ok lines."""
    episodes = read_meta(dataset / "meta" / "meta_k1.jsonl")
    rel = episodes[3].query.target.audio_path
    broken = {ep.id for ep in episodes if rel in {clip.audio_path for clip in ep.clips()}}
    n = len(broken)
    clip = dataset / rel
    saved = tmp_path / "saved.wav"
    clip.rename(saved)
    out = tmp_path / "out"
    args = ["run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "1"]
    assert f"k=1: 12 written ({n} errors)" in audioicl(*args, rc=1).stdout
    results = out / "random_results_k1.jsonl"
    assert {line["id"] for line in read_jsonl(results) if line["status"] == "error"} == broken
    saved.rename(clip)
    kept = audioicl(*args, rc=1)  # the default keeps the error lines and says so
    assert f"{n} error lines from an earlier run; --retry-errors runs them again" in kept.stdout
    before = read_jsonl(results)
    retried = audioicl(*args, "--retry-errors")
    assert (
        f"k=1: {n} written (0 errors), {12 - n} skipped as already done, {n} earlier error lines removed to retry"
        in retried.stdout
    )
    after = read_jsonl(results)
    assert sorted(line["id"] for line in after) == sorted(ep.id for ep in episodes)  # no id twice
    assert [line for line in after if line["id"] not in broken] == [
        line for line in before if line["id"] not in broken
    ]
    assert {line["id"] for line in after[-n:]} == broken and all(line["status"] == "ok" for line in after)
    assert not list(out.glob("*.tmp")) and not list(out.glob("*.lock"))
    record = json.loads((out / "random_run.json").read_text())
    assert [r["retry_errors"] for r in record["runs"]] == [False, False, True]
    fresh = tmp_path / "fresh"
    audioicl("run", "--data", dataset, "--model", "builtin:random", "--out", fresh, "--k", "1")
    by_id = {line["id"]: line for line in without_timing(after)}
    assert [by_id[ep.id] for ep in episodes] == results_of(fresh)["random_results_k1.jsonl"]


def test_models_share_a_folder_and_are_scored_together(dataset, tmp_path):
    out = tmp_path / "out"
    audioicl("run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "1")
    audioicl("run", "--data", dataset, "--model", "builtin:majority", "--out", out, "--style", "general")
    audioicl(
        "run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "2", "--batch-size", "3"
    )
    assert sorted(p.name for p in out.iterdir()) == [
        "majority_results_k1.jsonl",
        "majority_results_k2.jsonl",
        "majority_run.json",
        "random_results_k1.jsonl",
        "random_results_k2.jsonl",
        "random_run.json",
    ]
    summary = tmp_path / "summary.csv"
    audioicl("score", "--in", out, "--out", summary)
    table = summary.read_text(encoding="utf-8").splitlines()
    assert table[0] == "model,shots,task,accuracy,n"
    cells = {tuple(row.split(",")[:3]) for row in table[1:]}
    tasks = {ep.task for ep in read_meta(dataset / "meta" / "meta_k1.jsonl")}
    assert cells == {(m, k, t) for m in ("majority", "random") for k in ("1", "2") for t in tasks}
    # the same model with another prompt style is refused, naming the setting; nothing is written
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    refused = audioicl(
        "run", "--data", dataset, "--model", "builtin:random", "--out", out, "--style", "general", rc=2
    )
    assert "random_run.json: this folder holds results of model 'random'" in refused.stderr
    assert "style: was 'specific', now 'general'" in refused.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_help_documents_run_records_and_retry_errors():
    text = " ".join(audioicl("run", "--help").stdout.split())
    assert "<model>_run.json" in text and "several models share one folder" in text
    assert "--retry-errors" in text and "error lines" in text


def test_config_file_under_command_line(dataset, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(
        f"data: {dataset}\nmodel: builtin:majority\nout: results\nk: [1]\ntasks: [AudioCount, MorseCode]\n"
        "style: general\nbatch_size: 2\nbackend-option: {max_clip_seconds: 100}\n",
        encoding="utf-8",
    )
    proc = audioicl("run", "--config", config, "--style", "none")
    out = tmp_path / "results"  # relative to the config file
    assert "k=1: 6 written (0 errors)" in proc.stdout
    record = json.loads((out / "majority_run.json").read_text())
    assert record["settings"]["style"] == "none"  # the command line wins
    assert record["settings"]["backend_options"] == {"max_clip_seconds": "100"}
    assert record["runs"][-1]["batch_size"] == 2
    assert read_jsonl(out / "majority_results_k1.jsonl")[0]["prompt"].startswith(
        "system: You are a helpful assistant.\nuser: [Demo Audio 1]"
    )
    config.write_text("tasks: [AudioCount]\nlayout: sideways\n", encoding="utf-8")
    bad = audioicl(
        "run", "--config", config, "--data", dataset, "--model", "builtin:random", "--out", out, rc=2
    )
    assert f"{config}: argument --layout: invalid choice: 'sideways'" in bad.stderr
