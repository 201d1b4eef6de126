"""The runner, results log, lock, shards and the built-in floors, called as a library."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import quiet

from audioicl import AudioICLError, read_meta
from audioicl.backends import ModelSpec, load_backend
from audioicl.backends.base import GenerationConfig, Request
from audioicl.files import FileLock
from audioicl.inference.options import RunOptions, Shard
from audioicl.inference.results import (
    ResultsLog,
    drop_error_lines,
    iter_results,
    merge_shards,
    repair_tail,
)
from audioicl.inference.runner import run, select_episodes
from audioicl.prompts.build import build_chat
from audioicl.solvers.registry import demo_labels
from audioicl.tasks import TASKS


def lines(path):
    return [line.data for line in iter_results(path)]


def test_model_spec_and_file_name():
    assert ModelSpec.parse("builtin:oracle").file_name == "oracle"
    assert ModelSpec.parse("hf:Qwen/Qwen2-Audio-7B-Instruct").file_name == "Qwen2-Audio-7B-Instruct"
    assert ModelSpec.parse("hf:/models/ckpt-7/").file_name == "ckpt-7"
    for text in ("builtin:oracle", "hf:/models/ckpt-7/", "openai:org/m:latest"):
        assert str(ModelSpec.parse(text)) == text  # run records store the text as given
    assert RunOptions(Path("d"), "builtin:icl", Path("o")).model == ModelSpec("builtin", "icl")
    for bad in ("random", ":random", "builtin:"):
        with pytest.raises(AudioICLError, match="BACKEND:NAME"):
            ModelSpec.parse(bad)
    with pytest.raises(AudioICLError, match="BACKEND:NAME"):
        ModelSpec("builtin", "/")
    with pytest.raises(AudioICLError, match="unknown backend 'nosuch'.*builtin"):
        load_backend(ModelSpec("nosuch", "x"))
    with pytest.raises(AudioICLError, match="unknown built-in solver 'nosuch'.*random"):
        load_backend(ModelSpec("builtin", "nosuch"))
    with pytest.raises(AudioICLError, match="no option colour"):
        load_backend(ModelSpec("builtin", "random"), colour="red")


def test_random_is_deterministic_and_in_label_space(tiny_dataset):
    episodes = read_meta(tiny_dataset / "meta" / "meta_k3.jsonl")
    chats = [build_chat(ep, tiny_dataset) for ep in episodes]
    requests = [Request(ep.id, ep.id, ep.task, ep.k, chat) for ep, chat in zip(episodes, chats, strict=True)]

    def answers(seed: int, asked: list[Request]) -> list[str | None]:
        return [
            r.text
            for r in load_backend(ModelSpec("builtin", "random"), seed=seed).generate(
                asked, GenerationConfig()
            )
        ]

    first = answers(0, requests)
    again = answers(0, list(reversed(requests)))
    assert first == list(reversed(again))
    other_seed = answers(1, requests)
    assert other_seed != first
    for ep, chat, answer in zip(episodes, chats, first, strict=True):
        spec = TASKS.get(ep.task)
        if spec.labels.values:
            assert answer in spec.labels.values
        elif ep.task == "AudioRemap":
            shown = {item.label for item in chat.items if item.kind == "query" and item.label}
            assert len(answer) == 3 and set(answer) <= shown
        else:  # MorseCode: a word of letters
            assert answer.isalpha() and answer.islower()


def test_majority_ties_go_to_first_shown(tiny_dataset):
    episodes = read_meta(tiny_dataset / "meta" / "meta_k3.jsonl")
    majority = load_backend(ModelSpec("builtin", "majority"))
    for ep in episodes:
        chat = build_chat(ep, tiny_dataset)
        (response,) = majority.generate([Request(ep.id, ep.id, ep.task, ep.k, chat)], GenerationConfig())
        answer = response.text
        labels = demo_labels(chat)
        assert labels == [d.label for d in ep.demos]
        if ep.task == "AnomalyDetect":
            assert answer == "Anomalous"  # every demo pair ends with its anomalous clip
        else:  # all demo labels distinct in the fixture: the first wins
            assert answer == labels[0]


def test_shards_partition_the_episodes(tiny_dataset):
    episodes = read_meta(tiny_dataset / "meta" / "meta_k1.jsonl")
    shards = [select_episodes(episodes, shard=Shard(i, 3)) for i in (1, 2, 3)]
    ids = [ep.id for part in shards for ep in part]
    assert sorted(ids) == sorted(ep.id for ep in episodes)
    assert all(shards)
    with pytest.raises(AudioICLError):
        Shard.parse("0/3")
    with pytest.raises(AudioICLError):
        Shard.parse("a/b")


def test_select_limit_and_tasks(tiny_dataset):
    episodes = read_meta(tiny_dataset / "meta" / "meta_k1.jsonl")
    chosen = select_episodes(episodes, tasks=["AudioCount", "MorseCode"], limit=2)
    assert [ep.id for ep in chosen] == ["AudioICL00001", "AudioICL00002", "AudioICL01801", "AudioICL01802"]


def test_run_writes_every_field(tiny_dataset, tmp_path):
    out = tmp_path / "out"
    summary = run(RunOptions(data=tiny_dataset, model="builtin:majority", out=out, shots=(2,)), report=quiet)
    assert summary.errors == 0
    (k2,) = summary.ks
    assert (k2.written, k2.skipped, k2.errors) == (12, 0, 0)
    rows = lines(out / "majority_results_k2.jsonl")
    episodes = read_meta(tiny_dataset / "meta" / "meta_k2.jsonl")
    assert [r["id"] for r in rows] == [ep.id for ep in episodes]
    for row, ep in zip(rows, episodes, strict=True):
        assert list(row)[:4] == ["id", "task", "response", "gt"]
        assert row["gt"] == ep.query.label
        assert row["status"] == "ok" and row["error"] is None
        assert row["k"] == 2 and row["model"] == "builtin:majority"
        assert row["prompt"].startswith("system: You are a helpful assistant.\nuser: ")
        assert row["prompt"].endswith("Label:")
        assert row["audio_paths"][-1] == ep.query.target.audio_path
        assert len(row["prompt_sha256"]) == len(row["audio_sha256"]) == 64
        if ep.task == "MorseCode":  # the bank comes first
            assert row["audio_paths"][0] == "data/MorseCode/alphabet/A.wav"
    record = json.loads((out / "majority_run.json").read_text())
    assert record["model_name"] == "majority" and record["settings"]["style"] == "specific"
    assert record["data"] == str(tiny_dataset.resolve()) and list(record["meta_sha256"]) == ["2"]
    assert not (out / "majority_results_k2.jsonl.lock").exists()
    # rerun: everything is skipped
    again = run(RunOptions(data=tiny_dataset, model="builtin:majority", out=out, shots=(2,)), report=quiet)
    assert (again.ks[0].written, again.ks[0].skipped) == (0, 12)
    assert len(lines(out / "majority_results_k2.jsonl")) == 12


def test_padding_changes_audio_not_prompt(tiny_dataset, tmp_path):
    plain = run(
        RunOptions(data=tiny_dataset, model="builtin:random", out=tmp_path / "a", shots=(2,)), report=quiet
    )
    padded = run(
        RunOptions(data=tiny_dataset, model="builtin:random", out=tmp_path / "b", shots=(2,), pad="episode"),
        report=quiet,
    )
    assert plain.errors == padded.errors == 0
    a = lines(tmp_path / "a" / "random_results_k2.jsonl")
    b = lines(tmp_path / "b" / "random_results_k2.jsonl")
    assert [r["prompt_sha256"] for r in a] == [r["prompt_sha256"] for r in b]
    assert all(x["audio_sha256"] != y["audio_sha256"] for x, y in zip(a, b, strict=True))


def test_clip_over_backend_limit_is_an_error_line(tiny_dataset, tmp_path):
    options = RunOptions(
        data=tiny_dataset,
        model="builtin:random",
        out=tmp_path,
        shots=(1,),
        tasks=("AudioCount", "AnomalyDetect"),
        backend_options={"max_clip_seconds": "0.2"},
    )
    summary = run(options, report=quiet)
    rows = {r["id"]: r for r in lines(tmp_path / "random_results_k1.jsonl")}
    anomaly = [r for r in rows.values() if r["task"] == "AnomalyDetect"]
    assert anomaly and all(r["status"] == "error" and r["response"] is None for r in anomaly)
    assert "the backend accepts at most 0.2 s" in anomaly[0]["error"]
    count = [r for r in rows.values() if r["task"] == "AudioCount"]
    assert len(count) == 3  # short clips pass, long ones fail: none skipped
    assert summary.errors == sum(r["status"] == "error" for r in rows.values())


def test_resume_refuses_other_settings(tiny_dataset, tmp_path):
    run(RunOptions(data=tiny_dataset, model="builtin:random", out=tmp_path, shots=(1,)), report=quiet)
    record_file = tmp_path / "random_run.json"
    before = record_file.read_bytes()
    with pytest.raises(AudioICLError, match="model 'random' .*seed: was 0, now 3") as info:
        run(
            RunOptions(data=tiny_dataset, model="builtin:random", out=tmp_path, shots=(1,), seed=3),
            report=quiet,
        )
    assert info.value.file == str(record_file)
    with pytest.raises(AudioICLError, match="max_new_tokens: was 16, now 8; pad: was 'none', now 'episode'"):
        run(
            RunOptions(
                data=tiny_dataset, model="builtin:random", out=tmp_path, pad="episode", max_new_tokens=8
            ),
            report=quiet,
        )
    assert record_file.read_bytes() == before  # a refused run changes nothing
    assert not list(tmp_path.glob("*.lock"))


def test_resume_adds_k_tasks_limit_batch_size_and_other_models(tiny_dataset, tmp_path):
    """What only selects episodes may change between runs of a model in one folder; models sit side by side."""
    base = {"data": tiny_dataset, "model": "builtin:random", "out": tmp_path}
    run(RunOptions(**base, shots=(1,), tasks=("AudioCount",), limit=2), report=quiet)
    more = run(RunOptions(**base, shots=(1, 2), batch_size=3), report=quiet)
    assert [(s.k, s.written, s.skipped) for s in more.ks] == [(1, 10, 2), (2, 12, 0)]
    run(RunOptions(**{**base, "model": "builtin:majority"}, shots=(1,), seed=4), report=quiet)
    record = json.loads((tmp_path / "random_run.json").read_text())
    assert sorted(record["meta_sha256"]) == ["1", "2"]
    assert [(r["shots"], r["tasks"], r["limit"], r["batch_size"]) for r in record["runs"]] == [
        ([1], ["AudioCount"], 2, 8),
        ([1, 2], None, None, 3),
    ]
    other = json.loads((tmp_path / "majority_run.json").read_text())
    assert other["settings"]["seed"] == 4 and len(other["runs"]) == 1
    assert sorted(p.name for p in tmp_path.glob("*_results_k*.jsonl")) == [
        "majority_results_k1.jsonl",
        "random_results_k1.jsonl",
        "random_results_k2.jsonl",
    ]
    # with padding to the batch's longest clip the batch size changes the audio: it must stay
    padded = {**base, "out": tmp_path / "padded", "shots": (1,), "pad": "batch"}
    run(RunOptions(**padded, batch_size=4), report=quiet)
    with pytest.raises(AudioICLError, match="batch_size: was 4, now 2"):
        run(RunOptions(**padded, batch_size=2), report=quiet)


def test_legacy_run_json_is_checked_for_its_model(tiny_dataset, tmp_path):
    """A folder from before per-model records: its run.json still guards its model's files."""
    run(RunOptions(data=tiny_dataset, model="builtin:random", out=tmp_path, shots=(1,)), report=quiet)
    (tmp_path / "random_run.json").rename(tmp_path / "run.json")
    with pytest.raises(AudioICLError, match="seed: was 0, now 1") as info:
        run(
            RunOptions(data=tiny_dataset, model="builtin:random", out=tmp_path, shots=(1,), seed=1),
            report=quiet,
        )
    assert info.value.file == str(tmp_path / "run.json")
    run(
        RunOptions(data=tiny_dataset, model="builtin:majority", out=tmp_path, shots=(1,), seed=1),
        report=quiet,
    )
    run(RunOptions(data=tiny_dataset, model="builtin:random", out=tmp_path, shots=(2,)), report=quiet)
    assert json.loads((tmp_path / "random_run.json").read_text())["meta_sha256"].keys() == {"1", "2"}


