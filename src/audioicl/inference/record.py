"""results part: run.record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from audioicl.backends.base import answer_options
from audioicl.errors import AudioICLError

RUN_SUFFIX = "_run.json"
LEGACY_RUN_FILE = "run.json"  # one record per folder, as written before per-model records

Record = dict[str, Any]


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


def _answer_settings(record: Record) -> dict[str, Any]:
    settings = dict(record.get("settings") or {})
    if "backend_options" in settings:
        settings["backend_options"] = answer_options(record.get("model") or "", settings["backend_options"])
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
