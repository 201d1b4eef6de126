"""Perception probes: one zero-shot question per query clip, its answer known from the build."""

from __future__ import annotations

from pathlib import Path

import pytest

from audioicl import read_meta
from audioicl.dataset.meta import find_meta_files
from audioicl.dataset.sidecar import load_sidecar
from audioicl.prompts.probes import PROBE_QUESTIONS, PROBE_SET, probe
from audioicl.tasks import task_names
from audioicl.tasks.transcripts import read


@pytest.fixture(scope="module")
def root(nine_tasks: Path) -> Path:
    return nine_tasks


def test_every_task_has_its_question():
    assert set(PROBE_QUESTIONS) == set(task_names())
    assert all(PROBE_SET.instruction(task, "specific") == PROBE_QUESTIONS[task] for task in task_names())


def test_probe_episodes_ask_about_the_query_with_the_answer_from_the_build(root):
    sidecar = load_sidecar(root)
    for episode in read_meta(find_meta_files(root)[1]):
        found = probe(episode, sidecar)
        assert found.error is None and found.episode.id == episode.id
        asked = found.episode
        assert asked.query.target.audio_path == episode.query.target.audio_path
        if episode.task == "AnomalyDetect":  # one reference: the first normal demo clip
            (reference,) = asked.demos
            assert [(c.label, c.role) for c in reference.clips] == [("Normal", "Normal")]
            assert reference.clips[0].audio_path in {c.audio_path for c in episode.demos[0].clips}
            assert asked.query.label == episode.query.label
        elif episode.task in ("AudioOperator", "AudioOperatorHard"):  # the spoken digits, written together
            assert asked.demos == ()
            spoken = read(sidecar.transcripts[episode.query.target.audio_path]).spoken
            assert asked.query.label == "".join(str(p) for p in spoken if isinstance(p, int))
            assert len(asked.query.label) == (2 if episode.task == "AudioOperator" else 3)
        else:  # the count, length, word or spelled pattern is the task's own label
            assert asked.demos == () and asked.query == episode.query


def test_probes_without_what_they_need_say_why(root):
    episodes = read_meta(find_meta_files(root)[1])
    operator = next(e for e in episodes if e.task == "AudioOperator")
    assert "transcripts.jsonl" in probe(operator, None).error
    anomaly = next(e for e in episodes if e.task == "AnomalyDetect")
    assert "Normal demo clip" in probe(anomaly.with_shots(0), None).error
