"""The one exception type for problems a user can act on (bad input, bad options), and its two kinds that
are no mistake of the user's: a write the system refused (``WriteFailed``: a full disk, a quota, a file-size
limit, a read-only folder) and a run stopped by a signal (``Stopped``)."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable


class AudioICLError(Exception):
    """A user-actionable error, located by file, line and episode id where known.

    The CLI prints it as one line (``file:line id: message``) and exits non-zero; anything
    else escaping to the CLI is a bug and keeps its traceback.
    """

    def __init__(
        self, message: str, *, file: str | None = None, line: int | None = None, id: str | None = None
    ):
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.id = id

    def __reduce__(self):
        # Keep file, line, id (and any exit_code) when the error crosses processes (the builder's workers).
        return (type(self), (self.message,), self.__dict__)

    def location(self) -> str:
        where = ""
        if self.file is not None:
            where = str(self.file)
            if self.line is not None:
                where += f":{self.line}"
        if self.id:
            where = f"{where} {self.id}" if where else self.id
        return where

    def __str__(self) -> str:
        where = self.location()
        return f"{where}: {self.message}" if where else self.message


def refuse_duplicate_ids(ids_and_lines: Iterable[tuple[str, int]], file: str, why: str = "") -> None:
    """Raise on the second line that holds an id already seen (results and episodes are keyed by id)."""
    first_line: dict[str, int] = {}
    for episode_id, line in ids_and_lines:
        if episode_id in first_line:
            raise AudioICLError(
                f"id appears twice (first on line {first_line[episode_id]}){why}",
                file=file,
                line=line,
                id=episode_id,
            )
        first_line[episode_id] = line


# Causes of a refused write that more room (or a larger quota or file-size limit) cures.
NO_ROOM = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
# Causes that a writable place cures.
NOT_WRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
# Causes that mean "this storage refused the write" wherever they come from (a client library's own write
# included): a command turns them into ``WriteFailed`` even when it cannot tell which file it was.
STORAGE_ERRNOS = NO_ROOM | {errno.EROFS}


class WriteFailed(AudioICLError):
    """The system refused a write: one line naming the file (or the folder being written) and the cause,
    ``cannot write PATH: File too large (errno 27); free space and run the same command again``. The CLI exits
    1 and adds ``: it resumes`` for the commands that pick up where they stopped (``cli.main``)."""

    exit_code = 1


class NotWritable(AudioICLError):
    """An output path where this user may not write (a folder without permission, a read-only file system),
    refused before the work starts: exit 1, as a write the system refuses during the work is, since the
    same remedy (a writable place) cures both."""

    exit_code = 1


class WorkerDied(AudioICLError):
    """A worker process died mid-work (the out-of-memory killer, a signal of its own): the work failed rather
    than being refused, so exit 1, and the command, run again, picks up where it stopped."""

    exit_code = 1


def write_failed(path: str | os.PathLike, exc: OSError) -> WriteFailed:
    """The ``WriteFailed`` for ``exc`` raised while writing ``path``."""
    cause = exc.strerror or type(exc).__name__
    number = f" (errno {exc.errno})" if exc.errno else ""
    if exc.errno in NO_ROOM:
        remedy = "free space and run the same command again"
    elif exc.errno in NOT_WRITABLE:
        remedy = "make it writable and run the same command again"
    else:
        remedy = "run the same command again"
    return WriteFailed(f"cannot write {os.fspath(path)}: {cause}{number}; {remedy}")


class Stopped(BaseException):
    """A command stopped by a signal (SIGTERM, SIGINT), at a safe point or where it was: the CLI prints its
    message as the one line (not as an error) and exits ``exit_code``, 128 + the signal's number (143, 130);
    ``signal`` names it. A ``BaseException``, as ``KeyboardInterrupt`` is: no ``except Exception`` on its way
    up (a backend's failed call, a prompt that cannot be made) can take a stop for an error and write it as a
    result."""

    def __init__(self, message: str, *, exit_code: int = 130, signal: str | None = None):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.signal = signal

    def __reduce__(self):
        return (type(self), (self.message,), self.__dict__)
