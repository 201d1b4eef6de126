"""lmms-eval sample logs of the audioicl tasks → results files (``audioicl import-lmms-eval``).

``lmms-eval --log_samples --output_path OUT`` writes ``OUT/<model>/<date>_samples_<task>.jsonl`` (one line per
document) and ``OUT/<model>/<date>_results.json``. Each line of an audioicl task holds the metric
``audioicl_accuracy`` as its ``process_results`` made it: the episode id, task, k, ground truth and the
response (stripped). Those become the lines of ``<model>_results_k<k>.jsonl`` (SPEC §3), with ``status: "ok"``
(lmms-eval keeps no error: a model that failed answers ``""``, which scores wrong as in the original),
``source: "lmms-eval"``, ``lmms_eval_task``, ``lmms_eval_doc_id`` and ``lmms_eval_correct`` (lmms-eval's own
verdict). ``<model>`` is the last component of the run's model (``model_name`` of the results file:
``pretrained=Qwen/Qwen2-Audio-7B-Instruct`` → ``Qwen2-Audio-7B-Instruct``), else of the folder; ``name``
replaces it. Reading needs no lmms-eval.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from audioicl.errors import AudioICLError

from .episodes import results_model_name
from .imported import Imported, WrittenFile, result_line, write_results

METRIC = "audioicl_accuracy"  # lmms_eval.METRIC (not imported: that module needs numpy and the tasks)
SAMPLES_FILE = re.compile(r"^(?P<date>.+?)_samples_(?P<task>.+)\.jsonl$")


def _sample_files(paths: Sequence[str | os.PathLike]) -> list[Path]:
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            # the audioicl tasks' files (a run of other tasks too leaves theirs beside them)
            files += sorted(
                p
                for p in path.rglob("*.jsonl")
                if (match := SAMPLES_FILE.match(p.name)) and match["task"].startswith("audioicl_")
            )
        elif path.is_file():
            files.append(path)
        else:
            raise AudioICLError("no such file or folder", file=str(path))
    return files


def _run_model(samples: Path) -> str:
    """The model of the run that wrote ``samples``: from the results file of the same date beside it."""
    match = SAMPLES_FILE.match(samples.name)
    candidates = [samples.with_name(f"{match['date']}_results.json")] if match else []
    candidates += sorted(samples.parent.glob("*_results.json"))
    for candidate in candidates:
        try:
            data = json.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for value in (data.get("model_name"), (data.get("config") or {}).get("model")):
            if isinstance(value, str) and value.strip("/"):
                return value
    return samples.parent.name


def samples_results(path: Path, *, name: str | None = None) -> Iterator[Imported]:
    """The lines of one samples file (see the module docstring)."""
    model = _run_model(path)
    match = SAMPLES_FILE.match(path.name)
    task = match["task"] if match else None
    with path.open(encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                sample: Any = json.loads(text)
            except ValueError as exc:
                raise AudioICLError(f"malformed JSON: {exc}", file=str(path), line=number) from None
            verdict = sample.get(METRIC) if isinstance(sample, dict) else None
            if not isinstance(verdict, dict) or not {"id", "task", "k"} <= set(verdict):
                raise AudioICLError(
                    f"no {METRIC} record with id, task and k: not a sample of an audioicl task "
                    "(or logged without --log_samples)",
                    file=str(path),
                    line=number,
                )
            k = int(verdict["k"])
            line = result_line(
                episode_id=str(verdict["id"]),
                task=str(verdict["task"]),
                response=verdict.get("response"),
                gt=verdict.get("gt", sample.get("target")),
                k=k,
                model=model,
                error=None,
                extra={
                    "source": "lmms-eval",
                    "lmms_eval_task": task,
                    "lmms_eval_doc_id": sample.get("doc_id"),
                    "lmms_eval_correct": verdict.get("correct"),
                },
            )
            yield Imported(results_model_name(model, None, name), k, line, str(path))


def import_lmms_eval(
    paths: Sequence[str | os.PathLike], out: str | os.PathLike, *, name: str | None = None
) -> list[WrittenFile]:
    """Write the results files of the samples files in ``paths`` (files, or ``--output_path`` folders)."""
    files = _sample_files(paths)
    if not files:
        raise AudioICLError(
            f"no lmms-eval samples file (*_samples_<task>.jsonl) in {', '.join(map(str, paths))}; "
            "run lmms-eval with --log_samples"
        )
    items = [item for path in files for item in samples_results(path, name=name)]
    return write_results(Path(out), items)
