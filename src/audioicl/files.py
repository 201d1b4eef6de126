"""Writing files safely: atomic writes (a reader, or a rerun after a crash, sees the old file or the new
one, never a part) and the lock that keeps one writer per file (``<file>.lock``, created with ``O_EXCL``,
holding the writer's host and pid; a lock left by a dead process on this host is taken over).
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from audioicl.errors import AudioICLError

TMP_SUFFIX = ".tmp"


def temporary_name(path: Path) -> Path:
    """``.<name>.<pid>.tmp`` beside ``path``: hidden, and unique per process (builder workers race)."""
    return path.with_name(f".{path.name}.{os.getpid()}{TMP_SUFFIX}")


def write_atomic(path: str | os.PathLike, data: str | bytes, *, durable: bool = False) -> None:
    """Write ``data`` (text as UTF-8, newlines as given) to a temporary file and rename it over ``path``.

    ``durable`` also fsyncs before the rename, for files whose loss a crash must not cause (results, meta).
    The folder must exist.
    """
    path = Path(path)
    tmp = temporary_name(path)
    with tmp.open("wb") as handle:
        handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        if durable:
            handle.flush()
            os.fsync(handle.fileno())
    os.replace(tmp, path)


# --------------------------------------------------------------------------- lock


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class LockOwner:
    host: str
    pid: int

    @property
    def alive(self) -> bool:
        """True unless the owner is a process of this host that no longer exists."""
        return self.host != socket.gethostname() or _pid_alive(self.pid)


def read_lock(lock: Path) -> LockOwner | None:
    """Who holds ``lock`` (None when there is no lock file); an unreadable lock counts as a live foreign one."""
    try:
        text = lock.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        info = json.loads(text)
        return LockOwner(str(info["host"]), int(info["pid"]))
    except (ValueError, KeyError, TypeError):
        return LockOwner("?", -1)


def lock_path(path: Path) -> Path:
    """``<path>.lock``, the lock file of ``path``."""
    return path.with_name(path.name + ".lock")


@dataclass
class FileLock:
    """An exclusive lock on ``path`` for this process: ``<path>.lock`` with host and pid. A stale lock
    (dead process on this host) is replaced; ``taken_over`` then names its owner so the caller can warn."""

    path: Path
    taken_over: LockOwner | None = field(default=None, init=False)

    @property
    def lock(self) -> Path:
        return lock_path(self.path)

    def acquire(self, wait_s: float = 0.0) -> None:
        """Take the lock; a live owner is waited for up to ``wait_s`` seconds, then refused."""
        deadline = time.monotonic() + wait_s
        attempts = 0
        while attempts < 2:
            attempts += 1
            try:
                fd = os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = read_lock(self.lock)
                if owner is None:
                    continue
                if owner.alive and time.monotonic() < deadline:
                    attempts = 0
                    time.sleep(0.05)
                    continue
                if owner.alive:
                    raise AudioICLError(
                        f"being written by process {owner.pid} on {owner.host} "
                        f"(lock {self.lock}; delete it if that process is gone)",
                        file=str(self.path),
                    ) from None
                self.taken_over = owner
                self.lock.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"host": socket.gethostname(), "pid": os.getpid()}, handle)
            return
        raise AudioICLError(f"could not create the lock {self.lock}", file=str(self.path))

    def release(self) -> None:
        owner = read_lock(self.lock)
        if owner is not None and owner.pid == os.getpid() and owner.host == socket.gethostname():
            self.lock.unlink(missing_ok=True)