def test_unknown_task_and_missing_k(tiny_dataset, tmp_path):
    with pytest.raises(AudioICLError, match="unknown task.*Nope"):
        run(
            RunOptions(data=tiny_dataset, model="builtin:random", out=tmp_path, tasks=("Nope",)), report=quiet
        )
    with pytest.raises(AudioICLError, match="no meta file for k=4"):
        run(RunOptions(data=tiny_dataset, model="builtin:random", out=tmp_path, shots=(1, 4)), report=quiet)


def test_repair_tail(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b"}\n{"id": "c", "resp', encoding="utf-8")
    message = repair_tail(path)
    assert "half-written" in message and "17 bytes" in message
    assert path.read_text() == '{"id": "a"}\n{"id": "b"}\n'
    assert repair_tail(path) is None
    log = ResultsLog.open(path)
    assert log.done_ids() == {"a", "b"}


def test_drop_error_lines_keeps_other_lines_byte_for_byte(tmp_path):
    path = tmp_path / "r.jsonl"
    kept = [
        '{"id": "a", "status": "ok"}\r\n',
        '{"id":"b","status":"error"}\n',
        '{"id": "c", "status": "error"}\n',
    ]
    path.write_bytes("".join([*kept, '{"id": "d", "status": "error"}\n', '{"id": "e"}\n']).encode())
    assert drop_error_lines(path, {"a", "d", "e", "x"}) == 1  # c and b are not asked for
    assert path.read_bytes() == "".join([*kept, '{"id": "e"}\n']).encode()
    assert drop_error_lines(path, {"d"}) == 0
    assert not list(tmp_path.glob("*.tmp"))


def test_results_log_refuses_duplicate_ids(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "a"}\n{"id": "a"}\n', encoding="utf-8")
    with pytest.raises(AudioICLError, match="id appears twice") as info:
        ResultsLog.open(path)
    assert info.value.line == 2


def test_lock_live_and_stale(tmp_path):
    path = tmp_path / "r.jsonl"
    held = FileLock(path)
    held.acquire()
    with pytest.raises(AudioICLError, match=f"being written by process {os.getpid()}"):
        FileLock(path).acquire()
    held.release()
    assert not held.lock.exists()
    # a lock left by a dead process is taken over
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_pid = int(dead.stdout)
    held.lock.write_text(json.dumps({"host": socket.gethostname(), "pid": dead_pid}))
    fresh = FileLock(path)
    fresh.acquire()
    assert fresh.taken_over is not None and fresh.taken_over.pid == dead_pid
    assert json.loads(fresh.lock.read_text())["pid"] == os.getpid()
    fresh.release()


def test_batch_size_does_not_change_results(tiny_dataset, tmp_path):
    for size in (1, 5):
        run(
            RunOptions(data=tiny_dataset, model="builtin:random", out=tmp_path / str(size), batch_size=size),
            report=quiet,
        )
    for k in (1, 2, 3):
        name = f"random_results_k{k}.jsonl"
        one, five = (lines(tmp_path / size / name) for size in ("1", "5"))
        assert [{**r, "seconds": 0} for r in one] == [{**r, "seconds": 0} for r in five]


def test_merge_refuses_gaps_and_duplicates(tiny_dataset, tmp_path):
    shards = []
    for i in (1, 2, 3):
        options = RunOptions(
            data=tiny_dataset, model="builtin:random", out=tmp_path, shots=(1,), shard=Shard(i, 3)
        )
        run(options, report=quiet)
        shards.append(tmp_path / f"shard-{i}-of-3")
    merged = merge_shards(shards, tmp_path / "all", tiny_dataset)
    assert [(m.path.name, m.lines, m.sources) for m in merged] == [("random_results_k1.jsonl", 12, 3)]
    record = json.loads((tmp_path / "all" / "random_run.json").read_text())
    assert record["shard"] is None and len(record["runs"]) == 3 and len(record["merged_from"]) == 3
    with pytest.raises(AudioICLError, match="random: shard\\(s\\) 2/3 not given"):
        merge_shards([shards[0], shards[2]], tmp_path / "some")
    # copies without their run records: only the ids can tell
    bare = []
    for shard in shards:
        copy = tmp_path / "bare" / shard.name
        shutil.copytree(shard, copy)
        (copy / "random_run.json").unlink()
        bare.append(copy)
    missing = len(lines(bare[2] / "random_results_k1.jsonl"))
    with pytest.raises(AudioICLError, match=f"{missing} episode\\(s\\) of the dataset have no result"):
        merge_shards(bare[:2], tmp_path / "m1", tiny_dataset)
    merge_shards(bare[:2], tmp_path / "m2")  # without --data a gap cannot be seen
    duplicate = shutil.copytree(bare[0], tmp_path / "duplicate")
    with pytest.raises(AudioICLError, match="id given twice") as info:
        merge_shards([*bare, duplicate], tmp_path / "m3")
    assert info.value.line == 1
    with pytest.raises(AudioICLError, match="folder given twice"):
        merge_shards([*shards, shards[0]], tmp_path / "m4")
    again = shutil.copytree(shards[0], tmp_path / "again")
    with pytest.raises(AudioICLError, match="the same shard is given twice"):
        merge_shards([*shards, again], tmp_path / "m4")
    other_style = tmp_path / "general"
    run(
        RunOptions(
            data=tiny_dataset,
            model="builtin:random",
            out=other_style,
            shots=(1,),
            shard=Shard(2, 3),
            max_new_tokens=5,
        ),
        report=quiet,
    )
    with pytest.raises(
        AudioICLError, match="random: run with other settings .*max_new_tokens: was 16, now 5"
    ):
        merge_shards([shards[0], other_style / "shard-2-of-3", shards[2]], tmp_path / "m6")
    held = FileLock(shards[0] / "random_results_k1.jsonl")
    held.acquire()
    try:
        with pytest.raises(AudioICLError, match="still being written"):
            merge_shards(shards, tmp_path / "m5")
    finally:
        held.release()


def test_a_meta_file_with_an_id_twice_is_refused_with_both_lines(fresh_dataset, tmp_path):
    meta = fresh_dataset / "meta" / "meta_k1.jsonl"
    first = meta.read_text(encoding="utf-8").splitlines()[0]
    meta.write_text(meta.read_text(encoding="utf-8") + first + "\n", encoding="utf-8")
    count = len(meta.read_text(encoding="utf-8").splitlines())
    options = RunOptions(data=fresh_dataset, model="builtin:random", out=tmp_path / "out", shots=(1,))
    with pytest.raises(
        AudioICLError, match=r"id appears twice \(first on line 1\); results are keyed by id"
    ) as info:
        run(options, quiet)
    assert info.value.file == str(meta) and info.value.line == count
    assert info.value.id == json.loads(first)["id"]


# --------------------------------------------------------------------------- where and when a run ran


def test_the_run_record_says_where_and_when_each_run_ran(tiny_dataset, tmp_path, monkeypatch):
    import datetime
    import platform

    from audioicl import __version__
    from audioicl.inference.record import source_commit

    monkeypatch.setattr(sys, "argv", ["audioicl", "run", "--model", "builtin:random"])
    run(RunOptions(data=tiny_dataset, model="builtin:random", out=tmp_path, shots=(1,)), report=quiet)
    (entry,) = json.loads((tmp_path / "random_run.json").read_text())["runs"]
    environment, timing = entry["environment"], entry["timing"]
    assert environment["argv"] == ["audioicl", "run", "--model", "builtin:random"]
    assert environment["python"] == platform.python_version() and environment["pid"] == os.getpid()
    assert environment["host"] == socket.gethostname() and environment["platform"] == platform.platform()
    assert environment["audioicl_version"] == __version__
    found = source_commit()  # this checkout when the tests run from one (an editable install)
    if found is None:
        assert "git_commit" not in environment
    else:
        assert (environment["git_commit"], environment["git_dirty"]) == found
        assert len(found[0]) == 40
    times = [
        datetime.datetime.fromisoformat(timing[key]) for key in ("started", "backend_loaded", "finished")
    ]
    assert all(t.utcoffset() == datetime.timedelta(0) for t in times) and times == sorted(times)
    assert timing["wall_s"] == pytest.approx((times[2] - times[0]).total_seconds(), abs=0.002)
    assert timing["outcome"] == "completed"


def test_a_run_resumes_on_another_host_at_another_time_with_the_settings_unchanged(tiny_dataset, tmp_path):
    """environment and timing are no settings: a run resumed elsewhere, later, from another command line, is
    taken, and keeps its own entry; the settings part of the record stays as it was."""
    run(
        RunOptions(data=tiny_dataset, model="builtin:random", out=tmp_path, shots=(1,), limit=1), report=quiet
    )
    path = tmp_path / "random_run.json"
    record = json.loads(path.read_text())
    settings = record["settings"]
    assert set(settings) == {
        "model", "style", "layout", "pad", "max_new_tokens", "morse_bank", "seed", "prompts_sha256",
        "backend_options",
    }  # fmt: skip
    record["runs"][0]["environment"] |= {"host": "elsewhere", "argv": ["x"], "python": "3.0", "pid": 1}
    record["runs"][0]["timing"] = {"started": "2001-01-01T00:00:00.000Z"}  # killed: never finished
    path.write_text(json.dumps(record))
    more = run(RunOptions(data=tiny_dataset, model="builtin:random", out=tmp_path, shots=(1,)), report=quiet)
    assert more.ks[0].skipped == 4 and more.ks[0].written == 8
    after = json.loads(path.read_text())
    assert after["settings"] == settings
    first, second = after["runs"]
    assert first["environment"]["host"] == "elsewhere" and "finished" not in first["timing"]
    assert second["environment"]["host"] == socket.gethostname()
    assert second["timing"]["outcome"] == "completed"


class _Unreachable:
    """A backend whose server goes away after ``answered`` calls."""

    name, family, max_clip_seconds, info = "fake:gone", "default", None, {}

    def __init__(self, answered: int) -> None:
        self.answered, self.calls = answered, 0

    def generate(self, requests, config):
        from audioicl.backends.base import BackendUnreachable, Response

        self.calls += 1
        if self.calls > self.answered:
            raise BackendUnreachable("no request of the call could reach the server at http://x/v1")
        return [Response("1") for _ in requests]

    def close(self) -> None:
        pass


def test_an_unreachable_backend_stops_the_run_writing_nothing_for_its_window(tiny_dataset, tmp_path):
    """Not FAILED_WINDOWS_LIMIT windows of error lines: the first call that reached nobody stops the run, its
    prompts get no line, and the run record says the run stopped; a rerun asks them."""
    options = RunOptions(data=tiny_dataset, model="fake:gone", out=tmp_path, shots=(1,), window=4, order="k")
    backend = _Unreachable(answered=1)
    with pytest.raises(
        AudioICLError, match="could reach the server at http://x/v1; stopped, nothing written"
    ):
        run(options, report=quiet, backend=backend)
    assert backend.calls == 2
    rows = lines(tmp_path / "gone_results_k1.jsonl")
    assert len(rows) == 4 and {r["status"] for r in rows} == {"ok"}
    (entry,) = json.loads((tmp_path / "gone_run.json").read_text())["runs"]
    assert entry["timing"]["outcome"] == "stopped" and "could reach" in entry["timing"]["stopped_by"]
    again = run(options, report=quiet, backend=_Unreachable(answered=99))
    assert (again.ks[0].skipped, again.ks[0].written, again.errors) == (4, 8, 0)


def test_the_run_record_names_the_digest_of_the_wording_the_prompts_came_from(tiny_dataset, tmp_path):
    """``prompt_set_sha256`` of each run entry is the digest of the prompt set the run built its prompts from:
    the built-in one, or a prompts file over it."""
    from audioicl.prompts.sets import PromptSet, load_prompt_set

    prompts = tmp_path / "mine.yaml"
    prompts.write_text("general: Listen, then answer with one integer.\n", encoding="utf-8")
    for out, given, expected in (
        (tmp_path / "plain", None, PromptSet().sha256()),
        (tmp_path / "file", prompts, load_prompt_set(prompts).sha256()),
    ):
        options = RunOptions(data=tiny_dataset, model="builtin:majority", out=out, shots=(1,), prompts=given)
        run(options, report=quiet)
        (entry,) = json.loads((out / "majority_run.json").read_text())["runs"]
        assert entry["prompt_set_sha256"] == expected
    assert PromptSet().sha256() != load_prompt_set(prompts).sha256()


class _Recording:
    """A backend that answers every prompt and keeps how many prompts each call held."""

    name, family, max_clip_seconds, info = "fake:record", "default", None, {}

    def __init__(self) -> None:
        self.calls: list[int] = []

    def generate(self, requests, config):
        from audioicl.backends.base import Response

        self.calls.append(len(requests))
        return [Response("1") for _ in requests]

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("settings", "calls"),
    [
        ({}, [2, 4, 6]),  # batch 2: 1 then 2 batches, then WINDOW_BATCHES (4) of them, 12 prompts in all
        ({"window": 5}, [5, 5, 2]),  # --window as given, every call
        ({"pad": "batch"}, [2] * 6),  # the original's one batch a call, whatever the rest
        ({"pad": "batch", "window": 5}, [2] * 6),
    ],
)
def test_the_first_calls_are_short_so_the_model_starts_while_the_next_window_is_prepared(
    tiny_dataset, tmp_path, settings, calls
):
    """Nothing overlaps the first window's preparation: the default windows ramp up (1, 2, then 4 batches);
    every prompt still reaches the backend exactly once."""
    options = RunOptions(
        data=tiny_dataset, model="fake:record", out=tmp_path, shots=(1,), batch_size=2, **settings
    )
    backend = _Recording()
    summary = run(options, report=quiet, backend=backend)
    assert backend.calls == calls
    assert summary.ks[0].written == 12
    assert len({row["id"] for row in lines(tmp_path / "record_results_k1.jsonl")}) == 12


