"""Run a backend over a dataset: select episodes, build prompts, batch, and append results (SPEC §3).

For every k it writes ``<model>_results_k<k>.jsonl`` into the output folder, where ``<model>`` is the last
path component of the model name (``builtin:random`` → ``random``, ``hf:Qwen/Qwen2-Audio-7B-Instruct`` →
``Qwen2-Audio-7B-Instruct``) unless a name is given. The log is append-only: ids already in it are skipped
(the original's resume rule), a half-written last line is cut off first, and a lock file keeps a second run
from writing the same file. With ``--shard i/n`` (1-based) a run takes the episodes whose id hashes to
shard i and writes into ``OUT/shard-i-of-n/``; ``audioicl merge`` joins the shard folders (scoring the
parent folder also works, it counts same-named files together).

``<model>_run.json`` next to the results files records the model's data root, dataset fingerprint and the
settings that change what a line says. Several models share a folder, and one model may be run again for
other k, other tasks, another ``--limit`` or ``--batch-size`` (each run's selection is added to the record);
a run whose settings differ from the record is refused, naming each setting that differs.

k = 0 without a k = 0 meta file asks the queries of the smallest k file zero-shot (instruction and query).
A study condition (``control``: a ``controls`` transformation of every prompt; ``probe``: the perception
probes at k = 0) is part of the settings and of the model name, ``<model>+<condition>``, so its files sit
beside the plain run's.

Before a folder is created or a backend loaded, ``preflight`` checks the run: the options, the data root,
every clip of the selection (missing clips are counted and refuse the run, unless ``allow_missing_audio``: a
partial dataset such as the release), the output folder (writable, outside the dataset root) and the model.
An episode whose audio cannot be read (missing, with ``allow_missing_audio``), or has a clip longer than the
backend accepts, gets a line with ``status: "error"`` and the reason; it is never skipped. Error lines stay in
the log (a rerun reports them) unless ``retry_errors`` removes them first so that their episodes run again.

With ``draws``, ``orders`` or ``prompt_variants`` above 1 (``prompts.draws``, ``prompts.sets.prompt_variants``)
each episode is asked in every presentation (demonstration draw x demo order x instruction variant), each its
own line in the same log with its ``draw``, ``order`` and ``variant`` fields (only those asked for above 1); a
line's identity for resume and retries is (id, draw, order, variant), absent fields being 0, so a plain run's
lines are draw 0 of a later ``--draws 3`` run, which adds only draws 1 and 2.

A write the system refuses (a full disk) stops the run with ``WriteFailed``, the results file cut back to its
last whole line; a signal (``stopping``) stops it after the window in hand, raising ``Stopped``. Either way the
logs are closed, the run record gets the outcome and the locks are released; the same command resumes.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from audioicl.backends import Backend, load_backend
from audioicl.backends.base import (
    BackendUnreachable,
    GenerationConfig,
    GenerationStopped,
    Prefetching,
    Request,
    Response,
    Workload,
    check_model,
)
from audioicl.backends.families.registry import declared_clip_limit
from audioicl.dataset.meta import check_dataset_root, find_meta_files, iter_meta, k_of, resolve_audio_path
from audioicl.dataset.sidecar import Sidecar, load_sidecar
from audioicl.errors import AudioICLError, refuse_duplicate_ids
from audioicl.files import FileLock, check_output, create_folder, remove_empty_folders
from audioicl.prompts.build import Prompt, build_prompt
from audioicl.prompts.chat import CONTINUATION, AudioPart, Chat, render_text
from audioicl.prompts.clips import MORSE_TASK, ClipStore, load_morse_bank, pad_chats
from audioicl.prompts.controls import CONTROLS, Control, ControlContext, swap_partners
from audioicl.prompts.draws import Variation, demo_pool, present
from audioicl.prompts.probes import PROBE_SET, probe
from audioicl.prompts.sets import PromptSet, load_prompt_set, prompt_variants, system_family
from audioicl.records import Demo, Episode, Result
from audioicl.registry import unknown_name
from audioicl.tasks import TASKS

from .options import RUN_ORDERS, Report, RunOptions, RunOrder, Shard
from .progress import Progress
from .record import (
    dataset_label,
    new_run_record,
    other_datasets,
    timed_run,
    update_run_record,
    with_backend,
)
from .results import LineKey, ResultsLog, drop_error_lines, restore_order, results_name
from .stopping import StopRequest

T = TypeVar("T")


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


@dataclass
class KSummary:
    k: int
    path: Path
    selected: int = 0
    written: int = 0
    skipped: int = 0  # already in the file
    errors: int = 0  # error lines written by this run
    earlier_errors: int = 0  # error lines already in the file for selected episodes (kept)
    retried: int = 0  # error lines removed from the file (retry_errors) so their episodes ran again
    repaired: str | None = None

    def line(self) -> str:
        text = f"k={self.k}: {self.written} written ({self.errors} errors), {self.skipped} skipped as already done"
        if self.retried:
            text += f", {self.retried} earlier error lines removed to retry"
        text += f" -> {self.path}"
        if self.earlier_errors:
            text += (
                f" [{self.earlier_errors} error lines from an earlier run; --retry-errors runs them again]"
            )
        return text


# where the runner's own time goes, in the run record (``timing.runner_spent``): waiting for a window's prompts
# to be prepared (the preparing thread behind), inside the backend's call for a window (with its result lines
# made), writing them (fsynced); and at the end, putting each k's lines back in the meta order (``restoring_order``)
RUNNER_PHASES = ("waited_for_prompts", "in_backend", "writing")


@dataclass(frozen=True)
class RunSummary:
    ks: tuple[KSummary, ...]
    waited_s: float = 0.0  # the backend idle, waiting for the next window's preparation (``prepare_window``)

    @property
    def errors(self) -> int:
        return sum(s.errors + s.earlier_errors for s in self.ks)


# --------------------------------------------------------------------------- selecting episodes


def _read_episodes(path: Path) -> list[Episode]:
    entries = list(iter_meta(path))
    refuse_duplicate_ids(((e.episode.id, e.line) for e in entries), str(path), "; results are keyed by id")
    return [entry.episode for entry in entries]


def select_episodes(
    episodes: Sequence[Episode],
    tasks: Sequence[str] | None = None,
    limit: int | None = None,
    shard: Shard | None = None,
) -> list[Episode]:
    """Episodes in file order: of ``tasks`` (all if None), the first ``limit`` of each task, then the shard's."""
    chosen: list[Episode] = []
    per_task: dict[str, int] = {}
    for ep in episodes:
        if tasks is not None and ep.task not in tasks:
            continue
        per_task[ep.task] = per_task.get(ep.task, 0) + 1
        if limit is not None and per_task[ep.task] > limit:
            continue
        if shard is None or shard.holds(ep.id):
            chosen.append(ep)
    return chosen


