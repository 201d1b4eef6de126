"""The reproducibility block of an entry: what its run records (``inference.record``) say made its results —
checkpoint and config hash, engine and versions, decoding, prompt set, dataset, seeds, the exact commands.

Each item is read from the record as it is; one the record lacks is ``not recorded``. A value that differs
between the runs of a record (a run resumed on another machine) is shown per run."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audioicl.dataset.manifest import dataset_fingerprint
from audioicl.errors import AudioICLError
from audioicl.inference.options import CONDITION_MARK
from audioicl.inference.record import Record

from .board import Entry, RecordFile

NOT_RECORDED = "not recorded"
# the items every block names, in its order (the tests and docs/leaderboard.md list them too)
ITEMS = (
    "checkpoint",
    "checkpoint config sha256",
    "engine",
    "transformers",
    "torch",
    "vllm",
    "audioicl",
    "decoding",
    "prompts",
    "prompt set sha256",
    "dataset fingerprint",
    "seeds",
    "commands",
)


@dataclass(frozen=True)
class Item:
    label: str
    value: str
    recorded: bool = True


@dataclass(frozen=True)
class Reproduction:
    """One run record's items (``record`` None: the entry has no record beside its results)."""

    entry: Entry
    record: Path | None
    items: tuple[Item, ...]
    commands: tuple[str, ...]  # one per run, as it was typed


def _runs(record: Record) -> list[dict[str, Any]]:
    runs = record.get("runs")
    return [run for run in runs if isinstance(run, dict)] if isinstance(runs, list) else []


def per_run(values: Sequence[object]) -> str | None:
    """One value for every run, or each run's (``a (run 1); b (runs 2-3)``); None when no run has one."""
    if all(value is None for value in values):
        return None
    distinct = list(dict.fromkeys(map(_text, values)))
    if len(distinct) == 1:
        return distinct[0]
    parts = []
    for value in distinct:
        runs = [str(i) for i, v in enumerate(values, start=1) if _text(v) == value]
        parts.append(f"{value} (run{'s' if len(runs) > 1 else ''} {', '.join(runs)})")
    return "; ".join(parts)


def _text(value: object) -> str:
    """A recorded value as text: a mapping as ``key=value, ...`` (values inside it as compact JSON), a list
    as its items, None as ``not recorded``."""
    if value is None:
        return NOT_RECORDED
    if isinstance(value, dict):
        return ", ".join(f"{key}={_json(v)}" for key, v in value.items()) or "none"
    if isinstance(value, list):
        return ", ".join(map(_json, value)) or "none"
    return str(value)


def _json(value: object) -> str:
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _text(value)


def command_line(argv: object) -> str | None:
    """The command a run's ``environment.argv`` holds, as a shell line; the program is ``audioicl`` when it
    was the package's entry point or ``python -m audioicl``."""
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return None
    program = argv[0]
    if Path(program).name in ("audioicl", "__main__.py"):
        program = "audioicl"
    return shlex.join([program, *argv[1:]])


def _item(label: str, value: str | None) -> Item:
    return Item(label, NOT_RECORDED, False) if value is None else Item(label, value)


def _from_runs(runs: list[dict[str, Any]], read: Callable[[dict[str, Any]], object]) -> str | None:
    return per_run([read(run) for run in runs]) if runs else None


def _info(key: str) -> Callable[[dict[str, Any]], object]:
    return lambda run: (run.get("backend_info") or {}).get(key)


def _decoding(settings: dict[str, Any], runs: list[dict[str, Any]]) -> str | None:
    """max_new_tokens and temperature, what the backend says of its numerics (dtype, device, attention) and
    each run's batch size (it changes what a batched GPU sum gives, and with --pad batch the prompts)."""
    if not settings:
        return None
    parts = [f"{key}={_text(settings.get(key))}" for key in ("max_new_tokens", "temperature")]
    for key in ("dtype", "device", "attn"):
        value = _from_runs(runs, _info(key))
        if value is not None:
            parts.append(f"{key}={value}")
    batch = _from_runs(runs, lambda run: run.get("batch_size"))
    if batch is not None:
        parts.append(f"batch_size={batch}")
    return "; ".join(parts)


def _prompts(settings: dict[str, Any]) -> str | None:
    keys = ("style", "layout", "pad", "morse_bank", "condition", "transcripts")
    parts = [f"{key}={_text(settings[key])}" for key in keys if key in settings]
    return "; ".join(parts) or None


def _prompt_set(record: Record, settings: dict[str, Any], runs: list[dict[str, Any]]) -> Item:
    """The digest of the wording the runs used (``prompt_set_sha256`` of each run: its prompts file over the
    defaults, or the built-in set), the prompts file's own sha256 where one was given, and those of the
    instruction variant files a run used. Records older than ``prompt_set_sha256`` name only the file's."""
    wording = per_run([run.get("prompt_set_sha256") for run in runs])
    digest = settings.get("prompts_sha256")
    variants = [(run.get("variations") or {}).get("variant_files") for run in runs]
    extra = f"; variant files: {per_run(variants)}" if any(variants) else ""
    named = f" ({record['prompts']})" if isinstance(record.get("prompts"), str) else ""
    if wording:
        return Item("prompt set sha256", f"{wording}{_wording_source(settings, digest, named)}{extra}")
    if digest:  # a record from before prompt_set_sha256: the file's own digest
        return Item("prompt set sha256", f"{digest}{named}{extra}")
    if "prompts_sha256" in settings:
        version = record.get("audioicl_version") or "?"
        return Item(
            "prompt set sha256",
            f"{NOT_RECORDED} (the built-in prompt set of audioicl {version}){extra}",
            False,
        )
    return Item("prompt set sha256", NOT_RECORDED, False)


