"""``<model>_run.json``, the run record: how a model's results files in a folder were made (data root,
dataset fingerprint, the settings that change what a line says, every run's selection and backend). The one
owner of the format: naming, reading (legacy ``run.json`` too), building a run's record, checking it against
the folder's and merging it in under the record's lock, and the conflicts that refuse a run or a merge.

Each entry of ``runs`` also says where and when that run ran, in two blocks that no check reads (a resumed
run may run on another host, at another time, from another command line): ``environment`` (argv, Python,
platform, host, process id, audioicl version, and the git commit of the installed source tree when it is a
git checkout, with whether that tree had changes) and ``timing`` (``started``, ``backend_loaded`` and
``finished`` as UTC ISO times, ``wall_s`` and the ``outcome``: completed; stopped, by an error, with
``stopped_by`` its text; or interrupted, by a signal (Ctrl-C, SIGTERM), with ``signal`` its name; a run that
was killed has no ``finished``).

A run with ``--draws``, ``--orders`` or ``--prompt-variants`` above 1 records them in its entry of ``runs``
(``variations``: the counts, how each draw's and order's generator is seeded from the run seed, the meta file
draws take their pool from and the sha256 of each instruction variant file used); they are no ``settings``,
so that a later run may add draws to the same folder."""

from __future__ import annotations

import contextlib
import datetime
import functools
import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from audioicl import __version__
from audioicl.backends import Backend
from audioicl.backends.base import CountsWork, ModelSpec, answer_options, hide_url_credentials
from audioicl.dataset.download import dataset_source
from audioicl.dataset.manifest import dataset_fingerprint
from audioicl.dataset.meta import k_of
from audioicl.dataset.sidecar import Sidecar
from audioicl.errors import AudioICLError, Stopped
from audioicl.files import FileLock, write_atomic
from audioicl.prompts.draws import DRAW_SEED, ORDER_SEED
from audioicl.prompts.sets import PromptSet, variant_files

from .options import RunOptions

RUN_SUFFIX = "_run.json"
LEGACY_RUN_FILE = "run.json"  # one record per folder, as written before per-model records

Record = dict[str, Any]
RECORD_LOCK_WAIT_S = 30.0  # another run of the same model in the folder holds the record only briefly
GIT_TIMEOUT_S = 5.0
STOPPED_BY_CHARS = 300  # of the error that stopped a run, kept in its timing block


def run_record_name(model: str) -> str:
    """The run record next to ``<model>_results_k<k>.jsonl``."""
    return f"{model}{RUN_SUFFIX}"


# --------------------------------------------------------------------------- run records


def read_run_record(path: Path) -> Record | None:
    """The record at ``path``; None when there is none."""
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise AudioICLError(f"malformed run record: {exc}", file=str(path)) from exc
    if not isinstance(record, dict):
        raise AudioICLError("malformed run record: not a JSON object", file=str(path))
    return record


def model_run_record(folder: Path, model: str) -> tuple[Path, Record] | None:
    """``<model>_run.json`` in ``folder``, else a legacy ``run.json`` made for ``model``; with its path."""
    path = folder / run_record_name(model)
    record = read_run_record(path)
    if record is not None:
        return path, record
    legacy = read_run_record(folder / LEGACY_RUN_FILE)
    if legacy is not None and legacy.get("model_name") == model:
        return folder / LEGACY_RUN_FILE, legacy
    return None


def folder_run_records(folder: Path) -> dict[str, Record]:
    """Every model's run record in ``folder``, by the ``<model>`` of its results files."""
    records = {
        path.name[: -len(RUN_SUFFIX)]: record
        for path in sorted(folder.glob(f"*{RUN_SUFFIX}"))
        if (record := read_run_record(path)) is not None
    }
    legacy = read_run_record(folder / LEGACY_RUN_FILE)
    if legacy is not None and isinstance(legacy.get("model_name"), str):
        records.setdefault(legacy["model_name"], legacy)
    return records


def dumps_record(record: Record) -> str:
    return json.dumps(record, indent=2, ensure_ascii=False) + "\n"


def record_shard(record: Record) -> str | None:
    """The shard ``I/N`` a record's folder holds (legacy records keep it in ``selection``)."""
    if "shard" in record:
        return record["shard"]
    return (record.get("selection") or {}).get("shard")