def _check_tasks(tasks: Sequence[str], found: set[str]) -> None:
    known = set(TASKS.names()) | found
    unknown = [t for t in tasks if t not in known]
    if unknown:
        raise AudioICLError("; ".join(unknown_name("task", t, sorted(known)) for t in unknown))


def zero_shot_source(found: Mapping[int, Path]) -> Path | None:
    """The k file whose queries make k = 0 when the dataset has no k = 0 file: the smallest k >= 1."""
    shots = [k for k in found if k > 0]
    return found[min(shots)] if shots else None


def _meta_files(options: RunOptions) -> dict[int, Path]:
    """The meta file each k reads. k = 0 without a k = 0 file reads the smallest k >= 1 and drops the demos
    (zero-shot: instruction and query); so do probes, which run at k = 0."""
    found = find_meta_files(options.data)
    if options.probe:
        source = zero_shot_source(found)
        if source is None:
            raise AudioICLError("--probe needs a meta file with k >= 1", file=str(options.data))
        return {0: source}
    if options.shots is None:
        return found
    if 0 in options.shots and 0 not in found and (source := zero_shot_source(found)) is not None:
        found = {0: source, **found}
    missing = [k for k in options.shots if k not in found]
    if missing:
        have = ", ".join(map(str, found)) or "none"
        raise AudioICLError(
            f"the dataset has no meta file for k={', '.join(map(str, missing))} (has k={have})",
            file=str(options.data),
        )
    return {k: found[k] for k in options.shots}


# --------------------------------------------------------------------------- prompts and lines


def audio_sha256(chat: Chat) -> str:
    """Digest of the audio the model hears: over each part's content digest (``AudioPart.digest``, a hash
    of its rate and float32 samples), in order."""
    digest = hashlib.sha256()
    for part in chat.audio_parts():
        digest.update(part.digest.encode())
    return digest.hexdigest()


def _too_long(prompt: Prompt, limit: float | None) -> str | None:
    if limit is None:
        return None
    for item, path in zip(prompt.chat.items, prompt.audio_paths, strict=True):
        if item.audio is not None and item.audio.seconds > limit:
            return f"clip {path} is {item.audio.seconds:.2f} s long; the backend accepts at most {limit:g} s"
    return None


@dataclass(frozen=True)
class Work:
    """One line to write: an episode as its k file has it, or (``variation``) in another presentation, its
    demos already drawn and ordered (``prompts.draws.present``); ``fields``: the variation fields the line
    carries (those the run asks for more than one of)."""

    k: int
    episode: Episode
    variation: Variation = Variation()
    fields: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.episode.id}@k{self.k}{self.variation.key_suffix}"

    @property
    def line_key(self) -> LineKey:
        return LineKey(self.episode.id, self.variation)


@dataclass
class PreparedWork:
    work: Work
    prompt: Prompt | None
    error: str | None


@dataclass(frozen=True)
class StudySetup:
    """What a study condition adds to a run: the control, the swapped-query partners per k, the built
    transcripts, and episodes that get an error line instead of a prompt (a probe without its answer)."""

    control: Control | None = None
    partners: Mapping[int, Mapping[str, Episode]] = field(default_factory=dict)
    sidecar: Sidecar | None = None
    problems: Mapping[str, str] = field(default_factory=dict)


