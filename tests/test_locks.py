"""The lock that keeps one writer per file or folder (``audioicl.files.FileLock``): who holds it, and when a lock
left behind is stale: a dead pid, a reused pid (same pid, another start time), another host (by its heartbeat);
and two ``fetch-sources`` into one folder, as real processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from corpus_server import CorpusServer, make_archives, registry_for

from audioicl import AudioICLError
from audioicl import files as lockfiles
from audioicl.files import FOLDER_LOCK, FileLock, folder_lock, lock_path, read_lock

HOST = socket.gethostname()
HANG_GUARD_S = 120  # only stops a hung test; nothing is timed


def command(*args: object) -> list[str]:
    """``audioicl ARGS`` as a user runs it, in a subprocess."""
    return [sys.executable, "-m", "audioicl", *map(str, args)]


def dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(done.stdout)


def start_time(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def write_lock(path: Path, mtime: float | None = None, **fields) -> Path:
    lock = lock_path(path)
    lock.write_text(json.dumps(fields), encoding="utf-8")
    if mtime is not None:
        os.utime(lock, (mtime, mtime))
    return lock


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="no /proc here")


@needs_proc
def test_a_lock_says_who_holds_it_and_an_old_lock_still_reads(tmp_path):
    path = tmp_path / "r.jsonl"
    with FileLock(path) as held:
        written = json.loads(held.lock.read_text())
        assert (written["host"], written["pid"]) == (HOST, os.getpid())
        assert written["start_time"] == start_time(os.getpid())
        assert written["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        assert written["heartbeat_s"] == lockfiles.HEARTBEAT_S
        owner = read_lock(held.lock)
        assert owner.local and owner.alive and owner.start_time == written["start_time"]
    assert not held.lock.exists()

    old = write_lock(path, host=HOST, pid=os.getpid())  # what earlier versions wrote
    owner = read_lock(old)
    assert (owner.host, owner.pid, owner.start_time, owner.heartbeat_s) == (HOST, os.getpid(), None, None)
    assert owner.alive  # judged by its pid alone
    with pytest.raises(AudioICLError, match=f"being written by process {os.getpid()} on {HOST}"):
        FileLock(path).acquire()
    write_lock(path, host=HOST, pid=dead_pid())
    fresh = FileLock(path)
    fresh.acquire()
    assert fresh.taken_over is not None and fresh.taken_over.start_time is None
    fresh.release()


@needs_proc
def test_a_lock_of_a_dead_process_is_taken_over(tmp_path):
    path = tmp_path / "r.jsonl"
    pid = dead_pid()
    write_lock(path, host=HOST, pid=pid, start_time=12345, boot_id=lockfiles._boot_id(), heartbeat_s=10.0)
    assert not read_lock(lock_path(path)).alive
    lock = FileLock(path)
    lock.acquire()
    assert lock.taken_over.pid == pid
    assert json.loads(lock.lock.read_text())["pid"] == os.getpid()
    lock.release()


@needs_proc
def test_a_reused_pid_is_stale_and_the_same_process_is_not(tmp_path):
    """The pid of the lock is alive, but a process that started at another time than the one that took the
    lock: the pid was reused, the lock is stale. With the right start time it is held."""
    path = tmp_path / "r.jsonl"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = start_time(other.pid)
        boot = lockfiles._boot_id()
        write_lock(path, host=HOST, pid=other.pid, start_time=started, boot_id=boot, heartbeat_s=10.0)
        assert read_lock(lock_path(path)).alive
        with pytest.raises(AudioICLError, match=f"being written by process {other.pid} on {HOST}"):
            FileLock(path).acquire()

        write_lock(path, host=HOST, pid=other.pid, start_time=started - 1, boot_id=boot, heartbeat_s=10.0)
        assert not read_lock(lock_path(path)).alive
        lock = FileLock(path)
        lock.acquire()
        assert (lock.taken_over.pid, lock.taken_over.start_time) == (other.pid, started - 1)
        lock.release()
    finally:
        other.kill()
        other.wait()


@pytest.fixture
def quick(monkeypatch):
    """Heartbeats every 50 ms, stale after 0.6 s without one: the rules, at test speed."""
    monkeypatch.setattr(lockfiles, "HEARTBEAT_S", 0.05)
    monkeypatch.setattr(lockfiles, "STALE_AFTER_S", 0.6)


REMOTE = {
    "host": "node-a.cluster",
    "pid": 4242,
    "start_time": 999,
    "boot_id": "other-boot",
    "heartbeat_s": 0.05,
}


def test_a_lock_of_another_host_is_not_judged_by_a_local_pid(tmp_path, quick):
    """pid 4242 means nothing here. Without a heartbeat (an earlier version) the lock is held however old;
    with one, it is held while the heartbeat moves and stale once it stops for STALE_AFTER_S."""
    path = tmp_path / "r.jsonl"
    old = time.time() - 3600
    write_lock(path, old, host="node-a.cluster", pid=os.getpid())  # an earlier version's lock, an hour old
    owner = read_lock(lock_path(path))
    assert not owner.local and owner.alive
    with pytest.raises(AudioICLError, match="being written by process .* on node-a.cluster"):
        FileLock(path).acquire()

    write_lock(path, old, **REMOTE)  # its heartbeat stopped an hour ago: stale at once
    assert not read_lock(lock_path(path)).alive
    began = time.monotonic()
    lock = FileLock(path)
    lock.acquire()
    assert lock.taken_over.host == "node-a.cluster" and time.monotonic() - began < 0.5
    lock.release()


def test_a_live_holder_on_another_host_is_refused_once_its_heartbeat_moves(tmp_path, quick):
    path = tmp_path / "r.jsonl"
    lock = write_lock(path, **REMOTE)
    stop = threading.Event()

    def beat() -> None:  # the holder on node-a, touching its lock over the shared file system
        while not stop.wait(0.05):
            os.utime(lock)

    holder = threading.Thread(target=beat)
    holder.start()
    try:
        with pytest.raises(AudioICLError, match="being written by process 4242 on node-a.cluster"):
            FileLock(path).acquire()
    finally:
        stop.set()
        holder.join()


def test_a_shard_retried_on_another_node_takes_over_the_dead_nodes_lock(tmp_path, quick):
    """Ray reruns the shard of a node that died on another node: it finds that node's lock, fresh, and no
    heartbeat after it; once the heartbeat has stood still for STALE_AFTER_S the lock is taken over (the
    watch does not depend on the two clocks agreeing)."""
    path = tmp_path / "r.jsonl"
    write_lock(path, time.time() + 5, **REMOTE)  # even a clock 5 s ahead of ours: the mtime never moves
    began = time.monotonic()
    lock = FileLock(path)
    lock.acquire()
    waited = time.monotonic() - began
    assert lock.taken_over.host == "node-a.cluster" and lockfiles.STALE_AFTER_S <= waited < 5
    lock.release()


def test_this_host_after_a_reboot_is_judged_by_the_heartbeat(tmp_path, quick):
    """The same host name with another boot id: its pids are not this boot's, even a live one."""
    path = tmp_path / "r.jsonl"
    write_lock(
        path, time.time() - 3600, host=HOST, pid=os.getpid(), boot_id="before-the-reboot", heartbeat_s=10.0
    )
    if lockfiles._boot_id() is None:
        pytest.skip("no boot id here")
    owner = read_lock(lock_path(path))
    assert not owner.local and not owner.alive
    lock = FileLock(path)
    lock.acquire()
    assert lock.taken_over.boot_id == "before-the-reboot"
    lock.release()


