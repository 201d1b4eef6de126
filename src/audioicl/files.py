"""Writing files safely: atomic writes (a reader, or a rerun after a crash, sees the old file or the new
one, never a part) and the lock that keeps one writer per file (``<file>.lock``, created with ``O_EXCL``,
holding the writer's host, pid and process start time, touched by a heartbeat; a lock whose process is gone,
on this host by its pid and start time, on another by its heartbeat, is taken over: see ``# lock`` below).
"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audioicl.errors import STORAGE_ERRNOS, AudioICLError, NotWritable, write_failed

log = logging.getLogger("audioicl")

TMP_SUFFIX = ".tmp"


def temporary_name(path: Path) -> Path:
    """``.<name>.<pid>.tmp`` beside ``path``: hidden, and unique per process (builder workers race)."""
    return path.with_name(f".{path.name}.{os.getpid()}{TMP_SUFFIX}")


def remove_left_temporaries(path: Path) -> list[Path]:
    """Remove the temporaries of ``path`` (``temporary_name``) that a killed writer left, those of a process
    not alive here; the caller holds the lock of the folder, so no other writer of ``path`` is at work."""
    removed = []
    prefix = f".{path.name}."
    for left in path.parent.glob(f".{glob.escape(path.name)}.*{TMP_SUFFIX}"):
        pid = left.name[len(prefix) : -len(TMP_SUFFIX)]
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            left.unlink(missing_ok=True)
            removed.append(left)
    return removed


def write_atomic(path: str | os.PathLike, data: str | bytes, *, durable: bool = False) -> None:
    """Write ``data`` (text as UTF-8, newlines as given) to a temporary file and rename it over ``path``.

    ``durable`` also fsyncs before the rename, for files whose loss a crash must not cause (results, meta).
    The folder must exist. The temporary file is removed whatever happens; a write the system refuses (``path``
    a folder, no permission, a full disk, a file-size limit) is a ``WriteFailed`` naming ``path`` and the cause,
    and ``path`` is as it was.
    """
    path = Path(path)
    tmp = temporary_name(path)
    try:
        with tmp.open("wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise write_failed(path, exc) from None
        raise


@contextlib.contextmanager
def atomic_text(path: str | os.PathLike, *, durable: bool = False) -> Iterator[io.StringIO]:
    """A text buffer (newlines as written: ``csv``'s CRLF stays) that becomes ``path`` by ``write_atomic`` when
    the block ends without an error; the folder is made as needed. For writers that stream (a CSV)."""
    buffer = io.StringIO(newline="")
    yield buffer
    path = Path(path)
    with writing(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, buffer.getvalue(), durable=durable)


@contextlib.contextmanager
def writing(path: str | os.PathLike, *, any_error: bool = True) -> Iterator[None]:
    """Around code that writes ``path`` (a file, or a folder being filled): an ``OSError`` raised inside becomes
    one ``WriteFailed`` naming ``path``. ``any_error`` False converts only the errors of full or read-only
    storage (``STORAGE_ERRNOS``), for code that also reads or talks to a network (a client library)."""
    try:
        yield
    except OSError as exc:
        if any_error or exc.errno in STORAGE_ERRNOS:
            raise write_failed(exc.filename or path, exc) from None
        raise


# --------------------------------------------------------------------------- output paths


def _nearest_existing(path: Path) -> Path:
    parent = path.parent
    while not os.path.lexists(parent) and parent != parent.parent:
        parent = parent.parent
    return parent


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def _shape_problem(path: Path, folder: bool) -> str | None:
    """Why ``path`` cannot be an output file (``folder`` False) or folder, the folders above it made as needed:
    a file where a folder goes, or the reverse, or a path under a file. Nothing is created."""
    want, other = ("a folder", "a file") if folder else ("a file", "a folder")
    if path.exists():
        return f"is {other}, not {want}" if path.is_dir() != folder else None
    parent = _nearest_existing(path)
    return None if parent.is_dir() else f"cannot be created: {parent} is not a folder"


def _permission_problem(path: Path, folder: bool) -> str | None:
    """A folder (or file system) that does not let this user write where ``path`` goes."""
    if path.exists():
        into = path if folder else path.parent
        return None if _writable(into) else f"cannot be written: {into} is not writable"
    parent = _nearest_existing(path)
    return None if _writable(parent) else f"cannot be created: {parent} is not writable"


def check_output(path: str | os.PathLike, what: str, *, folder: bool) -> None:
    """Refuse an output path that cannot be written: ``what`` names it (``--out``). The wrong kind of path is a
    usage error (exit 2); a place the user may not write is ``NotWritable`` (exit 1, as a write refused
    later is)."""
    problem = _shape_problem(Path(path), folder)
    if problem is not None:
        raise AudioICLError(f"{what} {path} {problem}")
    problem = _permission_problem(Path(path), folder)
    if problem is not None:
        raise NotWritable(f"{what} {path} {problem}; make it writable, or name another")


def create_folder(path: str | os.PathLike) -> list[Path]:
    """``mkdir -p path``; returns the folders it created, outermost first (``remove_empty_folders`` takes them
    back)."""
    path = Path(path)
    missing = [p for p in (path, *path.parents) if not os.path.lexists(p)]
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AudioICLError(f"cannot create the folder: {exc.strerror or exc}", file=str(path)) from exc
    return list(reversed(missing))


def remove_empty_folders(created: list[Path]) -> None:
    """Remove the folders ``create_folder`` made, innermost first, as long as they are empty."""
    for folder in reversed(created):
        try:
            folder.rmdir()
        except OSError:
            return


# --------------------------------------------------------------------------- lock
#
# A lock file holds JSON: ``host`` and ``pid`` (all that earlier versions wrote; such locks are still read)
# and, from this version, ``start_time`` (the process's start in clock ticks since boot: field 22 of
# /proc/<pid>/stat), ``boot_id`` (/proc/sys/kernel/random/boot_id), ``pid_ns`` (the pid namespace) and
# ``heartbeat_s``: while it holds the lock, the holder touches the file (its mtime) that often.
#
# Whether the owner is alive:
# - an owner is *local* when its host name is this host's and, where both sides recorded them, so are its boot
#   id and pid namespace. A local owner is judged by its pid: no such process, or one that started at another
#   time (the pid was reused), is stale; otherwise the lock is held. (Without /proc: a live pid holds it.)
# - any other owner (another host; this host's name after a reboot or in another container) cannot be judged
#   by a pid. It holds the lock while its heartbeat moves: the lock is stale once its mtime is older than
#   ``STALE_AFTER_S`` by this host's clock, or has not moved for ``STALE_AFTER_S`` while ``acquire`` watched
#   it (so clocks that disagree by less than that do not matter). ``acquire`` watches such a lock, whatever its
#   ``wait_s``, until the heartbeat moves (held: refused) or has stood still that long (stale: taken over).
#   So a Ray shard retried on another node takes over the lock of the node that died, after at most
#   ``STALE_AFTER_S``, and one started beside a live holder is refused within a heartbeat.
# - an owner of another host whose lock records no heartbeat (an earlier version), or a lock that cannot be
#   read, is held until a user deletes it. An empty lock (its creator died between creating and writing it)
#   is judged by its age like a remote one.

HEARTBEAT_S = 10.0  # a holder touches its lock file this often
STALE_AFTER_S = 60.0  # a lock of another host whose heartbeat has not moved for this long is stale
FOLDER_LOCK = ".audioicl.lock"  # the lock of a folder (fetch-sources, download), inside it
_POLL_S = 0.05
_MAX_TAKEOVERS = 5


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def _boot_id() -> str | None:
    """The kernel's id of this boot (Linux); None elsewhere."""
    text = _read_text("/proc/sys/kernel/random/boot_id")
    return text.strip() or None if text else None


def _pid_namespace() -> str | None:
    """This process's pid namespace (Linux, e.g. ``pid:[4026531836]``): pids compare only within one."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _start_time(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (field 22 of ``/proc/<pid>/stat``); None
    without /proc or without such a process."""
    text = _read_text(f"/proc/{pid}/stat")
    if text is None:
        return None
    try:  # the command name, field 2, is in parentheses and may hold anything: count from after it
        return int(text.rsplit(")", 1)[1].split()[22 - 3])
    except (IndexError, ValueError):
        return None


def _pid_alive(pid: int) -> bool:
    if pid <= 0:  # 0 and -1 would signal a process group, or every process: no owner of a lock
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OSError, OverflowError):  # a pid out of range: past the kernel's (OSError) or C's int (Overflow)
        return False
    return True


