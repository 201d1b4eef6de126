"""Demonstration draws and orders: which demos an episode shows, and in what order (``run --draws/--orders``).

An episode's **pool** is the demos of its record in the dataset's largest k file: the meta files are nested
(the k-shot demos are the first k of one list), so at k < k_max the demos the k file leaves out are there to
draw from; at k = k_max the pool is the shown demos themselves and a draw can only re-order them. An
episode whose k record is not the first k of its pool (a non-nested dataset) draws from its own demos.

Draw 0 is the episode as its k file has it. Draw j >= 1 is a seeded permutation of the pool, the same for
every k, whose first k demos are shown: draw j at k = 2 is a prefix of draw j at k = 5, as the files are.
Order 0 shows a draw's demos in the draw's order; order o >= 1 is a seeded permutation of them. Every
generator comes from ``seeding.rng_for(seed, name, episode id, ...)``, so a draw never depends on the order
of work, the workers or the shard. Demos are drawn whole (a multi-clip demo keeps its clips, roles and
inner order), and every task draws an episode's demos exchangeably (``tasks``), so a subset in any order
has the label distribution the construction defines (distinct counts stay distinct, remap patterns
distinct, AnomalyDetect demos pairs).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from audioicl.records import Demo, Episode
from audioicl.seeding import rng_for

DRAW_SEED = "demo-draw"  # rng_for(seed, DRAW_SEED, episode id, draw)
ORDER_SEED = "demo-order"  # rng_for(seed, ORDER_SEED, episode id, draw, k, order)
VARIATION_FIELDS = ("draw", "order", "variant")


@dataclass(frozen=True, order=True)
class Variation:
    """One presentation of an episode: demonstration draw, demo order, instruction variant (0: as today)."""

    draw: int = 0
    order: int = 0
    variant: int = 0

    @property
    def key_suffix(self) -> str:
        """What a request key (``<id>@k<k>``) adds for it: ``/d<draw>``, ``/o<order>``, ``/v<variant>`` for
        each non-zero one; nothing for the default."""
        return "".join(
            f"/{name[0]}{value}" for name in VARIATION_FIELDS if (value := getattr(self, name)) != 0
        )

    def describe(self) -> str:
        return ", ".join(f"{name} {getattr(self, name)}" for name in VARIATION_FIELDS)


@dataclass(frozen=True)
class Variations:
    """What a run asks for each episode: ``draws`` x ``orders`` x ``variants`` presentations. A count of 1
    writes no field; above 1 its field (``draw``, ``order``, ``variant``) is on every line of the run."""

    draws: int = 1
    orders: int = 1
    variants: int = 1

    def __iter__(self) -> Iterator[Variation]:
        for draw, order, variant in itertools.product(
            range(self.draws), range(self.orders), range(self.variants)
        ):
            yield Variation(draw, order, variant)

    @property
    def fields(self) -> tuple[str, ...]:
        """The line fields this run writes."""
        counts = (self.draws, self.orders, self.variants)
        return tuple(name for name, count in zip(VARIATION_FIELDS, counts, strict=True) if count > 1)

    @property
    def varied(self) -> bool:
        return bool(self.fields)


def demo_pool(episode: Episode, largest: Episode | None) -> tuple[Demo, ...] | None:
    """What ``episode`` (a k file's record) draws from: ``largest`` (its record in the largest k file)'s
    demos when ``episode``'s are their first k; None when they are not (not nested), or there is none."""
    if largest is not None and largest.demos[: episode.k] == episode.demos:
        return largest.demos
    return None


def drawn_demos(episode: Episode, pool: Sequence[Demo], seed: int, draw: int) -> tuple[Demo, ...]:
    """The demos draw ``draw`` shows at ``episode.k``: the file's own for draw 0, else the first k of the
    pool's seeded permutation (the same for every k, so nested across k)."""
    if draw == 0:
        return episode.demos
    permutation = rng_for(seed, DRAW_SEED, episode.id, draw).permutation(len(pool))
    return tuple(pool[int(i)] for i in permutation[: episode.k])


def ordered_demos(
    demos: Sequence[Demo], seed: int, episode_id: str, draw: int, order: int
) -> tuple[Demo, ...]:
    """``demos`` in order ``order``: as given for 0, else a seeded permutation."""
    if order == 0:
        return tuple(demos)
    permutation = rng_for(seed, ORDER_SEED, episode_id, draw, len(demos), order).permutation(len(demos))
    return tuple(demos[int(i)] for i in permutation)


def present(episode: Episode, pool: Sequence[Demo], seed: int, variation: Variation) -> Episode:
    """``episode`` with the demos ``variation`` shows (its draw, then its order); the query is untouched."""
    if variation.draw == 0 and variation.order == 0:
        return episode
    demos = drawn_demos(episode, pool, seed, variation.draw)
    return replace(episode, demos=ordered_demos(demos, seed, episode.id, variation.draw, variation.order))