@dataclass
class PromptMaker:
    """Turns work into prompts for one backend and prompt configuration; clips are decoded once while
    they stay in ``clips`` (an episode's k files are visited together, so its clips are shared)."""

    options: RunOptions
    prompt_set: PromptSet
    family: str
    bank: tuple[AudioPart, ...]
    clips: ClipStore
    max_clip_seconds: float | None
    study: StudySetup = field(default_factory=lambda: StudySetup())
    variants: tuple[PromptSet, ...] = ()  # instruction variants 1.. (``prompt_variants``); 0 is prompt_set

    def prepare(self, work: Work) -> PreparedWork:
        problem = self.study.problems.get(work.episode.id)
        if problem is not None:
            return PreparedWork(work, None, problem)
        try:
            prompt = build_prompt(
                work.episode,
                self.clips,
                style=self.options.style,
                layout=self.options.layout,
                family=self.family,
                prompt_set=self.variants[work.variation.variant - 1]
                if work.variation.variant
                else self.prompt_set,
                bank=self.bank,
            )
            if self.study.control is not None:
                context = ControlContext(
                    self.options.seed,
                    work.episode,
                    self.clips,
                    self.study.partners.get(work.k, {}).get(work.episode.id),
                    self.study.sidecar,
                )
                prompt = self.study.control.apply(prompt, context)
        except AudioICLError as exc:
            return PreparedWork(work, None, str(exc))
        error = _too_long(prompt, self.max_clip_seconds)
        return PreparedWork(work, None if error else prompt, error)


def _line(work: Work, model: str, fields: dict[str, Any]) -> Result:
    response = fields.pop("response")
    extra = {
        **fields,
        "k": work.k,
        "model": model,
        **{name: getattr(work.variation, name) for name in work.fields},
    }
    return Result(work.episode.id, work.episode.task, response, work.episode.query.label, extra)


def ok_line(work: Work, model: str, prompt: Prompt, chat: Chat, response: Response, seconds: float) -> Result:
    """The line of an answered prompt; ``chat`` is what the backend got (``prompt.chat``, maybe padded)."""
    text = render_text(chat)
    fields = {
        "response": response.text.strip() if isinstance(response.text, str) else None,
        "status": "ok",
        "error": None,
        "seconds": round(seconds, 6),
        "usage": response.usage.to_json(),
        "prompt_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "audio_sha256": audio_sha256(chat),
        "prompt": text,
        "audio_paths": list(prompt.audio_paths),
    }
    return _line(work, model, fields)


def error_line(work: Work, model: str, error: str, prompt: Prompt | None = None) -> Result:
    fields = {
        "response": None,
        "status": "error",
        "error": error,
        "seconds": None,
        "usage": {},
        "prompt_sha256": None,
        "audio_sha256": None,
        "prompt": None,
        "audio_paths": list(prompt.audio_paths) if prompt else [c.audio_path for c in work.episode.clips()],
    }
    return _line(work, model, fields)


# --------------------------------------------------------------------------- one window of work


WINDOW_BATCHES = 4  # a backend call holds this many batches by default, so a backend can sort by length
# The first calls hold fewer batches (1, then 2): nothing overlaps the first window's preparation (a
# backend's feature extraction), so a short first window starts the model sooner; each next window is
# prepared while the one before it runs, the smaller window giving the larger one's preparation time. A
# small window sorts fewer prompts by length, so its batches pad more (docs/measurements.md weighs both).
RAMP_BATCHES = (1, 2)
# Windows prepared ahead of the one being answered: with one, a window whose preparation takes longer than the
# window before it takes to answer keeps the model waiting (the hf backend's preparation encodes each window's
# new clips, and windows differ in how many they hold); with two, a quick window's slack serves the next.
LOOKAHEAD_WINDOWS = 2
FAILED_WINDOWS_LIMIT = 3  # windows in a row whose whole call raised: the run stops instead of going on
# (a call that raises BackendUnreachable, no request having reached a server, stops the run at once)


def _generate(
    backend: Backend, requests: list[Request], config: GenerationConfig
) -> tuple[list[Response | None], str | None]:
    """The backend's responses, or (when the call itself raised) one error response per request and the
    error's text. A wrong number of responses is a bug in the backend and stops the run, and so does a
    backend that could not be reached (``BackendUnreachable``): the window gets no lines, a rerun asks it.
    A call stopped by a signal (``GenerationStopped``) gives None for each request it did not answer."""
    try:
        responses = backend.generate(requests, config)
    except GenerationStopped as stopped:
        return [stopped.answered.get(index) for index in range(len(requests))], None
    except BackendUnreachable as exc:
        raise AudioICLError(
            f"backend {backend.name}: {exc}; stopped, nothing written for the last {len(requests)} prompts "
            "(the same command resumes)"
        ) from exc
    except Exception as exc:  # one failed call becomes error lines; the caller stops after several
        error = f"backend {backend.name} failed: {type(exc).__name__}: {exc}"
        return [Response.failed(error) for _ in requests], error
    if len(responses) != len(requests):
        raise RuntimeError(f"backend {backend.name} returned {len(responses)} responses for {len(requests)}")
    return list(responses), None


@dataclass
class PreparedWindow:
    """A window's prompts, built: every work item's prepared prompt (or its problem), and the requests of
    those that have one, their chats padded as the run asks."""

    prepared: list[PreparedWork]
    ok: list[PreparedWork]
    chats: list[Chat]
    requests: list[Request]


