"""``audioicl study``: what did the model learn from the shots? One model over the grid of conditions.

Every condition (``study.conditions``) is a run into one results folder (resumable like every run: a rerun
skips what is done), then the folder is scored and the study report written (``study.report``). The backend
is loaded once for the whole grid. Beside the model, ``builtin:text-only`` (model ``text-only``)
runs at the plain run's k: the honest floor, what the prompt's text alone scores (``floor=False`` skips it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from audioicl.backends import load_backend
from audioicl.dataset.meta import find_meta_files
from audioicl.errors import AudioICLError
from audioicl.files import check_output
from audioicl.inference.options import RunOptions
from audioicl.inference.runner import RunSummary, preflight, run
from audioicl.inference.stopping import StopRequest, on_signals
from audioicl.scoring.score import Scoring, score_folder

from .conditions import CONDITION_NAMES, FLOOR_SPEC, Condition, condition


@dataclass(frozen=True)
class StudyOptions:
    """``run``: what every condition's run shares (data, model, selection, seed, name, batch size, decoding
    budget, backend options), with ``run.out`` the study's folder (the runs go to ``out/results``) and
    ``run.shots`` None for 0 and every k the dataset has; each condition sets its own style, control and probe.
    """

    run: RunOptions
    conditions: tuple[str, ...] = CONDITION_NAMES
    floor: bool = True  # also run builtin:text-only, the floor from the prompt's text alone

    @property
    def out(self) -> Path:
        return self.run.out

    @property
    def results(self) -> Path:
        return self.out / "results"

    @property
    def model_name(self) -> str:
        """The plain run's ``<model>``."""
        return self.run.name or self.run.model.file_name


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
    wanted = set(options.run.shots) if options.run.shots is not None else {0, *available}
    if chosen.probe:
        return (0,)
    ks = sorted(k for k in wanted if k > 0 or chosen.zero_shot)
    return tuple(ks)


def run_options(options: StudyOptions, chosen: Condition, shots: tuple[int, ...]) -> RunOptions:
    return replace(
        options.run,
        out=options.results,
        shots=None if chosen.probe else shots,
        style=chosen.style,
        name=options.model_name,
        control=chosen.control,
        probe=chosen.probe,
    )


def run_study(options: StudyOptions, say: Callable[[str], None] = print) -> StudyOutputs:
    """Every chosen condition into ``OUT/results``, scores into ``OUT/scores``, the study report into
    ``OUT/study.md`` and ``OUT/study.html``. SIGTERM or SIGINT stops the whole study (``inference.stopping``):
    in a condition's run after the window in hand, anywhere else at once; nothing a rerun takes for a result
    is written, and the same command completes what is missing."""
    check_output(options.out, "--out", folder=True)
    chosen = [condition(name) for name in dict.fromkeys(options.conditions)]
    available = [k for k in find_meta_files(options.run.data) if k > 0]
    plans = [(c, _shots(options, c, available)) for c in chosen]
    plans = [(c, ks) for c, ks in plans if ks]
    if not plans:
        raise AudioICLError("no condition has a k to run (see --k and --conditions)")
    with on_signals() as stop:
        # every condition's run checked before the model loads (each checks again, saying so)
        for c, ks in plans:
            preflight(run_options(options, c, ks), lambda _message: None, model="none")
        runs = _run_conditions(options, plans, say, stop)
        with stop.during("after every run, while scoring and writing the study report"):
            return _scored_and_reported(options, plans, runs)


def _run_conditions(
    options: StudyOptions,
    plans: Sequence[tuple[Condition, tuple[int, ...]]],
    say: Callable[[str], None],
    stop: StopRequest,
) -> dict[str, RunSummary]:
    """Each condition's run on one loaded backend, then the floor's."""
    shared = options.run
    with stop.during("before the first prompt, while the model loads"):
        backend = load_backend(shared.model, seed=shared.seed, **shared.backend_options)
    runs: dict[str, RunSummary] = {}
    try:
        for number, (c, ks) in enumerate(plans, start=1):
            say(f"[{number}/{len(plans)}] {c.name}: k = {', '.join(map(str, ks))}")
            with stop.during(f"before condition {c.name} ({number} of {len(plans)})"):
                runs[c.name] = run(run_options(options, c, ks), say, backend=backend, stop=stop)
            for k_summary in runs[c.name].ks:
                say(f"  {k_summary.line()}")
    finally:
        backend.close()
    plain = next((ks for c, ks in plans if c.name == "plain"), None)
    if options.floor and plain and shared.model != FLOOR_SPEC:
        say(f"[floor] {FLOOR_SPEC}: k = {', '.join(map(str, plain))}")
        floor = RunOptions(
            shared.data,
            FLOOR_SPEC,
            options.results,
            plain,
            shared.tasks,
            limit=shared.limit,
            allow_missing_audio=shared.allow_missing_audio,
        )
        with stop.during("before the floor's run"):
            for k_summary in run(floor, say, stop=stop).ks:
                say(f"  {k_summary.line()}")
    return runs


def _scored_and_reported(
    options: StudyOptions, plans: Sequence[tuple[Condition, tuple[int, ...]]], runs: dict[str, RunSummary]
) -> StudyOutputs:
    from .report import StudyReportOptions, write_study_report  # matplotlib only for a report

    summary = options.out / "scores" / "summary.csv"
    scoring = score_folder(options.results, summary)
    files = write_study_report(
        StudyReportOptions(
            results=options.results,
            summary=summary,
            out=options.out,
            model=options.model_name,
            conditions=tuple(c for c, _ in plans),
        )
    )
    return StudyOutputs(options.results, summary, files.markdown, files.html, scoring, runs)
