"""``audioicl run`` and ``audioicl merge`` as subprocesses on the tiny fixture dataset."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import cli
import pytest
from helpers import read_jsonl

from audioicl import read_meta

TIMING = ("seconds",)


audioicl = partial(cli.audioicl, timeout=120, rc=0)


def without_timing(lines: list[dict]) -> list[dict]:
    return [{k: v for k, v in line.items() if k not in TIMING} for line in lines]


def results_of(folder: Path) -> dict[str, list[dict]]:
    return {p.name: without_timing(read_jsonl(p)) for p in sorted(folder.glob("*_results_k*.jsonl"))}


@pytest.fixture
def dataset(fresh_dataset) -> Path:
    return fresh_dataset


def test_run_all_ks_and_summary(dataset, tmp_path):
    out = tmp_path / "out"
    proc = audioicl("run", "--data", dataset, "--model", "builtin:random", "--out", out, "--batch-size", 5)
    assert "k=1: 12 written (0 errors), 0 skipped" in proc.stdout
    assert "k=2: 12 written (0 errors), 0 skipped" in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == [
        "random_results_k1.jsonl",
        "random_results_k2.jsonl",
        "random_run.json",
    ]
    for k in (1, 2):
        lines = read_jsonl(out / f"random_results_k{k}.jsonl")
        assert [line["id"] for line in lines] == [
            ep.id for ep in read_meta(dataset / "meta" / f"meta_k{k}.jsonl")
        ]
    again = audioicl("run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "1")
    assert "k=1: 0 written (0 errors), 12 skipped as already done" in again.stdout


def _wait_for_lines(path: Path, count: int, proc: subprocess.Popen) -> None:
    while not (path.exists() and path.read_bytes().count(b"\n") >= count):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)


def test_resume_after_sigkill(dataset, tmp_path):
    """Kill the run while it is inside a long call (``builtin:icl`` perceiving an episode whose clips are all
    590 s long), cut the last line in half, then rerun: every id once, equal to an uninterrupted run."""
    import numpy as np

    from audioicl.audio import write_wav

    episodes = read_meta(dataset / "meta" / "meta_k1.jsonl")
    blocked = episodes[9]
    assert blocked.task == "AnomalyDetect"
    clips = [dataset / c.audio_path for demo in blocked.demos for c in demo.clips]
    clips += [dataset / c.audio_path for c in blocked.query.clips]
    kept = {path: path.read_bytes() for path in clips}
    long = np.random.default_rng(0).standard_normal(16_000 * 590).astype(np.float32) * 0.1
    out = tmp_path / "out"
    results = out / "icl_results_k1.jsonl"
    args = [
        "run",
        "--data",
        dataset,
        "--model",
        "builtin:icl",
        "--out",
        out,
        "--batch-size",
        1,
        "--window",
        1,
    ]
    try:
        for path in clips:
            write_wav(path, long)
        proc = subprocess.Popen(cli.command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            _wait_for_lines(results, 9, proc)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
        assert proc.returncode == -signal.SIGKILL
        assert (out / "icl_results_k1.jsonl.lock").exists()
        data = results.read_bytes()
        assert data.count(b"\n") == 9
        cut = data.rstrip(b"\n").rfind(b"\n") + 40  # half of line 9 stays
        results.write_bytes(data[:cut])

        resumed = audioicl(*args)
        assert "took over the stale lock" in resumed.stderr
        assert "cut a half-written last line" in resumed.stderr
        assert "k=1: 4 written (0 errors), 8 skipped as already done" in resumed.stdout
        assert not (out / "icl_results_k1.jsonl.lock").exists()

        fresh = tmp_path / "fresh"
        audioicl("run", "--data", dataset, "--model", "builtin:icl", "--out", fresh, "--batch-size", 1)
        assert results_of(out) == results_of(fresh)
        ids = [line["id"] for line in read_jsonl(results)]
        assert ids == [ep.id for ep in episodes]
    finally:  # the dataset is the module's
        for path, content in kept.items():
            path.write_bytes(content)


def test_second_writer_is_refused(dataset, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    lock = out / "random_results_k1.jsonl.lock"
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))
    proc = audioicl("run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "1", rc=2)
    assert f"being written by process {os.getpid()}" in proc.stderr
    assert not (out / "random_results_k1.jsonl").exists()
    assert lock.exists()


def test_shards_merge_to_a_single_run(dataset, tmp_path):
    """Three shard runs at once next to a single run; their merge equals the single run."""
    single, sharded = tmp_path / "single", tmp_path / "sharded"
    common = ["run", "--data", dataset, "--model", "builtin:majority"]
    jobs = [[*common, "--out", single]] + [
        [*common, "--out", sharded, "--shard", f"{i}/3"] for i in (1, 2, 3)
    ]
    procs = [
        subprocess.Popen(
            cli.command(*job),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for job in jobs
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    shards = [sharded / f"shard-{i}-of-3" for i in (1, 2, 3)]
    sizes = [len(read_jsonl(s / "majority_results_k1.jsonl")) for s in shards]
    assert sum(sizes) == 12 and all(sizes)

    merged = tmp_path / "merged"
    proc = audioicl("merge", *shards, "--out", merged, "--data", dataset)
    assert "majority_results_k1.jsonl: 12 lines from 3 folder(s)" in proc.stdout
    assert results_of(merged) == results_of(single)
    assert json.loads((merged / "majority_run.json").read_text())["shard"] is None
    # a merge stopped part way (issue 39, item 8: the rerun was refused) is completed by the same command,
    # byte for byte; another merge into the folder is refused (the other refusals: tests/inference/test_runner.py)
    whole = {p.name: p.read_bytes() for p in merged.iterdir()}
    (merged / "majority_results_k1.jsonl").unlink()
    audioicl("merge", *shards, "--out", merged, "--data", dataset)
    assert {p.name: p.read_bytes() for p in merged.iterdir()} == whole
    audioicl(
        "merge", *shards, "--out", merged, "--data", dataset
    )  # once more: nothing to do, nothing changed
    assert {p.name: p.read_bytes() for p in merged.iterdir()} == whole
    (merged / "majority_results_k1.jsonl").write_text("{}\n")  # a file the merge would not write
    refused = audioicl("merge", *shards, "--out", merged, "--data", dataset, rc=2).stderr
    assert "with other content than this merge makes; merge into an empty folder" in refused


def test_unreadable_audio_is_an_error_line(dataset, tmp_path):
    episodes = read_meta(dataset / "meta" / "meta_k1.jsonl")
    broken = episodes[0]
    (dataset / broken.query.target.audio_path).write_bytes(b"RIFF\x00\x00garbage")
    out = tmp_path / "out"
    proc = audioicl("run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "1", rc=1)
    assert "k=1: 12 written (1 errors)" in proc.stdout
    lines = {line["id"]: line for line in read_jsonl(out / "random_results_k1.jsonl")}
    assert len(lines) == 12
    bad = lines[broken.id]
    assert bad["status"] == "error" and bad["response"] is None and bad["gt"] == broken.query.label
    assert "cannot decode audio" in bad["error"] and broken.query.target.audio_path in bad["error"]
    assert all(line["status"] == "ok" for i, line in lines.items() if i != broken.id)
    # a rerun still reports the error line it skips
    again = audioicl("run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "1", rc=1)
    assert "1 error lines from an earlier run" in again.stdout


def test_retry_errors_runs_error_lines_again(dataset, tmp_path):
    """A missing clip gives error lines (with --allow-missing-audio); once the clip is back, --retry-errors
    replaces them by ok lines."""
    episodes = read_meta(dataset / "meta" / "meta_k1.jsonl")
    rel = episodes[3].query.target.audio_path
    broken = {ep.id for ep in episodes if rel in {clip.audio_path for clip in ep.clips()}}
    n = len(broken)
    clip = dataset / rel
    saved = tmp_path / "saved.wav"
    clip.rename(saved)
    out = tmp_path / "out"
    args = ["run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "1"]
    allowed = audioicl(*args, "--allow-missing-audio", rc=1)
    assert f"k=1: 12 written ({n} errors)" in allowed.stdout
    assert (
        f"1 clip(s) that the selected episodes need are missing ({rel}): {n} result line(s)" in allowed.stderr
    )
    results = out / "random_results_k1.jsonl"
    assert {line["id"] for line in read_jsonl(results) if line["status"] == "error"} == broken
    saved.rename(clip)
    kept = audioicl(*args, rc=1)  # the default keeps the error lines and says so
    assert f"{n} error lines from an earlier run; --retry-errors runs them again" in kept.stdout
    before = read_jsonl(results)
    retried = audioicl(*args, "--retry-errors")
    assert (
        f"k=1: {n} written (0 errors), {12 - n} skipped as already done, {n} earlier error lines removed to retry"
        in retried.stdout
    )
    after = read_jsonl(results)
    assert sorted(line["id"] for line in after) == sorted(ep.id for ep in episodes)  # no id twice
    assert [line for line in after if line["id"] not in broken] == [
        line for line in before if line["id"] not in broken
    ]
    assert all(line["status"] == "ok" for line in after)
    assert [line["id"] for line in after] == [ep.id for ep in episodes]  # retried lines in their place
    assert not list(out.glob("*.tmp")) and not list(out.glob("*.lock"))
    record = json.loads((out / "random_run.json").read_text())
    assert [r["retry_errors"] for r in record["runs"]] == [False, False, True]
    fresh = tmp_path / "fresh"
    audioicl("run", "--data", dataset, "--model", "builtin:random", "--out", fresh, "--k", "1")
    by_id = {line["id"]: line for line in without_timing(after)}
    assert [by_id[ep.id] for ep in episodes] == results_of(fresh)["random_results_k1.jsonl"]


def test_models_share_a_folder_and_are_scored_together(dataset, tmp_path):
    out = tmp_path / "out"
    audioicl("run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "1")
    audioicl("run", "--data", dataset, "--model", "builtin:majority", "--out", out, "--style", "general")
    audioicl(
        "run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "2", "--batch-size", "3"
    )
    assert sorted(p.name for p in out.iterdir()) == [
        "majority+style-general_results_k1.jsonl",
        "majority+style-general_results_k2.jsonl",
        "majority+style-general_run.json",
        "random_results_k1.jsonl",
        "random_results_k2.jsonl",
        "random_run.json",
    ]
    summary = tmp_path / "summary.csv"
    audioicl("score", "--in", out, "--out", summary)
    table = summary.read_text(encoding="utf-8").splitlines()
    assert table[0] == "model,shots,task,accuracy,n"
    cells = {tuple(row.split(",")[:3]) for row in table[1:]}
    tasks = {ep.task for ep in read_meta(dataset / "meta" / "meta_k1.jsonl")}
    models = ("majority+style-general", "random")
    assert cells == {(m, k, t) for m in models for k in ("1", "2") for t in tasks}
    # issue 40, item 6: another prompt style is a condition with its own name, as --control and --layout are
    # (it was refused, "use --name"); the plain run's files stay as they were
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    audioicl(
        "run", "--data", dataset, "--model", "builtin:random", "--out", out, "--style", "general", "--k", "1"
    )
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name in before} == before
    assert (out / "random+style-general_results_k1.jsonl").is_file()
    # what still differs under one name is refused, naming the setting; nothing is written
    refused = audioicl(
        "run", "--data", dataset, "--model", "builtin:random", "--out", out, "--max-new-tokens", "5", rc=2
    )
    assert "random_run.json: this folder holds results of model 'random'" in refused.stderr
    assert "max_new_tokens: was 16, now 5" in refused.stderr


def test_help_documents_run_records_and_retry_errors():
    text = " ".join(audioicl("run", "--help").stdout.split())
    assert "<model>_run.json" in text and "several models share one folder" in text
    assert "--retry-errors" in text and "error lines" in text


def test_config_file_under_command_line(dataset, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(
        f"data: {dataset}\nmodel: builtin:majority\nout: results\nk: [1]\ntasks: [AudioCount, MorseCode]\n"
        "style: general\nbatch_size: 2\nbackend-option: {max_clip_seconds: 100}\n",
        encoding="utf-8",
    )
    proc = audioicl("run", "--config", config, "--style", "none")
    out = tmp_path / "results"  # relative to the config file
    assert "k=1: 6 written (0 errors)" in proc.stdout
    record = json.loads((out / "majority+style-none_run.json").read_text())
    assert record["settings"]["style"] == "none"  # the command line wins
    assert record["settings"]["backend_options"] == {"max_clip_seconds": "100"}
    assert record["runs"][-1]["batch_size"] == 2
    assert read_jsonl(out / "majority+style-none_results_k1.jsonl")[0]["prompt"].startswith(
        "system: You are a helpful assistant.\nuser: [Demo Audio 1]"
    )
    config.write_text("tasks: [AudioCount]\nlayout: sideways\n", encoding="utf-8")
    bad = audioicl(
        "run", "--config", config, "--data", dataset, "--model", "builtin:random", "--out", out, rc=2
    )
    assert f"{config}: argument --layout: invalid choice: 'sideways'" in bad.stderr


# --------------------------------------------------------------------------- preflight: refused before any work


def _one_error_line(proc: subprocess.CompletedProcess, command: str = "run") -> str:
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"audioicl {command}: error: ")
    return lines[0]


def test_missing_clips_are_counted_up_front(dataset, tmp_path):
    """A clip missing from the dataset refuses the run before anything is made, with the count and the first
    few; --allow-missing-audio runs it, each episode that needs the clip getting an error line."""
    episodes = read_meta(dataset / "meta" / "meta_k1.jsonl")
    gone = sorted(
        {episodes[0].query.target.audio_path, *(ep.query.target.audio_path for ep in episodes[3:9])}
    )
    for rel in gone:
        (dataset / rel).unlink()
    out = tmp_path / "out"
    args = ["run", "--data", dataset, "--model", "builtin:random", "--out", out, "--k", "1"]
    line = _one_error_line(audioicl(*args, rc=2))
    assert f"{len(gone)} clip(s) that the selected episodes need are missing (" in line
    assert ", ...)" in line and sum(rel in line for rel in gone) == 3  # the first three
    assert "--allow-missing-audio" in line
    assert not out.exists()
    proc = audioicl(*args, "--allow-missing-audio", rc=1)
    errors = [r for r in read_jsonl(out / "random_results_k1.jsonl") if r["status"] == "error"]
    assert f"k=1: 12 written ({len(errors)} errors)" in proc.stdout
    assert errors and all(
        "audio file not found" in r["error"] and any(rel in r["error"] for rel in gone) for r in errors
    )


@pytest.mark.parametrize("given", ["meta", "data", "parent"])
@pytest.mark.parametrize("command", ["run", "validate"])
def test_a_folder_near_the_dataset_root_says_did_you_mean(dataset, tmp_path, command, given):
    """Issue 40, item 8: ``validate ROOT/meta`` reported every clip missing (exit 1) where ``run`` said "did you
    mean"; ``ROOT/data`` and the folder holding ROOT had no hint in either. Both now name ROOT, exit 2."""
    folder = {"meta": dataset / "meta", "data": dataset / "data", "parent": dataset.parent}[given]
    args = ["validate", folder] if command == "validate" else [
        "run", "--data", folder, "--model", "builtin:random", "--out", tmp_path / "o"
    ]  # fmt: skip
    line = _one_error_line(audioicl(*args, rc=2), command)
    assert line.endswith(f"did you mean {dataset}?"), line
    assert not (tmp_path / "o").exists()


