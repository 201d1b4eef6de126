"""audioicl: build, run and score AudioICL-Bench (in-context learning in audio-language models).

The public API, one name per stage, each imported on first use (PEP 562) so that ``import audioicl`` stays
cheap and the heavy stages (torch, transformers, matplotlib, httpx) load only when used. Paths are ``str``
or ``Path`` alike (this example runs as a doctest in CI)::

    >>> import os, tempfile
    >>> import audioicl
    >>> os.chdir(tempfile.mkdtemp())
    >>> built = audioicl.build("bench", audioicl.BuildOptions(episodes=2, shots=(1, 2)))
    >>> ran = audioicl.run(audioicl.RunOptions(data="bench", model="builtin:icl", out="results"))
    >>> scoring = audioicl.score("results", "results/summary.csv")
    >>> files = audioicl.report(audioicl.ReportOptions(scores="results/summary.csv", out="report"))
    >>> sorted(p.name for p in (files.markdown, files.html))
    ['report.html', 'report.md']

The stages themselves live in packages (``audioicl.dataset``, ``audioicl.inference``, ...; docs/architecture.md has
the map); names not exported here are internal and may change between releases.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> (module, attribute)
_API: dict[str, tuple[str, str]] = {
    "AudioICLError": ("audioicl.errors", "AudioICLError"),
    "Episode": ("audioicl.records", "Episode"),
    "BuildOptions": ("audioicl.tasks.context", "BuildOptions"),
    "build": ("audioicl.dataset.build", "build"),
    "validate": ("audioicl.dataset.validate", "validate"),
    "read_meta": ("audioicl.dataset.meta", "read_meta"),
    "ModelSpec": ("audioicl.backends.base", "ModelSpec"),
    "load_backend": ("audioicl.backends.base", "load_backend"),
    "RunOptions": ("audioicl.inference.options", "RunOptions"),
    "Shard": ("audioicl.inference.options", "Shard"),
    "run": ("audioicl.inference.runner", "run"),
    "ScoreOptions": ("audioicl.scoring.score", "ScoreOptions"),
    "score": ("audioicl.scoring.score", "score_folder"),
    "judge": ("audioicl.scoring.rules", "judge"),
    "ReportOptions": ("audioicl.analysis.report", "ReportOptions"),
    "report": ("audioicl.analysis.report", "write_report"),
    "StudyOptions": ("audioicl.analysis.study.run", "StudyOptions"),
    "study": ("audioicl.analysis.study.run", "run_study"),
    "audit": ("audioicl.analysis.audit", "audit"),
    "DemoOptions": ("audioicl.analysis.demo", "DemoOptions"),
    "demo": ("audioicl.analysis.demo", "run_demo"),
}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _API[name]
    except KeyError:
        raise AttributeError(f"module 'audioicl' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
