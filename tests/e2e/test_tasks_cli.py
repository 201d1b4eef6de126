"""``audioicl tasks``: the table and its JSON, checked against the task registry and the build."""

from __future__ import annotations

import json
from functools import partial

import cli

from audioicl.tasks import TASKS, task_names
from audioicl.tasks.catalog import K_SCAN_LIMIT
from audioicl.tasks.chance import chance_level
from audioicl.tasks.count import MAX_COUNT

audioicl = partial(cli.audioicl, timeout=120, rc=0)


def test_tasks_json_holds_every_task_in_benchmark_order():
    listed = json.loads(audioicl("tasks", "--json").stdout)
    assert [t["name"] for t in listed] == task_names()
    by_name = {t["name"]: t for t in listed}
    for name, task in by_name.items():
        spec = TASKS.get(name)
        assert (task["family"], task["answer"], task["labels"]) == (
            spec.family,
            spec.answer,
            spec.labels.description,
        )
        assert task["chance"] == chance_level(name).value
        assert task["k_min"] == 0 and task["k_scan_limit"] == K_SCAN_LIMIT
    # distinct counts within an episode: k demos and the query need k + 1 of the counts 1..8
    assert by_name["AudioCount"]["k_max"] == MAX_COUNT - 1
    assert by_name["AudioCount"]["clips_per_prompt"]["3"] == 4
    remap = by_name["AudioRemap"]
    assert (remap["clips_per_demo"], remap["clips_per_query"], remap["roles"]) == (3, 3, ["A", "B", "MIX"])
    assert remap["clips_per_prompt"]["5"] == 18
    anomaly = by_name["AnomalyDetect"]
    assert (anomaly["clips_per_demo"], anomaly["clips_per_query"]) == (2, 1)
    morse = by_name["MorseCode"]
    assert morse["shared_clips"] == 26 and morse["clips_per_prompt"]["1"] == 28 and morse["n_labels"] is None


def test_tasks_table():
    out = audioicl("tasks").stdout.splitlines()
    assert out[0].split() == ["task", "family", "answer", "label", "space", "chance", "clips", "k"]
    rows = {line.split()[0]: line for line in out[1:] if line and line.split()[0] in task_names()}
    assert list(rows) == task_names()
    assert rows["AudioCount"].split()[1:3] == ["count", "integer"]
    assert "integers 1..8 (8)" in rows["AudioCount"] and rows["AudioCount"].split()[-3:] == [
        "12.5%",
        "k+1",
        f"0-{MAX_COUNT - 1}",
    ]
    assert rows["AudioRemap"].split()[-2] == "3k+3" and rows["MorseCode"].split()[-2] == "k+27"
    assert rows["AnomalyDetect"].split()[-3:-1] == ["50.0%", "2k+1"]


def test_the_k_legend_says_what_the_column_holds():
    """Issue 40, item 14: the legend called k ranges up to 0-64+ "what the default build makes" (1..5)."""
    table = audioicl("tasks").stdout
    assert (
        "can make of the task from the built-in sounds" in table
        and "the default build makes k = 1-5" in table
    )


def test_a_reader_that_goes_away_ends_the_listing_quietly():
    """``audioicl backends | head -1`` printed a BrokenPipeError traceback: the reader here has gone before the
    listing is written; the command ends as one killed by SIGPIPE does (141), without a word."""
    import subprocess

    command = " ".join(cli.command("backends"))
    proc = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command} | true; echo rc=$?"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.stdout.strip() in ("rc=141", "rc=0")  # 0: the listing fit the pipe before the reader went
