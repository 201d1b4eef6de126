"""inspect_ai logs of ``audioicl/audioicl_bench`` → results files (``audioicl import-inspect``; extra ``inspect``).

Each sample of a log becomes one line of ``<model>_results_k<k>.jsonl`` (SPEC §3): ``id`` (the episode id),
``task``, ``response`` (the model's completion, stripped; None when the sample ended in an error), ``gt`` (the
target), and extras: ``status``/``error`` as ``audioicl run`` writes them, ``k``, ``model`` (inspect's model
id), ``condition``, ``source: "inspect"``, ``inspect_log``, ``inspect_sample_id`` and ``inspect_score``
(inspect's own verdict, C or I). ``<model>`` is inspect's provider and the last component of its model id
(``openai/gpt-4o-audio-preview`` → ``openai-gpt-4o-audio-preview``, ``mockllm/model`` → ``mockllm-model``: two
providers' models of one name stay apart), with ``+<condition>`` under a study condition, as ``audioicl run``
names its files; ``name`` replaces the model part. A log run with several epochs gives epoch ``epoch`` (1) only:
a results file holds one answer per episode.

Beside them, ``<model>_run.json`` records what the eval asked, from the task's arguments: the dataset root, the
k, the tasks and ``limit`` of each log (a run's selection, so that ``audioicl score`` calls an eval of some tasks
a subset, not a crashed run), and the settings that change answers (style, layout, seed, max_new_tokens).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from audioicl.errors import AudioICLError

from .episodes import parse_shots, results_model_name
from .imported import RUN_SETTINGS, Imported, ImportedRun, WrittenFile, result_line, write_results

TASK_NAME = "audioicl_bench"


def _log_files(paths: Sequence[str | os.PathLike]) -> list[tuple[Path, bool]]:
    """The logs named, each with whether it was named itself; a folder stands for the ``.eval`` and
    ``.json`` files in it (recursively), of which those that are not audioicl_bench logs are passed over."""
    files: list[tuple[Path, bool]] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix in (".eval", ".json") and p.is_file())
            if not found:
                raise AudioICLError("no inspect log (.eval or .json) in this folder", file=str(path))
            files.extend((p, False) for p in found)
        elif path.is_file():
            files.append((path, True))
        else:
            raise AudioICLError("no such log file or folder", file=str(path))
    return files


class NotOurs(AudioICLError):
    """A readable log, or a file, that is not of audioicl/audioicl_bench."""


def _score_value(sample: Any) -> Any:
    scores = getattr(sample, "scores", None) or {}
    for score in scores.values():
        return score.value
    return None


def _error_text(sample: Any) -> str | None:
    error = getattr(sample, "error", None)
    if error is not None:
        return f"inspect: {getattr(error, 'message', None) or error}"
    limit = getattr(sample, "limit", None)
    if limit is not None:
        return f"inspect: the sample hit its {getattr(limit, 'type', 'limit')} limit"
    return None


def read_log(path: Path) -> Any:
    """The inspect log at ``path``, if it is one of ``audioicl_bench`` with its samples."""
    from inspect_ai.log import read_eval_log

    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # inspect raises its own errors for a file that is not a log
        raise NotOurs(f"cannot read the inspect log: {exc}", file=str(path)) from exc
    task_name = log.eval.task.rsplit("/", 1)[-1]
    if task_name != TASK_NAME:
        raise NotOurs(f"the log is of task {log.eval.task!r}, not audioicl/{TASK_NAME}", file=str(path))
    if log.samples is None:
        raise AudioICLError("the log holds no samples (written with --no-log-samples?)", file=str(path))
    return log


def inspect_model_name(model: str) -> str:
    """``provider/.../name`` → ``provider-name``: the provider kept (``mockllm/model`` → ``mockllm-model``)."""
    provider, _, rest = model.partition("/")
    last = rest.rstrip("/").rsplit("/", 1)[-1]
    return f"{provider}-{last}" if last else provider


def log_run(log: Any, path: Path) -> ImportedRun:
    """What one log's eval asked: the task's arguments as ``audioicl run`` records a run's."""
    args = dict(log.eval.task_args or {})
    shots = args.get("k")
    tasks = args.get("tasks")
    return ImportedRun(
        model=f"inspect:{log.eval.model}",
        data=str(args["data"]) if args.get("data") else None,
        shots=None
        if shots is None
        else parse_shots(",".join(map(str, shots)) if isinstance(shots, list) else str(shots)),
        tasks=None
        if not tasks
        else (tasks.split(",") if isinstance(tasks, str) else [str(t) for t in tasks]),
        limit=args.get("limit"),
        settings={key: args.get(key, default) for key, default in RUN_SETTINGS.items()},
        source=f"inspect log {path}",
    )


def log_results(log: Any, path: Path, *, name: str | None = None, epoch: int = 1) -> Iterator[Imported]:
    """The lines of one log (see the module docstring)."""
    model = log.eval.model
    for sample in log.samples:
        if getattr(sample, "epoch", 1) != epoch:
            continue
        meta = sample.metadata or {}
        missing = [key for key in ("episode_id", "task", "k") if key not in meta]
        if missing:
            raise AudioICLError(
                f"sample {sample.id} lacks the metadata {', '.join(missing)}: not an audioicl_bench sample",
                file=str(path),
            )
        condition = meta.get("condition") or None
        error = _error_text(sample)
        output = getattr(sample, "output", None)
        completion = output.completion if output is not None and output.choices else None
        if completion is None and error is None:
            error = "inspect: the sample has no output"
        k = int(meta["k"])
        line = result_line(
            episode_id=str(meta["episode_id"]),
            task=str(meta["task"]),
            response=completion,
            gt=sample.target if isinstance(sample.target, str) else "".join(sample.target),
            k=k,
            model=model,
            error=error,
            extra={
                "condition": condition,
                "source": "inspect",
                "inspect_log": str(path),
                "inspect_sample_id": sample.id,
                "inspect_score": _score_value(sample),
                "audio_paths": list(meta.get("audio_paths") or []),
            },
        )
        yield Imported(results_model_name(name or inspect_model_name(model), condition), k, line, str(path))


def import_inspect(
    logs: Sequence[str | os.PathLike], out: str | os.PathLike, *, name: str | None = None, epoch: int = 1
) -> list[WrittenFile]:
    """Write the results files of ``logs`` (files, or folders of them) into ``out``."""
    items: list[Imported] = []
    runs: dict[str, list[ImportedRun]] = {}
    for path, named in _log_files(logs):
        try:
            log = read_log(path)
        except NotOurs:
            if named:
                raise
            continue
        found = list(log_results(log, path, name=name, epoch=epoch))
        items.extend(found)
        for model in dict.fromkeys(item.model for item in found):
            runs.setdefault(model, []).append(log_run(log, path))
    if not items:
        raise AudioICLError(f"no audioicl/{TASK_NAME} sample in {', '.join(map(str, logs))}")
    return write_results(Path(out), items, runs)