def test_the_holder_keeps_its_heartbeat(tmp_path, quick):
    with FileLock(tmp_path / "r.jsonl") as held:
        os.utime(held.lock, (1, 1))
        deadline = time.monotonic() + 5
        while held.lock.stat().st_mtime < time.time() - 1:
            assert time.monotonic() < deadline, "the heartbeat never touched the lock"
            time.sleep(0.02)


def test_an_empty_lock_is_stale_once_old(tmp_path, quick):
    """Its creator died between creating and writing it: judged by its age, like a remote lock."""
    path = tmp_path / "r.jsonl"
    lock = lock_path(path)
    lock.write_text("")
    os.utime(lock, (time.time() - 60, time.time() - 60))
    fresh = FileLock(path)
    fresh.acquire()
    assert fresh.taken_over.pid == -1
    fresh.release()


def test_a_folder_lock_lies_inside_the_folder_and_names_it(tmp_path):
    with folder_lock(tmp_path) as held:
        assert held.lock == tmp_path / FOLDER_LOCK
        with pytest.raises(AudioICLError) as refused:
            folder_lock(tmp_path).acquire()
        assert refused.value.file == str(tmp_path)
        assert f"being written by process {os.getpid()} on {HOST} (lock {tmp_path / FOLDER_LOCK};" in str(
            refused.value
        )
    assert not (tmp_path / FOLDER_LOCK).exists()