@dataclass(frozen=True)
class LockOwner:
    """Who holds a lock, as its file says; ``touched`` is the file's mtime when read (its last heartbeat)."""

    host: str
    pid: int
    start_time: int | None = None
    boot_id: str | None = None
    pid_ns: str | None = None
    heartbeat_s: float | None = None  # None: the holder does not touch the lock (an earlier version)
    touched: float | None = None

    @property
    def local(self) -> bool:
        """Whether its pid means a process here: the same host name, boot and pid namespace."""
        if self.host != socket.gethostname():
            return False
        pairs = ((self.boot_id, _boot_id()), (self.pid_ns, _pid_namespace()))
        return all(theirs is None or ours is None or theirs == ours for theirs, ours in pairs)

    @property
    def alive(self) -> bool:
        """False when the lock is stale: see the rules above (``# lock``)."""
        if self.local:
            if not _pid_alive(self.pid):
                return False
            now = _start_time(self.pid) if self.start_time is not None else None
            return now is None or now == self.start_time
        if self.heartbeat_s is None or self.touched is None:
            return True
        return time.time() - self.touched <= STALE_AFTER_S

    @property
    def watchable(self) -> bool:
        """Judged by its heartbeat: a remote owner that touches its lock."""
        return not self.local and self.heartbeat_s is not None and self.touched is not None

    def describe(self) -> str:
        return f"process {self.pid} on {self.host}"


