"""The append-only results log (SPEC §3) and the lock that keeps one writer per file.

A results file is ``<model>_results_k<k>.jsonl``, one JSON object per line. Writers append whole lines and
flush + fsync after each batch; a process killed mid-write can leave one half-written last line, which
``ResultsLog.open`` cuts off (reporting it) before appending. A lock file ``<file>.lock`` created with
``O_EXCL`` holds the writer's host and pid; a lock left by a dead process on this host is taken over.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import AudioICLError
from .meta import find_meta_files, iter_meta
from .records import Result

RESULTS_PATTERN = re.compile(r"^(?P<model>.+?)_results_(?:meta_)?k(?P<k>\d+)\.jsonl$")


def results_name(model: str, k: int) -> str:
    return f"{model}_results_k{k}.jsonl"


@dataclass(frozen=True)
class ResultLine:
    """One parsed line of a results file, with where it came from."""

    data: dict[str, Any]
    file: Path
    line: int

    @property
    def id(self) -> str:
        return self.data["id"]


def _parse_line(text: str, path: Path, number: int) -> ResultLine:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AudioICLError(
            f"malformed JSON: {exc.msg} (column {exc.colno})", file=str(path), line=number
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise AudioICLError("result line is not an object with a string 'id'", file=str(path), line=number)
    return ResultLine(data, path, number)


def iter_results(path: str | os.PathLike) -> Iterator[ResultLine]:
    """Every non-blank line of a results file, parsed; anything malformed raises naming file and line."""
    path = Path(path)
    with path.open(encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            if text.strip():
                yield _parse_line(text, path, number)


def repair_tail(path: Path) -> str | None:
    """Cut a half-written last line (one without its final newline) off ``path``.
    Returns a report of what was cut, or None when the file was whole."""
    if not path.exists():
        return None
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return None
    keep = data.rfind(b"\n") + 1
    with path.open("r+b") as handle:
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
    return f"cut a half-written last line ({len(data) - keep} bytes) off {path}"


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

    def acquire(self) -> None:
        for _ in range(2):
            try:
                fd = os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = read_lock(self.lock)
                if owner is None:
                    continue
                if owner.alive:
                    raise AudioICLError(
                        f"results file is being written by process {owner.pid} on {owner.host} "
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


# --------------------------------------------------------------------------- log


class ResultsLog:
    """An open results file: the lines already there (after repair) and appending new ones."""

    def __init__(self, path: Path, existing: list[ResultLine], repaired: str | None):
        self.path = path
        self.existing = existing
        self.repaired = repaired
        self._handle = None

    @classmethod
    def open(cls, path: str | os.PathLike) -> ResultsLog:
        """Repair the tail, read what is there (refusing duplicate ids), ready to append."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        repaired = repair_tail(path)
        existing = list(iter_results(path)) if path.exists() else []
        seen: dict[str, int] = {}
        for line in existing:
            if line.id in seen:
                raise AudioICLError(
                    f"id appears twice (first on line {seen[line.id]})",
                    file=str(path),
                    line=line.line,
                    id=line.id,
                )
            seen[line.id] = line.line
        return cls(path, existing, repaired)

    def done_ids(self) -> set[str]:
        return {line.id for line in self.existing}

    def append(self, results: Iterable[Result]) -> None:
        """Append whole lines, then flush and fsync, so a crash loses at most the batch in flight."""
        if self._handle is None:
            self._handle = self.path.open("a", encoding="utf-8", newline="\n")
        text = "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in results)
        self._handle.write(text)
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


# --------------------------------------------------------------------------- merging shards


@dataclass(frozen=True)
class MergedFile:
    path: Path
    lines: int
    sources: int