def record_selections(record: Record) -> list[dict[str, Any]]:
    """What each run of a record selected, ``{"shots", "tasks", "limit", "shard"}`` (None: all), the folder's
    shard applying to every run; a legacy record's one ``selection`` is its one run."""
    runs = record.get("runs")
    if not isinstance(runs, list):
        legacy = record.get("selection")
        runs = [legacy] if isinstance(legacy, dict) else []
    shard = record_shard(record)
    return [
        {"shots": run.get("shots"), "tasks": run.get("tasks"), "limit": run.get("limit"), "shard": shard}
        for run in runs
        if isinstance(run, dict)
    ]


def _record_model(record: Record) -> ModelSpec | None:
    """The model spec a record names (None for none, or for text that is not a spec)."""
    try:
        return ModelSpec.parse(record.get("model") or "")
    except AudioICLError:
        return None


def _answer_settings(record: Record) -> dict[str, Any]:
    settings = dict(record.get("settings") or {})
    if "backend_options" in settings:
        settings["backend_options"] = answer_options(_record_model(record), settings["backend_options"])
    return settings


def results_identity(record: Record | None) -> dict[str, Any]:
    """What the result lines of a run measured, flat: the dataset (its fingerprint, else a hash of its meta
    files' hashes, and the downloaded repo and commit) and every setting that changes what a line says (``-o`` options as ``-o NAME``). Two sets of
    lines of one model name pool only when these are equal (``scoring.identity``); the data root's path is
    not part of it (one dataset may be copied), nor is anything that leaves answers as they are. Without a
    record (the original's result files): empty."""
    if record is None:
        return {}
    fingerprint = record.get("dataset_fingerprint")
    if not isinstance(fingerprint, str):  # a dataset without a manifest: its meta files' hashes tell it
        meta = json.dumps(record.get("meta_sha256") or {}, sort_keys=True)
        fingerprint = "meta-" + hashlib.sha256(meta.encode("utf-8")).hexdigest()
    identity: dict[str, Any] = {"dataset": fingerprint}
    if record.get("dataset_source") is not None:
        identity["dataset_source"] = record["dataset_source"]
    for key, value in sorted(_answer_settings(record).items()):
        if key == "backend_options" and isinstance(value, Mapping):
            identity.update({f"-o {name}": option for name, option in sorted(value.items())})
        else:
            identity[key] = value
    return identity


FINGERPRINT_SHOWN = 12  # hex digits of a dataset fingerprint that a message shows


def dataset_label(record: Record) -> str:
    """Which dataset a record's lines were run over, for a message: its data root and the start of its
    fingerprint (``/data/bench (fingerprint 3f2a9c01d4e7)``)."""
    fingerprint = str(results_identity(record)["dataset"])
    shown = fingerprint.removeprefix("meta-")[:FINGERPRINT_SHOWN]
    kind = "meta files' digest" if fingerprint.startswith("meta-") else "fingerprint"
    source = record.get("dataset_source")
    if isinstance(source, Mapping):  # a downloaded dataset: where from, and which commit
        shown += f", downloaded from {source.get('repo')} at {str(source.get('commit'))[:FINGERPRINT_SHOWN]}"
    return f"{record.get('data') or 'an unnamed dataset'} ({kind} {shown})"


def same_dataset(one: Record, other: Record) -> bool:
    """Whether two records' lines were run over one dataset: the same download (or none) and fingerprint, not
    the same path; a dataset without a manifest (no fingerprint) by the meta files of the k both ran (or, with
    none in common, by its root)."""
    if one.get("dataset_source") != other.get("dataset_source"):
        return False
    if one.get("dataset_fingerprint") != other.get("dataset_fingerprint"):
        return False
    if isinstance(one.get("dataset_fingerprint"), str):
        return True
    metas = one.get("meta_sha256") or {}, other.get("meta_sha256") or {}
    shared = metas[0].keys() & metas[1].keys()
    if not shared:
        return one.get("data") == other.get("data")
    return all(metas[0][k] == metas[1][k] for k in shared)


