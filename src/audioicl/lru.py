"""One bounded least-recently-used cache for every cache of the package (clips read, features extracted,
audio embeddings, perception results): entries weighed by a size function, the oldest dropped once the total
passes the budget."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedLRU(Generic[K, V]):
    """``get``/``put``/``fetch(key, compute)`` by key; ``size(value)`` weighs an entry (1 each by default) and
    the least recently used go once the total passes ``budget``. ``keep_one``: the newest entry stays even
    when it alone passes the budget (else it is returned, not kept). ``misses``: entries computed or put."""

    def __init__(self, budget: int, size: Callable[[V], int] = lambda _: 1, keep_one: bool = True):
        self.budget = budget
        self.size = size
        self.keep_one = keep_one
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self.total = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, key: K) -> V | None:
        found = self._items.get(key)
        if found is None:
            return None
        self._items.move_to_end(key)
        return found[0]

    def fetch(self, key: K, compute: Callable[[], V]) -> V:
        """The value of ``key``, computed (and kept) where it is not held."""
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
            return found[0]
        value = compute()
        self.put(key, value)
        return value

    def put(self, key: K, value: V, size: int | None = None) -> None:
        """Keep ``value`` (weighing ``size``, else ``self.size(value)``), dropping the oldest past the budget."""
        self.misses += 1
        weight = self.size(value) if size is None else size
        if not self.keep_one and weight > self.budget:
            return
        old = self._items.pop(key, None)
        if old is not None:
            self.total -= old[1]
        self._items[key] = (value, weight)
        self.total += weight
        while self.total > self.budget and len(self._items) > 1:
            _, (_, dropped) = self._items.popitem(last=False)
            self.total -= dropped

    def clear(self) -> None:
        """Empty, the miss count included."""
        self._items.clear()
        self.total = 0
        self.misses = 0
