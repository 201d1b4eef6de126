"""Atomic file writes: a reader, or a rerun after a crash, sees the old file or the new one, never a part."""

from __future__ import annotations

import os
from pathlib import Path

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
