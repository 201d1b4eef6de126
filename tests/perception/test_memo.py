"""perception.memo: measurements kept once per key, bounded by bytes, least recently used dropped first."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audioicl.perception.memo import Memo, size_of


def test_a_key_is_computed_once_while_it_stays():
    memo = Memo(max_bytes=10_000)
    calls = []
    for _ in range(3):
        assert memo.get("a", lambda: calls.append(1) or 7) == 7
    assert calls == [1] and memo.computed == 1


def test_the_memo_never_holds_more_than_its_budget():
    memo = Memo(max_bytes=100_000)
    for i in range(50):
        memo.get(i, lambda: np.zeros(1000, dtype=np.float64))  # 8 kB each
        assert memo.bytes <= memo.max_bytes
    assert 0 < len(memo) <= 12
    assert 49 in memo and 0 not in memo  # the oldest went first


def test_a_hit_keeps_an_entry_from_being_dropped():
    memo = Memo(max_bytes=30_000)
    for i in range(3):
        memo.get(i, lambda: np.zeros(1000))
    memo.get(0, lambda: None)  # a hit: 0 is now the most recently used
    memo.get(3, lambda: np.zeros(1000))
    assert 0 in memo and 1 not in memo


def test_an_entry_larger_than_the_budget_is_returned_not_kept():
    memo = Memo(max_bytes=1_000)
    value = memo.get("big", lambda: np.zeros(10_000))
    assert value.shape == (10_000,) and "big" not in memo and memo.bytes == 0


def test_size_counts_arrays_inside_containers_and_dataclasses():
    @dataclass
    class Reading:
        onsets: np.ndarray
        names: tuple[str, ...]

    array = np.zeros(5000)
    assert size_of(array) >= 40_000
    assert size_of([array, array]) >= 80_000
    assert size_of({"x": array}) >= 40_000
    assert size_of(Reading(array, ("a", "b"))) >= 40_000
