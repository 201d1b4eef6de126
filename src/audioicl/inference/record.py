"""``<model>_run.json``, the run record: how a model's results files in a folder were made (data root,
dataset fingerprint, the settings that change what a line says, every run's selection and backend). The one
owner of the format: naming, reading (legacy ``run.json`` too), building a run's record, checking it against
the folder's and merging it in under the record's lock, and the conflicts that refuse a run or a merge."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from audioicl import __version__
from audioicl.backends import Backend
from audioicl.backends.base import ModelSpec, answer_options
from audioicl.dataset.download import dataset_source
from audioicl.dataset.manifest import dataset_fingerprint
from audioicl.dataset.meta import k_of
from audioicl.dataset.sidecar import Sidecar
from audioicl.errors import AudioICLError
from audioicl.files import FileLock, write_atomic

from .options import RunOptions

RUN_SUFFIX = "_run.json"
LEGACY_RUN_FILE = "run.json"  # one record per folder, as written before per-model records

Record = dict[str, Any]
RECORD_LOCK_WAIT_S = 30.0  # another run of the same model in the folder holds the record only briefly


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


def record_conflicts(old: Record, new: Record) -> list[str]:
    """``key: was X, now Y`` for each recorded fact that changes what a result line says: the settings (of the
    backend options, those that are not ``EXECUTION_OPTIONS``), the data root, the dataset fingerprint, the
    downloaded repo and commit, and the meta file of any k both records have run."""
    old_settings, new_settings = (_answer_settings(record) for record in (old, new))
    pairs = {
        key: (old_settings.get(key), new_settings.get(key))
        for key in old_settings.keys() | new_settings.keys()
    }
    for key in ("data", "dataset_fingerprint", "dataset_source"):
        pairs[key] = (old.get(key), new.get(key))
    old_meta, new_meta = old.get("meta_sha256") or {}, new.get("meta_sha256") or {}
    for k in sorted(old_meta.keys() & new_meta.keys(), key=int):
        pairs[f"meta file of k={k} (sha256)"] = (old_meta[k], new_meta[k])
    return [f"{key}: was {was!r}, now {now!r}" for key, (was, now) in sorted(pairs.items()) if was != now]


# --------------------------------------------------------------------------- a run's record


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


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
        "backend_options": dict(sorted(options.backend_options.items())),
    }
    if options.pad == "batch":
        settings["batch_size"] = options.batch_size
    if options.condition:  # only then: the records of plain runs stay as they were
        settings["condition"] = options.condition
    return settings


def new_run_record(options: RunOptions, metas: Mapping[int, Path], sidecar: Sidecar | None = None) -> Record:
    """This run's record: what its lines depend on, and (in ``runs``) what it selected. The transcripts a
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
                "backend_options": dict(sorted(options.backend_options.items())),
                "retry_errors": options.retry_errors,
                "audioicl_version": __version__,
                **({"k0_from": metas[0].name} if 0 in metas and k_of(metas[0]) != 0 else {}),
            }
        ],
    }


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
