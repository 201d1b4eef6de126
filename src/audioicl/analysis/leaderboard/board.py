"""What a leaderboard is made of: the results folders scored once (``scoring.score``: the original's rules,
cluster intervals, format compliance, coverage, the numbers over draws), each results name (``<model>`` of
``<model>_results_k<k>.jsonl``) an entry of one kind — a model, a control (``<model>+<condition>``, a study
condition such as ``+random-labels``) or a built-in floor or solver.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from audioicl.backends.base import ModelSpec
from audioicl.errors import AudioICLError
from audioicl.inference.options import CONDITION_MARK, SINGLE_CLIP
from audioicl.inference.record import Record, model_run_record
from audioicl.prompts.chat import CONTINUATION
from audioicl.scoring.coverage import NO_ANSWERS, CoverageRow
from audioicl.scoring.draws import DrawRow
from audioicl.scoring.identity import separate_runs
from audioicl.scoring.lines import entry_folders
from audioicl.scoring.score import (
    ResultFile,
    ScoredLine,
    ScoreOptions,
    SummaryRow,
    find_result_files,
    query_clips_of,
    score_files,
)

MODEL, CONTROL, FLOOR = "model", "control", "floor"
KINDS = (MODEL, CONTROL, FLOOR)  # the page's order


@dataclass(frozen=True)
class RecordFile:
    """One run record (``<model>_run.json``) found beside an entry's results files."""

    path: Path
    record: Record


@dataclass(frozen=True)
class Entry:
    """One results name: ``base`` and ``condition`` split at the first ``+`` (the condition is empty for a plain
    run), its kind, and the run records of the folders holding its results files."""

    name: str
    base: str
    condition: str
    kind: str
    records: tuple[RecordFile, ...]


@dataclass(frozen=True)
class Board:
    """Every entry (by name), the summary rows and coverage of each (name, k), every scored line, and the
    numbers over draws of each (name, k, task) whose lines hold several."""

    entries: Mapping[str, Entry]
    rows: tuple[SummaryRow, ...]
    coverage: Mapping[tuple[str, int], CoverageRow]
    lines: Mapping[tuple[str, int], tuple[ScoredLine, ...]]
    folders: tuple[Path, ...]
    draws: Mapping[tuple[str, int, str], DrawRow]
    notes: tuple[str, ...] = ()  # names whose runs measured different things, scored apart

    def of_kind(self, kind: str) -> list[Entry]:
        return [entry for entry in self.entries.values() if entry.kind == kind]

    def shots(self, name: str) -> list[int]:
        return sorted(k for entry, k in self.coverage if entry == name)

    def row(self, name: str, k: int, task: str) -> SummaryRow | None:
        return self._rows.get((name, k, task))

    @cached_property
    def _rows(self) -> dict[tuple[str, int, str], SummaryRow]:
        return {(r.model, r.shots, r.task): r for r in self.rows}


def builtin_solvers() -> frozenset[str]:
    """The names of the built-in solvers (their module registers them when imported)."""
    from audioicl.solvers import SOLVERS

    return frozenset(SOLVERS)


def classify(name: str, spec: str | None, solvers: frozenset[str]) -> tuple[str, str, str]:
    """(base, condition, kind) of a results name: a control when it carries ``+<condition>``, else a floor when
    its run record names a ``builtin:`` model (without a record: when its name is a built-in solver's)."""
    base, mark, condition = name.partition(CONDITION_MARK)
    if mark:
        return base, condition, CONTROL
    if spec is not None:
        try:
            builtin = ModelSpec.parse(spec).backend == "builtin"
        except AudioICLError:
            builtin = False
    else:
        builtin = name in solvers
    return base, "", FLOOR if builtin else MODEL


def find_files(folders: Sequence[Path], shots: Iterable[int] | None = None) -> list[ResultFile]:
    """The results files of every folder; a folder without any, or a file reached twice (a folder given twice,
    or inside another one given), is refused."""
    files: list[ResultFile] = []
    seen: dict[Path, Path] = {}
    wanted = None if shots is None else list(shots)
    for folder in folders:
        found = find_result_files(folder, shots=wanted)
        if not found:
            only = f" for k = {', '.join(map(str, wanted))}" if wanted else ""
            raise AudioICLError(
                f"no result files (<model>_results_k<k>.jsonl){only} in this folder", file=str(folder)
            )
        for result in found:
            where = result.path.resolve()
            if where in seen:
                raise AudioICLError(
                    f"results file reached twice (through {seen[where]} and {folder}): give each folder once",
                    file=str(result.path),
                )
            seen[where] = folder
            files.append(result)
    return separate_runs(
        files
    )  # runs of one name in different folders: apart when they measured other things


def _entries(files: Sequence[ResultFile]) -> dict[str, Entry]:
    solvers = builtin_solvers()
    entries = {}
    for name, held in entry_folders(files).items():
        records = tuple(
            RecordFile(*found)
            for folder, run_name in held
            if (found := model_run_record(folder, run_name)) is not None
        )
        specs = [r.record["model"] for r in records if isinstance(r.record.get("model"), str)]
        spec = specs[0] if specs else None
        base, condition, kind = classify(name, spec, solvers)
        entries[name] = Entry(name, base, condition, kind, records)
    return entries


def load_board(
    folders: Sequence[Path], data: Path | None = None, shots: Iterable[int] | None = None
) -> Board:
    """Score every results file of ``folders`` (against ``data`` when given, else each run record's data root)."""
    files = find_files(folders, shots)
    options = ScoreOptions(data=data, query_clips=query_clips_of(data) if data is not None else None)
    scoring = score_files(files, options, keep_examples=True)
    lines = {cell: tuple(scored) for cell, scored in scoring.examples.items()}
    coverage = {(c.model, c.shots): c for c in scoring.coverage}
    draws = {(d.model, d.shots, d.task): d for d in scoring.draws}
    entries = _ranked_layouts(_entries(files), coverage)
    return Board(entries, tuple(scoring.rows), coverage, lines, tuple(folders), draws, tuple(scoring.notes))


def _ranked_layouts(
    entries: dict[str, Entry], coverage: Mapping[tuple[str, int], CoverageRow]
) -> dict[str, Entry]:
    """A model's ``+single-clip`` or ``+continuation`` run goes among the models (or the floors, for a built-in
    solver's), its name saying the layout, where the model has no run of its own that answered (none, or all "no
    answers": a family that takes one clip a prompt, a base model that has no chat format), so that such a model
    is ranked by its valid run, never by its all-error one or not at all."""

    def answered(name: str) -> bool:
        cells = [row for (entry, _), row in coverage.items() if entry == name]
        return any(row.status != NO_ANSWERS for row in cells)

    moved = {}
    for name, entry in entries.items():
        base = entries.get(entry.base)
        without_own = base is None or base.kind != CONTROL and not answered(base.name)
        layout = entry.condition in (SINGLE_CLIP, CONTINUATION)
        if entry.kind == CONTROL and layout and answered(name) and without_own:
            moved[name] = replace(entry, kind=base.kind if base is not None else MODEL)
    return {**entries, **moved}
