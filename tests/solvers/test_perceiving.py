"""The perceiving built-in solvers ``builtin:oracle`` and ``builtin:icl`` on a small fresh build.

Measured on the default build (seed 0, 20 episodes per task) by ``benchmarks/solver_accuracy.py``: the oracle
answers every perceivable task right (an AudioOperatorHard demo can fit two operator assignments at k = 1);
AnomalyDetect is the exception (the oracle about 0.85-0.95, ``icl`` about 0.7-0.8), so here it is tested by
properties (a clip shown as a demo is recognised; a clear fault is caught from one normal demo), not by a
figure.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from audioicl import Episode, judge, read_meta
from audioicl.backends import ModelSpec, load_backend
from audioicl.dataset.meta import find_meta_files
from audioicl.prompts.build import build_chat
from audioicl.prompts.chat import AudioPart, Chat, PromptItem
from audioicl.prompts.clips import load_morse_bank
from audioicl.records import Clip, Query
from audioicl.solvers.perceiving import (
    ANOMALOUS,
    NORMAL,
    PRIOR_WEIGHT,
    Shown,
    deviation_score,
    learn_code_table,
    oracle_anomaly,
    read_with_table,
)
from audioicl.solvers.registry import SOLVERS
from audioicl.synth.morse import MORSE_CODE
from audioicl.tasks import task_names

PERCEIVABLE = [task for task in task_names() if task != "AnomalyDetect"]


@pytest.fixture(scope="module")
def root(nine_tasks: Path) -> Path:
    return nine_tasks


def _accuracy(root: Path, solver: str, bank_mode: str = "auto") -> dict[tuple[str, int], float]:
    solve = SOLVERS.get(solver)(0)
    bank = load_morse_bank(root, bank_mode)
    right: dict[tuple[str, int], list[bool]] = defaultdict(list)
    for k, path in find_meta_files(root).items():
        for episode in read_meta(path):
            response = solve(build_chat(episode, root, bank=bank))
            verdict = judge(episode.task, response, episode.query.label)
            assert verdict.parsed, (solver, episode.id, response)
            right[episode.task, k].append(verdict.correct)
    return {key: sum(v) / len(v) for key, v in right.items()}


def test_solvers_are_registered_backends():
    for name in ("oracle", "icl"):
        backend = load_backend(ModelSpec("builtin", name), seed=0)
        assert backend.name == f"builtin:{name}"


def test_oracle_through_run_and_score(root, tmp_path):
    """The oracle's answers go through the results files and the scorer: every response parses, and every
    perceivable task is answered right (k >= 2; at k = 1 an operator demo may fit two meanings)."""
    runs, summary = tmp_path / "runs", tmp_path / "summary.csv"
    cli = [sys.executable, "-m", "audioicl"]
    subprocess.run(
        [*cli, "run", "--data", str(root), "--model", "builtin:oracle", "--out", str(runs)], check=True
    )
    subprocess.run([*cli, "score", "--in", str(runs), "--out", str(summary)], check=True, capture_output=True)
    detail = list(csv.DictReader((tmp_path / "summary_detail.csv").open(newline="")))
    assert {row["task"] for row in detail} == set(task_names())
    assert all(int(row["unparsed"]) == 0 for row in detail)
    for row in detail:
        if row["task"] in PERCEIVABLE and int(row["shots"]) >= 2:
            assert float(row["accuracy"]) >= 0.95, row
    overall = [float(row["accuracy"]) for row in detail if row["task"] in PERCEIVABLE]
    assert sum(overall) / len(overall) >= 0.95


def test_icl_improves_with_shots_and_answers_in_format(root):
    accuracy = _accuracy(root, "icl")
    tasks = task_names()
    mean = {k: sum(accuracy[task, k] for task in tasks) / len(tasks) for k in (1, 5)}
    assert mean[5] >= mean[1]
    assert mean[5] >= 0.9
    assert all(accuracy["MorseCode", k] == 1.0 for k in range(1, 6)), (
        "the alphabet bank gives the whole table"
    )


def test_icl_morse_without_bank_learns_the_code_from_demos(root):
    accuracy = _accuracy(root, "icl", bank_mode="off")
    assert accuracy["MorseCode", 5] >= accuracy["MorseCode", 1]


def test_code_table_reading_guesses_unseen_codes_deterministically():
    table = {".-": "a", "-...": "b"}
    assert read_with_table([".-", "-...", "--..", ".-", "--.."], table) == "abeae"
    assert read_with_table(["-", "--"], {}) == "et"


def test_learn_code_table_aligns_words_letter_by_letter(root):
    episode = next(e for e in read_meta(find_meta_files(root)[5]) if e.task == "MorseCode")
    shown = Shown.of(build_chat(episode, root))
    table = learn_code_table(shown, None)
    assert {code: MORSE_CODE[letter] for code, letter in table.items()} == {code: code for code in table}
    for demo in episode.demos:
        assert all(letter in table.values() for letter in demo.label or "")


@pytest.mark.parametrize("solver", ["oracle", "icl"])
def test_anomaly_recognises_a_clip_it_was_shown(root, solver):
    """A query that is one of the demo clips gets that clip's label (nearest neighbour at distance 0)."""
    solve = SOLVERS.get(solver)(0)
    for episode in read_meta(find_meta_files(root)[3]):
        if episode.task != "AnomalyDetect":
            continue
        for demo in episode.demos:
            for clip in demo.clips:
                query = Query((Clip(clip.audio_path, None, "Query"),), clip.label or "", multi=True)
                probe = Episode(episode.id, episode.task, episode.demos, query, episode.extra)
                assert solve(build_chat(probe, root)) == clip.label


