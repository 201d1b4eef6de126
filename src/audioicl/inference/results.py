"""The append-only results log (SPEC §3): reading it, appending to it, and merging shard folders.

A results file is ``<model>_results_k<k>.jsonl``, one JSON object per line. Writers append whole lines (a
batch's in one ``os.write``) and fsync after each batch, holding the file's lock (``audioicl.files.FileLock``);
a write the system refuses (full disk, quota, file-size limit) is cut back to the last complete line at once; a
process killed mid-write can leave one half-written last line, which ``ResultsLog.open`` cuts off (reporting
it) before appending. ``raw_result_lines`` is the one way a results file is split into lines (the scorer's too), a line at a time.

A line is one presentation of an episode: its identity (``LineKey``, what resume, retries, shards and merge
go by) is its ``id`` with its integer fields ``draw``, ``order`` and ``variant`` (``prompts.draws``), each 0
where the line has none, as every line of a run without ``--draws/--orders/--prompt-variants`` has.

Next to a model's results files, ``<model>_run.json`` records how they were made (``record``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audioicl.dataset.meta import find_meta_files, iter_meta, json_limit_problem
from audioicl.errors import AudioICLError, refuse_duplicate_ids, write_failed
from audioicl.files import (
    check_output,
    folder_lock,
    lock_path,
    read_lock,
    remove_left_temporaries,
    write_atomic,
    writing,
)
from audioicl.prompts.draws import VARIATION_FIELDS, Variation
from audioicl.records import Result

from .record import Record, dumps_record, folder_run_records, record_conflicts, record_shard, run_record_name

RESULTS_PATTERN = re.compile(r"^(?P<model>.+?)_results_(?:meta_)?k(?P<k>\d+)\.jsonl$")


def results_name(model: str, k: int) -> str:
    return f"{model}_results_k{k}.jsonl"


@dataclass(frozen=True, order=True)
class LineKey:
    """What a line answers: an episode (``id``) in one presentation (``variation``)."""

    id: str
    variation: Variation = Variation()

    def __str__(self) -> str:
        if self.variation == Variation():
            return self.id
        return f"{self.id} ({self.variation.describe()})"


@dataclass(frozen=True)
class ResultLine:
    """One parsed line of a results file, with where it came from."""

    data: dict[str, Any]
    file: Path
    line: int

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def key(self) -> LineKey:
        """The line's identity; a ``draw``, ``order`` or ``variant`` that is not a non-negative integer is
        refused naming the file and line."""
        values = {}
        for name in VARIATION_FIELDS:
            value = self.data.get(name, 0)
            if type(value) is not int or value < 0:
                raise AudioICLError(
                    f"{name!r} must be a non-negative integer, got {value!r}",
                    file=str(self.file),
                    line=self.line,
                    id=self.id,
                )
            values[name] = value
        return LineKey(self.id, Variation(**values))


def _parse_line(text: str, path: Path, number: int) -> ResultLine:
    """A line as the scorer (and the original's ``line.strip()``) reads it: Unicode whitespace around the JSON
    (a no-break space, an ideographic space) is not part of it."""
    try:
        data = json.loads(text.strip())
    except json.JSONDecodeError as exc:
        raise AudioICLError(
            f"malformed JSON: {exc.msg} (column {exc.colno})", file=str(path), line=number
        ) from exc
    except (ValueError, RecursionError) as exc:  # a number past 4,300 digits, nesting past the stack
        raise AudioICLError(
            f"unreadable JSON: {json_limit_problem(exc)}", file=str(path), line=number
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise AudioICLError("result line is not an object with a string 'id'", file=str(path), line=number)
    return ResultLine(data, path, number)


def raw_result_lines(path: Path) -> Iterator[bytes]:
    """The file's lines as bytes, split as the original's text-mode reading splits them (``\\n``, ``\\r\\n``
    and ``\\r`` end a line; ``str.splitlines`` would also split on characters JSON strings may hold, such as
    U+2028), the last one what follows the last break (``b""`` after a final newline, as ``str.split``
    gives). One line in memory at a time: a file of any length is read in the memory of its longest line."""
    ended = True  # an empty file is one empty line, as "".split("\n") is
    with path.open("rb") as handle:
        for raw in handle:  # split at b"\n", which it keeps
            ended = raw.endswith(b"\n")
            body = raw[:-1] if ended else raw
            if ended and body.endswith(b"\r"):  # \r\n: one break
                body = body[:-1]
            if b"\r" in body:
                yield from body.split(b"\r")
            else:
                yield body
    if ended:
        yield b""


def iter_result_lines(path: Path) -> Iterator[str]:
    """``raw_result_lines`` as text; a line that is not UTF-8 raises, naming it."""
    for number, raw in enumerate(raw_result_lines(path), 1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise AudioICLError(f"not UTF-8 text ({exc.reason})", file=str(path), line=number) from None


def iter_result_lines_or_none(path: Path) -> Iterator[str | None]:
    """``iter_result_lines``, but a line that is not UTF-8 is None rather than an error for the whole file
    (so that the scorer can count it as one malformed line, in its place)."""
    for raw in raw_result_lines(path):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            yield None


def read_result_lines(path: Path) -> list[str]:
    """Every line of ``iter_result_lines``, for reading lines by number."""
    return list(iter_result_lines(path))


def iter_results(path: str | os.PathLike) -> Iterator[ResultLine]:
    """Every non-blank line of a results file, parsed; anything malformed raises naming file and line."""
    path = Path(path)
    for number, text in enumerate(iter_result_lines(path), start=1):
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


# --------------------------------------------------------------------------- log


class ResultsLog:
    """An open results file: the lines already there (after repair) and appending new ones."""

    def __init__(self, path: Path, existing: list[ResultLine], repaired: str | None):
        self.path = path
        self.existing = existing
        self.repaired = repaired
        self._fd: int | None = None

    @classmethod
    def open(cls, path: str | os.PathLike) -> ResultsLog:
        """Repair the tail, read what is there (refusing duplicate ids), ready to append."""
        path = Path(path)
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            repaired = repair_tail(path)
        existing = list(iter_results(path)) if path.exists() else []
        refuse_duplicate_ids(((str(line.key), line.line) for line in existing), str(path))
        return cls(path, existing, repaired)

    def done_ids(self) -> set[str]:
        """The episodes with a line, in any presentation."""
        return {line.id for line in self.existing}

    def done_keys(self) -> set[LineKey]:
        """The (episode, presentation) pairs with a line: what a resumed run skips."""
        return {line.key for line in self.existing}

    def append(self, results: Iterable[Result]) -> None:
        """Append whole lines in one write of their bytes, then fsync, so a crash loses at most the batch in
        flight. A write the system refuses (a full disk, a quota, a file-size limit) cuts the file back to
        where it was, its last complete line, and raises ``WriteFailed``: the batch is asked again on resume."""
        data = "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in results).encode("utf-8")
        if not data:
            return
        with writing(self.path):
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            size = os.fstat(self._fd).st_size
        try:
            view = memoryview(data)
            while view:  # a short write (room for part of it) is followed by the error of the rest
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size)
                os.fsync(self._fd)
            raise write_failed(self.path, exc) from None

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def drop_error_lines(
    path: Path, ids: Collection[str], variations: Collection[Variation] = (Variation(),)
) -> int:
    """Rewrite ``path`` atomically without its ``status: "error"`` lines of ``ids`` in ``variations`` (the
    presentations the run asks), so those run again; every other line is kept byte for byte. Returns how
    many lines went. Hold the file's lock."""
    if not path.exists():
        return 0
    drop = {
        line.line
        for line in iter_results(path)
        if line.id in ids and line.data.get("status") == "error" and line.key.variation in variations
    }
    if not drop:
        return 0
    with path.open(encoding="utf-8", newline="") as handle:  # the line numbering of iter_results
        kept = [text for number, text in enumerate(handle, start=1) if number not in drop]
    write_atomic(path, "".join(kept), durable=True)
    return len(drop)


def restore_order(path: Path, ids: Sequence[str]) -> bool:
    """Rewrite ``path`` atomically with its lines in the order a fresh run writes them, ``ids`` (the meta
    file's order), each id's presentations in order, lines of ids not in ``ids`` last in their order; each
    line kept byte for byte. A resumed run appends what a stop left unasked at the end: this puts it back
    (issue 40, item 7). Returns whether the file changed. Hold the file's lock."""
    if not path.exists():
        return False
    lines = list(iter_results(path))
    rank = {episode: index for index, episode in enumerate(ids)}
    wanted = sorted(lines, key=lambda line: (rank.get(line.id, len(rank)), line.key.variation, line.line))
    if [line.line for line in wanted] == [line.line for line in lines]:
        return False
    with path.open(encoding="utf-8", newline="") as handle:  # the line numbering of iter_results
        texts = dict(enumerate(handle, start=1))
    write_atomic(path, "".join(texts[line.line] for line in wanted), durable=True)
    return True


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


def _check_shard_set(model: str, records: dict[Path, Record]) -> None:
    """One model's records in the shard folders must name one complete set of shards 1..N made with the
    same settings on the same dataset."""
    named = {folder: shard for folder, rec in records.items() if (shard := record_shard(rec))}
    if named:
        counts = {int(s.split("/")[1]) for s in named.values()}
        if len(counts) > 1:
            raise AudioICLError(
                f"{model}: shards of different splits: {', '.join(sorted(set(named.values())))}"
            )
        total = counts.pop()
        have = {int(s.split("/")[0]) for s in named.values()}
        missing = sorted(set(range(1, total + 1)) - have)
        if missing:
            raise AudioICLError(f"{model}: shard(s) {', '.join(f'{i}/{total}' for i in missing)} not given")
        if len(named) != len(have):
            raise AudioICLError(f"{model}: the same shard is given twice")
    (first_folder, first), *rest = records.items()
    for folder, record in rest:
        conflicts = record_conflicts(first, record)
        if conflicts:
            raise AudioICLError(
                f"{model}: run with other settings than in {first_folder} ({'; '.join(conflicts)})",
                file=str(folder / run_record_name(model)),
            )


def _merged_record(records: dict[Path, Record]) -> Record:
    """One model's record for the merged folder: the shards' common facts, every run, no shard."""
    record = dict(next(iter(records.values())))
    record.pop("selection", None)
    record["shard"] = None
    record["meta_sha256"] = {
        k: v for rec in records.values() for k, v in (rec.get("meta_sha256") or {}).items()
    }
    record["runs"] = [run for rec in records.values() for run in rec.get("runs") or []]
    record["merged_from"] = [str(folder.resolve()) for folder in records]
    return record


def _dataset_order(data: Path, k: int) -> list[str]:
    metas = find_meta_files(data)
    if k not in metas:
        raise AudioICLError(f"the dataset has no meta file for k={k}", file=str(data))
    return [entry.episode.id for entry in iter_meta(metas[k])]


def _check_coverage(name: str, lines: dict[LineKey, ResultLine], order: list[LineKey], data: Path) -> None:
    """Every dataset episode in every presentation the lines hold (``order``) has a line, and no line is of
    an id outside the dataset."""
    missing = [key for key in order if key not in lines]
    extra = sorted(set(lines) - set(order))
    if missing:
        what = (
            "episode(s)" if {key.variation for key in order} == {Variation()} else "(episode, presentation)s"
        )
        raise AudioICLError(
            f"{name}: {len(missing)} {what} of the dataset have no result (first: {missing[0]})",
            file=str(data),
        )
    if extra:
        first = lines[extra[0]]
        raise AudioICLError(
            f"{name}: {len({key.id for key in extra})} id(s) are not in the dataset",
            file=str(first.file),
            line=first.line,
            id=first.id,
        )


def _merged_order(lines: Collection[LineKey], data: Path | None, k: int) -> list[LineKey]:
    """The merged file's lines: in dataset order with ``data`` (each episode in every presentation any line
    has, in order), else sorted by id and presentation."""
    if data is None:
        return sorted(lines)
    variations = sorted({key.variation for key in lines})
    return [LineKey(i, variation) for i in _dataset_order(data, k) for variation in variations]


def _holds_other(path: Path, text: str) -> bool:
    """Whether ``path`` exists with other content than ``text``."""
    try:
        return path.read_text(encoding="utf-8") != text
    except FileNotFoundError:
        return False
    except (OSError, UnicodeDecodeError):
        return True


def merge_shards(folders: list[Path], out: Path, data: Path | None = None) -> list[MergedFile]:
    """Join the results files of shard folders into ``out``, one file per model and k, refusing a line
        (an id in one presentation) given twice and (with ``data``) any dataset episode without a line in each
        presentation the files hold. Lines come in dataset order with ``data``, else by id (each id's
        presentations in order). Writes ``out/<model>_run.json`` from the shards' records of each model. The same
    merge into a folder it already wrote (whole or in part) completes it and changes nothing there."""
    check_output(out, "--out", folder=True)
    resolved = [f.resolve() for f in folders]
    twice = sorted({str(f) for f in folders if resolved.count(f.resolve()) > 1})
    if twice:
        raise AudioICLError(f"folder given twice: {', '.join(twice)}")
    per_folder = {folder: _shard_files(folder) for folder in folders}
    by_model: dict[str, dict[Path, Record]] = {}
    for folder in folders:
        for model, record in folder_run_records(folder).items():
            by_model.setdefault(model, {})[folder] = record
    for model, records in sorted(by_model.items()):
        _check_shard_set(model, records)
    names = sorted({name for files in per_folder.values() for name in files})
    merged: dict[str, list[ResultLine]] = {}
    for name in names:
        lines: dict[LineKey, ResultLine] = {}
        for files in per_folder.values():
            if name not in files:
                continue
            for line in iter_results(files[name]):
                key = line.key
                if key in lines:
                    first = lines[key]
                    what = "id" if key.variation == Variation() else f"id in {key.variation.describe()}"
                    raise AudioICLError(
                        f"{what} given twice (also {first.file}:{first.line})",
                        file=str(line.file),
                        line=line.line,
                        id=line.id,
                    )
                lines[key] = line
        order = _merged_order(lines, data, int(RESULTS_PATTERN.match(name)["k"]))  # type: ignore[index]
        if data is not None:
            _check_coverage(name, lines, order, data)
        merged[name] = [lines[key] for key in order]
    out.mkdir(parents=True, exist_ok=True)
    contents = {
        name: "".join(json.dumps(line.data, ensure_ascii=False) + "\n" for line in lines)
        for name, lines in merged.items()
    }
    contents.update(
        {run_record_name(model): dumps_record(_merged_record(records)) for model, records in by_model.items()}
    )
    with folder_lock(out):  # one merge into a folder at a time; what a killed one left is cleared
        # a merge stopped part way (a kill, a full disk) left some of these whole (each is written atomically):
        # the same merge again keeps those and writes the rest; a file that says anything else is refused
        clashes = [name for name, text in contents.items() if _holds_other(out / name, text)]
        if clashes:
            raise AudioICLError(
                f"already holds {', '.join(clashes)} with other content than this merge makes; merge into an "
                "empty folder",
                file=str(out),
            )
        written = []
        for name, text in contents.items():
            path = out / name
            remove_left_temporaries(path)
            if not path.exists():
                write_atomic(path, text, durable=True)
            if name in merged:
                sources = sum(1 for files in per_folder.values() if name in files)
                written.append(MergedFile(path, len(merged[name]), sources))
    return written