# ------------------------------------------------------------------------------- two fetch-sources, one folder


@pytest.fixture(scope="module")
def archives() -> dict[str, bytes]:
    return make_archives()


def environment(base_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(AUDIOICL_SOURCES_BASE_URL=base_url, NO_PROXY="127.0.0.1")
    return env


def test_a_second_fetch_sources_into_the_same_folder_is_refused(archives, tmp_path):
    """The first holds the folder's lock while its download hangs (a server that never answers); the second is
    refused in one line naming it; once the first is killed, a third takes over its stale lock and completes."""
    registry = registry_for(tmp_path / "registry.json", archives)
    out = tmp_path / "corpora"
    fetch = ("fetch-sources", "--out", out, "--registry", registry, "--only", "digits", "--quiet")
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        hanging = environment(f"http://127.0.0.1:{silent.getsockname()[1]}")
        first = subprocess.Popen(
            command(*fetch), env=hanging, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            lock = out / FOLDER_LOCK
            deadline = time.monotonic() + HANG_GUARD_S
            while not (lock.is_file() and lock.read_text()):
                assert first.poll() is None, first.stderr.read().decode()
                assert time.monotonic() < deadline, "the first fetch never took the lock"
                time.sleep(0.05)
            assert json.loads(lock.read_text())["pid"] == first.pid

            second = subprocess.run(
                command(*fetch), env=hanging, capture_output=True, text=True, timeout=HANG_GUARD_S
            )
            assert second.returncode == 2, second.stderr
            assert len(second.stderr.splitlines()) == 1, second.stderr
            assert f"{out}: being written by process {first.pid} on {HOST} (lock {lock};" in second.stderr
            assert first.poll() is None  # the first goes on
        finally:
            first.kill()
            first.wait()
            first.stderr.close()
    assert json.loads(lock.read_text())["pid"] == first.pid  # killed: its lock stays behind, stale

    server = CorpusServer(dict(archives)).start()
    try:
        third = subprocess.run(
            command(*fetch), env=environment(server.url), capture_output=True, text=True, timeout=HANG_GUARD_S
        )
    finally:
        server.stop()
    assert third.returncode == 0, third.stderr
    assert f"warning: took over the stale lock {lock} of process {first.pid} on {HOST}" in third.stdout
    assert (out / "fsdd/corpus.json").is_file() and not lock.exists()


def test_an_empty_lock_is_waited_for_with_a_word(tmp_path, monkeypatch, caplog):
    """A lock file created and never written (issue 39, item 10: the next run waited 60 s without a word) is
    judged by its age as before, and the wait is said once."""
    from audioicl import files

    monkeypatch.setattr(files, "STALE_AFTER_S", 0.3)
    path = tmp_path / "x.jsonl"
    files.lock_path(path).write_text("")
    with caplog.at_level("WARNING", logger="audioicl"):
        lock = files.FileLock(path)
        lock.acquire()
        lock.release()
    said = [r.getMessage() for r in caplog.records if "is empty" in r.getMessage()]
    assert len(said) == 1 and "waiting up to 0.3 s" in said[0]


def test_a_lock_naming_a_pid_past_any_int_is_stale_not_a_traceback(tmp_path):
    """Issue 53, item 8: pid 10**20 in a lock file raised ``OverflowError`` from ``os.kill``."""
    path = tmp_path / "r.jsonl"
    write_lock(path, host=HOST, pid=10**20, start_time=12345, boot_id=lockfiles._boot_id(), heartbeat_s=10.0)
    assert not read_lock(lock_path(path)).alive
    lock = FileLock(path)
    lock.acquire()
    assert lock.taken_over.pid == 10**20
    lock.release()