class _SlowToPrepare(_Recording):
    """A backend whose own preparation of a window (``prefetch``) takes ``PREPARING_S``."""

    def prefetch(self, requests, config) -> None:
        time.sleep(PREPARING_S)


PREPARING_S = 0.2


def test_the_summary_counts_the_time_the_backend_waited_for_a_window_to_be_prepared(tiny_dataset, tmp_path):
    """The first window's preparation overlaps nothing, so the run waits for at least all of it."""
    options = RunOptions(data=tiny_dataset, model="fake:record", out=tmp_path, shots=(1,), batch_size=2)
    assert run(options, report=quiet, backend=_SlowToPrepare()).waited_s >= PREPARING_S


class _WaitsForTheWindowAfterNext(_Recording):
    """A backend whose ``generate`` of a window returns only once the preparation (``prefetch``) of the
    window after the next has begun, where there is one; it notes whether that came."""

    def __init__(self) -> None:
        super().__init__()
        self.prefetched: list[threading.Event] = []
        self.came: list[bool] = []

    def prefetch(self, requests, config) -> None:
        self.prefetched.append(threading.Event())
        self.prefetched[-1].set()

    def generate(self, requests, config):
        after_next = len(self.calls) + 2
        if after_next < 3:  # windows of 2, 4 and 6 prompts: the first has one after its next
            deadline = time.monotonic() + 10
            while len(self.prefetched) <= after_next and time.monotonic() < deadline:
                time.sleep(0.01)
            self.came.append(len(self.prefetched) > after_next)
        return super().generate(requests, config)


