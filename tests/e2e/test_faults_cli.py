"""Faults a user meets, on real ``audioicl`` subprocesses: a disk that fills up mid-command (a file-size limit,
``RLIMIT_FSIZE`` with SIGXFSZ ignored, so that writes fail with EFBIG as on a full disk) and the signals a
scheduler or a user sends (SIGTERM, SIGINT, a second one). Each ends in one line and the exit status the README
gives, leaves no half-written line, no lock and no folder that looks complete, and the same command run again
completes, losing and duplicating nothing."""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path

import cli
import pytest
from helpers import read_jsonl

from audioicl import read_meta
from audioicl.inference.results import iter_results

audioicl = partial(cli.audioicl, timeout=300)
SMALL_BUILD = [
    "--tasks",
    "AudioCount,MorseCode,AnomalyDetect",
    "--episodes",
    "2",
    "--k",
    "1-2",
    "--seed",
    "5",
]
TOO_LARGE = r"File too large \(errno 27\); free space and run the same command again"


def limited(max_bytes: int):
    """A ``preexec_fn``: files of the child may not grow past ``max_bytes``; SIGXFSZ ignored, so that a write
    past the limit fails with EFBIG instead of killing the process."""

    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))

    return preexec


def audioicl_limited(max_bytes: int, *args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        cli.command(*args), preexec_fn=limited(max_bytes), capture_output=True, text=True, timeout=300
    )


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def leftovers(folder: Path) -> list[str]:
    """Lock and temporary files under ``folder``."""
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith((".lock", ".tmp", ".break")))


def without_timing(lines: list[dict]) -> list[dict]:
    return [{k: v for k, v in line.items() if k != "seconds"} for line in lines]


def results_of(folder: Path) -> dict[str, list[dict]]:
    """Each results file's lines by id (a resumed run may write an episode's k lines in another order)."""
    return {
        p.name: sorted(without_timing(read_jsonl(p)), key=lambda line: line["id"])
        for p in sorted(folder.glob("*_results_k*.jsonl"))
    }


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- a full disk


def test_a_run_that_fills_the_disk_stops_in_one_line_at_a_whole_line_and_resumes(tiny_dataset, tmp_path):
    out = tmp_path / "out"
    args = ["run", "--data", tiny_dataset, "--model", "builtin:random", "--out", out, "--window", 1]
    full = audioicl_limited(
        8000, *args
    )  # the run record fits; the results files (12 lines of ~1.5 kB) do not
    assert full.returncode == 1, full.stderr
    line = one_line(full.stderr)
    assert re.fullmatch(
        rf"audioicl run: error: cannot write {re.escape(str(out))}/random_results_k\d\.jsonl: {TOO_LARGE}: "
        "it resumes",
        line,
    ), line
    assert leftovers(out) == []
    kept = 0
    for path in sorted(out.glob("*_results_k*.jsonl")):
        data = path.read_bytes()
        assert not data or data.endswith(b"\n"), f"{path} ends in a half-written line"
        kept += len(list(iter_results(path)))  # every line whole
    assert 0 < kept < 36
    (entry,) = json.loads((out / "random_run.json").read_text())["runs"]
    assert entry["timing"]["outcome"] == "stopped" and "File too large" in entry["timing"]["stopped_by"]

    again = audioicl(*args)
    assert again.returncode == 0, again.stderr
    assert "cut a half-written" not in again.stderr
    fresh = tmp_path / "fresh"
    assert audioicl(*args[:-4], "--out", fresh).returncode == 0
    for k in (1, 2, 3):  # every episode once
        ids = [line["id"] for line in read_jsonl(out / f"random_results_k{k}.jsonl")]
        assert sorted(ids) == sorted(ep.id for ep in read_meta(tiny_dataset / "meta" / f"meta_k{k}.jsonl"))
    assert results_of(out) == results_of(fresh)  # and as an uninterrupted run has it
    for path in sorted(out.glob("*_results_k*.jsonl")):  # in its order too (issue 40, item 7: the resumed
        # lines came last), each line byte for byte but its time
        assert without_timing(read_jsonl(path)) == without_timing(read_jsonl(fresh / path.name)), path.name


