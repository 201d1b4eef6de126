"""``audioicl demo`` as a new user runs it: one command from nothing to scores and a report."""

from __future__ import annotations

import csv
from pathlib import Path

import cli


def test_demo_builds_runs_scores_and_reports(tmp_path: Path):
    out = tmp_path / "demo"
    args = ["demo", "--out", out, "--episodes", "2", "--k", "1,3", "--workers", "1"]
    done = cli.audioicl(*args, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"report: {out / 'report' / 'report.html'}" in done.stdout
    assert "mean accuracy over tasks" in done.stdout

    with (out / "scores" / "summary.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {row["model"] for row in rows} == {"random", "majority", "text-only", "icl", "oracle"}
    assert {row["shots"] for row in rows} == {"1", "3"}
    assert len(rows) == 5 * 2 * 9 and all(row["n"] == "2" for row in rows)
    oracle = [float(row["accuracy"]) for row in rows if row["model"] == "oracle"]
    assert sum(oracle) / len(oracle) > 0.8  # perception answers nearly everything on a clean build

    html = (out / "report" / "report.html").read_text(encoding="utf-8")
    assert html.count("<audio") > 0 and "AudioRemap" in html
    assert "not embedded" not in html and "left out" not in html  # every shown example can be listened to
    assert "text-only (text-only floor)" in html and "Text-only floor:" in html
    assert "text-only floor" in (out / "report" / "report.md").read_text(encoding="utf-8")

    # A second run resumes: nothing is built or answered twice, and the numbers are the same.
    again = cli.audioicl(*args, timeout=600)
    assert again.returncode == 0, again.stderr
    with (out / "scores" / "summary.csv").open(newline="") as handle:
        assert list(csv.DictReader(handle)) == rows
    for path in (out / "results").glob("*_results_k*.jsonl"):
        ids = [line.split('"id": "')[1].split('"')[0] for line in path.read_text().splitlines()]
        assert len(ids) == len(set(ids)) == 18


def test_a_signal_stops_the_demo_in_one_line_and_the_rerun_completes(tmp_path: Path):
    """SIGTERM while the demo runs its solvers (issue 39: every command stops the same way): one line, 143, no
    lock left; the same command completes it."""
    import signal

    out = tmp_path / "demo"
    args = ["demo", "--out", out, "--episodes", "3", "--k", "1,2", "--solvers", "random,icl"]
    status, stderr = cli.stopped_by(
        signal.SIGTERM, lambda: any((out / "results").glob("*_results_k*.jsonl")), *args
    )
    assert status == 143, stderr  # the icl solver's seconds of work were still ahead
    assert stderr.strip().splitlines()[-1].startswith("audioicl demo: stopped by SIGTERM")
    assert not list(out.rglob("*.lock")) and not list(tmp_path.glob("*.lock"))
    assert "error lines" not in stderr  # issue 53: a stop raised inside a solver's call is no answer
    for path in (out / "results").glob("*_results_k*.jsonl"):
        assert '"status": "error"' not in path.read_text(), path
    done = cli.audioicl(*args, rc=0)
    assert "report:" in done.stdout and (out / "report" / "report.html").is_file()
