"""``audioicl run ... --ray`` on a local Ray cluster with a built-in solver: the merged results equal a
single-process run's, a rerun resumes every shard and merges the same files again, and OUT holds only
the merged files (the shard logs live beside it)."""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path

import cli
import pytest

pytest.importorskip("ray")

MODEL = "builtin:icl"


# without RAY_ADDRESS, ray starts a local cluster of its own
LOCAL_CLUSTER = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
audioicl = partial(cli.audioicl, timeout=600, env=LOCAL_CLUSTER, rc=0)


def results(folder: Path, k: int) -> list[dict]:
    """The lines of a results file without their timing."""
    out = []
    for text in (folder / f"icl_results_k{k}.jsonl").read_text(encoding="utf-8").splitlines():
        line = json.loads(text)
        line.pop("seconds")
        out.append(line)
    return out


def test_ray_run_equals_a_single_run(tiny_dataset, tmp_path):
    single, multi = tmp_path / "single", tmp_path / "multi"
    audioicl("run", "--data", tiny_dataset, "--model", MODEL, "--out", single)
    proc = audioicl(
        "run", "--data", tiny_dataset, "--model", MODEL, "--out", multi, "--ray", "--ray-shards", 2
    )
    assert "ray: 2 shard(s), 0 GPU(s) each" in proc.stdout + proc.stderr
    for k in (1, 2, 3):
        assert results(multi, k) == results(single, k)
        assert f"icl_results_k{k}.jsonl: 12 lines merged from 2 shard(s)" in proc.stdout
    # OUT holds the merged files only; the shards' logs are beside it, complete
    assert sorted(p.name for p in multi.iterdir()) == [
        "icl_results_k1.jsonl", "icl_results_k2.jsonl", "icl_results_k3.jsonl", "icl_run.json",
    ]  # fmt: skip
    shards = tmp_path / "multi.shards" / "icl"
    assert sorted(p.name for p in shards.iterdir()) == ["shard-1-of-2", "shard-2-of-2"]
    record = json.loads((multi / "icl_run.json").read_text())
    assert record["shard"] is None and len(record["merged_from"]) == 2

    before = {k: (multi / f"icl_results_k{k}.jsonl").read_bytes() for k in (1, 2, 3)}
    again = audioicl(
        "run", "--data", tiny_dataset, "--model", MODEL, "--out", multi, "--ray", "--ray-shards", 2
    )
    assert again.stdout.count("0 written (0 errors)") == 2 * 3  # every shard resumed with nothing to do
    assert {k: (multi / f"icl_results_k{k}.jsonl").read_bytes() for k in (1, 2, 3)} == before

    for folder in (single, multi):
        audioicl("score", "--in", folder, "--out", folder.with_name(folder.name + "-scores") / "summary.csv")
    assert (tmp_path / "multi-scores" / "summary.csv").read_bytes() == (
        tmp_path / "single-scores" / "summary.csv"
    ).read_bytes()


def test_ray_refuses_an_out_holding_a_plain_run(tiny_dataset, tmp_path):
    out = tmp_path / "results"
    audioicl("run", "--data", tiny_dataset, "--model", "builtin:random", "--out", out, "--k", 1)
    proc = audioicl(
        "run", "--data", tiny_dataset, "--model", "builtin:random", "--out", out, "--k", "1", "--ray",
        "--ray-shards", "1", rc=None,
    )  # fmt: skip
    assert proc.returncode == 2 and "not a merge of the --ray shards" in proc.stderr


def test_a_killed_shard_resumes_from_its_log(tiny_dataset, tmp_path):
    """Shard 1's log as a worker killed mid-write leaves it (some lines, then half a line): the --ray run
    repairs and completes it, and the merged files equal a single run's."""
    single, multi = tmp_path / "single", tmp_path / "multi"
    audioicl("run", "--data", tiny_dataset, "--model", MODEL, "--out", single, "--k", 1)
    shard_out = tmp_path / "multi.shards" / "icl"
    audioicl("run", "--data", tiny_dataset, "--model", MODEL, "--out", shard_out, "--k", 1, "--shard", "1/2")
    log = shard_out / "shard-1-of-2" / "icl_results_k1.jsonl"
    kept = log.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(kept) >= 3
    log.write_text("".join(kept[:2]) + kept[2][: len(kept[2]) // 2], encoding="utf-8")
    proc = audioicl(
        "run", "--data", tiny_dataset, "--model", MODEL, "--out", multi, "--k", 1, "--ray", "--ray-shards", 2
    )
    assert f"k=1: {len(kept) - 2} written (0 errors), 2 skipped as already done" in proc.stdout
    assert results(multi, 1) == results(single, 1)