def prepare_window(
    maker: PromptMaker, backend: Backend, window: Sequence[Work], config: GenerationConfig
) -> PreparedWindow:
    """Build ``window``'s prompts, and let a backend that can (``prefetch``) prepare its own side of them
    for ``config``: the runner does this for the windows ahead while the backend answers the current one."""
    prepared = [maker.prepare(work) for work in window]
    ok = [p for p in prepared if p.prompt is not None]
    chats = pad_chats([p.prompt.chat for p in ok if p.prompt is not None], maker.options.pad)
    requests = [
        Request(p.work.key, p.work.episode.id, p.work.episode.task, p.work.k, chat)
        for p, chat in zip(ok, chats, strict=True)
    ]
    if isinstance(backend, Prefetching) and requests:
        with contextlib.suppress(Exception):  # ahead of time only: generate prepares again, and reports
            backend.prefetch(requests, config)
    return PreparedWindow(prepared, ok, chats, requests)


def prepared_ahead(
    pool: ThreadPoolExecutor,
    maker: PromptMaker,
    backend: Backend,
    parts: Sequence[Sequence[Work]],
    config: GenerationConfig,
) -> Iterator[tuple[Sequence[Work], PreparedWindow, float]]:
    """Each window of ``parts``, its preparation (``prepare_window``) and the seconds waited for it: ``pool``
    prepares ``LOOKAHEAD_WINDOWS`` windows ahead of the one handed out; those not begun when the caller stops
    (closes this) are cancelled."""
    upcoming = deque(
        pool.submit(prepare_window, maker, backend, part, config) for part in parts[:LOOKAHEAD_WINDOWS]
    )
    try:
        for index, window in enumerate(parts):
            waiting = time.perf_counter()
            built = upcoming.popleft().result()
            waited = time.perf_counter() - waiting
            if index + LOOKAHEAD_WINDOWS < len(parts):
                later = parts[index + LOOKAHEAD_WINDOWS]
                upcoming.append(pool.submit(prepare_window, maker, backend, later, config))
            yield window, built, waited
    finally:
        for future in upcoming:
            future.cancel()


def run_window(
    maker: PromptMaker,
    backend: Backend,
    config: GenerationConfig,
    window: Sequence[Work],
    built: PreparedWindow | None = None,
) -> tuple[list[Result], str | None]:
    """Result lines for ``window`` (in its order) and the error of a backend call that raised, if any.
    ``built``: the window already prepared (``prepare_window``). A call stopped by a signal gives no line
    for the prompts it did not answer (the rerun asks them)."""
    model = str(maker.options.model)
    built = built or prepare_window(maker, backend, window, config)
    requests = built.requests
    started = time.perf_counter()
    responses, call_error = _generate(backend, requests, config) if requests else ([], None)
    # each line's share of the call (a batched call has no per-prompt latency): documented in docs/cli.md
    seconds = (time.perf_counter() - started) / max(len(requests), 1)
    answered = {
        id(p): (chat, response) for p, chat, response in zip(built.ok, built.chats, responses, strict=True)
    }
    results = []
    for p in built.prepared:
        if id(p) not in answered:
            results.append(error_line(p.work, model, p.error or "unknown error"))
            continue
        chat, response = answered[id(p)]
        if response is None:  # not answered: the call was stopped
            continue
        if response.error is not None:
            results.append(error_line(p.work, model, response.error, p.prompt))
        else:
            assert p.prompt is not None
            results.append(ok_line(p.work, model, p.prompt, chat, response, seconds))
    return results, call_error


# --------------------------------------------------------------------------- the run


def windows(
    items: Sequence[T],
    sizes: int | Sequence[int],
    whole_episodes: bool = False,
    episode_of: Callable[[T], str] = lambda work: work.episode.id,
) -> Iterator[Sequence[T]]:
    """``items`` (the runner's ``Work``; ``episode_of`` says whose episode another item is) in windows of
    ``sizes`` (one size, or the sizes of the first windows, the last one repeated); with ``whole_episodes``,
    a window runs on to the end of the episode it would cut (episode-major order keeps an episode's k
    prompts next to each other), so the prompts that share a prefix reach the backend together."""
    sizes = (sizes,) if isinstance(sizes, int) else tuple(sizes)
    next_sizes = itertools.chain(sizes, itertools.repeat(sizes[-1]))
    start = 0
    while start < len(items):
        end = min(start + next(next_sizes), len(items))
        while whole_episodes and end < len(items) and episode_of(items[end]) == episode_of(items[end - 1]):
            end += 1
        yield items[start:end]
        start = end


def window_sizes(options: RunOptions) -> tuple[int, ...]:
    """Prompts per backend call: one batch with ``--pad batch`` (the original's one batch per call, each
    padded to its longest clip); ``--window`` as given; else ``WINDOW_BATCHES`` batches, after first windows
    of ``RAMP_BATCHES``."""
    if options.pad == "batch":
        return (options.batch_size,)
    if options.window is not None:
        return (options.window,)
    return tuple(options.batch_size * batches for batches in (*RAMP_BATCHES, WINDOW_BATCHES))