def test_the_window_after_next_is_prepared_while_this_one_is_answered(tiny_dataset, tmp_path):
    """Two windows are prepared ahead (``LOOKAHEAD_WINDOWS``): a window whose preparation is slow uses the
    slack of the one before it. With one ahead, the first window's answer would wait for the third window's
    preparation in vain (it begins only after that answer)."""
    options = RunOptions(data=tiny_dataset, model="fake:record", out=tmp_path, shots=(1,), batch_size=2)
    backend = _WaitsForTheWindowAfterNext()
    summary = run(options, report=quiet, backend=backend)
    assert backend.came == [True]
    assert backend.calls == [2, 4, 6] and summary.ks[0].written == 12
    assert len(backend.prefetched) == 3  # each window prepared once


class _Counting(_Recording):
    """A backend that counts its work as the hf backend does (``seconds`` by phase, ``work``)."""

    name = "fake:counting"

    def __init__(self) -> None:
        super().__init__()
        self.seconds = {"prefill": 0.0}
        self.work = {"lm_tokens": 0, "out_of_memory": 0}

    def generate(self, requests, config):
        self.seconds["prefill"] += 0.25
        self.work["lm_tokens"] += 10 * len(requests)
        return super().generate(requests, config)


def test_the_run_record_keeps_what_the_backend_counted_of_this_runs_work(tiny_dataset, tmp_path):
    """A backend that serves two runs: each run's entry holds only its own share of the counters; a backend
    that counts nothing adds nothing."""
    backend = _Counting()
    for k, out in ((1, tmp_path / "first"), (2, tmp_path / "second")):
        earlier = len(backend.calls)
        options = RunOptions(data=tiny_dataset, model="fake:counting", out=out, shots=(k,), batch_size=4)
        run(options, report=quiet, backend=backend)
        calls = backend.calls[earlier:]
        (entry,) = json.loads((out / "counting_run.json").read_text())["runs"]
        assert entry["timing"]["backend_spent"] == {
            "seconds": {"prefill": 0.25 * len(calls)},
            "work": {"lm_tokens": 10 * sum(calls), "out_of_memory": 0},
        }
    assert backend.work["lm_tokens"] > 10 * sum(calls)  # the backend's own counters hold both runs
    run(
        RunOptions(data=tiny_dataset, model="builtin:random", out=tmp_path / "plain", shots=(1,)),
        report=quiet,
    )
    (entry,) = json.loads((tmp_path / "plain" / "random_run.json").read_text())["runs"]
    assert "backend_spent" not in entry["timing"]


