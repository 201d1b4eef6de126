"""Deterministic random generators per unit of work.

Every clip, sound and episode gets its own ``numpy.random.Generator`` derived from the run seed and the
unit's stable name, so output never depends on the order of work or on the number of workers.
"""

from __future__ import annotations

import hashlib

import numpy as np


def derive_seed(seed: int, *names: object) -> int:
    """A 64-bit integer that depends only on ``seed`` and the ``names`` path."""
    text = "\x1f".join([str(seed), *map(str, names)])
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def rng_for(seed: int, *names: object) -> np.random.Generator:
    """A fresh generator for one unit of work, e.g. ``rng_for(0, "AudioCount", "episode", 17)``."""
    return np.random.default_rng(derive_seed(seed, *names))