def _shard_files(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        raise AudioICLError("not a folder", file=str(folder))
    files = {p.name: p for p in sorted(folder.iterdir()) if p.is_file() and RESULTS_PATTERN.match(p.name)}
    if not files:
        raise AudioICLError("no results files (*_results_k<k>.jsonl) in this folder", file=str(folder))
    for path in files.values():
        owner = read_lock(lock_path(path))
        if owner is not None and owner.alive:
            raise AudioICLError(f"still being written by process {owner.pid} on {owner.host}", file=str(path))
    return files


def _check_shard_set(records: dict[Path, dict[str, Any]]) -> None:
    """Shards named in run.json must be one complete set 1..N made with the same settings."""
    shards = {folder: (rec.get("selection") or {}).get("shard") for folder, rec in records.items()}
    named = {folder: s for folder, s in shards.items() if s}
    if named:
        counts = {int(s.split("/")[1]) for s in named.values()}
        if len(counts) > 1:
            raise AudioICLError(f"shards of different splits: {', '.join(sorted(set(named.values())))}")
        total = counts.pop()
        have = {int(s.split("/")[0]) for s in named.values()}
        missing = sorted(set(range(1, total + 1)) - have)
        if missing:
            raise AudioICLError(f"shard(s) {', '.join(f'{i}/{total}' for i in missing)} not given")
        if len(named) != len(have):
            raise AudioICLError("the same shard is given twice")
    settings = {json.dumps(rec.get("settings"), sort_keys=True) for rec in records.values()}
    if len(settings) > 1:
        raise AudioICLError("the folders were run with different settings (see their run.json)")


def _dataset_order(data: Path, k: int) -> list[str]:
    metas = find_meta_files(data)
    if k not in metas:
        raise AudioICLError(f"the dataset has no meta file for k={k}", file=str(data))
    return [entry.episode.id for entry in iter_meta(metas[k])]


def _check_coverage(name: str, lines: dict[str, ResultLine], order: list[str], data: Path) -> None:
    expected = set(order)
    missing = [i for i in order if i not in lines]
    extra = sorted(set(lines) - expected)
    if missing:
        raise AudioICLError(
            f"{name}: {len(missing)} episode(s) of the dataset have no result (first: {missing[0]})",
            file=str(data),
        )
    if extra:
        first = lines[extra[0]]
        raise AudioICLError(
            f"{name}: {len(extra)} id(s) are not in the dataset",
            file=str(first.file),
            line=first.line,
            id=first.id,
        )


def merge_shards(folders: list[Path], out: Path, data: Path | None = None) -> list[MergedFile]:
    """Join the results files of shard folders into ``out``, one file per model and k, refusing an id
    given twice and (with ``data``) any dataset episode without a result. Lines come in dataset order
    with ``data``, else by id. Writes ``out/run.json`` from the shards' records."""
    resolved = [f.resolve() for f in folders]
    twice = sorted({str(f) for f in folders if resolved.count(f.resolve()) > 1})
    if twice:
        raise AudioICLError(f"folder given twice: {', '.join(twice)}")
    per_folder = {folder: _shard_files(folder) for folder in folders}
    records = {
        folder: json.loads((folder / "run.json").read_text(encoding="utf-8"))
        for folder in folders
        if (folder / "run.json").is_file()
    }
    _check_shard_set(records)
    names = sorted({name for files in per_folder.values() for name in files})
    merged: dict[str, list[ResultLine]] = {}
    for name in names:
        lines: dict[str, ResultLine] = {}
        for files in per_folder.values():
            if name not in files:
                continue
            for line in iter_results(files[name]):
                if line.id in lines:
                    first = lines[line.id]
                    raise AudioICLError(
                        f"id given twice (also {first.file}:{first.line})",
                        file=str(line.file),
                        line=line.line,
                        id=line.id,
                    )
                lines[line.id] = line
        if data is not None:
            order = _dataset_order(data, int(RESULTS_PATTERN.match(name)["k"]))  # type: ignore[index]
            _check_coverage(name, lines, order, data)
        else:
            order = sorted(lines)
        merged[name] = [lines[i] for i in order]
    out.mkdir(parents=True, exist_ok=True)
    clashes = [name for name in names if (out / name).exists()]
    if clashes:
        raise AudioICLError(f"already holds {', '.join(clashes)}; merge into an empty folder", file=str(out))
    written = []
    for name, lines in merged.items():
        path = out / name
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", encoding="utf-8", newline="\n") as handle:
            handle.writelines(json.dumps(line.data, ensure_ascii=False) + "\n" for line in lines)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)
        sources = sum(1 for files in per_folder.values() if name in files)
        written.append(MergedFile(path, len(lines), sources))
    if records:
        record = dict(next(iter(records.values())))
        record["selection"] = {**(record.get("selection") or {}), "shard": None}
        record["merged_from"] = [str(f.resolve()) for f in folders]
        (out / "run.json").write_text(
            json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    return written