def order_work(pending: Mapping[int, Sequence[Work]], order: RunOrder) -> list[Work]:
    """``k``: all of k=1's work, then k=2's ... ``episode``: each episode's k lines together, episodes
    in the order they first appear in the k files (smallest k first), so the clips and prompt prefixes
    that an episode's k files share are handled together; an episode's presentations in order, its k
    lines together (draw j at k = 2 is a prefix of draw j at k = 5)."""
    work = [item for k in sorted(pending) for item in pending[k]]
    if order == "k":
        return work
    first_seen: dict[str, int] = {}
    for item in work:
        first_seen.setdefault(item.episode.id, len(first_seen))
    return sorted(work, key=lambda item: (first_seen[item.episode.id], item.variation, item.k))


def workload(
    selected: Mapping[int, Sequence[Episode]], bank: Sequence[AudioPart], layout: str = "original"
) -> Workload:
    """What the selected episodes will ask: their number, the most clips one prompt holds, and whether
    ``layout`` makes chats."""
    counts = [prompt_clips(ep, bank) for episodes in selected.values() for ep in episodes]
    return Workload(len(counts), max(counts, default=0), chats=layout != CONTINUATION)


def _validate(options: RunOptions) -> None:
    if options.batch_size < 1:
        raise AudioICLError(f"--batch-size must be at least 1, got {options.batch_size}")
    if options.max_new_tokens < 1:
        raise AudioICLError(f"--max-new-tokens must be at least 1, got {options.max_new_tokens}")
    if options.limit is not None and options.limit < 1:
        raise AudioICLError(f"--limit must be at least 1, got {options.limit}")
    if "seed" in options.backend_options:
        raise AudioICLError("set the seed with --seed, not as a backend option")
    if options.window is not None and options.window < 1:
        raise AudioICLError(f"--window must be at least 1, got {options.window}")
    if options.order not in RUN_ORDERS:
        raise AudioICLError(f"--order must be one of {', '.join(RUN_ORDERS)}, got {options.order!r}")
    if options.control is not None:
        CONTROLS.get(options.control)  # an unknown name raises, listing the known ones
    if options.probe and options.control is not None:
        raise AudioICLError("--probe and --control are separate conditions: run them one at a time")
    if options.probe and options.shots not in (None, (0,)):
        raise AudioICLError("--probe runs at k = 0 only (each query clip asked zero-shot); drop --k")
    if options.probe and options.style != "specific":
        raise AudioICLError("--probe asks its own question; --style does not apply")
    for flag, count in (("--draws", options.draws), ("--orders", options.orders)):
        if count < 1:
            raise AudioICLError(f"{flag} must be at least 1, got {count}")
    if options.probe and options.variations.varied:
        raise AudioICLError(
            "--probe asks each query zero-shot; --draws, --orders and --prompt-variants do not apply"
        )
    if options.style == "none" and options.prompt_variants > 1:
        raise AudioICLError("--style none shows no instruction; --prompt-variants has nothing to vary")


def _study_episodes(
    options: RunOptions, metas: Mapping[int, Path], sidecar: Sidecar | None
) -> tuple[dict[int, list[Episode]], StudySetup]:
    """Each k's episodes as the condition asks for them (k = 0 read from a k >= 1 file without its demos; a
    probe per episode), and what the condition needs to make its prompts."""
    episodes: dict[int, list[Episode]] = {}
    partners: dict[int, dict[str, Episode]] = {}
    problems: dict[str, str] = {}
    for k, path in metas.items():
        read = _read_episodes(path)
        if options.probe:
            probes = [probe(ep, sidecar) for ep in read]
            problems.update({p.episode.id: p.error for p in probes if p.error})
            read = [p.episode for p in probes]
        elif k == 0 and k_of(path) != 0:
            read = [ep.with_shots(0) for ep in read]
        if options.control == "swapped-query":
            # from the whole file: the same partner whatever the selection (--limit, --shard, --tasks)
            partners[k] = swap_partners(read, options.seed)
        episodes[k] = read
    control = CONTROLS.get(options.control) if options.control else None
    return episodes, StudySetup(control, partners, sidecar, problems)


# --------------------------------------------------------------------------- preflight

MISSING_SHOWN = 3  # missing clips named in the refusal


def _check_out(options: RunOptions) -> None:
    """Refuse an output folder that cannot be made or written, or one inside the dataset root."""
    check_output(options.out, "--out", folder=True)
    if options.folder != options.out:
        check_output(options.folder, "--out", folder=True)
    data, out = options.data.resolve(), options.out.resolve()
    if out.is_relative_to(data):
        raise AudioICLError(
            f"--out {options.out} is inside the dataset root {options.data}: results there would change the "
            "dataset; write them into a folder outside it"
        )


def missing_clips(data: Path, selected: Mapping[int, Sequence[Episode]]) -> tuple[list[str], int]:
    """The clips (``audio_path``, in the order first met) that the selected episodes name and the dataset
    lacks, and how many episodes (lines) need one of them."""
    missing: dict[str, None] = {}
    present: set[str] = set()
    lines = 0
    for episodes in selected.values():
        for ep in episodes:
            lacks = False
            for clip in ep.clips():
                rel = clip.audio_path
                if rel in present:
                    continue
                if rel not in missing:
                    try:
                        found = resolve_audio_path(data, rel).exists()
                    except AudioICLError:  # an absolute path or one leaving the root: its error line says so
                        found = True
                    if found:
                        present.add(rel)
                        continue
                    missing[rel] = None
                lacks = True
            lines += lacks
    return list(missing), lines


