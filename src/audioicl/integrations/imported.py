"""Results files (SPEC §3) from another tool's answers: what ``import-inspect`` and ``import-lmms-eval`` share.

An importer turns each answered sample into a ``Result`` (id, task, response, gt, and extras: ``k``,
``model``, ``status``, ``error``, ``source``, ...) under a model name and k; ``write_results`` writes them as
``<model>_results_k<k>.jsonl``, one line per episode in the order met, so ``audioicl score`` reads them as it
reads ``audioicl run``'s. It refuses an id met twice for one model and k (two logs of the same episodes) and
a results file that is already there (results are never mixed with another run's).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from audioicl.errors import AudioICLError
from audioicl.files import check_output, write_atomic
from audioicl.inference.options import RunOptions
from audioicl.inference.record import dumps_record, run_record_name
from audioicl.inference.results import results_name
from audioicl.records import Result


@dataclass(frozen=True)
class Imported:
    """One answered sample: the results file it goes to (model name and k) and its line."""

    model: str
    k: int
    result: Result
    source: str  # the log it came from (for errors)


# The settings of a run that change answers, as the tools' task arguments name them, with ``audioicl run``'s
# defaults (``RunOptions``).
RUN_SETTINGS: dict[str, object] = {
    field.name: field.default
    for field in fields(RunOptions)
    if field.name in ("style", "layout", "control", "seed", "max_new_tokens", "morse_bank")
}


@dataclass(frozen=True)
class ImportedRun:
    """What one log's eval asked, for the run record beside the imported results (``write_results``): the
    tool's model id (``inspect:openai/gpt-4o``), the dataset root, the k (None: all), the tasks (None: all),
    the first ``limit`` episodes of each, the settings (``RUN_SETTINGS``) and the log it came from."""

    model: str
    data: str | None
    shots: list[int] | None
    tasks: list[str] | None
    limit: int | None
    settings: Mapping[str, object]
    source: str

    def selection(self) -> dict[str, object]:
        """The record's run entry (``inference.record.record_selections`` reads it)."""
        return {"shots": self.shots, "tasks": self.tasks, "limit": self.limit, "source": self.source}


def run_record(name: str, runs: list[ImportedRun]) -> dict[str, object]:
    """The ``<model>_run.json`` of imported results: the first run's model, data and settings, every run's
    selection, no fingerprint (the dataset may not be on this machine: the coverage reads it from ``data``)."""
    first = runs[0]
    return {
        "model": first.model,
        "model_name": name,
        "data": first.data,
        "dataset_fingerprint": None,
        "settings": dict(first.settings),
        "shard": None,
        "runs": [run.selection() for run in runs],
        "imported": True,
    }


@dataclass(frozen=True)
class WrittenFile:
    path: Path
    lines: int
    errors: int


def group_results(items: Iterable[Imported]) -> dict[tuple[str, int], list[Imported]]:
    """Lines per (model, k) in the order met; an id met twice for one model and k is refused."""
    grouped: dict[tuple[str, int], list[Imported]] = {}
    seen: dict[tuple[str, int, str], str] = {}
    for item in items:
        key = (item.model, item.k, item.result.id)
        if key in seen:
            where = seen[key] if seen[key] == item.source else f"{seen[key]} and {item.source}"
            raise AudioICLError(
                f"episode {item.result.id} at k={item.k} is answered twice for {item.model} (in {where}); "
                "import one answer per episode",
                id=item.result.id,
            )
        seen[key] = item.source
        grouped.setdefault((item.model, item.k), []).append(item)
    return grouped


def write_results(
    out: Path, items: Iterable[Imported], runs: Mapping[str, list[ImportedRun]] | None = None
) -> list[WrittenFile]:
    """Write each (model, k)'s lines as ``out/<model>_results_k<k>.jsonl`` and, for the models ``runs``
    knows, ``out/<model>_run.json`` (``run_record``); refuses a file already there."""
    grouped = group_results(items)
    if not grouped:
        raise AudioICLError("the logs hold no answered sample to import")
    check_output(out, "--out", folder=True)
    paths = {key: out / results_name(*key) for key in grouped}
    records = {out / run_record_name(name): run_record(name, found) for name, found in (runs or {}).items()}
    present = [str(path) for path in [*paths.values(), *records] if path.exists()]
    if present:
        raise AudioICLError(
            f"{', '.join(present)} already there; import into an empty folder (results are not mixed)"
        )
    out.mkdir(parents=True, exist_ok=True)
    written: list[WrittenFile] = []
    for key in sorted(grouped):
        lines = grouped[key]
        text = "".join(json.dumps(item.result.to_json(), ensure_ascii=False) + "\n" for item in lines)
        write_atomic(paths[key], text.encode("utf-8"))
        errors = sum(1 for item in lines if item.result.extra.get("status") == "error")
        written.append(WrittenFile(paths[key], len(lines), errors))
    for path, record in records.items():
        write_atomic(path, dumps_record(record))
    return written


def result_line(
    *,
    episode_id: str,
    task: str,
    response: str | None,
    gt: object,
    k: int,
    model: str,
    error: str | None,
    extra: Mapping[str, object],
) -> Result:
    """A line as ``audioicl run`` writes one: the response stripped (None with an error), ``status``,
    ``error``, ``k`` and ``model``, then the tool's own fields."""
    text = response.strip() if isinstance(response, str) and error is None else None
    fields = {"status": "error" if error else "ok", "error": error, **extra, "k": k, "model": model}
    return Result(episode_id, task, text, gt, fields)
