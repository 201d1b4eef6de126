"""The numbers a report shows: accuracy per (model, shots, task) with Wilson (or cluster) intervals, chance
levels, and the text-only floor (the results of ``builtin:text-only``, model ``text-only``: what the prompt's
text alone scores), which the report draws apart from the models. With the coverage CSV beside the summary
(``scoring.coverage``), the mean over tasks of a model at a k is over its complete tasks only and carries its
coverage (complete, subset, incomplete, unchecked); a summary without one is read as before."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from audioicl.errors import AudioICLError
from audioicl.scoring.coverage import COMPLETE, CoverageRow, coverage_path, read_coverage
from audioicl.scoring.score import SummaryRow, detail_path, read_summary
from audioicl.tasks.chance import order_tasks

FLOOR_MODEL = "text-only"  # builtin:text-only's model name in result files and summaries
# the interval a report draws: Wilson treats the n episodes as independent; ``cluster`` spans both Wilson's
# and the cluster bootstrap's over query clips (from the detail CSV), which is wider where a query clip serves
# several episodes (a bootstrap alone collapses to a point at 0 % or 100 %)
INTERVALS = {
    "wilson": "95% Wilson interval",
    "cluster": "95% interval spanning Wilson's and the cluster bootstrap's over query clips",
}


@dataclass(frozen=True)
class Cell:
    """One summary row: accuracy over ``n`` results and its 95% interval (``AccuracyGrid.interval``);
    ``errors``: how many of the n are error lines (episodes the run could not ask, counted as wrong), None
    when the scores do not say; ``partial``: (present, selected) episodes when the coverage says some of the
    task's episodes have no line; ``cluster``: the cluster bootstrap's 95% interval over query clips (detail
    CSV); ``parsed_share``, ``accuracy_parsed``: format compliance (detail CSV); None: the scores do not say."""

    accuracy: float
    n: int
    low: float
    high: float
    errors: int | None = None
    partial: tuple[int, int] | None = None
    cluster: tuple[float, float] | None = None
    parsed_share: float | None = None
    accuracy_parsed: float | None = None


@dataclass(frozen=True)
class MeanCell:
    """Unweighted mean of the task accuracies one model has at one k, over ``tasks`` of ``of`` tasks.
    ``status``: the coverage's (``complete``, ``subset``, ``incomplete``, ``unchecked``; None without a
    coverage CSV), ``selection``: the runs' selection of a subset."""

    accuracy: float
    tasks: int
    of: int
    status: str | None = None
    selection: str = ""

    @property
    def complete(self) -> bool:
        """Over every task of the dataset, every episode present (unknown without coverage: True)."""
        return self.status in (None, COMPLETE)


@dataclass(frozen=True)
class AccuracyGrid:
    models: tuple[str, ...]
    shots: tuple[int, ...]
    tasks: tuple[str, ...]
    cells: Mapping[tuple[str, int, str], Cell]
    floor: str | None = None  # the model whose results are the text-only floor, when the summary has it
    interval: str = "wilson"  # which of INTERVALS the cells hold
    coverage: Mapping[tuple[str, int], CoverageRow] = field(default_factory=dict)  # (model, k) → its coverage

    @property
    def interval_label(self) -> str:
        return INTERVALS[self.interval]

    @property
    def lines(self) -> tuple[str, ...]:
        """The models drawn as models: all but the floor."""
        return tuple(model for model in self.models if model != self.floor)

    def cell(self, model: str, shots: int, task: str) -> Cell | None:
        return self.cells.get((model, shots, task))

    def clustered(self, task: str | None = None) -> bool:
        """Every model cell (of ``task``, or of all tasks) holds its cluster interval: the plots' bands
        show it."""
        cells = [c for (m, _, t), c in self.cells.items() if m != self.floor and task in (None, t)]
        return bool(cells) and all(c.cluster is not None for c in cells)

    def mean(self, model: str, shots: int) -> MeanCell | None:
        """Over the tasks present, or, with coverage, over the complete tasks only (of the dataset's)."""
        coverage = self.coverage.get((model, shots))
        over = self.tasks if coverage is None or coverage.mean_over is None else coverage.mean_over
        values = [c.accuracy for t in over if (c := self.cell(model, shots, t)) is not None]
        if not values:
            return None
        if coverage is None:
            return MeanCell(sum(values) / len(values), len(values), len(self.tasks))
        of = coverage.tasks_expected if coverage.tasks_expected is not None else len(values)
        return MeanCell(sum(values) / len(values), len(values), of, coverage.status, coverage.selection)

    def short(self) -> list[CoverageRow]:
        """The coverage of every (model, k) that is not complete, in model and k order."""
        return [c for key, c in sorted(self.coverage.items()) if not c.complete]