def _check_clips(options: RunOptions, selected: Mapping[int, Sequence[Episode]], report: Report) -> None:
    """Refuse a selection whose clips are not all there, counting them up front; ``allow_missing_audio``
    runs anyway (their episodes get error lines), saying how many."""
    missing, lines = missing_clips(options.data, selected)
    if not missing:
        return
    shown = ", ".join(missing[:MISSING_SHOWN]) + (", ..." if len(missing) > MISSING_SHOWN else "")
    what = f"{len(missing)} clip(s) that the selected episodes need are missing ({shown}): {lines} result line(s)"
    if options.allow_missing_audio:
        report(f"warning: {what} will be error lines naming the missing clip (--allow-missing-audio)")
        return
    raise AudioICLError(
        f"{what} would be error lines instead of answers; restore the clips, or pass --allow-missing-audio "
        "to run anyway (a partial dataset such as the release)",
        file=str(options.data),
    )


@dataclass(frozen=True)
class RunPlan:
    """What ``preflight`` read and checked: each k's meta file, the sidecar, each k's selected episodes and
    the work they make (each episode in each presentation the run asks), the study condition's setup, the
    prompt set (and its instruction variants 1..), the Morse bank, and the meta file draws take their pool
    from (None without draws)."""

    metas: Mapping[int, Path]
    sidecar: Sidecar | None
    selected: Mapping[int, list[Episode]]
    study: StudySetup
    prompt_set: PromptSet
    bank: tuple[AudioPart, ...]
    work: Mapping[int, list[Work]] = field(default_factory=dict)
    variants: tuple[PromptSet, ...] = ()
    pool_file: Path | None = None


def _pools(
    options: RunOptions, selected: Mapping[int, Sequence[Episode]], report: Report
) -> tuple[Path | None, dict[int, dict[str, tuple[Demo, ...]]]]:
    """The largest k meta file of the dataset and, per k, each selected episode's pool of demos
    (``prompts.draws.demo_pool``); an episode whose demos are not the first k of its record there (not
    nested) draws from its own demos, and is counted in a warning."""
    if options.draws == 1:
        return None, {}
    found = find_meta_files(options.data)
    largest_file = found[max(found)]
    largest = {ep.id: ep for ep in _read_episodes(largest_file)}
    pools: dict[int, dict[str, tuple[Demo, ...]]] = {}
    for k, episodes in selected.items():
        pools[k], own = {}, 0
        for ep in episodes:
            pool = demo_pool(ep, largest.get(ep.id))
            own += pool is None
            pools[k][ep.id] = ep.demos if pool is None else pool
        if own:
            report(
                f"warning: k={k}: {own} episode(s) are not the first {k} demos of their record in "
                f"{largest_file.name} (not nested); their draws re-order their own demos"
            )
    return largest_file, pools


def _plan_work(
    options: RunOptions,
    selected: Mapping[int, Sequence[Episode]],
    pools: Mapping[int, Mapping[str, tuple[Demo, ...]]],
) -> dict[int, list[Work]]:
    """Each k's work: every selected episode in every presentation (``options.variations``), in file order,
    an episode's presentations together."""
    variations = options.variations
    fields = variations.fields
    return {
        k: [
            Work(
                k,
                present(ep, pools.get(k, {}).get(ep.id, ep.demos), options.seed, variation),
                variation,
                fields,
            )
            for ep in episodes
            for variation in variations
        ]
        for k, episodes in selected.items()
    }


def preflight(
    options: RunOptions, report: Report = _stderr, *, model: Literal["import", "name", "none"] = "import"
) -> RunPlan:
    """Everything a run checks before it creates a folder or loads a backend: the options, the data root
    (meta files, not ``ROOT/meta``; every clip of the selection, unless ``allow_missing_audio``), the output
    folder (can be made and written, outside the dataset root) and the model (``model``: ``"import"``
    checks the kind, the checkpoint folder and the packages its module needs; ``"name"`` all but the
    packages; ``"none"`` nothing, for a backend already loaded)."""
    _validate(options)
    metas = _meta_files(options)
    check_dataset_root(options.data, metas)
    _check_out(options)
    if model != "none":
        check_model(options.model, import_kind=False)
    sidecar = load_sidecar(options.data) if options.control == "transcript" or options.probe else None
    episodes, study = _study_episodes(options, metas, sidecar)
    selected: dict[int, list[Episode]] = {}
    for k, read in episodes.items():
        if options.tasks is not None:
            _check_tasks(options.tasks, {ep.task for ep in read})
        selected[k] = select_episodes(read, options.tasks, options.limit, options.shard)
    prompt_set = _prompt_set(options)
    variants = prompt_variants(prompt_set, options.prompt_variants)[1:]
    bank = load_morse_bank(options.data, options.morse_bank)
    pool_file, pools = _pools(options, selected, report)
    work = _plan_work(options, selected, pools)
    _check_clips(options, shown_episodes(work), report)
    if model != "none":
        _check_clip_count(options, shown_episodes(work), bank, report)
    if model == "import":
        check_model(options.model)
    return RunPlan(metas, sidecar, selected, study, prompt_set, bank, work, variants, pool_file)


