"""Build the benchmark: plan every episode, render its audio in parallel, write meta files, card and manifest.

Order of work, so that an interrupted build can be rerun to completion:
1. ``ROOT/build.json`` (the options) is written first; a non-empty ``ROOT`` is accepted only when it holds
   a build with the same options.
2. Workers plan episodes and write each missing audio file atomically (temporary file, then rename), so a
   file that exists is complete; files that exist are hashed, not rendered again. A worker takes a task
   family's episodes in one range at a time (a ``Job``): the sources those tasks share are made once, and
   two workers rarely create files in the same folder at once (creating a file locks its folder).
3. Meta files, the transcripts of the clips (``meta/transcripts.jsonl``, what was placed in each; see
   ``dataset.sidecar``), the dataset card and ``manifest.json`` are written last.

Every file's audio comes from a generator keyed by stable names, so the bytes do not depend on ``workers``.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import signal
import time
from collections import Counter, defaultdict
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from audioicl import __version__
from audioicl.audio import SAMPLE_RATE, pcm16_bytes
from audioicl.errors import AudioICLError, WorkerDied
from audioicl.files import TMP_SUFFIX, FileLock, check_output, write_atomic
from audioicl.records import Episode
from audioicl.sources.banks import SoundSources
from audioicl.sources.corpora import SourceUse, provenance
from audioicl.tasks import TASKS, LabelSpace, task_names
from audioicl.tasks.context import BuildOptions, GenContext, PlannedFile

from .card import TaskStats, render_card
from .manifest import FileEntry, file_entry, fingerprint, write_manifest
from .meta import write_meta
from .sidecar import write_sidecar

__all__ = ["BuildOptions", "BuildSummary", "build", "STATE_NAME", "CARD_NAME"]

STATE_NAME = "build.json"
CARD_NAME = "README.md"
META_DIR = "meta"
WAV_HEADER_BYTES = 44
PROGRESS_SECONDS = 0.25  # how often a parallel build's progress bar is brought up to date
# glibc mallopt parameters and the values a rendering process uses (see _keep_freed_memory)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
KEEP_FREED_BYTES = 256 << 20
TOP_PAD_BYTES = 64 << 20
MMAP_THRESHOLD_BYTES = 32 << 20  # glibc's largest


@dataclass(frozen=True)
class FileRecord:
    path: str
    sha256: str
    bytes: int
    seconds: float
    transcript: str | None = None  # what was placed in it (``tasks.transcripts``), None where there is none


@dataclass(frozen=True)
class WorkUnit:
    """Episodes ``start`` .. ``stop - 1`` of a task (a batch that shares sources), or with ``stop == start``
    the task's shared files (the Morse alphabet bank)."""

    task: str
    start: int
    stop: int


@dataclass(frozen=True)
class Job:
    """Work units one worker runs in a row: the episodes ``start`` .. ``stop - 1`` of every task of a family
    (and the family's shared files). Tasks of a family share sources (AudioCount and AudioCountHard the
    same one-shots, the two AudioLength tasks one fragment bank) and each family writes its own folders."""

    family: str
    start: int
    stop: int
    units: tuple[WorkUnit, ...]
    cost_ms: float  # estimated CPU time, from the generators' ``cost_ms``


@dataclass(frozen=True)
class UnitResult:
    unit: WorkUnit
    episodes: tuple[Episode, ...]
    files: tuple[FileRecord, ...]
    rendered: int  # files this unit wrote (the others existed already)


@dataclass(frozen=True)
class BuildSummary:
    root: Path
    episodes: int
    audio_files: int
    rendered: int
    audio_seconds: float
    bytes: int
    wall_seconds: float
    fingerprint: str
    corpora: tuple[SourceUse, ...] = ()  # the real corpora it drew from

    def line(self) -> str:
        return (
            f"built {self.episodes} episodes: {self.audio_files} audio files ({self.rendered} rendered now), "
            f"{self.audio_seconds:.0f} s ({self.audio_seconds / 3600:.1f} h) of audio, {self.bytes / 1e6:.1f} MB, "
            f"{self.wall_seconds:.1f} s wall -> {self.root}"
        )


