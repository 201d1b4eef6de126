"""Check a dataset folder: meta files, episode shapes, labels, audio files, the Morse bank and the manifest.

Every problem is collected (one bad line or file never hides the others) and located as ``file:line id``.
Nesting across k is reported as information only: the original's AudioRemap and AnomalyDetect draw new
episodes for every k under the same ids (SPEC §1), which is a property of the data, not an error.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
from collections import Counter, defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from audioicl import audio
from audioicl.errors import AudioICLError
from audioicl.records import Clip, Episode, Query
from audioicl.registry import unknown_name
from audioicl.tasks import TASKS, LabelSpace, TaskSpec, task_names
from audioicl.tasks.anomaly import MACHINE_TYPES

from .manifest import MANIFEST_NAME, ListedFile, read_manifest
from .meta import MetaLine, check_dataset_root, find_meta_files, meant_root, resolve_audio_path, scan_meta

# Problem kinds, in the order the report lists them.
MALFORMED = "malformed"
EMPTY_META = "empty meta file"
UNKNOWN_TASK = "unknown task"
DUPLICATE_ID = "duplicate id"
K_MISMATCH = "k mismatch"
SHAPE = "shape"
LABEL = "label"
BAD_PATH = "bad audio path"
MISSING_AUDIO = "missing audio"
BAD_AUDIO = "bad audio"
ALPHABET = "alphabet"
MANIFEST = "manifest"
PROBLEM_KINDS = (
    MALFORMED,
    EMPTY_META,
    UNKNOWN_TASK,
    DUPLICATE_ID,
    K_MISMATCH,
    SHAPE,
    LABEL,
    BAD_PATH,
    MISSING_AUDIO,
    BAD_AUDIO,
    ALPHABET,
    MANIFEST,
)
SHOWN_PER_KIND = 20
Finding = tuple[str, str]  # (problem kind, message) about one episode

# Clip roles of the multi-clip task families (SPEC §3): the demo role layouts accepted (an AnomalyDetect pair
# in either order: the original shows Normal first, our default draws the order), query roles (the last one
# is the target).
DEMO_ROLES = {"remap": (("A", "B", "MIX"),), "anomaly": (("Normal", "Anomalous"), ("Anomalous", "Normal"))}
QUERY_ROLES = {"remap": ("A", "B", "MIX"), "anomaly": ("Query",)}

ALPHABET_DIR = "data/MorseCode/alphabet"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
DECODE_BLOCK = 1 << 16  # frames per read when decoding a whole file


@dataclass(frozen=True)
class Problem:
    kind: str
    message: str
    file: str | None = None
    line: int | None = None
    id: str | None = None

    @classmethod
    def from_error(cls, kind: str, exc: AudioICLError) -> Problem:
        return cls(kind, exc.message, exc.file, exc.line, exc.id)

    def sort_key(self) -> tuple:
        return (self.file or "", self.line or 0, self.id or "", self.message)

    def __str__(self) -> str:
        return str(AudioICLError(self.message, file=self.file, line=self.line, id=self.id))


@dataclass(frozen=True)
class TaskStats:
    """One row of the summary table: a task in one meta file. Clips and seconds count distinct files."""

    task: str
    k: int
    episodes: int
    clips: int
    seconds: float | None
    min_seconds: float | None
    max_seconds: float | None
    query_labels: dict[str, int]

    def label_summary(self) -> str:
        if not self.query_labels:
            return "no labels"
        label, count = min(self.query_labels.items(), key=lambda item: (-item[1], item[0]))
        distinct = len(self.query_labels)
        if distinct == 1:
            return f"1 label ({label})"
        if count == 1:
            return f"{distinct} labels, all distinct"
        total = sum(self.query_labels.values())
        return f"{distinct} labels, most common {label} ({100 * count / total:.0f}%)"


@dataclass(frozen=True)
class Nesting:
    """Whether a task's smaller-k episodes are the largest-k episodes with their first k demos."""

    task: str
    reference_k: int
    compared: int
    differ: int
    differ_by_k: dict[int, int]

    @property
    def nested(self) -> bool | None:
        return None if self.compared == 0 else self.differ == 0

    def describe(self) -> str:
        if self.nested is None:
            return "n/a (one k only)"
        if self.nested:
            return "yes"
        return f"no ({self.differ} of {self.compared} episodes differ)"