def test_limit_below_one_is_refused(dataset, tmp_path):
    for limit in ("0", "-1"):
        proc = audioicl(
            "run",
            "--data",
            dataset,
            "--model",
            "builtin:random",
            "--out",
            tmp_path / "o",
            "--limit",
            limit,
            rc=2,
        )
        assert f"--limit must be at least 1, got {limit}" in _one_error_line(proc)
    assert not (tmp_path / "o").exists()


def test_out_inside_the_dataset_is_refused(dataset):
    for out in (dataset / "results", dataset, dataset / "data" / "x"):
        proc = audioicl("run", "--data", dataset, "--model", "builtin:random", "--out", out, rc=2)
        assert "is inside the dataset root" in _one_error_line(proc)
    assert not (dataset / "results").exists() and not (dataset / "data" / "x").exists()


def test_a_refused_run_leaves_no_folder(dataset, tmp_path):
    """Refused after the folder was made (the backend refuses its options): the folders it made go again."""
    work = tmp_path / "work"
    (work / "a").mkdir(parents=True)
    for out, shard in ((work / "a" / "b" / "c", []), (work / "s", ["--shard", "1/2"])):
        proc = audioicl(
            "run", "--data", dataset, "--model", "builtin:random", "--out", out, "-o", "bogus=1", *shard, rc=2
        )
        assert "builtin backend takes no option bogus (known: max_clip_seconds)" in _one_error_line(proc)
    assert sorted(p.name for p in work.iterdir()) == ["a"] and not any((work / "a").iterdir())