# --------------------------------------------------------------------------------------------- workers


class _Worker:
    """Renders work units into ``root``; remembers the files it has seen (shared clips recur)."""

    def __init__(self, root: Path, options: BuildOptions):
        self.root = root
        self.ctx = GenContext(options, SoundSources.create(options.seed, options.sources))
        self.seen: dict[str, FileRecord] = {}
        self.folders: set[Path] = set()
        self.rendered = 0

    def run(self, unit: WorkUnit) -> UnitResult:
        spec = TASKS.get(unit.task)
        if unit.start == unit.stop:
            episodes, planned = (), list(spec.generator.shared(self.ctx))
        else:
            plans = [spec.generator.episode(self.ctx, spec, i) for i in range(unit.start, unit.stop)]
            episodes, planned = tuple(p.episode for p in plans), [f for p in plans for f in p.files]
        before = self.rendered
        records = tuple(self._materialize(f) for f in planned)
        return UnitResult(unit, episodes, records, rendered=self.rendered - before)

    def _materialize(self, planned: PlannedFile) -> FileRecord:
        if planned.path in self.seen:
            return self.seen[planned.path]
        full = self.root / planned.path
        if full.is_file():
            data = full.read_bytes()
        else:
            data = pcm16_bytes(planned.render(), SAMPLE_RATE)
            self._write(full, data)
            self.rendered += 1
        seconds = (len(data) - WAV_HEADER_BYTES) / 2 / SAMPLE_RATE
        transcript = planned.transcript() if planned.transcript else None
        record = FileRecord(planned.path, hashlib.sha256(data).hexdigest(), len(data), seconds, transcript)
        self.seen[planned.path] = record
        return record

    def _write(self, full: Path, data: bytes) -> None:
        if full.parent not in self.folders:
            full.parent.mkdir(parents=True, exist_ok=True)
            self.folders.add(full.parent)
        write_atomic(full, data)


