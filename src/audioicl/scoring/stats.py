"""Intervals for an accuracy: the Wilson score interval, and a cluster bootstrap over query clips (where a
query clip serves several episodes, as in the released data, the episodes are not independent and the Wilson
interval is too narrow).
"""

from __future__ import annotations

import math

import numpy as np

from audioicl.seeding import rng_for

BOOTSTRAP_DRAWS = 2000


def wilson_interval(correct: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for ``correct`` of ``n`` (95% by default); ``(0, 1)`` when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    p = correct / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def cluster_bootstrap(
    clusters: list[list[int]], name: tuple[object, ...], draws: int = BOOTSTRAP_DRAWS
) -> tuple[float, float]:
    """95% percentile interval of the accuracy when whole clusters ([correct, n] per query clip) are drawn
    with replacement: lines that share a query clip go together. Deterministic: seeded by ``name``."""
    tallies = np.array(clusters, dtype=float)
    rng = rng_for(0, "cluster-bootstrap", *name)
    weights = rng.multinomial(len(tallies), np.full(len(tallies), 1 / len(tallies)), size=draws)
    accuracy = (weights @ tallies[:, 0]) / (weights @ tallies[:, 1])
    low, high = np.quantile(accuracy, [0.025, 0.975])
    return float(low), float(high)
