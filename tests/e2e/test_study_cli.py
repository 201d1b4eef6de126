"""A researcher's path through the study conditions, as subprocesses on a fresh build: ``run --k 0``,
``run --control NAME`` for each control, ``run --probe``, ``score`` and ``report`` with the conditions side by
side, ``compare``, and ``study`` in one command (with the built-in solvers and with a tiny model)."""

from __future__ import annotations

import csv
import shutil
import signal
from functools import partial
from pathlib import Path

import cli
import pytest
from helpers import read_jsonl

CONTROLS = ("random-labels", "no-audio", "noise-query", "swapped-query", "transcript")
TASKS = 9


audioicl = partial(cli.audioicl, timeout=900, rc=0)


def summary(path: Path) -> dict[tuple[str, int, str], float]:
    with path.open(newline="") as handle:
        return {
            (r["model"], int(r["shots"]), r["task"]): float(r["accuracy"]) for r in csv.DictReader(handle)
        }


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """Two episodes of every task, k = 1 and 2."""
    root = tmp_path_factory.mktemp("study-e2e") / "bench"
    audioicl("build", "--out", root, "--episodes", 2, "--k", "1,2", "--quiet", "--workers", 1)
    return root


def test_zero_shot_controls_and_probes_side_by_side(built, tmp_path):
    out = tmp_path / "results"
    proc = audioicl("run", "--data", built, "--model", "builtin:icl", "--out", out, "--k", "0-2")
    assert f"k=0: {2 * TASKS} written (0 errors)" in proc.stdout
    for control in CONTROLS:
        run = ("run", "--data", built, "--model", "builtin:icl", "--out", out, "--control", control, "--k", 2)
        proc = audioicl(*run)
        assert f"k=2: {2 * TASKS} written (0 errors), 0 skipped" in proc.stdout
        assert f"icl+{control}_results_k2.jsonl" in proc.stdout
    proc = audioicl("run", "--data", built, "--model", "builtin:icl", "--out", out, "--probe")
    assert f"k=0: {2 * TASKS} written (0 errors)" in proc.stdout
    again = audioicl(*run)
    assert f"k=2: 0 written (0 errors), {2 * TASKS} skipped" in again.stdout  # resumes like every run

    bare = read_jsonl(out / "icl+no-audio_results_k2.jsonl")
    assert all("<audio>" not in x["prompt"] for x in bare) and len({x["audio_sha256"] for x in bare}) == 1
    for line in read_jsonl(out / "icl+transcript_results_k2.jsonl"):
        assert "(transcript: " in line["prompt"] and "<audio>" not in line["prompt"]
    noisy = read_jsonl(out / "icl+noise-query_results_k2.jsonl")
    assert [x["audio_paths"][-1] for x in noisy] == [f"control:noise/{x['id']}" for x in noisy]

    scores = tmp_path / "scores" / "summary.csv"
    audioicl("score", "--in", out, "--out", scores)
    found = summary(scores)
    models = {m for m, _, _ in found}
    assert models == {"icl", "icl+probe", *(f"icl+{c}" for c in CONTROLS)}
    assert {k for m, k, _ in found if m == "icl"} == {0, 1, 2} and {
        k for m, k, _ in found if m == "icl+probe"
    } == {0}
    mean = lambda model, k: sum(v for (m, kk, _), v in found.items() if (m, kk) == (model, k)) / TASKS  # noqa: E731
    assert mean("icl", 2) > mean("icl+random-labels", 2) and mean("icl", 2) > mean("icl+noise-query", 2)
    assert mean("icl+transcript", 2) >= mean("icl", 2) - 0.12  # AnomalyDetect's measurements differ
    proc = audioicl(
        "report", "--scores", scores, "--results", out, "--out", tmp_path / "report", "--examples", 1
    )
    assert "9 task plots" in proc.stdout
    table = (tmp_path / "report" / "report.md").read_text()
    sections = {part.split("\n", 1)[0]: part for part in table.split("\n### ")[1:]}  # a table a model
    assert "| task | chance | k=0 | k=1 |" in sections["icl"]
    assert "| task | chance | k=2 |" in sections["icl+random-labels"]
    assert "| task | chance | k=0 |" in sections["icl+probe"]

    compared = audioicl(
        "compare", out, out, "--model-a", "icl", "--model-b", "icl+random-labels", "--out", tmp_path / "c.md"
    )
    assert "| B vs A k=2 | AudioCount |" in compared.stdout and "mean over tasks" in compared.stdout
    assert "Holm-Bonferroni" in (tmp_path / "c.md").read_text()
    bad = audioicl("compare", out, out, rc=2)
    assert "pick one with --model-a" in bad.stderr


def test_compare_per_example_csvs(built, tmp_path):
    out = tmp_path / "results"
    for model in ("builtin:oracle", "builtin:random"):
        audioicl("run", "--data", built, "--model", model, "--out", out, "--k", 2)
    audioicl("score", "--in", out, "--out", tmp_path / "s.csv", "--per-example-dir", tmp_path / "ex")
    proc = audioicl("compare", tmp_path / "ex" / "random_k2.csv", tmp_path / "ex" / "oracle_k2.csv")
    rows = [r for r in proc.stdout.splitlines() if r.startswith("| B vs A |")]
    assert len(rows) == TASKS + 1 and rows[-1].startswith("| B vs A | mean over tasks | 18 |")


@pytest.fixture(scope="module")
def whole_study(built, tmp_path_factory) -> tuple[Path, str]:
    """``study`` of builtin:icl over ``built`` in one uninterrupted command: its folder and stdout."""
    out = tmp_path_factory.mktemp("whole-study") / "study"
    return out, audioicl("study", "--data", built, "--model", "builtin:icl", "--out", out).stdout