def test_a_build_that_fills_the_disk_leaves_no_manifest_and_resumes_byte_identical(tmp_path):
    root = tmp_path / "bench"
    full = audioicl_limited(100_000, "build", "--out", root, "--quiet", *SMALL_BUILD)  # some clips are larger
    assert full.returncode == 1, full.stderr
    line = one_line(full.stderr)
    assert re.fullmatch(
        rf"audioicl build: error: cannot write {re.escape(str(root))}/data/\S+\.wav: {TOO_LARGE}: it resumes",
        line,
    ), line
    assert not (root / "manifest.json").exists()
    assert leftovers(root) == []

    assert audioicl("build", "--out", root, "--quiet", *SMALL_BUILD).returncode == 0
    fresh = tmp_path / "fresh"
    assert audioicl("build", "--out", fresh, "--quiet", *SMALL_BUILD).returncode == 0
    assert tree(root) == tree(fresh)


def test_score_and_report_that_fill_the_disk_say_so_in_one_line(tiny_dataset, tmp_path):
    results = tmp_path / "results"
    assert (
        audioicl("run", "--data", tiny_dataset, "--model", "builtin:random", "--out", results).returncode == 0
    )
    summary = tmp_path / "scores" / "summary.csv"

    full = audioicl_limited(1000, "score", "--in", results, "--out", summary)  # the detail CSV is larger
    assert full.returncode == 1, full.stderr
    line = one_line(full.stderr)
    assert re.fullmatch(rf"audioicl score: error: cannot write \S+\.csv: {TOO_LARGE}", line), line
    assert leftovers(tmp_path / "scores") == []
    assert audioicl("score", "--in", results, "--out", summary).returncode == 0

    report = tmp_path / "report"
    assert audioicl("report", "--scores", summary, "--results", results, "--out", report).returncode == 0
    assert (report / "report.html").stat().st_size > 100_000
    full = audioicl_limited(100_000, "report", "--scores", summary, "--results", results, "--out", report)
    assert full.returncode == 1, full.stderr
    line = one_line(full.stderr)
    assert re.fullmatch(
        rf"audioicl report: error: cannot write {re.escape(str(report))}/\S+: {TOO_LARGE}", line
    )
    assert not (report / "report.html").exists()  # the earlier page is gone: nothing looks complete
    assert leftovers(report) == []


