"""One name, one measurement: result files of one model name whose runs measured different things (another
dataset, another style, layout, prompt set, seed, or backend option that changes answers; the run record's
``inference.record.results_identity``) are never pooled into one number. Each such run becomes an entry of its
own, named ``<model>@<what differs>`` (``icl@data-3f2a9c1b``, ``qwen@style=general``; before a condition's
``+<condition>``, which stays the condition), and ``identity_notes`` says so in a line per name for the
terminal. Files of one name with equal identities (the shards of a run, its resumed parts) pool as before, as
do files without any run record (the original's), among themselves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from audioicl.inference.options import CONDITION_MARK
from audioicl.inference.record import model_run_record, results_identity

from .lines import ResultFile

IDENTITY_MARK = "@"  # between a model's name and what tells its runs apart
NO_RECORD = "no-record"  # the label of files without a run record, beside files with one
_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]+")  # the label goes into file names (per-example CSVs)
LABEL_VALUE_CHARS = 24


def separate_runs(files: Sequence[ResultFile]) -> list[ResultFile]:
    """``files`` with the runs of one name that measured different things named apart; idempotent (names are
    made from each file's own ``run_name``)."""
    identities: dict[tuple[str, Path], tuple[tuple[str, str], ...] | None] = {}
    for result in files:
        key = (result.run_name, result.path.parent)
        if key not in identities:
            found = model_run_record(result.path.parent, result.run_name)
            identities[key] = None if found is None else _canonical(results_identity(found[1]))
    labels: dict[tuple[str, Path], str] = {}
    for name in dict.fromkeys(result.run_name for result in files):
        held = {folder: identity for (model, folder), identity in identities.items() if model == name}
        distinct = list(dict.fromkeys(held.values()))
        if len(distinct) > 1:
            names = _labels(distinct)
            labels.update(
                {(name, folder): names[distinct.index(identity)] for folder, identity in held.items()}
            )
    return [_renamed(result, labels.get((result.run_name, result.path.parent))) for result in files]


def _canonical(identity: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """``identity`` hashable: each value as canonical JSON (a record's values may be lists and mappings)."""
    return tuple((key, json.dumps(value, sort_keys=True, default=str)) for key, value in identity.items())


def _renamed(result: ResultFile, label: str | None) -> ResultFile:
    if label is None:
        return replace(result, model=result.run_name, file_model=None)
    base, mark, condition = result.run_name.partition(CONDITION_MARK)
    return replace(result, model=f"{base}{IDENTITY_MARK}{label}{mark}{condition}", file_model=result.run_name)


def _labels(identities: list[tuple[tuple[str, str], ...] | None]) -> list[str]:
    """A short name per identity: the facts in which they differ, each as ``key=value`` (the dataset as
    ``data-<fingerprint's first 8>``); a run without a record is ``no-record``. Distinct by construction,
    but for values cut to ``LABEL_VALUE_CHARS``: those get their number in the list."""
    known = [dict(identity) for identity in identities if identity is not None]
    keys = sorted({key for facts in known for key in facts})
    differing = [key for key in keys if len({facts.get(key) for facts in known}) > 1]
    labels = []
    for identity in identities:
        if identity is None:
            labels.append(NO_RECORD)
            continue
        facts = dict(identity)
        labels.append("@".join(_fact(key, facts.get(key)) for key in differing) or "run")
    if len(set(labels)) < len(labels):
        labels = [f"{label}.{number}" for number, label in enumerate(labels, 1)]
    return labels


def _fact(key: str, text: str | None) -> str:
    value = None if text is None else json.loads(text)
    if key == "dataset":
        return str(value)[:13] if str(value).startswith("meta-") else f"data-{str(value)[:8]}"
    name = key.removeprefix("-o ")
    return _UNSAFE.sub("-", f"{name}={value}")[: len(name) + 1 + LABEL_VALUE_CHARS]


def identity_notes(files: Sequence[ResultFile]) -> list[str]:
    """A line per name whose runs were made apart: the name, and each entry with its folder(s)."""
    entries: dict[str, dict[str, list[str]]] = {}
    for result in files:
        if result.file_model is not None:
            held = entries.setdefault(result.run_name, {}).setdefault(result.model, [])
            if str(result.path.parent) not in held:
                held.append(str(result.path.parent))
    return [
        f"{name}: {len(apart)} runs that measured different things are scored apart, not pooled: "
        + "; ".join(f"{entry} ({', '.join(folders)})" for entry, folders in apart.items())
        for name, apart in entries.items()
    ]