def answered_lines(results: Path) -> dict[str, list[dict]]:
    """Every results file's lines without their timings (what a rerun may not change)."""
    return {
        path.name: [{k: v for k, v in line.items() if k != "seconds"} for line in read_jsonl(path)]
        for path in sorted(results.glob("*_results_k*.jsonl"))
    }


def test_a_study_stopped_at_start_up_mid_condition_and_in_its_report_resumes_exactly(
    built, whole_study, tmp_path
):
    """Issue 53, item 1: SIGTERM (a scheduler's preemption) stops the whole study at once, exit 143, in one line,
    and writes nothing a rerun takes for a result (before the fix, the stop raised inside builtin:icl's call
    became that window's error lines, and the study ran every other condition to its end and exited 1). Stopped
    three times (while it starts, while a condition runs, while the report is written), the last rerun
    completes: the same lines as the uninterrupted study's, none an error, none twice."""
    out = tmp_path / "study"
    args = ("study", "--data", built, "--model", "builtin:icl", "--out", out)
    plain = out / "results" / "icl_results_k1.jsonl"
    moments = {
        "start-up": lambda: (out / "results").is_dir(),
        "mid-condition": lambda: plain.is_file() and plain.stat().st_size > 0,
        "report": lambda: (out / "scores" / "summary.csv").is_file(),
    }
    for moment, ready in moments.items():
        status, stderr = cli.stopped_by(signal.SIGTERM, ready, *args)
        assert status == 143, f"{moment}: {stderr}"
        last = stderr.strip().splitlines()[-1]
        assert last.startswith("audioicl study: stopped by SIGTERM") and "resume" in last, f"{moment}: {last}"
        assert "error lines" not in stderr and "Traceback" not in stderr, f"{moment}: {stderr}"
        for name, lines in answered_lines(out / "results").items():
            assert all(line["status"] == "ok" for line in lines), f"{moment}: an error line in {name}"
        assert not list(out.rglob("*.lock")), moment
        assert not (out / "study.html").exists(), moment  # the report is written whole or not at all
    again = audioicl(*args)
    assert "wrote" in again.stdout and (out / "study.html").is_file()
    assert answered_lines(out / "results") == answered_lines(whole_study[0] / "results")


def test_study_in_one_command_then_resumed(built, whole_study):
    out, stdout = whole_study
    assert "[9/9] probe: k = 0" in stdout and "study.html" in stdout
    assert "[floor] builtin:text-only: k = 0, 1, 2" in stdout
    text = (out / "study.md").read_text()
    assert "## Claims the numbers support" in text and "The model listens to the query" in text
    assert "| AudioCount |" in text and "perception (probe)" in text and "text ICL (transcript)" in text
    with (out / "comparisons.csv").open(newline="") as handle:
        comparisons = list(csv.DictReader(handle))
    labels = {r["comparison"] for r in comparisons}
    assert {
        "plain k=1 vs k=0",
        "plain k=2 vs k=1",
        "plain k=2 vs k=0",
        "transcript vs plain k=2",
        "probe vs plain k=2",
    } <= labels
    assert {"general vs plain k=2", "none vs plain k=2", "random-labels vs plain k=2"} <= labels
    assert "plain vs text-only k=2" in labels and "The model beats the text-only floor" in text
    html = (out / "study.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "data:image/png;base64," in html
    again = audioicl(
        "study", "--data", built, "--model", "builtin:icl", "--out", out, "--conditions", "plain,probe"
    )
    assert f"k=2: 0 written (0 errors), {2 * TASKS} skipped" in again.stdout
    bad = audioicl(
        "study",
        "--data",
        built,
        "--model",
        "builtin:icl",
        "--out",
        out,
        "--conditions",
        "plain,shuffle",
        rc=2,
    )
    assert "unknown condition 'shuffle'" in bad.stderr


def test_study_of_a_tiny_model_runs_every_condition(built, tiny_checkpoints, tmp_path):
    """The hf backend gets every condition as every backend does: chats with and without audio, text in
    place of clips, a noise clip."""
    pytest.importorskip("torch")
    checkpoint = tmp_path / "Qwen2-Audio-7B-Instruct"
    shutil.copytree(tiny_checkpoints["qwen2-audio"], checkpoint)
    out = tmp_path / "study"
    proc = audioicl(
        "study",
        "--data",
        built,
        "--model",
        f"hf:{checkpoint}",
        "--out",
        out,
        "--k",
        "0,1",
        "--limit",
        1,
        "-o",
        "dtype=fp32",
        "-o",
        "device=cpu",
        "--max-new-tokens",
        4,
    )
    assert "errors" not in proc.stdout.split("wrote")[-1]
    found = summary(out / "scores" / "summary.csv")
    name = "Qwen2-Audio-7B-Instruct"
    expected = {
        name,
        f"{name}+style-general",
        f"{name}+style-none",
        f"{name}+probe",
        *(f"{name}+{c}" for c in CONTROLS),
    }
    assert {m for m, _, _ in found} == {*expected, "text-only"}
    for path in (out / "results").glob(f"{name}*_results_k*.jsonl"):
        for line in read_jsonl(path):
            assert line["status"] == "ok" and isinstance(line["response"], str), (
                path.name,
                line.get("error"),
            )
            audio = line["usage"].get("audio_tokens", 0)
            assert (audio == 0) == ("+no-audio" in path.name or "+transcript" in path.name), path.name
    assert (out / "study.md").is_file()