def _keep_freed_memory() -> None:
    """Have glibc keep freed memory for reuse instead of handing it back to the kernel at once.

    Rendering allocates and frees large numpy temporaries all the time (a 10 s clip is 1.3 MB as float64);
    with glibc's defaults each comes from fresh pages: the default build took 1.6 million page faults (a
    fifth of its CPU time, more with workers faulting in parallel), and 50 thousand with this. Without
    glibc nothing changes."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    mallopt(M_TRIM_THRESHOLD, KEEP_FREED_BYTES)
    mallopt(M_TOP_PAD, TOP_PAD_BYTES)


_WORKER: _Worker | None = None
_DONE = None  # multiprocessing.Value: episodes the workers have finished, for the progress bar


def _init_worker(root: Path, options: BuildOptions, done=None) -> None:
    global _WORKER, _DONE
    _keep_freed_memory()
    _WORKER = _Worker(root, options)
    _DONE = done


def _run_job(job: Job) -> list[UnitResult]:
    assert _WORKER is not None and _DONE is not None
    results = []
    for unit in job.units:
        results.append(_WORKER.run(unit))
        with _DONE.get_lock():
            _DONE.value += unit.stop - unit.start
    return results


def _render_units(
    root: Path, options: BuildOptions, jobs: list[Job], workers: int, progress: bool
) -> list[UnitResult]:
    total = sum(u.stop - u.start for job in jobs for u in job.units)
    with tqdm(total=total, desc="building", unit="episode", disable=None if progress else True) as bar:
        if workers <= 1:
            return _render_here(root, options, jobs, bar)
        return _render_in_pool(root, options, jobs, workers, bar)


def _render_here(root: Path, options: BuildOptions, jobs: list[Job], bar: tqdm) -> list[UnitResult]:
    _init_worker(root, options)
    assert _WORKER is not None
    results = []
    for unit in (u for job in jobs for u in job.units):
        results.append(_WORKER.run(unit))
        bar.update(unit.stop - unit.start)
    return results


def _render_in_pool(
    root: Path, options: BuildOptions, jobs: list[Job], workers: int, bar: tqdm
) -> list[UnitResult]:
    """Jobs to worker processes as they become free; the bar follows the episodes done inside jobs.

    A worker that dies (the out-of-memory killer, a signal of its own, a failing start) fails the build at
    once: ``multiprocessing.Pool`` would replace it and wait for its job forever. On any way out (a signal
    to the command included) no worker outlives the build."""
    context = multiprocessing.get_context("fork")
    done = context.Value("q", 0)
    before = set(multiprocessing.active_children())
    pool = ProcessPoolExecutor(workers, context, _init_worker, (root, options, done))
    started: set[multiprocessing.process.BaseProcess] = set()
    results: list[UnitResult] = []
    try:
        pending = {pool.submit(_run_job, job) for job in jobs}
        started = set(multiprocessing.active_children()) - before  # all forked at the first submit
        while pending:
            finished, pending = wait(pending, timeout=PROGRESS_SECONDS, return_when=FIRST_COMPLETED)
            # read past its lock: a worker killed while holding it would leave this waiting forever
            bar.update(done.get_obj().value - bar.n)
            for future in finished:
                results += future.result()
    except BrokenProcessPool as broken:
        raise WorkerDied(
            f"{_how_workers_ended(started)}; the episodes it was writing are not in {root}: "
            "run the same command again: it resumes"
        ) from broken
    except BaseException:
        for process in started:
            process.terminate()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return results


def _how_workers_ended(workers: set[multiprocessing.process.BaseProcess]) -> str:
    """Which build worker ended, and how, for the error of a broken pool."""
    for process in workers:
        process.join(timeout=PROGRESS_SECONDS)
    ended = [p for p in workers if p.exitcode not in (None, 0)]
    if not ended:
        return "a build worker process ended before its job was done"
    process = min(ended, key=lambda p: p.pid)
    if process.exitcode < 0:
        name = signal.Signals(-process.exitcode).name
        why = f"was killed by {name}" + (" (the out-of-memory killer sends it)" if name == "SIGKILL" else "")
    else:
        why = f"exited with status {process.exitcode}"
    return f"build worker process {process.pid} {why}"


# --------------------------------------------------------------------------------------------- output folder


def corpora_json(corpora: tuple[SourceUse, ...]) -> dict[str, dict | None]:
    """Kind → the fetched corpus's record (title, licence, files with sha256), or None for a folder that no
    ``fetch-sources`` record describes: for ``build.json`` and ``manifest.json``."""
    return {use.kind: use.record.to_json() if use.record else None for use in corpora}


def _state(options: BuildOptions, corpora: tuple[SourceUse, ...] = ()) -> dict:
    state = {"tool": "audioicl", "version": __version__, "options": options.to_json()}
    if corpora:
        state["corpora"] = corpora_json(corpora)
    return state


def _differences(old: dict, new: dict) -> list[str]:
    old_options, new_options = old.get("options", {}), new["options"]
    diffs = [
        f"{key}: {old_options.get(key)!r} there, {value!r} now"
        for key, value in new_options.items()
        if old_options.get(key) != value
    ]
    if old.get("version") != new["version"]:
        diffs.append(f"audioicl version: {old.get('version')!r} there, {new['version']!r} now")
    if old.get("corpora") != new.get("corpora"):
        diffs.append("the real corpora (their records or checksums) differ")
    return diffs


def prepare_output(root: Path, options: BuildOptions, corpora: tuple[SourceUse, ...] = ()) -> bool:
    """Create ``root`` and record the options; returns True when resuming an earlier build with the same
    options (and corpora). Refuses a non-empty folder that holds anything else."""
    state_path = root / STATE_NAME
    state = _state(options, corpora)
    check_output(root, "--out", folder=True)
    if root.is_dir() and any(root.iterdir()):
        if not state_path.is_file():
            raise AudioICLError(
                f"--out is not empty and holds no earlier build ({STATE_NAME} missing); "
                "give an empty or new folder",
                file=str(root),
            )
        try:
            recorded = json.loads(state_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise AudioICLError(f"unreadable build state: {exc}", file=str(state_path)) from exc
        diffs = _differences(recorded if isinstance(recorded, dict) else {}, state)
        if diffs:
            raise AudioICLError(
                "--out holds a build with other options (" + "; ".join(diffs) + "); give a new folder or "
                "the same options",
                file=str(root),
            )
        for stray in (root / "data").rglob(f".*{TMP_SUFFIX}"):  # left by an interrupted build of ours
            stray.unlink()
        return True
    root.mkdir(parents=True, exist_ok=True)
    write_atomic(state_path, json.dumps(state, indent=1, ensure_ascii=False) + "\n")
    return False


# --------------------------------------------------------------------------------------------- the build


def check_options(options: BuildOptions) -> None:
    if options.episodes < 1:
        raise AudioICLError(f"--episodes must be at least 1, got {options.episodes}")
    if not options.shots or min(options.shots) < 0:
        raise AudioICLError("--k needs one or more shot counts >= 0")
    if not options.tasks:
        raise AudioICLError("no tasks to build")
    for name in options.tasks:
        spec = TASKS.get(name)
        if spec.generator is None:
            raise AudioICLError(f"task {name} has no generator")
        spec.generator.check(options)


def normalized(options: BuildOptions) -> BuildOptions:
    """Tasks in benchmark order (all of them when none are named), shots sorted and unique."""
    tasks = options.tasks or tuple(task_names())
    for name in tasks:
        TASKS.get(name)  # unknown names raise with the list of known ones
    order = {name: i for i, name in enumerate(task_names())}
    return dataclasses.replace(
        options,
        shots=tuple(sorted(set(options.shots))),
        tasks=tuple(sorted(set(tasks), key=order.__getitem__)),
        sources=tuple(sorted(options.sources)),
    )


def _work_units(options: BuildOptions) -> list[WorkUnit]:
    """The shared files of each task, then its episodes in batches of the task's ``batch`` size."""
    units = [WorkUnit(task, 0, 0) for task in options.tasks]
    for task in options.tasks:
        size = TASKS.get(task).generator.batch
        units += [
            WorkUnit(task, i, min(i + size, options.episodes)) for i in range(0, options.episodes, size)
        ]
    return units