def record_conflicts(old: Record, new: Record) -> list[str]:
    """``key: was X, now Y`` for each recorded fact that changes what a result line says: the settings (of the
    backend options, those that are not ``EXECUTION_OPTIONS``), the data root, and the meta file of any k both
    records have run. Another dataset is one conflict, each by its root and fingerprint's start
    (``dataset_label``), not the digests of its meta files."""
    old_settings, new_settings = (_answer_settings(record) for record in (old, new))
    pairs = {
        key: (old_settings.get(key), new_settings.get(key))
        for key in old_settings.keys() | new_settings.keys()
    }
    if not same_dataset(old, new):
        conflicts = [f"dataset: was {dataset_label(old)}, now {dataset_label(new)}"]
    else:
        conflicts = []
        pairs["data"] = (old.get("data"), new.get("data"))
        old_meta, new_meta = old.get("meta_sha256") or {}, new.get("meta_sha256") or {}
        for k in sorted(old_meta.keys() & new_meta.keys(), key=int):
            pairs[f"meta file of k={k} (sha256)"] = (old_meta[k], new_meta[k])
    return conflicts + [
        f"{key}: was {was!r}, now {now!r}" for key, (was, now) in sorted(pairs.items()) if was != now
    ]


def other_datasets(folder: Path, record: Record) -> list[str]:
    """A line for each other model in ``folder`` whose results were run over another dataset than
    ``record``'s: a folder that mixes datasets scores them side by side as if they were one benchmark."""
    return [
        f"{model} over {dataset_label(earlier)}"
        for model, earlier in folder_run_records(folder).items()
        if model != record.get("model_name") and not same_dataset(earlier, record)
    ]


# --------------------------------------------------------------------------- a run's record


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def recorded_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Backend options as a record keeps them: sorted, a URL's credentials hidden (``-o base_url=...``)."""
    return {key: hide_url_credentials(v) if isinstance(v, str) else v for key, v in sorted(options.items())}


def run_settings(options: RunOptions) -> dict[str, Any]:
    """The options that change what a result line says; a resumed run must use the same ones (all backend
    options are recorded; ``record_conflicts`` leaves out those that only change how answers are computed)."""
    settings: dict[str, Any] = {
        "model": str(options.model),
        "style": options.style,
        "layout": options.layout,
        "pad": options.pad,
        "max_new_tokens": options.max_new_tokens,
        "morse_bank": options.morse_bank,
        "seed": options.seed,
        "prompts_sha256": _sha256_file(options.prompts) if options.prompts else None,
        "backend_options": recorded_options(options.backend_options),
    }
    if options.pad == "batch":
        settings["batch_size"] = options.batch_size
    if options.condition:  # only then: the records of plain runs stay as they were
        settings["condition"] = options.condition
    return settings


def variations_entry(options: RunOptions, pool_file: Path | None) -> dict[str, Any]:
    """The ``variations`` block of a run's entry: the counts, the seeds (``seeding.rng_for`` of these names),
    the pool's meta file and the variant files."""
    entry: dict[str, Any] = {
        "draws": options.draws,
        "orders": options.orders,
        "prompt_variants": options.prompt_variants,
        "seeds": {
            "draw": ["seed", DRAW_SEED, "<id>", "<draw>"],
            "order": ["seed", ORDER_SEED, "<id>", "<draw>", "<k>", "<order>"],
            "seed": options.seed,
        },
    }
    if pool_file is not None:
        entry["pool"] = {"file": pool_file.name, "sha256": _sha256_file(pool_file)}
    if options.prompt_variants > 1:
        used = variant_files()[: options.prompt_variants - 1]
        entry["variant_files"] = {str(v): _sha256_file(path) for v, path in enumerate(used, start=1)}
    return entry


