"""``audioicl run --draws/--orders/--prompt-variants`` as subprocesses on the tiny fixture dataset: default
runs unchanged, a kill mid-run resumed without loss or duplication, and the scorer reading such logs."""

from __future__ import annotations

import csv
import json
import re
import signal
import subprocess
import time
from functools import partial
from pathlib import Path

import cli
from helpers import read_jsonl

from audioicl import read_meta

audioicl = partial(cli.audioicl, timeout=180, rc=0)
SECONDS = re.compile(rb'"seconds": [0-9.e+-]+')


def untimed(path: Path) -> bytes:
    return SECONDS.sub(b'"seconds": 0', path.read_bytes())


def identities(path: Path) -> list[tuple]:
    return [(line["id"], line.get("draw", 0), line.get("order", 0)) for line in read_jsonl(path)]


def test_a_default_run_is_byte_identical_with_draws_of_one(fresh_dataset, tmp_path):
    common = ["run", "--data", fresh_dataset, "--model", "builtin:icl"]
    audioicl(*common, "--out", tmp_path / "plain")
    audioicl(*common, "--out", tmp_path / "ones", "--draws", 1, "--orders", 1, "--prompt-variants", 1)
    names = sorted(p.name for p in (tmp_path / "plain").glob("*_results_k*.jsonl"))
    assert names == ["icl_results_k1.jsonl", "icl_results_k2.jsonl"]
    for name in names:
        assert untimed(tmp_path / "plain" / name) == untimed(tmp_path / "ones" / name)


def _wait_for_lines(path: Path, count: int, proc: subprocess.Popen) -> None:
    while not (path.exists() and path.read_bytes().count(b"\n") >= count):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)


def test_a_run_with_draws_killed_mid_way_resumes_without_loss_or_duplication(fresh_dataset, tmp_path):
    """Kill the run while it is inside episode 10 (``builtin:icl`` perceiving its clips, all 590 s long: seconds
    of work), after episodes 1-9 in their 6 presentations each; cut the last line in half; the rerun writes
    the rest once, as a fresh run."""
    import numpy as np

    from audioicl.audio import write_wav

    episodes = read_meta(fresh_dataset / "meta" / "meta_k1.jsonl")
    blocked = episodes[9]
    long = np.random.default_rng(0).standard_normal(16_000 * 590).astype(np.float32) * 0.1
    for clip in [*(c for demo in blocked.demos for c in demo.clips), *blocked.query.clips]:
        write_wav(fresh_dataset / clip.audio_path, long)
    out = tmp_path / "out"
    results = out / "icl_results_k1.jsonl"
    args = ["run", "--data", fresh_dataset, "--model", "builtin:icl", "--out", out, "--k", 1]
    args += ["--draws", 3, "--orders", 2, "--batch-size", 1, "--window", 1]
    proc = subprocess.Popen(cli.command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for_lines(results, 9 * 6, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    data = results.read_bytes()
    assert data.count(b"\n") == 9 * 6
    results.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 40])  # half of the last line stays

    resumed = audioicl(*args)
    assert "cut a half-written last line" in resumed.stderr
    assert "k=1: 19 written (0 errors), 53 skipped as already done" in resumed.stdout
    fresh = tmp_path / "fresh"
    audioicl(*[tmp_path / "fresh" if a == out else a for a in args])
    assert untimed(results) == untimed(fresh / "icl_results_k1.jsonl")
    expected = [(ep.id, d, o) for ep in episodes for d in range(3) for o in range(2)]
    assert identities(results) == expected  # every presentation once, in the order of an uninterrupted run


def test_score_reads_a_log_with_draws_and_variants(fresh_dataset, tmp_path):
    out = tmp_path / "out"
    config = tmp_path / "run.yaml"
    config.write_text("draws: 2\nprompt-variants: 3\n", encoding="utf-8")
    audioicl("run", "--data", fresh_dataset, "--model", "builtin:icl", "--out", out, "--config", config)
    for k in (1, 2):
        written = read_jsonl(out / f"icl_results_k{k}.jsonl")
        assert len(written) == 12 * 2 * 3
        assert {(line["draw"], line["variant"]) for line in written} == {
            (d, v) for d in range(2) for v in range(3)
        }
    record = json.loads((out / "icl_run.json").read_text())
    assert record["runs"][0]["variations"]["prompt_variants"] == 3
    summary = tmp_path / "summary.csv"
    audioicl("score", "--in", out, "--out", summary)
    with summary.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {int(row["shots"]): 0 for row in rows} == {1: 0, 2: 0}
    for k in (1, 2):
        assert sum(int(row["n"]) for row in rows if row["shots"] == str(k)) == 12 * 2 * 3  # every line counts


def test_report_shows_the_spread_over_draws_orders_and_variants(fresh_dataset, tmp_path):
    """``run --draws 3 --orders 2 --prompt-variants 2`` → ``score`` → ``report``: each task's section holds the
    spread view (one row per k, the presentations asked and the sd between each); a plain run's has none."""
    varied, plain = tmp_path / "varied", tmp_path / "plain"
    run = ("run", "--data", fresh_dataset, "--model", "builtin:icl")
    audioicl(*run, "--out", varied, "--draws", "3", "--orders", "2", "--prompt-variants", "2")
    audioicl(*run, "--out", plain)
    for out in (varied, plain):
        audioicl("score", "--in", out, "--out", out / "scores" / "summary.csv")
        audioicl(
            "report", "--scores", out / "scores" / "summary.csv", "--results", out, "--out", out / "report"
        )
    markdown = (varied / "report" / "report.md").read_text(encoding="utf-8")
    page = (varied / "report" / "report.html").read_text(encoding="utf-8")
    tasks = {line["task"] for line in read_jsonl(varied / "icl_results_k1.jsonl")}
    assert markdown.count("#### Draws, orders and instruction variants") == len(tasks)
    assert page.count("<h4>Draws, orders and instruction variants</h4>") == len(tasks)
    for k in (1, 2):
        assert re.search(
            rf"\| icl \| {k} \| 3 draws × 2 orders × 2 variants \| [0-9.]+% \| [0-9.]+ pts \|", markdown
        )
    assert "Draws, orders and instruction variants" not in (plain / "report" / "report.md").read_text()