def _jobs(options: BuildOptions, workers: int) -> list[Job]:
    """The work units grouped by task family; a family is cut into episode ranges only when it is more than
    a worker's share of the build (so that no worker waits at the end), and the largest jobs go first."""
    by_family: dict[str, list[WorkUnit]] = defaultdict(list)
    for unit in _work_units(options):
        by_family[TASKS.get(unit.task).family].append(unit)

    def cost(units: list[WorkUnit]) -> float:
        return sum((u.stop - u.start) * TASKS.get(u.task).generator.cost_ms for u in units)

    share = sum(cost(units) for units in by_family.values()) / max(1, workers)
    jobs = []
    for family, units in by_family.items():
        pieces = min(options.episodes, max(1, math.ceil(cost(units) / share)))
        bounds = [round(i * options.episodes / pieces) for i in range(pieces + 1)]
        for start, stop in itertools.pairwise(bounds):
            mine = [u for u in units if start <= u.start < stop]
            if mine:
                jobs.append(Job(family, start, stop, tuple(mine), cost(mine)))
    return sorted(jobs, key=lambda job: -job.cost_ms)


def _collect_files(results: list[UnitResult]) -> dict[str, FileRecord]:
    """Every file once, checking that workers which met the same shared file made the same bytes."""
    files: dict[str, FileRecord] = {}
    for result in results:
        for record in result.files:
            known = files.setdefault(record.path, record)
            if (known.sha256, known.transcript) != (record.sha256, record.transcript):
                raise RuntimeError(
                    f"{record.path} was rendered with two different contents (non-deterministic)"
                )
    return files


def _answer_labels(episode: Episode, labels: LabelSpace) -> list[str]:
    """Every label of the task's answer kind an episode shows or asks for (an AnomalyDetect demo has two,
    an AudioRemap demo one: its A/B letters are not answers)."""
    shown = [c.label for d in episode.demos for c in d.clips if c.label is not None and c.label in labels]
    return [*shown, episode.query.label]