@pytest.mark.parametrize("spec", ["foo:bar", "rendering:x", "reuse:x", "base:x"])
def test_unknown_backend_lists_only_backend_kinds(dataset, tmp_path, spec):
    proc = audioicl("run", "--data", dataset, "--model", spec, "--out", tmp_path / "o", rc=2)
    kind = spec.split(":")[0]
    assert _one_error_line(proc).endswith(f"unknown backend {kind!r} (known: builtin, hf, openai, vllm)")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--model", "Qwen2-Audio"],
            "argument --model: model spec must be BACKEND:NAME, BACKEND one of builtin, hf, openai, vllm (e.g. "
            "hf:Qwen2-Audio for a checkpoint or hub id), got 'Qwen2-Audio' (see audioicl run --help)",
        ),
        (["--model", "builtin:icll"], "unknown built-in solver 'icll' (did you mean icl?)"),
        (["--model", "hff:x"], "unknown backend 'hff' (did you mean hf?)"),
        (
            ["--model", "builtin:icl", "--tasks", "audiocont"],
            "unknown task 'audiocont' (did you mean AudioCount?)",
        ),
    ],
)
def test_a_mistyped_model_or_task_is_one_line_with_the_near_name(dataset, tmp_path, args, said):
    """Not argparse's 16 lines of usage above the line that matters; a near name where there is one."""
    proc = audioicl("run", "--data", dataset, "--out", tmp_path / "o", *args, rc=2)
    assert _one_error_line(proc).endswith(said)
    assert not (tmp_path / "o").exists()


