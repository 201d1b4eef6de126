"""Measurements kept per process, bounded by bytes: a clip recurs at every k and in every study condition,
so the solvers measure it once, but a long run must not grow without end (an unbounded cache held 0.9 GB in
one study run). The least recently used measurement goes first."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import numpy as np

from audioicl.lru import BoundedLRU

DEFAULT_MAX_BYTES = 256 * 2**20


def size_of(value: Any) -> int:
    """Bytes ``value`` holds, roughly: arrays by their buffer, containers and dataclasses by their parts."""
    if isinstance(value, np.ndarray):
        return value.nbytes + sys.getsizeof(value)
    if isinstance(value, str | bytes | int | float | bool | type(None)):
        return sys.getsizeof(value)
    if isinstance(value, Mapping):
        return sys.getsizeof(value) + sum(size_of(k) + size_of(v) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return sys.getsizeof(value) + sum(size_of(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sys.getsizeof(value) + sum(size_of(getattr(value, f.name)) for f in dataclasses.fields(value))
    return sys.getsizeof(value)


class Memo:
    """``get(key, compute)``: ``compute()`` once per key while the key stays among the most recently used
    entries that fit in ``max_bytes`` (an entry larger than the whole budget is returned, not kept)."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES):
        self._entries: BoundedLRU[Hashable, object] = BoundedLRU(max_bytes, size_of, keep_one=False)

    @property
    def max_bytes(self) -> int:
        return self._entries.budget

    @property
    def bytes(self) -> int:
        return self._entries.total

    @property
    def computed(self) -> int:
        """Calls of compute (for tests and measurements)."""
        return self._entries.misses

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def get(self, key: Hashable, compute: Callable[[], object]) -> object:
        return self._entries.fetch(key, compute)

    def clear(self) -> None:
        self._entries.clear()
