"""The records of scoring: a results file found (``ResultFile``) and one judged result line (``ScoredLine``:
``score.iter_scored_lines`` makes them; the draws and confusion views read them)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .rules import Verdict

# the fields a run with --draws/--orders/--prompt-variants N > 1 adds to each line (absent: 0)
REPLICATE_KEYS = ("draw", "order", "variant")
PLAIN = (0, 0, 0)


@dataclass(slots=True)
class ScoredLine:
    """One non-blank result line and its verdict; ``malformed`` lines (only with ``skip_bad_lines``) are wrong;
    ``error``: the run recorded that it could not ask the model (``status: "error"``); ``task_hint``: the task a
    malformed line's text names (read by ``id_in_broken_line``), if any."""

    model: str
    shots: int
    file: Path
    line: int
    id: object
    task: str
    response: object
    gt: object
    verdict: Verdict
    malformed: bool = False
    error: bool = False
    query_clip: str | None = None  # the query clip's audio path, when the line or the dataset tells
    task_hint: str | None = None
    replicate: tuple[int, int, int] | None = None  # (draw, order, variant) when the line holds any of them

    @property
    def identity(self) -> tuple[str, int, int, int]:
        """What a line answers: its episode id and its (draw, order, variant), 0 where absent."""
        return (str(self.id), *(self.replicate or PLAIN))


@dataclass(frozen=True)
class ResultFile:
    """One results file: ``model`` is the name its scores go under, its file name's ``<model>`` unless runs of
    that name measured different things (``scoring.identity``): then ``<model>@<what differs>``, and
    ``file_model`` keeps the file's own."""

    path: Path
    model: str
    shots: int
    file_model: str | None = None

    @property
    def run_name(self) -> str:
        """The ``<model>`` of the file's name, which names its run record ``<model>_run.json``."""
        return self.file_model or self.model


def entry_folders(files: Iterable[ResultFile]) -> dict[str, list[tuple[Path, str]]]:
    """Each entry's folders, with the name of the run record there (``ResultFile.run_name``), in the order met."""
    folders: dict[str, list[tuple[Path, str]]] = {}
    for result in files:
        held = folders.setdefault(result.model, [])
        if (result.path.parent, result.run_name) not in held:
            held.append((result.path.parent, result.run_name))
    return folders