def test_a_download_that_fills_the_disk_never_looks_complete_and_resumes(hub, tmp_path):
    from hub_server import original_release
    from reference_data import REFERENCE

    if not sorted(REFERENCE.glob("meta_k*.jsonl")):
        pytest.skip("reference meta files absent (shared/reference)")
    files = hub.commits[hub.commit(original_release(REFERENCE, per_task=1))]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and "proxy" not in k.lower()}
    env |= {"HF_ENDPOINT": hub.hub_url, "HF_HOME": str(tmp_path / "hf-home"), "NO_PROXY": "127.0.0.1"}
    env |= {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
    root = tmp_path / "orig"
    args = ["download", "--out", root, "--no-validate"]
    full = subprocess.run(
        cli.command(*args), env=env, preexec_fn=limited(5000), capture_output=True, text=True, timeout=300
    )  # the meta files of k >= 4 are larger
    assert full.returncode == 1, full.stderr
    assert "Traceback" not in full.stderr
    *_, line = full.stderr.strip().splitlines()  # the client may warn first that it could not cache a listing
    assert re.fullmatch(
        rf"audioicl download: error: cannot write {re.escape(str(root))}\S*: {TOO_LARGE}: it resumes", line
    )
    assert json.loads((root / "download.json").read_text())["complete"] is False
    again = cli.audioicl(*args, env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    assert json.loads((root / "download.json").read_text())["complete"] is True
    assert all((root / path).read_bytes() == data for path, data in files.items())


def test_fetch_sources_that_fills_the_disk_says_so_in_one_line_and_resumes(tmp_path):
    from corpus_server import CorpusServer, make_archives, registry_for

    archives = make_archives()
    registry = registry_for(tmp_path / "registry.json", archives)
    server = CorpusServer(dict(archives)).start()
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env |= {"AUDIOICL_SOURCES_BASE_URL": server.url, "NO_PROXY": "127.0.0.1"}
    out = tmp_path / "corpora"
    args = ["fetch-sources", "--out", out, "--registry", registry, "--quiet", "--allow-unverified"]
    try:
        full = subprocess.run(
            cli.command(*args),
            env=env,
            preexec_fn=limited(100_000),
            capture_output=True,
            text=True,
            timeout=300,
        )  # every archive is larger
        assert full.returncode == 1, full.stderr
        line = one_line(full.stderr)
        assert re.fullmatch(
            rf"audioicl fetch-sources: error: cannot write \S+\.part: {TOO_LARGE}: it resumes", line
        )
        assert not any((p / "corpus.json").exists() for p in out.iterdir())
        again = cli.audioicl(*args, env=env, timeout=300)
        assert again.returncode == 0, again.stderr
    finally:
        server.stop()
    assert sorted(p.name for p in out.iterdir() if (p / "corpus.json").is_file()) == [
        "dcase2024-task2-dev", "esc50", "freesound-one-shots", "fsdd",
    ]  # fmt: skip


# --------------------------------------------------------------------------- signals


class _SlowAfter:
    """The chat server's latency: the first ``fast`` distinct requests at once, then every other one slow
    (``slow_s``), until ``calm()``; a request keeps the latency it was first given."""

    def __init__(self, fast: int, slow_s: float):
        self.fast, self.slow_s = fast, slow_s
        self.seen: set[str] = set()
        self.slow: set[str] = set()
        self.calm_now = False
        self._lock = threading.Lock()

    def __call__(self, digest: str) -> float:
        with self._lock:
            if self.calm_now:
                return 0.0
            if digest not in self.seen:
                if len(self.seen) >= self.fast and len(self.seen) % 2 == 1:
                    self.slow.add(digest)
                self.seen.add(digest)
            return self.slow_s if digest in self.slow else 0.0

    def calm(self) -> None:
        with self._lock:
            self.calm_now = True


def _lines_in(out: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in out.glob("*_results_k*.jsonl"))


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_window_keeps_the_answered_prompts_releases_the_locks_and_resumes(
    tiny_dataset, tmp_path, signum, status
):
    """The openai backend against a server that answers half of the second window's requests at once and the
    other half after a minute: the signal stops the run within seconds, with the first window and the answered
    half of the second written; the rerun asks only the rest."""
    pytest.importorskip("httpx")
    from chat_server import ChatServer, messages_digest

    latency = _SlowAfter(fast=6, slow_s=60.0)
    server = ChatServer(latency=latency).start()
    out = tmp_path / "out"
    # a window of 4 runs on to the end of the episode it cuts: 2 episodes x 3 k = 6 requests, all at once
    args = [
        "run", "--data", tiny_dataset, "--model", "openai:m", "--base-url", server.url, "--out", out,
        "--window", 4, "-o", "concurrency=8", "-o", "timeout=120",
    ]  # fmt: skip
    try:
        proc = subprocess.Popen(cli.command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while _lines_in(out) < 6 or len(server.log) < 12:  # the first window written, the second asked
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.05)
            time.sleep(0.5)  # its fast half answered; its slow half in flight for a minute
            sent = time.monotonic()
            proc.send_signal(signum)
            _, stderr = proc.communicate(timeout=30)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == status, stderr
        assert took < 10, f"the stop took {took:.1f} s"
        name = signal.Signals(signum).name
        assert one_line(stderr) == (
            f"audioicl run: stopped by {name} after 9 of 36 prompts; run the same command again to resume"
        )
        assert _lines_in(out) == 9 and leftovers(out) == []
        for path in out.glob("*_results_k*.jsonl"):
            assert {line.data["status"] for line in iter_results(path)} == {"ok"}
        (entry,) = json.loads((out / "m_run.json").read_text())["runs"]
        assert entry["timing"]["outcome"] == "interrupted" and entry["timing"]["signal"] == name

        latency.calm()
        asked = len(server.log)
        again = audioicl(*args)
        assert again.returncode == 0, again.stderr
        assert "took over" not in again.stderr
    finally:
        server.stop()
    for k in (1, 2, 3):
        got = read_jsonl(out / f"m_results_k{k}.jsonl")
        assert len(got) == len({x["id"] for x in got}) == 12
    # the rerun asked what had no line, each once: the 3 left in flight and the 24 never asked
    assert len(server.log) - asked == 36 - 9 and len(latency.slow) == 3
    assert latency.slow <= {messages_digest(e.body["messages"]) for e in server.log[asked:]}


def test_a_second_signal_stops_at_once_and_the_rerun_completes(fresh_dataset, tmp_path):
    """The run is inside a long call that has no safe point (``builtin:icl`` perceiving an episode whose clips
    are all 590 s long: seconds of work in one ``generate``): the first SIGTERM is noted, the second, a moment
    later, ends the process at once, as SIGKILL would; the rerun completes."""
    import numpy as np

    from audioicl.audio import write_wav

    dataset = fresh_dataset
    episodes = read_meta(dataset / "meta" / "meta_k1.jsonl")
    long = np.random.default_rng(0).standard_normal(16_000 * 590).astype(np.float32) * 0.1
    clips = [clip for demo in episodes[9].demos for clip in demo.clips] + list(episodes[9].query.clips)
    for clip in clips:
        write_wav(dataset / clip.audio_path, long)
    out = tmp_path / "out"
    args = ["run", "--data", dataset, "--model", "builtin:icl", "--out", out, "--window", 1, "--order", "k"]
    proc = subprocess.Popen(cli.command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while _lines_in(out) < 9:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)  # noted: it stops at the next safe point, after the long call
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == -signal.SIGTERM, stderr
    assert "second SIGTERM: stopping at once" in stderr and "Traceback" not in stderr
    again = audioicl(*args)
    assert again.returncode == 0, again.stderr
    assert leftovers(out) == []
    for k in (1, 2):
        ids = [line["id"] for line in read_jsonl(out / f"icl_results_k{k}.jsonl")]
        assert ids == [ep.id for ep in read_meta(dataset / "meta" / f"meta_k{k}.jsonl")]


def test_hostile_clips_are_their_episodes_error_lines_and_the_run_goes_on(tmp_path):
    """A FIFO, a WAV at 1 Hz, a truncated WAV and a WAV of 0 samples in place of four query clips (issue 39,
    items 5, 6 and 9): the run ends (the FIFO is not opened, the 1 Hz header is refused before decoding, the
    others are not answered as if whole) with exactly those four episodes as error lines, each naming its file
    and why, and every other episode answered."""
    import struct

    data = tmp_path / "bench"
    audioicl("build", "--out", data, *SMALL_BUILD, "--quiet", rc=0)
    episodes = [e for e in read_meta(data / "meta" / "meta_k1.jsonl") if e.task == "AudioCount"]
    queries = [data / e.query.clips[0].audio_path for e in episodes[:2]]
    episodes = [e for e in read_meta(data / "meta" / "meta_k1.jsonl") if e.task == "MorseCode"]
    queries += [data / e.query.clips[0].audio_path for e in episodes[:2]]
    fifo, slow, cut, empty = queries
    fifo.unlink()
    os.mkfifo(fifo)
    header = (
        b"RIFF"
        + struct.pack("<I", 36 + 72_000)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, 1, 2, 2, 16)
    )
    slow.write_bytes(header + b"data" + struct.pack("<I", 72_000) + bytes(72_000))  # 1 Hz, 36,000 samples
    whole = cut.read_bytes()
    cut.write_bytes(whole[: len(whole) // 2])  # its data chunk still declares the whole
    empty.write_bytes(header[:4] + struct.pack("<I", 36) + header[8:] + b"data" + struct.pack("<I", 0))
    proc = audioicl(
        "run", "--data", data, "--model", "builtin:icl", "--out", tmp_path / "out", "--k", "1", rc=1
    )
    assert "Traceback" not in proc.stderr
    lines = read_jsonl(tmp_path / "out" / "icl_results_k1.jsonl")
    errors = {line["id"]: line["error"] for line in lines if line.get("error")}
    assert len(lines) == len(read_meta(data / "meta" / "meta_k1.jsonl"))
    wanted = {
        fifo.name: "not a regular file",
        slow.name: "a sample rate of 1 Hz",
        cut.name: "truncated",
        empty.name: "no samples",
    }
    assert len(errors) == 4, errors
    for name, why in wanted.items():
        assert any(name in error and why in error for error in errors.values()), (name, errors)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_a_build_in_one_line_lets_its_lock_go_and_the_rerun_completes(tmp_path, signum):
    """SIGTERM or SIGINT mid-build (issue 39: ``build`` did not stop gracefully) ends it with 128 + the signal's
    number and one line, the folder's lock let go (its workers end with it); the same command completes it."""
    out = tmp_path / "bench"
    args = ["build", "--out", out, "--episodes", "12", "--workers", "2"]
    status, stderr = cli.stopped_by(signum, lambda: any((out / "data").rglob("*.wav")), *args)
    name = signal.Signals(signum).name
    assert status == 128 + signum, stderr
    assert one_line(stderr) == f"audioicl build: stopped by {name}; run the same command again: it resumes"
    assert not (tmp_path / "bench.lock").exists() and not (out / "manifest.json").exists()
    audioicl(*args, rc=0)
    audioicl("validate", out, rc=0)


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux's /proc)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie no longer does)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(
    not Path(f"/proc/self/task/{os.getpid()}/children").exists(), reason="finds the workers in Linux's /proc"
)
def test_a_build_whose_worker_is_killed_fails_at_once_naming_it_and_the_rerun_completes(tmp_path):
    """A build worker killed mid-build (as the out-of-memory killer does: SIGKILL) fails the build in one line
    that names the worker and the signal, instead of leaving it waiting forever for the job the worker held
    (``multiprocessing.Pool`` replaced the worker and waited); no worker outlives it, nothing looks complete,
    and the rerun completes."""
    out = tmp_path / "bench"
    args = ["build", "--out", out, "--episodes", "12", "--workers", "2"]
    workers: list[int] = []

    def first_worker(pid: int) -> int:  # both are forked before either writes a clip
        workers.extend(children(pid))
        return workers[0]

    status, stderr = cli.stopped_by(
        signal.SIGKILL, lambda: any((out / "data").rglob("*.wav")), *args, timeout=120, whom=first_worker
    )
    assert status == 1 and len(workers) == 2, stderr
    assert one_line(stderr) == (
        f"audioicl build: error: build worker process {workers[0]} was killed by SIGKILL (the out-of-memory "
        f"killer sends it); the episodes it was writing are not in {out}: run the same command again: it resumes"
    )
    assert not any(map(running, workers))
    assert not (tmp_path / "bench.lock").exists() and not (out / "manifest.json").exists()
    audioicl(*args, rc=0)
    audioicl("validate", out, rc=0)


def test_sigusr1_prints_where_every_thread_is_and_the_build_goes_on(tmp_path):
    """A command that seems stuck is asked where it is: SIGUSR1 prints every thread's stack to stderr (the lock's
    heartbeat thread's too) and the build completes as if nothing happened."""
    out = tmp_path / "bench"
    args = ["build", "--out", out, "--episodes", "12", "--workers", "1"]
    status, stderr = cli.stopped_by(
        signal.SIGUSR1, lambda: any((out / "data").rglob("*.wav")), *args, timeout=300
    )
    assert status == 0, stderr
    assert re.search(r"Current thread 0x[0-9a-f]+ \(most recent call first\)", stderr), stderr
    assert re.search(r"\nThread 0x[0-9a-f]+ \(most recent call first\)", stderr), stderr  # the heartbeat
    assert 'File "' in stderr and "build.py" in stderr, stderr
    audioicl("validate", out, rc=0)


def test_a_command_past_its_tests_timeout_is_reported_with_its_stacks(tmp_path):
    """The tests' own hang guard (``cli.audioicl``'s timeout) fails with where the command was, not a bare
    timeout: the report CI shows when a command hangs."""
    with pytest.raises(AssertionError, match="still ran after 10 s") as failed:  # imported long before
        cli.audioicl("build", "--out", tmp_path / "bench", "--episodes", "300", "--workers", "2", timeout=10)
    assert "most recent call first" in str(failed.value)


WRITING_COMMANDS = {
    "run": ["run", "--data", "{data}", "--model", "builtin:random", "--out", "{tmp}/res", "--k", "1"],
    "build": ["build", "--out", "{tmp}/bench", "--episodes", "1", "--k", "1", "--workers", "1", "--tasks",
              "AudioCount"],
    "score": ["score", "--in", "{results}", "--out", "{tmp}/s/summary.csv"],
    "report": ["report", "--scores", "{summary}", "--out", "{tmp}/report"],
    "leaderboard": ["leaderboard", "{results}", "--out", "{tmp}/site"],
    "study": ["study", "--data", "{data}", "--model", "builtin:random", "--out", "{tmp}/study", "--conditions",
              "plain", "--k", "1", "--limit", "1", "--no-floor"],
    "merge": ["merge", "{shard}", "--out", "{tmp}/merged"],
    "validate": ["validate", "{data}", "--json", "{tmp}/v.json"],
    "audit": ["audit", "{data}", "--json", "{tmp}/a.json", "--workers", "1"],
    "compare": ["compare", "{results}", "{results}", "--out", "{tmp}/c.csv"],
    "export": ["export", "{data}", "--out", "{tmp}/export"],
}  # fmt: skip


@pytest.fixture(scope="module")
def written(tmp_path_factory, tiny_dataset) -> dict[str, str]:
    """What the writing commands read: the dataset, a results folder, a shard and a summary CSV."""
    base = tmp_path_factory.mktemp("written")
    results, sharded, summary = base / "results", base / "sharded", base / "summary.csv"
    audioicl("run", "--data", tiny_dataset, "--model", "builtin:random", "--out", results, "--k", "1", rc=0)
    audioicl(
        "run", "--data", tiny_dataset, "--model", "builtin:random", "--out", sharded, "--shard", "1/1", rc=0
    )
    audioicl("score", "--in", results, "--out", summary, rc=0)
    shard = sharded / "shard-1-of-1"
    return {"data": str(tiny_dataset), "results": str(results), "shard": str(shard), "summary": str(summary)}


@pytest.mark.parametrize("name", list(WRITING_COMMANDS))
def test_a_refused_write_names_the_file_in_every_command(name, written, tmp_path):
    """Issue 39: "cannot write a file" named no file in 8 cases (an ``OSError`` of a write that carries no file
    name: a lock's ``os.write``, a library's own write). With every file limited to 10 bytes, each command that
    writes says which file (or which output) in one line, exit 1."""
    args = [arg.format(tmp=tmp_path, **written) for arg in WRITING_COMMANDS[name]]
    full = audioicl_limited(10, *args)
    assert full.returncode == 1, full.stderr[-3000:]
    assert "Traceback" not in full.stderr
    line = full.stderr.strip().splitlines()[-1]  # after audit's progress lines
    assert re.fullmatch(
        rf"audioicl {name}: error: cannot write (into )?{re.escape(str(tmp_path))}/\S+: .*", line
    ), line
    assert "a file" not in line


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_commands_are_imported_is_one_line(signum):
    """Issue 39, item 10: SIGINT during start-up printed a traceback. The signal is sent while the sub-command
    modules are imported (by an import hook, so that it lands there every time): one line, 128 + its number."""
    code = f"""
import importlib.abc, os, sys
class Interrupt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "audioicl.cli.tasks":  # the one command module imported for "audioicl tasks"
            os.kill(os.getpid(), {int(signum)})
        return None
sys.meta_path.insert(0, Interrupt())
from audioicl.cli.main import main
raise SystemExit(main(["tasks"]))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, proc.stderr
    assert one_line(proc.stderr) == f"audioicl: stopped by {name}"


def two_shard_folders(dataset: Path, sharded: Path) -> list[str]:
    """builtin:random run as two shards (k = 1, 2) into ``sharded``: the two shard folders a merge joins."""
    for i in (1, 2):
        audioicl("run", "--data", dataset, "--model", "builtin:random", "--out", sharded, "--shard", f"{i}/2",
                 "--k", "1,2", rc=0)  # fmt: skip
    return [str(sharded / f"shard-{i}-of-2") for i in (1, 2)]


def test_sigterm_mid_merge_is_one_line_and_the_same_command_completes_it(tiny_dataset, tmp_path):
    """Issue 39: every command stops on SIGTERM the same way. The signal lands after the merge's first file is
    in place (a hook on ``os.replace`` sends it, so that it lands mid-merge every time): 143, one line, no
    temporary file; the same command completes the folder byte for byte as an uninterrupted merge."""
    shards = two_shard_folders(tiny_dataset, tmp_path / "sharded")
    code = """
import os, signal, sys
replace = os.replace
def replace_then_stop(src, dst, *args, **kwargs):
    replace(src, dst, *args, **kwargs)
    os.kill(os.getpid(), signal.SIGTERM)
os.replace = replace_then_stop
from audioicl.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""
    args = ["merge", *shards, "--out", str(tmp_path / "merged"), "--data", str(tiny_dataset)]
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 143, proc.stderr
    assert (
        one_line(proc.stderr) == "audioicl merge: stopped by SIGTERM; run the same command again: it resumes"
    )
    assert len(list((tmp_path / "merged").iterdir())) == 1 and leftovers(tmp_path / "merged") == []
    audioicl(*args, rc=0)
    audioicl(*args[:-4], "--out", tmp_path / "whole", "--data", tiny_dataset, rc=0)
    assert tree(tmp_path / "merged") == tree(tmp_path / "whole")


def test_a_merge_killed_mid_write_leaves_nothing_once_the_same_command_completes_it(tiny_dataset, tmp_path):
    """Issue 53: SIGKILL (no handler runs) with the second file's temporary written, not yet renamed: it
    stays, as does the folder's lock; the same command breaks the dead holder's lock, removes the
    temporary and completes the folder as an uninterrupted merge does."""
    shards = two_shard_folders(tiny_dataset, tmp_path / "sharded")
    code = """
import os, signal, sys
replace, done = os.replace, []
def replace_or_die(src, dst, *args, **kwargs):
    if done:
        os.kill(os.getpid(), signal.SIGKILL)
    replace(src, dst, *args, **kwargs)
    done.append(dst)
os.replace = replace_or_die
from audioicl.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""
    merged = tmp_path / "merged"
    args = ["merge", *shards, "--out", str(merged), "--data", str(tiny_dataset)]
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert [n for n in leftovers(merged) if n.endswith(".tmp")], sorted(merged.iterdir())
    audioicl(*args, rc=0)
    assert leftovers(merged) == [] and not list(merged.glob(".*"))
    audioicl(*args[:-4], "--out", tmp_path / "whole", "--data", tiny_dataset, rc=0)
    assert tree(merged) == tree(tmp_path / "whole")


def test_sigterm_mid_study_is_one_line_lets_its_locks_go_and_the_same_command_completes_it(
    fresh_dataset, tmp_path
):
    """Issue 39: ``study`` left locks in 3 of 4 stops. SIGTERM once its first results file is there, with
    episodes of 240 s clips still ahead (seconds of listening for the icl solver, so that the study is still
    running): 143, one line, no lock under OUT; the same command completes the study."""
    import numpy as np

    from audioicl.audio import write_wav

    long = np.random.default_rng(0).standard_normal(16_000 * 240).astype(np.float32) * 0.1
    for k in (1, 2):
        for episode in read_meta(fresh_dataset / "meta" / f"meta_k{k}.jsonl")[6:]:
            for clip in episode.clips():
                write_wav(fresh_dataset / clip.audio_path, long)
    out = tmp_path / "study"
    args = ["study", "--data", fresh_dataset, "--model", "builtin:icl", "--out", out, "--conditions",
            "plain,no-audio", "--k", "1,2", "--no-floor"]  # fmt: skip
    status, stderr = cli.stopped_by(
        signal.SIGTERM, lambda: any((out / "results").rglob("*_results_k*.jsonl")), *args
    )
    assert status == 143, stderr
    assert stderr.strip().splitlines()[-1].startswith("audioicl study: stopped by SIGTERM")
    assert not list(out.rglob("*.lock")) and not list(tmp_path.glob("*.lock"))
    audioicl(*args, rc=0)
    assert (out / "study.md").is_file() and not list(out.rglob("*.lock"))