def _wording_source(settings: dict[str, Any], digest: str | None, named: str) -> str:
    """Where the recorded wording came from: the prompts file or the built-in set; a probe run asks the built-in
    probe questions (``prompts.probes``) with the system prompts of either."""
    file = f"prompts file{named}, file sha256 {digest}"
    condition = settings.get("condition")
    if isinstance(condition, str) and "probe" in condition.split(CONDITION_MARK):
        return f" (the built-in probe questions{'; system prompts from the ' + file if digest else ''})"
    return f" ({file})" if digest else " (the built-in prompt set)"


def _fingerprint(record: Record, data: Path | None) -> Item:
    recorded = record.get("dataset_fingerprint")
    given = _given_fingerprint(data)
    if isinstance(recorded, str):
        if given is not None and given != recorded:
            return Item("dataset fingerprint", f"{recorded} (--data {data} has {given})")
        return Item("dataset fingerprint", recorded)
    if given is not None:
        return Item("dataset fingerprint", f"{given} (of --data {data}; the run record has none)")
    return Item("dataset fingerprint", NOT_RECORDED, False)


def _given_fingerprint(data: Path | None) -> str | None:
    if data is None:
        return None
    try:
        return dataset_fingerprint(data)
    except (AudioICLError, OSError):
        return None


def _variations(run: dict[str, Any]) -> object:
    """A run's draws, orders and instruction variants with how their generators are seeded (None: one each)."""
    variations = run.get("variations")
    if not isinstance(variations, dict):
        return None
    return {key: variations.get(key) for key in ("draws", "orders", "prompt_variants", "seeds")}


def _seeds(settings: dict[str, Any], runs: list[dict[str, Any]]) -> str | None:
    """The run seed, and each run's draws, orders and variants (``variations``) where it made several."""
    parts = [f"seed={_text(settings['seed'])}"] if "seed" in settings else []
    if any(_variations(run) is not None for run in runs):
        parts.append(f"variations: {per_run([_variations(run) or 'none' for run in runs])}")
    return "; ".join(parts) or None


def _engine(record: Record, runs: list[dict[str, Any]]) -> str | None:
    backend = _from_runs(runs, lambda run: run.get("backend")) or record.get("backend")
    if backend is None:
        return None
    options = (record.get("settings") or {}).get("backend_options")
    extra = f" (backend options: {_text(options)})" if isinstance(options, dict) and options else ""
    return f"{backend}{extra}"


def reproduction(entry: Entry, found: RecordFile, data: Path | None) -> Reproduction:
    record = found.record
    settings = record.get("settings") if isinstance(record.get("settings"), dict) else {}
    runs = _runs(record)
    checkpoint = record.get("model") if isinstance(record.get("model"), str) else None
    commands = tuple(c for run in runs if (c := command_line((run.get("environment") or {}).get("argv"))))
    versions = [_from_runs(runs, _info(key)) for key in ("transformers", "torch", "vllm")]
    audioicl = _from_runs(runs, lambda run: run.get("audioicl_version")) or record.get("audioicl_version")
    commit = _from_runs(runs, lambda run: (run.get("environment") or {}).get("git_commit"))
    items = (
        _item("checkpoint", checkpoint),
        _item("checkpoint config sha256", _from_runs(runs, _info("config_sha256"))),
        _item("engine", _engine(record, runs)),
        *(_item(key, value) for key, value in zip(ITEMS[3:6], versions, strict=True)),
        _item("audioicl", f"{audioicl} (git {commit})" if audioicl and commit else audioicl),
        _item("decoding", _decoding(settings, runs)),
        _item("prompts", _prompts(settings)),
        _prompt_set(record, settings, runs),
        _fingerprint(record, data),
        _item("seeds", _seeds(settings, runs)),
        Item("commands", "\n".join(commands)) if commands else Item("commands", NOT_RECORDED, False),
    )
    return Reproduction(entry, found.path, items, commands)


def missing_record(entry: Entry, data: Path | None) -> Reproduction:
    """An entry without a run record: every item not recorded but the dataset fingerprint of ``--data``."""
    items = tuple(Item(label, NOT_RECORDED, False) for label in ITEMS)
    fingerprint = _fingerprint({}, data)
    items = tuple(fingerprint if item.label == fingerprint.label else item for item in items)
    return Reproduction(entry, None, items, ())


def reproductions(entry: Entry, data: Path | None) -> list[Reproduction]:
    """One block per run record of the entry's folders (one without any)."""
    if not entry.records:
        return [missing_record(entry, data)]
    return [reproduction(entry, found, data) for found in entry.records]


def fingerprints(blocks: Sequence[Reproduction]) -> dict[str, list[str]]:
    """Recorded dataset fingerprint → the entries run over it (to tell when they differ)."""
    found: dict[str, list[str]] = {}
    for block in blocks:
        item = next(i for i in block.items if i.label == "dataset fingerprint")
        if item.recorded:
            found.setdefault(item.value.split(" ", 1)[0], []).append(block.entry.name)
    return found