def test_windows_take_their_sizes_in_turn_the_last_repeated():
    from audioicl.inference.runner import Work, windows
    from audioicl.records import Episode, Query

    episodes = [Episode(str(i), "AudioCount", (), Query((), "1")) for i in range(10)]
    work = [Work(1, ep) for ep in episodes]
    assert [len(w) for w in windows(work, (1, 2, 3))] == [1, 2, 3, 3, 1]
    assert [len(w) for w in windows(work, 4)] == [4, 4, 2]
    assert [w[0].episode.id for w in windows(work, (1, 2, 3))] == ["0", "1", "3", "6", "9"]
    # any item whose episode ``episode_of`` names: a window never cuts one
    items = [("a", 1), ("a", 2), ("b", 1), ("b", 2), ("c", 1)]
    cut = windows(items, 1, whole_episodes=True, episode_of=lambda item: item[0])
    assert [[k for _, k in window] for window in cut] == [[1, 2], [1, 2], [1]]


class _FallingBack(_Counting):
    """A backend whose info changes mid-run, as the hf fast path's does where a path falls back."""

    @property
    def info(self):
        return {"decode_batches": {"used": 1 if self.calls else 4}, "peak_memory_gib": float(len(self.calls))}


def test_the_run_record_keeps_the_backends_info_as_it_stands_when_the_run_ends(tiny_dataset, tmp_path):
    """Regression (issue 41): the record kept the backend's info from the load only, so a fast path that fell
    back mid-run and the peak memory read as they were before the first prompt."""
    backend = _FallingBack()
    run(
        RunOptions(data=tiny_dataset, model="fake:falling", out=tmp_path, shots=(1,)),
        report=quiet,
        backend=backend,
    )
    (entry,) = json.loads((tmp_path / "falling_run.json").read_text())["runs"]
    assert entry["backend_info"] == {
        "decode_batches": {"used": 1},
        "peak_memory_gib": float(len(backend.calls)),
    }
    assert backend.calls


def test_the_run_record_says_where_the_runners_own_time_went(tiny_dataset, tmp_path):
    """The record splits the run's wall time beside the backend's phases: waiting for the preparing thread, in
    the backend's calls, writing the lines, restoring the meta order (what a slow preparation costs shows)."""
    run(
        RunOptions(data=tiny_dataset, model="fake:slow", out=tmp_path, shots=(1,), batch_size=2),
        report=quiet,
        backend=_SlowToPrepare(),
    )
    (entry,) = json.loads((tmp_path / "slow_run.json").read_text())["runs"]
    spent = entry["timing"]["runner_spent"]
    assert set(spent) == {"waited_for_prompts", "in_backend", "writing", "restoring_order"}
    assert spent["waited_for_prompts"] >= PREPARING_S
    assert sum(spent.values()) <= entry["timing"]["wall_s"] + 0.01