def _me() -> dict[str, object]:
    pid = os.getpid()
    return {
        "host": socket.gethostname(),
        "pid": pid,
        "start_time": _start_time(pid),
        "boot_id": _boot_id(),
        "pid_ns": _pid_namespace(),
        "heartbeat_s": HEARTBEAT_S,
    }


def _optional(info: dict, key: str, kind: type) -> Any:
    value = info.get(key)
    return None if value is None else kind(value)


def _read_lock(lock: Path) -> tuple[str, LockOwner] | None:
    """The text of ``lock`` and its owner; None when there is no lock file."""
    try:
        text = lock.read_text(encoding="utf-8")
        touched = lock.stat().st_mtime
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return "?", LockOwner("?", -1)
    if not text.strip():  # created, never written: judged by its age
        return text, LockOwner("?", -1, heartbeat_s=0.0, touched=touched)
    try:
        info = json.loads(text)
        owner = LockOwner(
            str(info["host"]),
            int(info["pid"]),
            _optional(info, "start_time", int),
            _optional(info, "boot_id", str),
            _optional(info, "pid_ns", str),
            _optional(info, "heartbeat_s", float),
            touched,
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        owner = LockOwner("?", -1)
    return text, owner


def read_lock(lock: Path) -> LockOwner | None:
    """Who holds ``lock`` (None when there is no lock file); an unreadable lock counts as a live foreign one."""
    found = _read_lock(lock)
    return None if found is None else found[1]


def lock_path(path: Path) -> Path:
    """``<path>.lock``, the lock file of ``path``."""
    return path.with_name(path.name + ".lock")


# The heartbeat: one thread per process touches every lock the process holds, every HEARTBEAT_S.
_held: dict[int, FileLock] = {}
_held_guard = threading.Lock()
_beater: threading.Thread | None = None


def _forget_in_child() -> None:
    """A forked child holds none of its parent's locks, and must not inherit the guard locked by the heartbeat
    thread, which it has not."""
    global _held_guard, _beater
    _held_guard = threading.Lock()
    _held.clear()
    _beater = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def _beat() -> None:
    global _beater
    last = time.monotonic()
    while True:
        time.sleep(min(HEARTBEAT_S, 1.0))  # wakes at least once a second: a shorter HEARTBEAT_S applies soon
        with _held_guard:
            if not _held:
                _beater = None
                return
            if time.monotonic() - last < HEARTBEAT_S:
                continue
            last = time.monotonic()
            for lock in _held.values():
                lock._touch()


@dataclass
class FileLock:
    """An exclusive lock on ``path`` for this process: ``<path>.lock`` (or ``lock_file``) holding who took it
    (see ``# lock`` above). A stale lock is replaced; ``taken_over`` then names its owner so the caller can
    warn. Also a context manager (``with FileLock(path):``)."""

    path: Path
    lock_file: Path | None = None
    taken_over: LockOwner | None = field(default=None, init=False)
    _fd: int | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def lock(self) -> Path:
        return self.lock_file if self.lock_file is not None else lock_path(self.path)

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self, wait_s: float = 0.0) -> None:
        """Take the lock; a live owner is waited for up to ``wait_s`` seconds, then refused. A lock of another
        host is watched until its heartbeat moves or stops (up to ``STALE_AFTER_S``), whatever ``wait_s``."""
        deadline = time.monotonic() + wait_s
        watched: tuple[str, float | None, float] | None = None  # text, mtime, since when it stood still
        beat_seen = False
        takeovers = vanished = 0
        while True:
            if self._create():
                return
            found = _read_lock(self.lock)
            if found is None:  # released meanwhile
                vanished += 1
                if vanished > 100:
                    break
                continue
            text, owner = found
            now = time.monotonic()
            stale, held = not owner.alive, False
            if not stale and owner.watchable:
                if watched is None or watched[0] != text:  # a new owner: watch it afresh
                    if not text.strip() and watched is None:  # say why nothing seems to happen
                        log.warning(
                            "%s is empty (its writer just starting, or gone before it wrote who it is): "
                            "waiting up to %g s for it to be written or to go stale",
                            self.lock,
                            STALE_AFTER_S,
                        )
                    watched, beat_seen = (text, owner.touched, now), False
                elif watched[1] != owner.touched:  # its heartbeat moved: it lives
                    watched, beat_seen = (text, owner.touched, now), True
                elif now - watched[2] > STALE_AFTER_S:
                    stale = True
                held = beat_seen
            elif not stale:
                held = True
            if stale:
                takeovers += 1
                if takeovers > _MAX_TAKEOVERS:
                    break
                if self._break(text):
                    self.taken_over = owner
                continue
            if held and now >= deadline:
                raise AudioICLError(
                    f"being written by {owner.describe()} (lock {self.lock}; delete it if that process is "
                    "gone)",
                    file=str(self.path),
                ) from None
            time.sleep(min(0.5, max(_POLL_S, STALE_AFTER_S / 20)) if owner.watchable else _POLL_S)
        raise AudioICLError(f"could not create the lock {self.lock}", file=str(self.path))

    def _create(self) -> bool:
        """Create the lock file, written with who holds it, unless it exists (then False)."""
        try:
            fd = os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        except OSError as exc:  # a read-only folder, a full disk: the lock's file named, exit 1
            raise write_failed(self.lock, exc) from None
        try:
            unwritten = memoryview(json.dumps(_me()).encode("utf-8"))
            while unwritten:  # a short write (a file-size limit) is followed by one that fails
                unwritten = unwritten[os.write(fd, unwritten) :]
        except BaseException as exc:
            os.close(fd)
            self.lock.unlink(missing_ok=True)
            if isinstance(exc, OSError):  # os.write's error names no file
                raise write_failed(self.lock, exc) from None
            raise
        global _beater
        with _held_guard:
            self._fd = fd
            _held[id(self)] = self
            if _beater is None or not _beater.is_alive():
                _beater = threading.Thread(target=_beat, name="audioicl-lock-heartbeat", daemon=True)
                _beater.start()
        return True

    def _break(self, text: str) -> bool:
        """Remove the stale lock whose content is ``text``, unless it changed or another process is removing
        it (``<lock>.break``, held for that step): then False, and the caller looks again."""
        guard = self.lock.with_name(self.lock.name + ".break")
        try:
            os.close(os.open(guard, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            try:
                if time.time() - guard.stat().st_mtime > STALE_AFTER_S:  # its process died in this step
                    guard.unlink(missing_ok=True)
            except FileNotFoundError:
                pass
            time.sleep(_POLL_S)
            return False
        try:
            found = _read_lock(self.lock)
            if found is None or found[0] != text:
                return False
            self.lock.unlink(missing_ok=True)
            return True
        finally:
            guard.unlink(missing_ok=True)

    def _touch(self) -> None:
        """The heartbeat (called with ``_held_guard`` held): the lock file's mtime set to now."""
        try:
            if self._fd is not None and os.utime in os.supports_fd:
                os.utime(self._fd)
            else:
                os.utime(self.lock)
        except OSError:
            pass

    def release(self) -> None:
        with _held_guard:
            _held.pop(id(self), None)
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        owner = read_lock(self.lock)
        if owner is not None and owner.pid == os.getpid() and owner.host == socket.gethostname():
            self.lock.unlink(missing_ok=True)


def folder_lock(folder: Path) -> FileLock:
    """The lock of a whole folder that one command writes at a time (``FOLDER_LOCK`` inside it)."""
    return FileLock(folder, folder / FOLDER_LOCK)