@dataclass(frozen=True)
class LostEpisodes:
    """A task in one meta file whose episodes name clips that are missing or broken: a run gives each of
    those episodes an error line. Files are counted once per task and k."""

    task: str
    k: int
    episodes: int
    lost: int
    missing_files: int
    broken_files: int


@dataclass
class Report:
    root: str
    meta_files: dict[int, str]
    tables: list[TaskStats]
    nesting: list[Nesting]
    problems: list[Problem]
    audio_files: int
    quick: bool
    hashes_verified: bool
    notes: list[str] = field(default_factory=list)
    lost: list[LostEpisodes] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def counts(self) -> dict[str, int]:
        counts = Counter(p.kind for p in self.problems)
        return {kind: counts[kind] for kind in PROBLEM_KINDS if counts[kind]}

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "ok": self.ok,
            "meta_files": {str(k): path for k, path in self.meta_files.items()},
            "audio_files": self.audio_files,
            "quick": self.quick,
            "hashes_verified": self.hashes_verified,
            "tables": [asdict(row) | {"label_summary": row.label_summary()} for row in self.tables],
            "nesting": [
                asdict(n) | {"nested": n.nested, "differ_by_k": {str(k): v for k, v in n.differ_by_k.items()}}
                for n in self.nesting
            ],
            "lost": [asdict(row) for row in self.lost],
            "problem_counts": self.counts(),
            "problems": [asdict(p) for p in self.problems],
            "notes": self.notes,
        }


# --------------------------------------------------------------------------- episodes


def _labelled(clip: Clip, what: str, space: LabelSpace, problems: list[Finding]) -> None:
    if clip.label is None:
        problems.append((SHAPE, f"{what} has no label"))
    elif clip.label not in space:
        problems.append((LABEL, f"{what} label {clip.label!r} is not in {space.description}"))


def _roles_match(
    clips: tuple[Clip, ...], layouts: tuple[tuple[str, ...], ...], what: str, problems: list[Finding]
) -> bool:
    found = tuple(c.role for c in clips)
    if found not in layouts:
        shown = ", ".join(str(r) for r in found)
        expected = " or ".join(f"({', '.join(roles)})" for roles in layouts)
        problems.append((SHAPE, f"{what} has roles ({shown}), expected {expected}"))
        return False
    return True


def _spelled_with_references(
    clips: tuple[Clip, ...], label: str | None, what: str, problems: list[Finding]
) -> None:
    """AudioRemap: a MIX label uses only the letters its A and B clips carry."""
    letters = {clips[0].label, clips[1].label}
    if None in letters or label is None:
        return
    if len(letters) != 2:
        problems.append((LABEL, f"{what} A and B carry the same letter {clips[0].label!r}"))
    elif not set(label) <= letters:
        problems.append(
            (
                LABEL,
                f"{what} label {label!r} is not spelled with its letters {clips[0].label}/{clips[1].label}",
            )
        )


def _multi_clip_problems(ep: Episode, spec: TaskSpec, problems: list[Finding]) -> None:
    if spec.family not in DEMO_ROLES:  # a multi-clip task this checker has no role layout for
        return
    demo_roles, query_roles = DEMO_ROLES[spec.family], QUERY_ROLES[spec.family]
    for index, demo in enumerate(ep.demos, start=1):
        what = f"demo {index}"
        if not demo.multi:
            problems.append(
                (SHAPE, f"{what} is a single clip, {ep.task} demos have clips {', '.join(demo_roles[0])}")
            )
            continue
        if not _roles_match(demo.clips, demo_roles, what, problems):
            continue
        for clip in demo.clips:
            _labelled(clip, f"{what} {clip.role}", spec.clip_labels[clip.role], problems)
            if spec.family == "anomaly" and clip.label in spec.labels and clip.label != clip.role:
                problems.append((LABEL, f"{what} {clip.role} clip is labelled {clip.label!r}"))
        if spec.family == "remap":
            _spelled_with_references(demo.clips, demo.label, f"{what} MIX", problems)
    query = ep.query
    if not query.multi:
        problems.append(
            (SHAPE, f"query is a single clip, {ep.task} queries have clips {', '.join(query_roles)}")
        )
        return
    if not _roles_match(query.clips, (query_roles,), "query", problems):
        return
    for clip in query.clips[:-1]:
        _labelled(clip, f"query {clip.role}", spec.clip_labels[clip.role], problems)
    if query.target.label is not None:
        problems.append((SHAPE, f"query target clip {query.target.role} carries a label (the answer)"))
    if spec.family == "remap":
        _spelled_with_references(query.clips, query.label, "query", problems)
    if spec.family == "anomaly" and ep.object not in MACHINE_TYPES:
        problems.append(
            (SHAPE, f"'object' is {ep.extra.get('object')!r}, expected one of {', '.join(MACHINE_TYPES)}")
        )