def _task_stats(name: str, results: list[UnitResult]) -> TaskStats:
    spec = TASKS.get(name)
    generator = spec.generator
    episodes = sorted((e for r in results for e in r.episodes), key=lambda e: e.id)
    records = {f.path: f for r in results for f in r.files}
    seconds = [f.seconds for f in records.values()]
    return TaskStats(
        name=name,
        first_id=episodes[0].id,
        last_id=episodes[-1].id,
        episodes=len(episodes),
        query_labels=Counter(e.query.label for e in episodes),
        all_labels=Counter(label for e in episodes for label in _answer_labels(e, spec.labels)),
        files=len(records),
        seconds_min=min(seconds),
        seconds_max=max(seconds),
        seconds_total=sum(seconds),
        recipe=generator.recipe,
        differences=generator.differences,
    )


def _write_meta_files(root: Path, options: BuildOptions, episodes: list[Episode]) -> list[str]:
    paths = []
    for k in options.shots:
        path = f"{META_DIR}/meta_k{k}.jsonl"
        write_meta(root / path, (episode.with_shots(k) for episode in episodes))
        paths.append(path)
    return paths


def _render_and_record(
    root: Path, options: BuildOptions, corpora: tuple[SourceUse, ...], workers: int, progress: bool
) -> dict[str, Any]:
    """Render every unit (resuming what is on disk), then write the meta files, the card and the manifest;
    what ``BuildSummary`` says of them."""
    # Workers finish in any order; everything below (file order, float sums in the manifest and card) must not.
    results = sorted(
        _render_units(root, options, _jobs(options, workers), workers, progress),
        key=lambda r: (TASKS.get(r.unit.task).order, r.unit.start, r.unit.stop),
    )

    files = _collect_files(results)
    episodes = sorted((e for r in results for e in r.episodes), key=lambda e: e.id)
    meta_paths = _write_meta_files(root, options, episodes)
    transcripts = {f.path: f.transcript for f in files.values() if f.transcript is not None}
    meta_paths.append(write_sidecar(root, transcripts))
    by_task: dict[str, list[UnitResult]] = defaultdict(list)
    for result in results:
        by_task[result.unit.task].append(result)
    stats = [_task_stats(name, by_task[name]) for name in options.tasks]

    entries = [FileEntry(f.path, f.sha256, f.bytes) for f in files.values()]
    entries += [file_entry(root, path) for path in meta_paths]
    audio_seconds = sum(f.seconds for f in files.values())
    totals = {
        "episodes": len(episodes),
        "audio_files": len(files),
        "audio_seconds": round(audio_seconds, 3),
        "files": len(entries),
        "bytes": sum(e.bytes for e in entries),
    }
    digest = fingerprint(entries)
    write_atomic(root / CARD_NAME, render_card(options, stats, digest, corpora))
    write_manifest(root, options.to_json(), entries, totals, corpora_json(corpora) if corpora else None)
    return {
        "episodes": len(episodes),
        "audio_files": len(files),
        "rendered": sum(r.rendered for r in results),
        "audio_seconds": audio_seconds,
        "bytes": totals["bytes"],
        "fingerprint": digest,
    }


def build(
    out: str | os.PathLike, options: BuildOptions, workers: int = 1, progress: bool = False
) -> BuildSummary:
    """Build (or complete) the dataset in ``out``; the result does not depend on ``workers``."""
    started = time.perf_counter()
    options = normalized(options)
    check_options(options)
    SoundSources.create(options.seed, options.sources)  # a bad corpus folder fails here, before any output
    corpora = provenance(options.sources)
    root = Path(out).resolve()
    check_output(root, "--out", folder=True)
    root.parent.mkdir(parents=True, exist_ok=True)
    # one build per folder: a second, with other options or the same, is refused naming the first's process
    # (two at once mixed both seeds' files); the lock is ``<root>.lock`` beside the folder, not in the dataset
    with FileLock(root):
        prepare_output(root, options, corpora)
        made = _render_and_record(root, options, corpora, workers, progress)
    return BuildSummary(root=root, wall_seconds=time.perf_counter() - started, corpora=corpora, **made)