def prompt_clips(episode: Episode, bank: Sequence[AudioPart]) -> int:
    """The clips one prompt of ``episode`` holds: its demo and query clips, and the Morse bank's."""
    return sum(1 for _ in episode.clips()) + (len(bank) if episode.task == MORSE_TASK else 0)


def _check_clip_count(
    options: RunOptions, shown: Mapping[int, Sequence[Episode]], bank: Sequence[AudioPart], report: Report
) -> None:
    """Before loading: where the checkpoint's family takes fewer clips per prompt than some prompts hold,
    say which tasks and k (those prompts become error lines), or stop with ``--strict``."""
    declared = declared_clip_limit(options.model.backend, options.model.name)
    if declared is None or options.layout == "single-clip":
        return
    family, limit = declared
    over: dict[tuple[int, str], list[int]] = {}
    for k, episodes in shown.items():
        for episode in episodes:
            clips = prompt_clips(episode, bank)
            if clips > limit:
                over.setdefault((k, episode.task), []).append(clips)
    if not over:
        return
    cells = "; ".join(
        f"k={k} {task}: {len(counts)} prompts of up to {max(counts)} clips"
        for (k, task), counts in sorted(over.items())
    )
    message = f"{options.model} ({family.label}) takes at most {limit} clip(s) per prompt: {cells}"
    if options.strict:
        raise AudioICLError(f"{message} (--strict; --layout single-clip joins a prompt's clips into one)")
    report(f"warning: {message}; these prompts become error lines (--layout single-clip joins their clips)")


def shown_episodes(work: Mapping[int, Sequence[Work]]) -> dict[int, list[Episode]]:
    """Each k's episodes as the work shows them (drawn demos), for the clip check and the workload."""
    return {k: [item.episode for item in items] for k, items in work.items()}


def _prompt_set(options: RunOptions) -> PromptSet:
    prompt_set = load_prompt_set(options.prompts) if options.prompts else PromptSet()
    return replace(PROBE_SET, system=prompt_set.system) if options.probe else prompt_set


def run(
    options: RunOptions,
    report: Report = _stderr,
    backend: Backend | None = None,
    stop: StopRequest | None = None,
) -> RunSummary:
    """Run ``options.model`` over the selected episodes of every k; see the module docstring.

    The backend is loaded only after the results files are locked and the folder's run record accepts
    this run's settings: a large model is not loaded to be refused. Before that, ``preflight`` checks what
    can be checked without writing anything; the output folder is created after it, and removed again when
    the run is refused before it wrote a file there. ``backend``: an already loaded one to use instead of
    loading ``options.model`` (which then only names the run), e.g. a model built in memory, or one loaded
    once for the conditions of a ``study``; the caller keeps it (it is not closed). ``stop``: what signal
    handlers note (``stopping.on_signals``): the run stops at its next safe point, raising ``Stopped``."""
    plan = preflight(options, report, model="none" if backend is not None else "import")
    folder = options.folder
    created = create_folder(folder)
    stop = stop or StopRequest()
    try:
        with stop.deferred():
            return _run_in(options, plan, folder, report, backend, stop)
    except BaseException:
        remove_empty_folders(created)  # a refused run leaves no empty folder behind
        raise


def _run_in(
    options: RunOptions,
    plan: RunPlan,
    folder: Path,
    report: Report,
    backend: Backend | None,
    stop: StopRequest,
) -> RunSummary:
    """The run in its folder (made): the locks, the run record, the backend, then the lines. A signal is
    noted (``stop``) and acted on between windows, except while the backend loads, when it stops the run at
    once."""
    selected, bank, study, prompt_set = plan.selected, plan.bank, plan.study, plan.prompt_set
    record = new_run_record(options, plan.metas, prompt_set, plan.sidecar, plan.pool_file)

    locks = [FileLock(folder / results_name(options.model_name, k)) for k in selected]
    acquired: list[FileLock] = []
    given = backend
    try:
        for lock in locks:
            lock.acquire()
            acquired.append(lock)
            if lock.taken_over:
                report(f"warning: took over the stale lock {lock.lock} of dead process {lock.taken_over.pid}")
        update_run_record(folder, record, write=False)
        others = other_datasets(folder, record)
        if others:
            report(
                f"warning: {folder} holds results over another dataset than {dataset_label(record)}: "
                f"{'; '.join(others)}; scores of this folder put both side by side, and compare refuses "
                "to pair them (use another --out for another dataset)"
            )
        with stop.immediate():
            backend = given or load_backend(
                options.model,
                workload(shown_episodes(plan.work), bank, options.layout),
                seed=options.seed,
                **options.backend_options,
            )
        stop.backend = backend
        update_run_record(folder, with_backend(record, backend))
        with timed_run(folder, record, backend) as spent:  # the entry's finish, wall time, outcome, work
            family = backend.family or system_family(options.model.name)
            maker = PromptMaker(
                options,
                prompt_set,
                family,
                bank,
                ClipStore(options.data),
                backend.max_clip_seconds,
                study,
                plan.variants,
            )
            summary = _run_all(maker, backend, plan.work, folder, report, stop, spent)
            ordering = time.perf_counter()
            for k in selected:  # a resumed run's lines back in the meta order, as a fresh run writes them
                ids = [entry.episode.id for entry in iter_meta(plan.metas[k])]
                restore_order(folder / results_name(options.model_name, k), ids)
            spent["restoring_order"] = time.perf_counter() - ordering
            return summary
    finally:
        stop.backend = None
        if backend is not None and given is None:
            backend.close()
        for lock in acquired:
            lock.release()