def test_missing_checkpoint_folder_says_no_such_folder(dataset, tmp_path):
    work = tmp_path / "work"
    (work / "ckpts").mkdir(parents=True)
    for name in (
        "./no-such-ckpt",
        str(work / "no-such-ckpt"),
        "ckpts/qwen-typo",
        "~/no-such-audioicl-ckpt",
    ):
        for kind in ("hf", "vllm"):
            proc = audioicl(
                "run", "--data", dataset, "--model", f"{kind}:{name}", "--out", "o", cwd=work, rc=2
            )
            assert _one_error_line(proc).endswith(f"no such folder {name} (the checkpoint of {kind}:{name})")
    assert sorted(p.name for p in work.iterdir()) == ["ckpts"]


@pytest.mark.parametrize(
    ("spec", "module", "extra"),
    [
        ("hf:Org/some-model", "transformers", "hf"),
        ("openai:gpt-4o-audio", "httpx", "api"),
        ("vllm:Org/m", "vllm", "vllm"),
    ],
)
def test_a_missing_extra_is_named(dataset, tmp_path, spec, module, extra):
    """The package is made unimportable the way a missing one is (``sys.modules[name] = None``)."""
    code = (
        f"import sys; sys.modules[{module!r}] = None; from audioicl.cli.main import main; "
        "raise SystemExit(main(sys.argv[1:]))"
    )
    args = ["run", "--data", str(dataset), "--model", spec, "--out", str(tmp_path / "o")]
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    kind = spec.split(":")[0]
    assert _one_error_line(proc).endswith(
        f"the {kind} backend needs {module}: pip install 'audioicl[{extra}]'"
    )
    assert not (tmp_path / "o").exists()