def episode_problems(ep: Episode) -> list[Finding]:
    """(kind, message) for each way an episode does not fit its task's shape and label space."""
    if ep.task not in TASKS:
        return [(UNKNOWN_TASK, unknown_name("task", ep.task, task_names()))]
    spec = TASKS.get(ep.task)
    problems: list[Finding] = []
    if spec.multi_clip:
        _multi_clip_problems(ep, spec, problems)
    else:
        for index, demo in enumerate(ep.demos, start=1):
            if demo.multi:
                problems.append((SHAPE, f"demo {index} has clips, {ep.task} is a single-clip task"))
            else:
                _labelled(demo.clips[0], f"demo {index}", spec.labels, problems)
        if ep.query.multi:
            problems.append((SHAPE, f"query has clips, {ep.task} is a single-clip task"))
    if ep.query.label not in spec.labels:
        problems.append((LABEL, f"query label {ep.query.label!r} is not in {spec.labels.description}"))
    return problems


def check_meta_file(path: Path, k: int) -> tuple[list[MetaLine], list[Problem]]:
    """Parse every line; report bad lines, an empty file, duplicate ids, demo counts and episode fit."""
    lines, errors = scan_meta(path)
    problems = [Problem.from_error(MALFORMED, exc) for exc in errors]
    if not lines and not errors:
        problems.append(Problem(EMPTY_META, "empty meta file: no episodes", str(path)))
    first_line: dict[str, int] = {}
    for item in lines:
        ep = item.episode
        where = {"file": str(path), "line": item.line, "id": ep.id}
        if ep.id in first_line:
            problems.append(
                Problem(DUPLICATE_ID, f"duplicate id, first at line {first_line[ep.id]}", **where)
            )
        else:
            first_line[ep.id] = item.line
        if ep.k != k:
            problems.append(Problem(K_MISMATCH, f"{ep.k} demos in a k={k} file", **where))
        problems.extend(Problem(kind, message, **where) for kind, message in episode_problems(ep))
    return lines, problems


# --------------------------------------------------------------------------- nesting


def _query_key(query: Query) -> tuple:
    return (*((c.role, c.audio_path, c.label) for c in query.clips), query.label)


def nesting_by_task(episodes_by_k: dict[int, list[Episode]]) -> list[Nesting]:
    """Per task: is each smaller-k episode a largest-k episode (same task and query) cut to its first k demos?

    Episodes are matched by task and query rather than id alone: the original ``meta_k2`` numbers its
    ids differently, and a shared id means nothing where the task or query differ.
    """
    by_task: dict[str, dict[int, list[Episode]]] = defaultdict(lambda: defaultdict(list))
    for k, episodes in episodes_by_k.items():
        for ep in episodes:
            by_task[ep.task][k].append(ep)
    order = {name: i for i, name in enumerate(task_names())}
    result = []
    for task in sorted(by_task, key=lambda t: (order.get(t, len(order)), t)):
        files = by_task[task]
        reference_k = max(files)
        candidates: dict[tuple, list[Episode]] = defaultdict(list)
        for ep in files[reference_k]:
            candidates[_query_key(ep.query)].append(ep)
        differ_by_k, compared = {}, 0
        for k in sorted(files):
            if k == reference_k:
                continue
            differ_by_k[k] = sum(
                not any(ref.demos[:k] == ep.demos for ref in candidates.get(_query_key(ep.query), ()))
                for ep in files[k]
            )
            compared += len(files[k])
        result.append(Nesting(task, reference_k, compared, sum(differ_by_k.values()), differ_by_k))
    return result


# --------------------------------------------------------------------------- audio


