"""What the reuse path decides from a GPU's free memory, over the reads of the benchmark the GPU check runs
(``audioicl build --episodes 300``, 13,500 prompts, batch 128; ``python benchmarks/read_shapes.py --episodes 300
--dump tests/backends/hf/data/read_shapes_300.json``): how reads join into decodes under the KV budget of an
80 GB card (``plan.decode_groups``), and what running out of memory does to the rest of the run
(``plan.decode_reads`` with ``memory.Halving``). A change that doubles the decodes of the whole run on an H100
(issue 54: 126 → 241) fails here, on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from audioicl.backends.hf.memory import Halving  # noqa: E402
from audioicl.backends.hf.reuse.path import AUTO_DECODE_BATCHES  # noqa: E402
from audioicl.backends.hf.reuse.plan import JoinBudget, decode_groups, decode_reads, joined  # noqa: E402
from audioicl.backends.hf.reuse.rows import Member, Row, TokenSequence, cache_positions  # noqa: E402

SHAPES = Path(__file__).with_name("data") / "read_shapes_300.json"
GIB = 2**30
KV_BYTES = 32 * 2 * 32 * 128 * 2  # a position of Qwen2-Audio-7B's KV cache in bf16 (512 KiB)
STEPS = 15  # 16 new tokens: the first comes from the prefill
# the KV budgets an H100 80GB gave the whole run (a quarter of the memory free once the weights are loaded), and
# the decodes the benchmark's 105 reads make under them (a read's KV is 7.1-65 GiB: few join)
H100_BUDGETS_GIB = {"bf16": 15.76, "fp8": 17.22}
DECODES_UNDER = {"bf16": 104, "fp8": 102}


def row_of(length: int, prompts: int, first: int) -> Row:
    """A row of ``prompts`` members ``length`` positions long (what the plans read of a row: its length and
    its members), numbered from ``first``; its ids a ``range`` (a sequence of that length, held in no memory)."""
    trunk = length - (prompts - 1)
    members = [Member(TokenSequence(first, str(first), range(trunk), ()), 0, 0)]
    members += [
        Member(TokenSequence(first + at, str(first), range(trunk + 1), ()), trunk, trunk + at - 1)
        for at in range(1, prompts)
    ]
    return Row(tuple(members))


@pytest.fixture(scope="module")
def reads() -> list[list[Row]]:
    shapes = json.loads(SHAPES.read_text())
    made, first = [], 0
    for read in shapes["reads"]:
        made.append([])
        for length, prompts in read:
            made[-1].append(row_of(length, prompts, first))
            first += prompts
    assert first == shapes["prompts"] == 13_500
    return made


def h100_budget(precision: str) -> JoinBudget:
    return JoinBudget(int(H100_BUDGETS_GIB[precision] * GIB), KV_BYTES)


def kv_gib(rows: list[Row]) -> float:
    return cache_positions(rows, STEPS) * KV_BYTES / GIB


def test_rows_of_the_fixture_have_the_lengths_and_prompts_it_says():
    row = row_of(100, 5, 7)
    assert row.length == 100 and [m.sequence.index for m in row.members] == [7, 8, 9, 10, 11]
    assert row_of(40, 1, 0).length == 40


@pytest.mark.parametrize("precision", sorted(H100_BUDGETS_GIB))
def test_an_h100s_kv_budget_decodes_the_benchmarks_reads_one_decode_a_read_or_fewer(reads, precision):
    budget = h100_budget(precision)
    groups = decode_groups(reads, AUTO_DECODE_BATCHES["cuda"], lambda rows: budget.fits(rows, STEPS))
    assert len(reads) == 105 and len(groups) == DECODES_UNDER[precision]
    assert [read for group in groups for read in group] == reads  # every read once, in order
    joins = [joined(group) for group in groups if len(group) > 1]
    assert joins and all(kv_gib(rows) <= H100_BUDGETS_GIB[precision] for rows in joins)


class Card:
    """An 80 GB card as the plan sees it: a decode whose KV cache takes more than ``room_gib`` runs out of
    memory (the weights, caches and a prefill's activations take the rest), and so does the first attempt
    of rows that ``refuses`` (memory held a moment elsewhere, a fragmented cache). Counts the decodes run."""

    def __init__(self, room_gib: float, refuses=lambda rows: False):
        self.room_gib, self.refuses = room_gib, refuses
        self.decodes, self.refused = 0, set()

    def attempt(self, rows: list[Row]) -> dict:
        first = id(rows[0]), len(rows)
        if kv_gib(rows) > self.room_gib or (self.refuses(rows) and first not in self.refused):
            self.refused.add(first)
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
        self.decodes += 1
        return {member.sequence.index: None for row in rows for member in row.members}


def whole_run(reads: list[list[Row]], card: Card) -> tuple[dict[str, int], JoinBudget]:
    """The benchmark's decodes as an H100's bf16 run plans them (``plan.decode_reads`` over every read, the
    backend's ``Halving``): its counters and join budget; every prompt answered once."""
    work = {"out_of_memory": 0}
    budget = h100_budget("bf16")
    halving = Halving(torch.device("cpu"), {"lost": 0.0}, work)
    answered = decode_reads(reads, AUTO_DECODE_BATCHES["cuda"], budget, STEPS, card.attempt, halving)
    assert sorted(answered) == list(range(13_500))
    return work, budget


def test_an_h100s_out_of_memory_halvings_cost_the_benchmark_a_fifth_more_decodes_not_twice(reads, caplog):
    # room for ~48 GiB of KV cache: the 4 halvings and ~126 decodes of the standing bf16 run (e499126)
    card = Card(48)
    work, budget = whole_run(reads, card)
    assert work["out_of_memory"] == 4 and card.decodes <= 130 and budget.lowered == 0


def test_a_joined_decode_that_runs_out_of_memory_is_decoded_a_batch_at_a_time_and_halves_nothing_after_it(
    reads, caplog
):
    # the one join of the benchmark (two short batches, 51 rows) refused once: at 227f85a, its 28,407
    # prefill positions became the threshold of every read, 240 decodes; its batches alone cost one more
    most_rows_a_read = max(len(read) for read in reads)
    card = Card(48, refuses=lambda rows: len(rows) > most_rows_a_read)
    with caplog.at_level("WARNING", logger="audioicl.backends"):
        work, budget = whole_run(reads, card)
    assert work["out_of_memory"] == 5 and card.decodes <= 131
    assert budget.lowered == 1 and budget.limit < h100_budget("bf16").limit
    said = [r.getMessage() for r in caplog.records if "joined decode ran out of memory" in r.getMessage()]
    assert len(said) == 1 and "one at a time" in said[0]


@pytest.mark.parametrize("refused_at", [40, 60, 70])
def test_a_read_refused_once_at_a_size_that_ran_before_halves_only_itself(reads, refused_at):
    # one attempt of a batch alone refused (memory held a moment elsewhere): learned as the threshold, it
    # halved every later read as large (144-219 decodes); a batch as large had run, so it halves only itself
    attempts = iter(range(1, 10**6))
    single = max(len(read) for read in reads)
    card = Card(48, refuses=lambda rows: next(attempts) == refused_at and len(rows) <= single)
    work, _ = whole_run(reads, card)
    assert work["out_of_memory"] == 5 and card.decodes <= 127


def test_a_second_failure_at_a_size_that_ran_is_learned():
    work = {"out_of_memory": 0}
    halving = Halving(torch.device("cpu"), {"lost": 0.0}, work)
    tried: list[int] = []
    refusing = {"from": 10**9}

    def attempt(batch):
        tried.append(len(batch))
        if len(batch) >= refusing["from"]:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return dict.fromkeys(batch)

    halving(list(range(8)), attempt, lambda item: [item])  # 8 ran
    refusing["from"] = 8  # the card holds less from now on (a cache filled)
    for _ in range(3):
        halving(list(range(8)), attempt, lambda item: [item])
    # the first failure at 8 halves only itself, the second is learned: the third batch is halved untried
    assert tried == [8, 8, 4, 4, 8, 4, 4, 4, 4] and work["out_of_memory"] == 2
    assert work["halved_untried"] == 1
