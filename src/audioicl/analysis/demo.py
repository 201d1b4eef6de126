"""The main job in one call: build a small benchmark, run the built-in solvers, score, report.

Every stage is the same library call the single commands make (``build``, ``run``, ``score``, ``report``),
into sub-folders of one output folder, so a demo folder looks exactly like a user's own work and a rerun
resumes (the build completes, runs skip episodes already answered, scores and report are rewritten).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from audioicl.backends import ModelSpec
from audioicl.dataset.build import build
from audioicl.files import check_output
from audioicl.inference.options import RunOptions
from audioicl.inference.runner import run
from audioicl.inference.stopping import on_signals
from audioicl.scoring.score import Scoring, format_table, score_folder
from audioicl.tasks.context import BuildOptions

DEMO_SOLVERS = ("random", "majority", "text-only", "icl", "oracle")  # text-only: the report's floor
DEMO_EPISODES = 20


@dataclass(frozen=True)
class DemoOptions:
    out: Path
    episodes: int = DEMO_EPISODES
    shots: tuple[int, ...] = (1, 2, 3, 4, 5)
    solvers: tuple[str, ...] = DEMO_SOLVERS
    seed: int = 0
    workers: int = os.cpu_count() or 1


@dataclass(frozen=True)
class DemoOutputs:
    data: Path
    results: Path
    summary: Path
    report: Path
    scoring: Scoring
    errors: int  # error lines in the results (episodes a solver could not answer)
    seconds: dict[str, float]  # wall time per stage


def run_demo(options: DemoOptions, say: Callable[[str], None] = print) -> DemoOutputs:
    from .report import ReportOptions, write_report  # matplotlib: imported only when a report is made

    out = Path(options.out)
    check_output(out, "--out", folder=True)  # before a minute of building
    data, results, scores, report = out / "data", out / "results", out / "scores", out / "report"
    seconds: dict[str, float] = {}

    start = time.perf_counter()
    say(f"[1/4] building {options.episodes} episodes per task into {data}")
    built = build(
        data,
        BuildOptions(seed=options.seed, episodes=options.episodes, shots=options.shots),
        workers=max(1, options.workers),
        progress=True,
    )
    say("      " + built.line())
    seconds["build"] = time.perf_counter() - start

    errors = 0
    with on_signals() as stop:  # SIGTERM, SIGINT: a solver's run stops after the window in hand
        for solver in options.solvers:
            start = time.perf_counter()
            say(f"[2/4] running builtin:{solver} for k = {', '.join(map(str, options.shots))}")
            solver_run = RunOptions(
                data=data, model=ModelSpec("builtin", solver), out=results, seed=options.seed
            )
            with stop.during(f"before builtin:{solver}'s first prompt"):
                errors += run(solver_run, say, stop=stop).errors
            seconds[f"run {solver}"] = time.perf_counter() - start

    start = time.perf_counter()
    summary_csv = scores / "summary.csv"
    say(f"[3/4] scoring into {summary_csv}")
    scoring = score_folder(results, summary_csv)
    seconds["score"] = time.perf_counter() - start

    start = time.perf_counter()
    say(f"[4/4] writing the report into {report}")
    files = write_report(ReportOptions(scores=summary_csv, out=report, results=results, data=data))
    seconds["report"] = time.perf_counter() - start
    return DemoOutputs(data, results, summary_csv, files.html, scoring, errors, seconds)


def mean_accuracy_table(scoring: Scoring) -> str:
    """Mean accuracy over tasks per solver and k: the one-screen answer to "does it learn from shots"."""
    cells: dict[tuple[str, int], list[float]] = {}
    for row in scoring.rows:
        cells.setdefault((row.model, row.shots), []).append(row.accuracy)
    models = list(dict.fromkeys(model for model, _ in cells))
    shots = sorted({k for _, k in cells})
    width = max(10, *(len(model) + 1 for model in models))
    lines = ["mean accuracy over tasks", f"{'solver':<{width}}" + "".join(f"{f'k={k}':>8}" for k in shots)]
    for model in models:
        values = (cells.get((model, k)) for k in shots)
        lines.append(
            f"{model:<{width}}" + "".join(f"{sum(v) / len(v):>8.1%}" if v else f"{'-':>8}" for v in values)
        )
    return "\n".join(lines)


__all__ = [
    "DEMO_EPISODES",
    "DEMO_SOLVERS",
    "DemoOptions",
    "DemoOutputs",
    "format_table",
    "mean_accuracy_table",
    "run_demo",
]