@dataclass
class _Use:
    """Where an audio file is first referenced and how often, so each file is checked once."""

    file: str
    line: int | None
    id: str | None
    count: int = 1


@dataclass(frozen=True)
class AudioCheck:
    seconds: float | None
    missing: bool = False
    error: str | None = None


def _decoded_frames(handle: sf.SoundFile) -> int:
    buffer = np.empty((DECODE_BLOCK, handle.channels), dtype=np.int16)
    total = 0
    while True:
        got = len(handle.read(out=buffer))
        total += got
        if got < DECODE_BLOCK:
            return total


def check_audio(path: Path, quick: bool = False) -> AudioCheck:
    """Duration of one audio file, or why it cannot be used; ``quick`` reads headers only."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return AudioCheck(None, missing=True)
    except OSError as exc:
        return AudioCheck(None, error=f"cannot read: {exc.strerror}")
    if not stat.S_ISREG(mode):
        return AudioCheck(None, error="not a file")
    try:
        with sf.SoundFile(str(path)) as handle:
            frames, rate = handle.frames, handle.samplerate
            problem = audio.header_problem(path, frames, rate, handle.channels)
            decoded = frames if quick or problem else _decoded_frames(handle)
    except (sf.LibsndfileError, RuntimeError, OSError, struct.error) as exc:
        return AudioCheck(None, error=f"cannot decode: {exc}")
    if problem is None and decoded != frames:
        problem = f"decoded {decoded} of {frames} frames"
    return AudioCheck(frames / rate if rate else None, error=problem)


def _audio_uses(meta_lines: Iterable[MetaLine]) -> dict[str, _Use]:
    uses: dict[str, _Use] = {}
    for item in meta_lines:
        for clip in item.episode.clips():
            use = uses.get(clip.audio_path)
            if use is None:
                uses[clip.audio_path] = _Use(str(item.file), item.line, item.episode.id)
            else:
                use.count += 1
    return uses


def _check_meta_audio_path(root: Path, rel: str, quick: bool) -> AudioCheck | AudioICLError:
    try:
        return check_audio(resolve_audio_path(root, rel), quick)
    except AudioICLError as exc:
        return exc


def _check_all_audio(
    root: Path, uses: dict[str, _Use], quick: bool, pool: ThreadPoolExecutor
) -> tuple[dict[str, float], list[Problem], dict[str, str]]:
    """Resolve and check every distinct audio path once: durations by meta path, the problems, and the
    paths that cannot be used (``MISSING_AUDIO``, ``BAD_AUDIO`` or ``BAD_PATH``)."""
    problems: list[Problem] = []
    durations: dict[str, float] = {}
    unusable: dict[str, str] = {}
    root = root.resolve()  # once, not per path
    checks = pool.map(lambda rel: _check_meta_audio_path(root, rel, quick), uses, chunksize=64)
    for (rel, use), check in zip(uses.items(), checks, strict=True):
        where = {"file": use.file, "line": use.line, "id": use.id}
        refs = f" ({use.count} references)" if use.count > 1 else ""
        if isinstance(check, AudioICLError):
            problems.append(Problem(BAD_PATH, check.message, **where))
            unusable[rel] = BAD_PATH
        elif check.missing:
            problems.append(Problem(MISSING_AUDIO, f"missing audio {rel}{refs}", **where))
            unusable[rel] = MISSING_AUDIO
        elif check.error:
            problems.append(Problem(BAD_AUDIO, f"{rel}: {check.error}", **where))
            unusable[rel] = BAD_AUDIO
        if isinstance(check, AudioCheck) and check.seconds is not None:
            durations[rel] = check.seconds
    return durations, problems, unusable


def _alphabet_uses(root: Path) -> tuple[dict[str, _Use], list[Problem]]:
    """The Morse alphabet bank, when the dataset has one: all 26 letters, each checked like any clip."""
    folder = root / ALPHABET_DIR
    if not folder.is_dir():
        return {}, []
    uses, absent = {}, []
    for letter in LETTERS:
        rel = f"{ALPHABET_DIR}/{letter}.wav"
        if (root / rel).exists():
            uses[rel] = _Use(str(folder), None, None)
        else:
            absent.append(f"{letter}.wav")
    problems = []
    if absent:
        problems.append(Problem(ALPHABET, f"Morse alphabet bank lacks {', '.join(absent)}", str(folder)))
    return uses, problems


# --------------------------------------------------------------------------- manifest


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _entry_problem(root: Path, entry: ListedFile, verify_hashes: bool) -> str | None:
    try:
        full = resolve_audio_path(root, entry.path)
    except AudioICLError as exc:
        return exc.message
    if not full.is_file():
        return f"listed file is missing: {entry.path}"
    size = full.stat().st_size
    if isinstance(entry.bytes, int) and size != entry.bytes:
        return f"{entry.path}: {size} bytes, manifest says {entry.bytes}"
    if verify_hashes and isinstance(entry.sha256, str) and _sha256(full) != entry.sha256.lower():
        return f"{entry.path}: sha256 differs from the manifest"
    return None


def check_manifest(
    root: Path, verify_hashes: bool, pool: ThreadPoolExecutor, notes: list[str]
) -> list[Problem]:
    """Files the manifest lists exist with their sizes; their sha256 too with ``verify_hashes``."""
    try:
        manifest = read_manifest(root)
    except AudioICLError as exc:
        return [Problem.from_error(MANIFEST, exc)]
    if manifest is None:
        return []
    entries = manifest.files
    if entries is None:
        notes.append(f"{MANIFEST_NAME} has no recognisable file list; not checked")
        return []
    found = pool.map(lambda e: _entry_problem(root, e, verify_hashes), entries)
    return [Problem(MANIFEST, message, str(manifest.path)) for message in found if message]


# --------------------------------------------------------------------------- the whole dataset


def _table_rows(
    meta_files: dict[int, Path], lines_by_k: dict[int, list[MetaLine]], durations: dict[str, float]
) -> list[TaskStats]:
    order = {name: i for i, name in enumerate(task_names())}
    rows = []
    for k in meta_files:
        by_task: dict[str, list[Episode]] = defaultdict(list)
        for item in lines_by_k[k]:
            by_task[item.episode.task].append(item.episode)
        for task, episodes in by_task.items():
            paths = {clip.audio_path for ep in episodes for clip in ep.clips()}
            seconds = [durations[p] for p in paths if p in durations]
            labels = Counter(ep.query.label for ep in episodes)
            rows.append(
                TaskStats(
                    task,
                    k,
                    len(episodes),
                    len(paths),
                    round(sum(seconds), 3) if seconds else None,
                    min(seconds, default=None),
                    max(seconds, default=None),
                    dict(sorted(labels.items())),
                )
            )
    return sorted(rows, key=lambda r: (order.get(r.task, len(order)), r.task, r.k))


def _lost_rows(lines_by_k: dict[int, list[MetaLine]], unusable: dict[str, str]) -> list[LostEpisodes]:
    """Per task and k with losses: episodes naming an unusable clip, and the missing and broken files."""
    order = {name: i for i, name in enumerate(task_names())}
    rows = []
    for k, lines in lines_by_k.items():
        by_task: dict[str, list[Episode]] = defaultdict(list)
        for item in lines:
            by_task[item.episode.task].append(item.episode)
        for task, episodes in by_task.items():
            bad = [{c.audio_path for c in ep.clips()} & unusable.keys() for ep in episodes]
            paths = set().union(*bad)
            if not paths:
                continue
            missing = sum(unusable[p] == MISSING_AUDIO for p in paths)
            rows.append(
                LostEpisodes(task, k, len(episodes), sum(map(bool, bad)), missing, len(paths) - missing)
            )
    return sorted(rows, key=lambda r: (order.get(r.task, len(order)), r.task, r.k))


def validate(
    root: str | os.PathLike, *, quick: bool = False, verify_hashes: bool = False, jobs: int | None = None
) -> Report:
    """Check a dataset root; raises ``AudioICLError`` only when there is nothing to check (no folder/meta)."""
    root = Path(root)
    meta_files = find_meta_files(root)
    check_dataset_root(root, meta_files)
    problems: list[Problem] = []
    lines_by_k: dict[int, list[MetaLine]] = {}
    for k, path in meta_files.items():
        lines_by_k[k], file_problems = check_meta_file(path, k)
        problems += file_problems
    uses = _audio_uses(item for lines in lines_by_k.values() for item in lines)
    bank, bank_problems = _alphabet_uses(root)
    problems += bank_problems
    notes: list[str] = []
    with ThreadPoolExecutor(max_workers=jobs or min(16, 4 * (os.cpu_count() or 1))) as pool:
        durations, audio_problems, unusable = _check_all_audio(root, uses | bank, quick, pool)
        problems += audio_problems
        problems += check_manifest(root, verify_hashes, pool, notes)
    missing = sum(p.kind == MISSING_AUDIO for p in audio_problems)
    if uses and missing == len(uses):
        meant = meant_root(root)
        notes.append(
            f"none of the {len(uses)} audio files exists: is {root} the dataset root (with data/)?"
            + (f" Did you mean {meant}?" if meant is not None else "")
        )
    episodes_by_k = {k: [item.episode for item in lines] for k, lines in lines_by_k.items()}
    return Report(
        root=str(root),
        meta_files={k: str(path) for k, path in meta_files.items()},
        tables=_table_rows(meta_files, lines_by_k, durations),
        nesting=nesting_by_task(episodes_by_k),
        problems=sorted(problems, key=Problem.sort_key),
        audio_files=len(uses | bank),
        quick=quick,
        hashes_verified=verify_hashes,
        notes=notes,
        lost=_lost_rows(lines_by_k, unusable),
    )


# --------------------------------------------------------------------------- text report


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_table(rows: list[TaskStats]) -> list[str]:
    header = ("task", "k", "episodes", "clips", "seconds", "min s", "max s", "query labels")
    cells = [
        (
            r.task,
            str(r.k),
            str(r.episodes),
            str(r.clips),
            "-" if r.seconds is None else f"{r.seconds:.1f}",
            _seconds(r.min_seconds),
            _seconds(r.max_seconds),
            r.label_summary(),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in [header, *cells]) for i in range(len(header) - 1)]

    def line(row: tuple[str, ...]) -> str:
        first = row[0].ljust(widths[0])
        middle = "  ".join(cell.rjust(width) for cell, width in zip(row[1:-1], widths[1:], strict=True))
        return f"{first}  {middle}  {row[-1]}"

    return [line(header), *(line(row) for row in cells)]


def format_lost(rows: list[LostEpisodes]) -> list[str]:
    header = ("task", "k", "episodes", "lost", "missing files", "broken files")
    cells = [
        (r.task, str(r.k), str(r.episodes), str(r.lost), str(r.missing_files), str(r.broken_files))
        for r in rows
    ]
    widths = [max(len(row[i]) for row in [header, *cells]) for i in range(len(header))]

    def line(row: tuple[str, ...]) -> str:
        rest = "  ".join(cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True))
        return f"{row[0].ljust(widths[0])}  {rest}"

    return [line(header), *(line(row) for row in cells)]


def format_report(report: Report, show_all: bool = False) -> str:
    """The human-readable report: table, nesting, problems grouped by kind (20 per kind unless ``show_all``)."""
    out = [f"dataset {report.root}: {len(report.meta_files)} meta files, {report.audio_files} audio files"]
    out += ["", *format_table(report.tables)]
    if report.nesting:
        out += ["", "nesting across k (information, not a problem):"]
        width = max(len(n.task) for n in report.nesting)
        out += [f"  {n.task.ljust(width)}  nested: {n.describe()}" for n in report.nesting]
    out += ["", *(f"note: {note}" for note in report.notes)] if report.notes else []
    if report.lost:
        out += ["", "episodes a run records as error lines (a clip missing or broken), by task and k:"]
        out += ["  " + line for line in format_lost(report.lost)]
    counts = report.counts()
    if not counts:
        out += ["", "no problems found"]
        return "\n".join(out)
    total = len(report.problems)
    out += [
        "",
        f"{total} problem{'s' if total != 1 else ''}: " + ", ".join(f"{n} {k}" for k, n in counts.items()),
    ]
    for kind, count in counts.items():
        items = [p for p in report.problems if p.kind == kind]
        shown = items if show_all else items[:SHOWN_PER_KIND]
        out += ["", f"{kind} ({count}):", *(f"  {p}" for p in shown)]
        if len(shown) < count:
            out.append(f"  ... and {count - len(shown)} more (--all shows every one)")
    return "\n".join(out)