def _read(path: Path) -> list[SummaryRow]:
    try:
        return read_summary(path)
    except AudioICLError as exc:
        if exc.line is None and Path(path).is_file():
            exc.line = 1
        raise


def load_grid(path: Path, floor: str = FLOOR_MODEL, interval: str = "wilson") -> AccuracyGrid:
    """The summary CSV as a grid; errors name the file and line (a bad header is line 1). Error-line counts
    and cluster intervals come from the CSV when it is a detail CSV, else from the detail CSV beside it
    (``<stem>_detail.csv``). ``floor``: the model drawn as the text-only floor, if present; ``interval``: one
    of ``INTERVALS``."""
    if interval not in INTERVALS:
        raise AudioICLError(f"interval must be wilson or cluster, got {interval!r}")
    rows = _read(path)
    detail = _detail_rows(path, rows)
    if interval == "cluster":
        _check_clusters(path, detail)
    if detail is not None and detail[0] != path:
        known = {(r.model, r.shots, r.task): r for r in detail[1]}
        rows = [_with_detail(row, known.get((row.model, row.shots, row.task))) for row in rows]
    beside = coverage_path(path)
    coverage = read_coverage(beside) if beside.is_file() else ()
    return grid_from_rows(rows, str(path), floor, interval, coverage)


def _detail_rows(path: Path, rows: list[SummaryRow]) -> tuple[Path, list[SummaryRow]] | None:
    """The detail CSV's rows and where they come from: ``path`` itself when it is one, else the file beside it."""
    if rows and all(row.errors is not None for row in rows):
        return path, rows
    beside = detail_path(path)
    return (beside, _read(beside)) if beside.is_file() else None


def _with_detail(row: SummaryRow, detail: SummaryRow | None) -> SummaryRow:
    if detail is None:
        return row
    return replace(
        row,
        errors=detail.errors,
        cluster_interval=detail.cluster_interval,
        unparsed=detail.unparsed,
        correct_parsed=detail.correct_parsed,
    )


def _check_clusters(path: Path, detail: tuple[Path, list[SummaryRow]] | None) -> None:
    """Cluster intervals are asked for: every row of the detail CSV must hold one."""
    if detail is None:
        raise AudioICLError(
            f"cluster intervals are in the detail CSV that 'audioicl score' writes, and there is no detail CSV "
            f"beside this summary ({detail_path(path).name})",
            file=str(path),
        )
    source, rows = detail
    for index, row in enumerate(rows, start=1):
        if row.cluster_interval is None:
            raise AudioICLError(
                f"the query clips of model {row.model!r}, k={row.shots}, {row.task} are unknown (its result "
                "lines name no audio_paths): score again with --data ROOT for cluster intervals",
                file=str(source),
                line=index + 1,
            )


def grid_from_rows(
    rows: list[SummaryRow],
    source: str,
    floor: str = FLOOR_MODEL,
    interval: str = "wilson",
    coverage: Iterable[CoverageRow] = (),
) -> AccuracyGrid:
    covered = {(c.model, c.shots): c for c in coverage}
    partial = {(c.model, c.shots, t): (have, of) for c in covered.values() for t, have, of in c.partial_tasks}
    if not rows:
        raise AudioICLError("summary has a header but no rows", file=source, line=2)
    cells: dict[tuple[str, int, str], Cell] = {}
    for index, row in enumerate(rows, start=1):
        where = {"file": source, "line": index + 1}  # exact unless the file has blank lines
        key = (row.model, row.shots, row.task)
        if key in cells:
            raise AudioICLError(
                f"data row {index}: second row for model {row.model!r}, shots {row.shots}, task {row.task!r}",
                **where,
            )
        if not (0.0 <= row.accuracy <= 1.0) or row.n <= 0 or row.shots < 0:
            raise AudioICLError(
                f"data row {index}: need 0 <= accuracy <= 1, n > 0 and shots >= 0 "
                f"(got accuracy {row.accuracy}, n {row.n}, shots {row.shots})",
                **where,
            )
        if interval == "cluster":
            if row.cluster_interval is None:
                raise AudioICLError(
                    f"data row {index}: the detail CSV holds no cluster interval for it", **where
                )
            wilson = row.interval()
            low, high = min(wilson[0], row.cluster_interval[0]), max(wilson[1], row.cluster_interval[1])
        else:
            low, high = row.interval()
        cells[key] = Cell(
            row.accuracy,
            row.n,
            low,
            high,
            row.errors,
            partial.get(key),
            row.cluster_interval,
            row.parsed_share,
            row.accuracy_parsed,
        )
    models = tuple(sorted({row.model for row in rows}))
    return AccuracyGrid(
        models=models,
        shots=tuple(sorted({row.shots for row in rows})),
        tasks=order_tasks({row.task for row in rows}),
        cells=cells,
        floor=floor if floor in models else None,
        interval=interval,
        coverage=covered,
    )
