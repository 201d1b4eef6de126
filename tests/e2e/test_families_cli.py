"""A user's path with a checkpoint of every family beyond the Qwen ones (``audioicl.testing.families``):
``build`` → ``run --model hf:DIR`` (every task, at k = 1 and 5) → ``score`` (→ ``report``), with 0 error lines.
Every k's answers through each fast path are ``tests/backends/hf/test_reuse.py``'s."""

from __future__ import annotations

import csv
import json
import shutil
from functools import partial

import cli
import pytest

for _module in ("torch", "transformers", "torchvision"):
    pytest.importorskip(_module)

from audioicl.backends.families import FAMILIES  # noqa: E402
from audioicl.testing.families import TINY  # noqa: E402

TASKS = 9
audioicl = partial(cli.audioicl, timeout=900, rc=0)


FEWEST_AND_MOST = (1, 5)  # the shortest prompts and the longest: k = 2..4 take the same code in between


@pytest.mark.parametrize("name", TINY.names())
def test_run_and_score_every_task_at_the_fewest_and_most_shots(
    one_episode_each, family_checkpoints, tmp_path, name
):
    checkpoint = tmp_path / name
    shutil.copytree(family_checkpoints[name], checkpoint)
    out = tmp_path / "results"
    single = FAMILIES.get(name).max_clips == 1  # one clip a prompt: the labelled single-clip layout
    proc = audioicl(
        "run",
        "--data",
        one_episode_each,
        "--model",
        f"hf:{checkpoint}",
        "--out",
        out,
        "-o",
        "dtype=fp32",
        "-o",
        "device=cpu",
        "--k",
        ",".join(map(str, FEWEST_AND_MOST)),
        *(["--layout", "single-clip"] if single else []),
    )
    for k in FEWEST_AND_MOST:
        assert f"k={k}: {TASKS} written (0 errors)" in proc.stdout, proc.stdout
    scores = tmp_path / "scores" / "summary.csv"
    audioicl("score", "--in", out, "--out", scores)
    with scores.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    model = f"{name}+single-clip" if single else name
    assert {(r["model"], r["shots"]) for r in rows} == {(model, str(k)) for k in FEWEST_AND_MOST}
    assert len(rows) == len(FEWEST_AND_MOST) * TASKS and all(r["n"] == "1" for r in rows)
    # the report reads results alike whatever family made them: made once, for the first family (and for
    # each Qwen family in tests/e2e/test_hf_cli.py)
    if name == TINY.names()[0]:
        report = tmp_path / "report"
        audioicl("report", "--scores", scores, "--results", out, "--data", one_episode_each, "--out", report)
        assert model in (report / "report.md").read_text(encoding="utf-8")
    assert all(p.name.startswith(f"{name}+single-clip_") == single for p in out.glob("*.jsonl"))


SINGLE = [name for name in TINY.names() if FAMILIES.get(name).max_clips == 1]


@pytest.mark.skipif(not SINGLE, reason="no single-clip family")
def test_a_prompt_over_the_clip_limit_is_told_before_loading(one_episode_each, family_checkpoints, tmp_path):
    checkpoint = family_checkpoints[SINGLE[0]]
    label = FAMILIES.get(SINGLE[0]).label
    common = (
        "--data",
        one_episode_each,
        "--model",
        f"hf:{checkpoint}",
        "-o",
        "dtype=fp32",
        "-o",
        "device=cpu",
        "--k",
        1,
    )
    refused = cli.audioicl("run", *common, "--out", tmp_path / "strict", "--strict", rc=2)
    assert f"({label}) takes at most 1 clip(s) per prompt" in refused.stderr
    assert "k=1 AudioCount: 1 prompts of up to 2 clips" in refused.stderr
    assert not (tmp_path / "strict").exists()  # stopped before a folder was made or a model loaded

    proc = audioicl("run", *common, "--out", tmp_path / "lenient", rc=1)
    assert "these prompts become error lines" in proc.stderr
    lines = [json.loads(x) for x in next((tmp_path / "lenient").glob("*_results_k1.jsonl")).open()]
    assert len(lines) == TASKS and all(line["status"] == "error" for line in lines)
    assert all("takes at most 1 per prompt" in line["error"] for line in lines)
