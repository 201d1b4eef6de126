"""Study conditions through the runner: k = 0, controls and probes in run records and file names, and the
built-in solvers as honest checks of what each condition takes away."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from helpers import quiet

from audioicl import AudioICLError, RunOptions, judge, read_meta, run
from audioicl.dataset.meta import find_meta_files, write_meta
from audioicl.inference.results import iter_results

EPISODES = 3
RULE_FROM_LABELS = ("AudioCount", "AudioCountHard", "AudioLength", "AudioLengthHard", "AudioOperatorHard")


@pytest.fixture(scope="module")
def root(nine_tasks: Path) -> Path:
    return nine_tasks


@pytest.fixture(scope="module")
def icl_runs(root, tmp_path_factory) -> Path:
    """builtin:icl at k = 0 and 5, under every control, and its probes, in one folder."""
    out = tmp_path_factory.mktemp("icl-conditions")
    run(RunOptions(root, "builtin:icl", out, shots=(0, 5)), quiet)
    for control in ("random-labels", "no-audio", "noise-query", "swapped-query", "transcript"):
        run(RunOptions(root, "builtin:icl", out, shots=(5,), control=control), quiet)
    run(RunOptions(root, "builtin:icl", out, probe=True), quiet)
    return out


def accuracy(path: Path) -> dict[str, float]:
    right: dict[str, list[bool]] = defaultdict(list)
    for line in iter_results(path):
        right[line.data["task"]].append(
            judge(line.data["task"], line.data["response"], line.data["gt"]).correct
        )
    return {task: sum(v) / len(v) for task, v in right.items()}


def test_conditions_sit_beside_the_plain_run_under_their_own_names(icl_runs):
    names = sorted(p.name for p in icl_runs.iterdir() if p.suffix == ".jsonl")
    assert names == [
        "icl+no-audio_results_k5.jsonl",
        "icl+noise-query_results_k5.jsonl",
        "icl+probe_results_k0.jsonl",
        "icl+random-labels_results_k5.jsonl",
        "icl+swapped-query_results_k5.jsonl",
        "icl+transcript_results_k5.jsonl",
        "icl_results_k0.jsonl",
        "icl_results_k5.jsonl",
    ]
    plain = json.loads((icl_runs / "icl_run.json").read_text())
    assert "condition" not in plain["settings"]  # a plain run's record is as before
    assert plain["runs"][0]["k0_from"] == "meta_k1.jsonl"
    for condition in ("random-labels", "probe"):
        record = json.loads((icl_runs / f"icl+{condition}_run.json").read_text())
        assert record["settings"]["condition"] == condition and record["model_name"] == f"icl+{condition}"
    record = json.loads((icl_runs / "icl+transcript_run.json").read_text())
    assert len(record["settings"]["transcripts"]) == 64  # the sidecar's sha256


def test_k0_asks_the_queries_of_the_smallest_k_zero_shot(root, icl_runs):
    lines = [line.data for line in iter_results(icl_runs / "icl_results_k0.jsonl")]
    k1 = read_meta(find_meta_files(root)[1])
    assert [(x["id"], x["gt"]) for x in lines] == [(ep.id, ep.query.label) for ep in k1]
    for line in lines:
        assert line["k"] == 0 and "Demo" not in line["prompt"] and line["prompt"].endswith("Label:")
        assert line["audio_paths"][-1] in {c.audio_path for ep in k1 for c in ep.query.clips}


def test_icl_learns_from_the_labels_listens_to_the_query_and_reads_transcripts(icl_runs):
    plain = accuracy(icl_runs / "icl_results_k5.jsonl")
    assert all(plain[task] == 1.0 for task in RULE_FROM_LABELS)
    # random labels: where the rule comes from the labels alone, icl falls to its floor
    shuffled = accuracy(icl_runs / "icl+random-labels_results_k5.jsonl")
    floor = accuracy(icl_runs / "icl+no-audio_results_k5.jsonl")
    assert sum(shuffled[t] for t in RULE_FROM_LABELS) / len(RULE_FROM_LABELS) <= 1 / 3
    assert sum(floor.values()) / len(floor) <= 0.25
    # the query replaced by noise or by another episode's: chance
    for control in ("noise-query", "swapped-query"):
        heard = accuracy(icl_runs / f"icl+{control}_results_k5.jsonl")
        perceivable = [t for t in heard if t != "AnomalyDetect"]
        assert sum(heard[t] for t in perceivable) / len(perceivable) <= 0.2, control
    # transcripts: the tasks it solves from audio it solves from text
    text = accuracy(icl_runs / "icl+transcript_results_k5.jsonl")
    assert all(text[task] >= plain[task] for task in plain if task != "AnomalyDetect")
    # probes: what it hears, asked directly
    probe = accuracy(icl_runs / "icl+probe_results_k0.jsonl")
    assert all(probe[task] == 1.0 for task in probe if task != "AnomalyDetect")


def test_probe_lines_carry_the_probe_answer_and_question(icl_runs):
    lines = {x.data["id"]: x.data for x in iter_results(icl_runs / "icl+probe_results_k0.jsonl")}
    operator = next(x for x in lines.values() if x["task"] == "AudioOperatorHard")
    assert (
        len(operator["gt"]) == 3
        and operator["gt"].isdigit()
        and "Which digits are spoken?" in operator["prompt"]
    )
    anomaly = next(x for x in lines.values() if x["task"] == "AnomalyDetect")
    assert "[Demo 1 Normal]" in anomaly["prompt"] and "Label: Normal" in anomaly["prompt"]


def test_condition_options_are_checked(root, tmp_path):
    with pytest.raises(AudioICLError, match="unknown control 'shuffle'"):
        run(RunOptions(root, "builtin:icl", tmp_path, control="shuffle"), quiet)
    with pytest.raises(AudioICLError, match="one at a time"):
        run(RunOptions(root, "builtin:icl", tmp_path, control="no-audio", probe=True), quiet)
    with pytest.raises(AudioICLError, match="k = 0 only"):
        run(RunOptions(root, "builtin:icl", tmp_path, probe=True, shots=(1,)), quiet)
    with pytest.raises(AudioICLError, match="--style does not apply"):
        run(RunOptions(root, "builtin:icl", tmp_path, probe=True, style="none"), quiet)
    with pytest.raises(AudioICLError, match="no meta file for k=7"):
        run(RunOptions(root, "builtin:icl", tmp_path, shots=(0, 7)), quiet)


def test_operator_probes_without_builder_transcripts_are_error_lines(root, tmp_path):
    """The released dataset has no transcripts: the digits probe cannot know its answer and says why."""
    copy = tmp_path / "copy"
    for folder in ("audiooperator", "audiocount"):
        shutil.copytree(root / "data" / folder, copy / "data" / folder)
    kept = [ep for ep in read_meta(find_meta_files(root)[1]) if ep.task in ("AudioOperator", "AudioCount")]
    write_meta(copy / "meta" / "meta_k1.jsonl", kept)
    summary = run(RunOptions(copy, "builtin:oracle", tmp_path / "out", probe=True), quiet)
    assert summary.errors == EPISODES
    lines = [x.data for x in iter_results(tmp_path / "out" / "oracle+probe_results_k0.jsonl")]
    errors = [x for x in lines if x["status"] == "error"]
    assert {x["task"] for x in errors} == {"AudioOperator"} and "transcripts.jsonl" in errors[0]["error"]