def new_run_record(
    options: RunOptions,
    metas: Mapping[int, Path],
    prompt_set: PromptSet,
    sidecar: Sidecar | None = None,
    pool_file: Path | None = None,
) -> Record:
    """This run's record: what its lines depend on, and (in ``runs``) what it selected, the digest of the
    wording its prompts come from (``prompt_set``: the built-in set or a prompts file over it) and
    (``variations``, only when asked for) its draws, orders and instruction variants. The transcripts a
    ``transcript`` run shows are a setting: the sidecar's sha256, or ``perceived`` without one."""
    settings = run_settings(options)
    if options.control == "transcript":
        settings["transcripts"] = sidecar.sha256 if sidecar else "perceived"
    return {
        "audioicl_version": __version__,
        "data": str(options.data.resolve()),
        "dataset_fingerprint": dataset_fingerprint(options.data),
        "dataset_source": dataset_source(options.data),  # repo and commit of a downloaded dataset
        "model": str(options.model),
        "model_name": options.model_name,
        "settings": settings,
        "prompts": str(options.prompts.resolve()) if options.prompts else None,
        "shard": str(options.shard) if options.shard else None,
        "meta_sha256": {str(k): _sha256_file(path) for k, path in metas.items()},
        "runs": [
            {
                "shots": list(metas),
                "tasks": list(options.tasks) if options.tasks else None,
                "limit": options.limit,
                "batch_size": options.batch_size,
                "backend_options": recorded_options(options.backend_options),
                "retry_errors": options.retry_errors,
                "audioicl_version": __version__,
                "prompt_set_sha256": prompt_set.sha256(),
                **({"k0_from": metas[0].name} if 0 in metas and k_of(metas[0]) != 0 else {}),
                **({"variations": variations_entry(options, pool_file)} if options.variations.varied else {}),
                "environment": run_environment(),
                "timing": {"started": utc_now()},
            }
        ],
    }


def utc_now() -> str:
    """The time now as UTC ISO 8601 to the millisecond (``2025-06-01T12:00:00.123Z``)."""
    now = datetime.datetime.now(datetime.UTC)
    return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _seconds_between(start: str, end: str) -> float:
    def parse(text: str) -> datetime.datetime:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))

    return round((parse(end) - parse(start)).total_seconds(), 3)


