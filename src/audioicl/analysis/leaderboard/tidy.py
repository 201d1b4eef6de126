"""The leaderboard's tidy table: one row per scored line (``scores.csv``, and ``scores.parquet`` where pyarrow
is importable: the ``datasets`` extra)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from audioicl.files import atomic_text, write_atomic

from .board import KINDS, Board


@dataclass(frozen=True)
class TidyRow:
    """``model`` is the entry's base name and ``condition`` its ``+<condition>`` (empty for a plain run);
    ``draw``, ``order``, ``variant`` as the line has them (0 where it has none); ``response`` and ``gt`` None
    where the line's are null (``gt`` as text: an integer label reads as its digits)."""

    model: str
    condition: str
    k: int
    task: str
    id: str
    draw: int
    order: int
    variant: int
    response: str | None
    gt: str | None
    correct: bool
    parsed: bool


TIDY_COLUMNS = tuple(f.name for f in fields(TidyRow))


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def tidy_rows(board: Board) -> list[TidyRow]:
    """Every scored line, entries in ``KINDS`` then name order, each by k then file and line order."""
    rows = []
    for kind in KINDS:
        for entry in sorted(board.of_kind(kind), key=lambda e: e.name):
            for k in board.shots(entry.name):
                for s in board.lines.get((entry.name, k), ()):
                    rows.append(
                        TidyRow(
                            entry.base,
                            entry.condition,
                            k,
                            s.task,
                            str(s.id),
                            *s.identity[1:],
                            _text(s.response),
                            _text(s.gt),
                            s.verdict.correct,
                            s.verdict.parsed,
                        )
                    )
    return rows


def write_csv(path: Path, rows: Iterable[TidyRow]) -> None:
    """csv defaults (CRLF, as the scorer's CSVs); correct and parsed as 0/1, a null as the empty field."""
    with atomic_text(path) as handle:
        writer = csv.writer(handle)
        writer.writerow(TIDY_COLUMNS)
        for row in rows:
            writer.writerow("" if v is None else int(v) if isinstance(v, bool) else v for v in astuple(row))


def has_pyarrow() -> bool:
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


def write_parquet(path: Path, rows: Sequence[TidyRow]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    kinds = {"str": pa.string(), "str | None": pa.string(), "int": pa.int64(), "bool": pa.bool_()}
    table = pa.table(
        {
            f.name: pa.array([getattr(row, f.name) for row in rows], type=kinds[f.type])
            for f in fields(TidyRow)
        }
    )
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    write_atomic(path, buffer.getvalue())
