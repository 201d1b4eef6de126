"""How the reuse path plans a window's decodes from the GPU's memory: consecutive reads (batches) joined into one
decode while their KV cache fits a budget (``JoinBudget``, ``decode_groups``), each decode then run through the
backend's ``Halving`` (``decode_reads``). A join that runs out of memory is decoded read by read and lowers the
budget: its failure teaches the joins, not the reads. (Measured by the prefill's positions, a join of two short
reads is smaller than one long read that fits: learned as the reads' threshold, its failure halved every long
read after it, twice the decodes of the whole run, issue 54.) Pure of the model: the tests plan a whole
benchmark's reads on the CPU (``tests/backends/hf/test_decode_plan.py``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...base import GenerationStopped, Response
from ..memory import Halving
from .rows import Row, cache_positions

log = logging.getLogger("audioicl.backends")


@dataclass
class JoinBudget:
    """The bytes a joined decode's KV cache may take (``limit``; None: any), at ``per_position`` bytes a
    position of the cache; ``lowered``: how often a join that ran out of memory lowered it."""

    limit: int | None
    per_position: int
    lowered: int = 0

    def fits(self, rows: Sequence[Row], steps: int) -> bool:
        return self.limit is None or self.need(rows, steps) <= self.limit

    def need(self, rows: Sequence[Row], steps: int) -> int:
        """The bytes of a decode's KV cache of ``rows`` with room for ``steps`` generated tokens a prompt."""
        return cache_positions(rows, steps) * self.per_position

    def lower_below(self, rows: Sequence[Row], steps: int) -> None:
        """No join as large as ``rows`` from now on (they ran out of memory), said once."""
        need = self.need(rows, steps)
        self.limit = need - 1 if self.limit is None else min(self.limit, need - 1)
        self.lowered += 1
        (log.debug if self.lowered > 1 else log.warning)(
            "hf backend: a joined decode ran out of memory: its batches decoded one at a time, and joins "
            "from now on within %.2f GiB of KV cache",
            self.limit / 2**30,
        )


def prefill_positions(rows: Sequence[Row]) -> int:
    """What a read costs the prefill: rows times the longest (the halving's measure of a read)."""
    return len(rows) * max(row.length for row in rows)


def row_prompts(row: Row) -> list[int]:
    """The indices of the prompts a row holds."""
    return [member.sequence.index for member in row.members]


def decode_groups(
    reads: Sequence[list[Row]], together: int, fits: Callable[[list[Row]], bool]
) -> list[list[list[Row]]]:
    """Consecutive ``reads`` grouped for one decode each: up to ``together`` reads, and only while ``fits``
    says their rows joined do (a read alone always)."""
    groups: list[list[list[Row]]] = []
    for read in reads:
        if groups and len(groups[-1]) < together and fits([*joined(groups[-1]), *read]):
            groups[-1].append(read)
        else:
            groups.append([read])
    return groups


def joined(group: Sequence[list[Row]]) -> list[Row]:
    """The rows of a group's reads, one read after another (one decode's rows)."""
    return [row for read in group for row in read]


def decode_reads(
    reads: Sequence[list[Row]],
    together: int,
    budget: JoinBudget,
    steps: int,
    attempt: Callable[[list[Row]], dict[int, Response]],
    halving: Halving,
    halted: Callable[[], bool] = lambda: False,
) -> dict[int, Response]:
    """The answers of every prompt of ``reads``: grouped (``decode_groups``), each group's rows through
    ``attempt`` (one decode), halving (``memory.Halving``) what runs out of memory. Once ``halted()``, raises
    ``GenerationStopped`` with the answers so far."""
    answered: dict[int, Response] = {}
    for group in decode_groups(reads, together, lambda rows: budget.fits(rows, steps)):
        if halted():
            raise GenerationStopped(answered)
        answered |= decode_group(group, budget, steps, attempt, halving)
    return answered


def decode_group(
    group: list[list[Row]],
    budget: JoinBudget,
    steps: int,
    attempt: Callable[[list[Row]], dict[int, Response]],
    halving: Halving,
) -> dict[int, Response]:
    """A group's answers: its reads joined in one decode where they still fit the budget (a join that runs out
    of memory lowers it), else each read through ``halving``, which halves a read that runs out of memory."""
    rows = joined(group)
    if len(group) > 1 and budget.fits(rows, steps):  # lowered since the groups were made: not tried
        made = halving.once(rows, attempt, f"{len(group)} joined batches", "decoding each alone")
        if made is not None:
            return made
        budget.lower_below(rows, steps)
    answered: dict[int, Response] = {}
    for read in group:
        answered |= halving(read, attempt, row_prompts, prefill_positions)
    return answered