PROGRESS_LINE = r"progress: k=1-3 (\d+)/36 prompts \(\d+\.\d%\), [\d.e+]+ prompts/s, ETA \d+[hms]"
PROGRESS_DONE = r"progress: k=1-3 36/36 prompts \(100\.0%\) in \d+[hms].*, [\d.e+]+ prompts/s"


def test_progress_is_plain_lines_when_stderr_is_not_a_terminal(tiny_dataset, tmp_path):
    """stderr is a pipe here (a log file, a scheduler's output): no tqdm bar, but a plain line every
    $AUDIOICL_PROGRESS_EVERY seconds (0: after every window) and one at the end."""
    import re

    every = audioicl(
        "run", "--data", tiny_dataset, "--model", "builtin:random", "--out", tmp_path / "a",
        "--batch-size", "3", "--window", "6", env={**os.environ, "AUDIOICL_PROGRESS_EVERY": "0"},
    )  # fmt: skip
    lines = [line for line in every.stderr.splitlines() if line.startswith("progress:")]
    assert "\r" not in every.stderr and "it/s" not in every.stderr  # no bar
    assert len(lines) >= 4, every.stderr
    done = [int(re.fullmatch(PROGRESS_LINE, line)[1]) for line in lines[:-1]]
    assert done == sorted(done) and 0 < done[0] < 36
    assert re.fullmatch(PROGRESS_DONE, lines[-1]), lines[-1]

    default = audioicl(
        "run", "--data", tiny_dataset, "--model", "builtin:random", "--out", tmp_path / "b",
        env={k: v for k, v in os.environ.items() if k != "AUDIOICL_PROGRESS_EVERY"},
    )  # fmt: skip
    (last,) = [line for line in default.stderr.splitlines() if line.startswith("progress:")]  # a fast run
    assert re.fullmatch(PROGRESS_DONE, last), last