def _git(folder: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def source_commit() -> tuple[str, bool] | None:
    """(commit, whether the package's files differ from it) of the installed audioicl when its source tree
    is a git checkout whose files include this package (an editable install); None otherwise (a wheel, also
    one installed into a virtual environment inside some checkout)."""
    package = Path(__file__).resolve().parents[1]
    if _git(package, "ls-files", "--error-unmatch", "__init__.py") is None:
        return None
    commit = _git(package, "rev-parse", "HEAD")
    if not commit:
        return None
    status = _git(package, "status", "--porcelain", "--", ".")
    return commit, bool(status)


def run_environment() -> dict[str, Any]:
    """Where this run runs: the ``environment`` block of its entry in ``runs``."""
    environment: dict[str, Any] = {
        "argv": [hide_url_credentials(arg) for arg in sys.argv],  # --base-url https://user:TOKEN@host
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "audioicl_version": __version__,
    }
    found = source_commit()
    if found is not None:
        environment["git_commit"], environment["git_dirty"] = found
    return environment


def merge_run_record(found: tuple[Path, Record] | None, record: Record) -> Record:
    """``record`` added to the model's earlier record; refused when a setting that changes results differs."""
    if found is None:
        return record
    path, earlier = found
    conflicts = record_conflicts(earlier, record)
    if conflicts:
        raise AudioICLError(
            f"this folder holds results of model {record['model_name']!r} made with other settings "
            f"({'; '.join(conflicts)}); use another --out, or --name for a separate set of files",
            file=str(path),
        )
    return {
        **record,
        "meta_sha256": {**(earlier.get("meta_sha256") or {}), **record["meta_sha256"]},
        "runs": [*(earlier.get("runs") or []), *record["runs"]],
    }


def with_backend(record: Record, backend: Backend) -> Record:
    """The record with what the loaded backend says of itself (versions, checkpoint hash, dtype, device),
    kept per run since a resumed run may load it elsewhere."""
    run = {**record["runs"][-1], "backend": backend.name, "backend_info": dict(backend.info)}
    return {**record, "backend": backend.name, "runs": [*record["runs"][:-1], run]}


def _is_this_run(entry: Any, run: Record) -> bool:
    """Whether ``entry`` of a record's ``runs`` is ``run`` (the same start, process and host)."""
    if not isinstance(entry, dict):
        return False
    mine, theirs = run.get("environment") or {}, entry.get("environment") or {}
    return (entry.get("timing") or {}).get("started") == (run.get("timing") or {}).get("started") and (
        theirs.get("pid"),
        theirs.get("host"),
    ) == (mine.get("pid"), mine.get("host"))


def finish_run_record(
    folder: Path, record: Record, timing: Mapping[str, Any], backend_info: Mapping[str, Any] | None = None
) -> None:
    """Add ``timing`` to this run's entry (the last of ``record``'s ``runs``) in the folder's record, and
    ``backend_info`` as the backend says it at the end (a fast path that fell back mid-run, the peak memory),
    under its lock; nothing when the entry is not there (the record was not written, or replaced since)."""
    run = record["runs"][-1]
    path = folder / run_record_name(record["model_name"])
    lock = FileLock(path)
    lock.acquire(wait_s=RECORD_LOCK_WAIT_S)
    try:
        found = model_run_record(folder, record["model_name"])
        if found is None:
            return
        where, current = found
        runs = list(current.get("runs") or [])
        for index in range(len(runs) - 1, -1, -1):
            if _is_this_run(runs[index], run):
                runs[index] = {**runs[index], "timing": {**(runs[index].get("timing") or {}), **timing}}
                if backend_info is not None:
                    runs[index]["backend_info"] = dict(backend_info)
                write_atomic(where, dumps_record({**current, "runs": runs}), durable=True)
                return
    finally:
        lock.release()


def backend_counters(backend: Any) -> dict[str, dict[str, float]]:
    """What a backend counts of its work, where it does (the hf backend's ``seconds`` by phase and ``work``:
    clips encoded, positions read, attempts out of memory), copied as they stand."""
    if not isinstance(backend, CountsWork):
        return {}
    return {"seconds": dict(backend.seconds), "work": dict(backend.work)}


def backend_spent(
    before: Mapping[str, Mapping[str, float]], after: Mapping[str, Mapping[str, float]]
) -> Record:
    """The counters' growth from ``before`` to ``after``, seconds to the millisecond (a backend may serve
    several runs: only this one's share is its)."""
    spent: Record = {}
    for name, counts in after.items():
        was = before.get(name, {})
        grown = {key: value - was.get(key, 0) for key, value in counts.items()}
        spent[name] = {key: round(v, 3) if name == "seconds" else v for key, v in grown.items()}
    return spent


@contextlib.contextmanager
def timed_run(folder: Path, record: Record, backend: Any = None) -> Iterator[dict[str, float]]:
    """Around the work of a run whose record is written: when it ends, however it ends, its entry gets the
    time the backend was ready (the start of the block), the finish, the wall time and the outcome, what
    ``backend`` counts of its own work during the block (``backend_spent``) and its ``info`` as it stands
    then; and the seconds the block adds by phase to the dict it is given (``runner_spent``: the runner's
    own, beside the backend's)."""
    loaded = utc_now()
    before = backend_counters(backend)
    runner_spent: dict[str, float] = {}
    outcome: dict[str, Any] = {"outcome": "completed"}
    try:
        yield runner_spent
    except KeyboardInterrupt:
        outcome = {"outcome": "interrupted", "signal": "SIGINT"}
        raise
    except Stopped as exc:  # a signal, acted on at a safe point (``stopping``)
        outcome = {"outcome": "interrupted", "signal": exc.signal}
        raise
    except BaseException as exc:
        outcome = {"outcome": "stopped", "stopped_by": " ".join(str(exc).split())[:STOPPED_BY_CHARS]}
        raise
    finally:
        finished = utc_now()
        started = (record["runs"][-1].get("timing") or {}).get("started", loaded)
        timing = {
            "backend_loaded": loaded,
            "finished": finished,
            "wall_s": _seconds_between(started, finished),
            **outcome,
        }
        spent = backend_spent(before, backend_counters(backend))
        if spent:
            timing["backend_spent"] = spent
        if runner_spent:
            timing["runner_spent"] = {phase: round(s, 3) for phase, s in runner_spent.items()}
        info = getattr(backend, "info", None)
        with contextlib.suppress(AudioICLError, OSError):  # the run's own outcome matters more
            finish_run_record(folder, record, timing, dict(info) if isinstance(info, Mapping) else None)


def update_run_record(folder: Path, record: Record, write: bool = True) -> None:
    """Check this run against the model's record in ``folder`` and (``write``) add it, under the record's
    lock; a conflict raises before anything is written."""
    path = folder / run_record_name(record["model_name"])
    lock = FileLock(path)
    lock.acquire(wait_s=RECORD_LOCK_WAIT_S)
    try:
        merged = merge_run_record(model_run_record(folder, record["model_name"]), record)
        if write:
            write_atomic(path, dumps_record(merged), durable=True)
    finally:
        lock.release()
