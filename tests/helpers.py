"""Small helpers that several test modules share: ``from helpers import tone``.

pytest puts ``tests/`` on ``sys.path`` (its conftest.py sits in a folder without ``__init__.py``), as it does for
``reference_data`` and the servers; conftest modules themselves are not importable by name, so what a test module
calls directly lives here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from audioicl.audio import SAMPLE_RATE


def tone(
    seconds: float,
    hz: float = 440.0,
    sr: int = SAMPLE_RATE,
    *,
    amplitude: float = 0.3,
    decay: float = 0.0,
    noise_seed: int | None = None,
) -> np.ndarray:
    """A float32 sine of ``hz`` for ``seconds`` at ``sr``: ``amplitude`` times ``exp(-decay * t)``, plus white noise
    of standard deviation 0.01 drawn from ``noise_seed`` when one is given."""
    t = np.arange(round(seconds * sr)) / sr
    wave = amplitude * np.sin(2 * np.pi * hz * t)
    if decay:
        wave = wave * np.exp(-decay * t)
    if noise_seed is not None:
        wave = wave + np.random.default_rng(noise_seed).standard_normal(t.size) * 0.01
    return wave.astype(np.float32)


def quiet(_message: str) -> None:
    """A report callback (``run``'s second argument) that keeps messages for nobody."""


def read_jsonl(path: Path) -> list[dict]:
    """The objects of a JSON-lines file (a results file, a meta file), one a line."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
