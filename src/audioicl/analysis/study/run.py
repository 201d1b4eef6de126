"""``audioicl study``: what did the model learn from the shots? One model over a grid of conditions.

Every condition is a run into one results folder (resumable like every run: a rerun skips what is done),
then the folder is scored and the study report written (``report.study``). The conditions:

| name | model name | k | what it tells |
|---|---|---|---|
| ``plain`` | ``<m>`` | 0..K | audio ICL; k = 0 is zero-shot (instruction and query) |
| ``general``, ``none`` | ``<m>+style-general`` ... | 0..K | how much the instruction carries |
| ``random-labels`` | ``<m>+random-labels`` | 1..K | whether the demos' labels are used |
| ``no-audio`` | ``<m>+no-audio`` | 1..K | the model's own text-only floor |
| ``noise-query``, ``swapped-query`` | ``<m>+noise-query`` ... | 1..K | whether the query is listened to |
| ``transcript`` | ``<m>+transcript`` | 1..K | text ICL with perfect perception |
| ``probe`` | ``<m>+probe`` | 0 | perception: the perceptual question asked directly |

The backend is loaded once for the whole grid. Beside the model, ``builtin:text-only`` (model ``text-only``)
runs at the plain run's k: the honest floor, what the prompt's text alone scores (``floor=False`` skips it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from audioicl.backends import load_backend
from audioicl.dataset.meta import find_meta_files
from audioicl.errors import AudioICLError
from audioicl.inference.options import RunOptions
from audioicl.inference.runner import RunSummary, run
from audioicl.scoring.score import Scoring, score_folder

from .conditions import CONDITION_NAMES, FLOOR_SPEC, Condition, condition


@dataclass(frozen=True)
class StudyOptions:
    data: Path
    model: str
    out: Path
    conditions: tuple[str, ...] = CONDITION_NAMES
    shots: tuple[int, ...] | None = None  # None: 0 and every k the dataset has
    tasks: tuple[str, ...] | None = None
    limit: int | None = None
    seed: int = 0
    name: str | None = None
    batch_size: int = 8
    max_new_tokens: int = 16
    backend_options: Mapping[str, str] = field(default_factory=dict)
    floor: bool = True  # also run builtin:text-only, the floor from the prompt's text alone

    @property
    def results(self) -> Path:
        return self.out / "results"


@dataclass(frozen=True)
class StudyOutputs:
    results: Path
    summary: Path
    study_report: Path
    html_report: Path
    scoring: Scoring
    runs: dict[str, RunSummary]

    @property
    def errors(self) -> int:
        return sum(summary.errors for summary in self.runs.values())


def _shots(options: StudyOptions, chosen: Condition, available: Sequence[int]) -> tuple[int, ...]:
    wanted = set(options.shots) if options.shots is not None else {0, *available}
    if chosen.probe:
        return (0,)
    ks = sorted(k for k in wanted if k > 0 or chosen.zero_shot)
    return tuple(ks)


def run_options(options: StudyOptions, chosen: Condition, shots: tuple[int, ...]) -> RunOptions:
    base = RunOptions(options.data, options.model, options.results).model_name
    return RunOptions(
        data=options.data,
        model=options.model,
        out=options.results,
        shots=None if chosen.probe else shots,
        tasks=options.tasks,
        style=chosen.style,
        limit=options.limit,
        seed=options.seed,
        name=chosen.model_name(options.name or base),
        batch_size=options.batch_size,
        max_new_tokens=options.max_new_tokens,
        backend_options=options.backend_options,
        control=chosen.control,
        probe=chosen.probe,
    )


def run_study(options: StudyOptions, say: Callable[[str], None] = print) -> StudyOutputs:
    """Every chosen condition into ``OUT/results``, scores into ``OUT/scores``, the study report into
    ``OUT/study.md`` and ``OUT/study.html``."""
    from .report import StudyReportOptions, write_study_report  # matplotlib only for a report

    chosen = [condition(name) for name in dict.fromkeys(options.conditions)]
    available = [k for k in find_meta_files(options.data) if k > 0]
    plans = [(c, _shots(options, c, available)) for c in chosen]
    plans = [(c, ks) for c, ks in plans if ks]
    if not plans:
        raise AudioICLError("no condition has a k to run (see --k and --conditions)")
    backend = load_backend(options.model, seed=options.seed, **options.backend_options)
    runs: dict[str, RunSummary] = {}
    try:
        for number, (c, ks) in enumerate(plans, start=1):
            say(f"[{number}/{len(plans)}] {c.name}: k = {', '.join(map(str, ks))}")
            runs[c.name] = run(run_options(options, c, ks), say, backend=backend)
            for k_summary in runs[c.name].ks:
                say(f"  {k_summary.line()}")
    finally:
        backend.close()
    plain = next((ks for c, ks in plans if c.name == "plain"), None)
    if options.floor and plain and options.model != FLOOR_SPEC:
        say(f"[floor] {FLOOR_SPEC}: k = {', '.join(map(str, plain))}")
        floor = RunOptions(
            options.data, FLOOR_SPEC, options.results, plain, options.tasks, limit=options.limit
        )
        for k_summary in run(floor, say).ks:
            say(f"  {k_summary.line()}")
    summary = options.out / "scores" / "summary.csv"
    scoring = score_folder(options.results, summary)
    base = options.name or RunOptions(options.data, options.model, options.results).model_name
    files = write_study_report(
        StudyReportOptions(
            results=options.results,
            summary=summary,
            out=options.out,
            model=base,
            conditions=tuple(c for c, _ in plans),
        )
    )
    return StudyOutputs(options.results, summary, files.markdown, files.html, scoring, runs)