def _open_logs(
    options: RunOptions, work: Mapping[int, list[Work]], folder: Path, report: Report
) -> tuple[dict[int, ResultsLog], dict[int, KSummary], dict[int, list[Work]]]:
    """Each k's results log (repaired, error lines dropped when retrying), summary and pending work (the
    lines, by id and presentation, that the log does not hold)."""
    logs: dict[int, ResultsLog] = {}
    summaries: dict[int, KSummary] = {}
    pending: dict[int, list[Work]] = {}
    variations = set(options.variations)
    for k, items in work.items():
        path = folder / results_name(options.model_name, k)
        log = ResultsLog.open(path)
        summary = KSummary(k, path, selected=len(items), repaired=log.repaired)
        if log.repaired:
            report(f"warning: {log.repaired}")
        wanted = {item.line_key for item in items}
        if options.retry_errors:
            summary.retried = drop_error_lines(path, {key.id for key in wanted}, variations)
            if summary.retried:
                log = ResultsLog.open(path)
        done = log.done_keys()
        summary.earlier_errors = sum(
            1 for line in log.existing if line.key in wanted and line.data.get("status") == "error"
        )
        pending[k] = [item for item in items if item.line_key not in done]
        summary.skipped = len(items) - len(pending[k])
        logs[k], summaries[k] = log, summary
    return logs, summaries, pending


def _run_all(
    maker: PromptMaker,
    backend: Backend,
    work: Mapping[int, list[Work]],
    folder: Path,
    report: Report,
    stop: StopRequest | None = None,
    spent: dict[str, float] | None = None,
) -> RunSummary:
    """Append the lines of ``work`` not yet in their k's file; the caller holds the locks. A stop asked for
    (``stop``) ends the run after the window in hand is written, raising ``Stopped``. ``spent`` gets the
    seconds of the runner's phases as they pass (``RUNNER_PHASES``), so that a run that stops has them too."""
    options = maker.options
    logs, summaries, pending = _open_logs(options, work, folder, report)
    config = GenerationConfig(
        max_new_tokens=options.max_new_tokens,
        seed=options.seed,
        batch_size=options.batch_size,
        stop=("\n",) if options.layout == CONTINUATION else (),  # the answer is the rest of its label line
    )
    ordered = order_work(pending, options.order)
    # the original padded each batch to its longest clip: one batch per call, not run on to an episode's end
    whole_episodes = options.order == "episode" and options.pad != "batch"
    failed_in_a_row = 0
    parts = list(windows(ordered, window_sizes(options), whole_episodes))
    stop = stop or StopRequest()
    total = sum(summary.selected for summary in summaries.values())
    spent = {} if spent is None else spent
    spent.update(dict.fromkeys(RUNNER_PHASES, 0.0))

    def stop_if_asked() -> None:  # a safe point: every line so far written and fsynced
        done = sum(summary.skipped + summary.written for summary in summaries.values())
        if done < total:
            stop.check(f"after {done} of {total} prompts")

    try:
        stop_if_asked()
        with (
            Progress(len(ordered), report) as bar,  # a bar on a terminal, else a plain line now and then
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="audioicl-prepare") as pool,
            contextlib.closing(prepared_ahead(pool, maker, backend, parts, config)) as ready,
        ):
            for window, built, wait in ready:
                spent["waited_for_prompts"] += wait
                called = time.perf_counter()
                results, call_error = run_window(maker, backend, config, window, built)
                answered = time.perf_counter()
                spent["in_backend"] += answered - called
                for k in sorted({item.k for item in window}):
                    lines = [r for r in results if r.extra["k"] == k]
                    logs[k].append(lines)
                    summaries[k].written += len(lines)
                    summaries[k].errors += sum(1 for r in lines if r.extra.get("status") == "error")
                spent["writing"] += time.perf_counter() - answered
                bar.update(len(results), {item.k for item in window})
                stop_if_asked()
                failed_in_a_row = failed_in_a_row + 1 if call_error else 0
                if call_error:
                    report(f"warning: {call_error}; its {len(window)} prompts got error lines")
                if failed_in_a_row >= FAILED_WINDOWS_LIMIT:
                    raise AudioICLError(
                        f"the backend failed {failed_in_a_row} calls in a row; stopping (last: {call_error})"
                    )
    finally:
        for log in logs.values():
            log.close()
    return RunSummary(tuple(summaries[k] for k in sorted(summaries)), spent["waited_for_prompts"])