def _machine_episode(machine_type: str, query_anomaly: str | None, k: int = 1) -> Chat:
    """k (normal, anomalous) pairs of one synthetic machine (demo faults drawn from the type's other kinds) and a
    query, as the chat the solvers see."""
    from audioicl.synth.machines import ANOMALY_KINDS, machine_clip, machine_unit

    unit = machine_unit(machine_type, np.random.default_rng(11))
    others = [kind for kind in ANOMALY_KINDS[machine_type] if kind != query_anomaly]

    def item(kind: str, index: int, role: str, anomaly: str | None, seed: int) -> PromptItem:
        audio = AudioPart.of(machine_clip(unit, np.random.default_rng(seed), anomaly), 16_000)
        return PromptItem(kind, index, role, role, audio, None if kind == "query" else role)  # type: ignore[arg-type]

    items = []
    for i in range(1, k + 1):
        items.append(item("demo", i, NORMAL, None, i))
        items.append(item("demo", i, ANOMALOUS, others[i % len(others)], 50 + i))
    items.append(item("query", 1, "Query", query_anomaly, 99))
    return Chat("AnomalyDetect", (), tuple(items))


@pytest.mark.parametrize(
    ("machine_type", "anomaly"),
    [
        ("bearing", None),
        ("bearing", "inner_race"),
        ("valve", None),
        ("valve", "missing_event"),
        ("fan", "bearing_squeal"),
    ],
)
def test_oracle_anomaly_catches_a_fault_of_a_kind_no_demo_shows(machine_type, anomaly):
    """One normal demo is enough to judge a query, even when the demo's fault is of another kind."""
    chat = _machine_episode(machine_type, anomaly)
    assert oracle_anomaly(chat, Shown.of(chat)) == (NORMAL if anomaly is None else ANOMALOUS)


def test_deviation_score_counts_in_normal_spreads_shrunk_to_the_prior():
    prior = np.array([1.0, 1.0])
    one_normal = np.sqrt(
        PRIOR_WEIGHT / (1 + PRIOR_WEIGHT)
    )  # the spread of a lone normal clip: the prior, shrunk
    assert deviation_score(np.array([3.0, 0.0]), np.array([[0.0, 0.0]]), prior) == pytest.approx(
        3.0 / one_normal
    )
    normals = np.array([[-10.0, 0.0], [10.0, 0.0]])  # a wide normal spread in the first measurement
    assert deviation_score(np.array([3.0, 0.0]), normals, prior) < 1.0
    both_agree = np.sqrt(PRIOR_WEIGHT / (2 + PRIOR_WEIGHT))
    assert deviation_score(np.array([0.0, 3.0]), normals, prior) == pytest.approx(3.0 / both_agree)