def test_an_error_naming_hostile_text_is_one_line_without_terminal_escapes(tmp_path):
    """Ids, paths and server bodies are quoted in errors (issue 39, item 10): their escape sequences are shown
    as ``\\x1b`` and their line breaks as spaces, so the error stays one line and cannot drive the terminal."""
    data = tmp_path / "no\x1b[31mdata\nhere"
    proc = audioicl("run", "--data", data, "--model", "builtin:random", "--out", tmp_path / "out", rc=2)
    (line,) = proc.stderr.strip("\n").split("\n")
    assert "\x1b" not in line and "\\x1b[31m" in line and "data here" in line


def test_a_hub_id_that_cannot_be_had_is_one_line_before_any_retry(dataset, tmp_path):
    """Issue 40, item 16: a hub-id typo with no hub spent 38 s on five retries, and ``chat-template`` on a missing
    folder reported a hub connection error. The hub here is a closed local port (``HF_ENDPOINT``), the cache
    empty: both say what is wrong in one line (the name, the cache, the endpoint), exit 2."""
    pytest.importorskip("huggingface_hub")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed once the block ends
    env = {**os.environ, "HF_ENDPOINT": f"http://127.0.0.1:{port}", "HF_HUB_CACHE": str(tmp_path / "cache")}
    env.pop("HF_HUB_OFFLINE", None)
    done = cli.audioicl("run", "--data", dataset, "--model", "hf:Qwen/Qwen2-Audoi-7B", "--out", tmp_path / "o",
                        rc=2, env=env)  # fmt: skip
    line = _one_error_line(done)
    assert "Qwen/Qwen2-Audoi-7B is no folder here, not in the Hugging Face cache" in line
    assert f"the hub at http://127.0.0.1:{port} cannot be reached" in line
    assert not (tmp_path / "o").exists()
    done = cli.audioicl("chat-template", tmp_path / "no-such-folder", rc=2, env=env)
    assert _one_error_line(done, "chat-template").endswith(
        f"no such folder {tmp_path / 'no-such-folder'} (the checkpoint of hf:{tmp_path / 'no-such-folder'})"
    )
