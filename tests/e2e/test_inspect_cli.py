"""The inspect_ai task (``audioicl/audioicl_bench``) against the real library, offline: its samples are the
chats ``audioicl run`` sends; an eval with ``mockllm/model`` imported by ``audioicl import-inspect`` scores as
inspect's own metric; inspect's OpenAI-compatible provider and ``audioicl run --model openai:...`` send the
same messages to the local chat server and get the same answers and score CSVs.

Needs the ``inspect`` extra (skipped without it): ``scripts/integrations_env.sh`` makes an environment with it.
"""

from __future__ import annotations

import base64
import csv
import json
import os
import re
import sys
from functools import partial
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

import cli  # noqa: E402
from helpers import read_jsonl  # noqa: E402
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import (  # noqa: E402
    ChatMessageSystem,
    ContentAudio,
    ContentText,
    ModelOutput,
    ModelUsage,
    get_model,
)

from audioicl.errors import AudioICLError  # noqa: E402
from audioicl.integrations.episodes import episode_prompts, run_options, wav_bytes  # noqa: E402
from audioicl.integrations.inspect_import import import_inspect  # noqa: E402
from audioicl.integrations.inspect_task import audioicl_bench  # noqa: E402
from audioicl.prompts.chat import AudioPart, TextPart  # noqa: E402
from audioicl.scoring.rules import judge  # noqa: E402

audioicl = partial(cli.audioicl, timeout=300, rc=0)
TASKS = "AudioCount,MorseCode,AudioRemap,AnomalyDetect"  # the tiny dataset's four shapes


@pytest.fixture(autouse=True)
def _clip_cache(tmp_path, monkeypatch):
    """Clips of ``audio="file"`` samples go to the test's folder, not the user's cache."""
    monkeypatch.setenv("AUDIOICL_INSPECT_CLIPS", str(tmp_path / "default-clips"))


def _audio_contents(messages) -> list[ContentAudio]:
    return [
        c
        for m in messages
        if not isinstance(m.content, str)
        for c in m.content
        if isinstance(c, ContentAudio)
    ]


def _text(messages) -> str:
    return "".join(
        m.content
        if isinstance(m.content, str)
        else "".join(c.text for c in m.content if isinstance(c, ContentText))
        for m in messages
    )


def _last_label(input, tools, tool_choice, config) -> ModelOutput:
    """A mock model: answers the label shown last (right now and then: an anomaly label in the last demo's
    place, a remap pattern repeated), or nothing readable for a Morse prompt of more than 28 clips."""
    labels = re.findall(r"Label: (\S+)", _text(input))
    clips = len(_audio_contents(input))
    answer = labels[-1] if labels and clips <= 28 else "I cannot tell."
    output = ModelOutput.from_content("mockllm/model", answer)
    output.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)  # no tiktoken download
    return output


def _eval(task, model, log_dir: Path):
    logs = inspect_eval(task, model=model, log_dir=str(log_dir), display="none")
    assert logs[0].status == "success", logs[0].error
    return logs[0]


def test_samples_are_the_run_chats(tiny_dataset, tmp_path):
    clip_dir = tmp_path / "clips"
    task = audioicl_bench(data=str(tiny_dataset), k="0-2", tasks=TASKS, clip_dir=str(clip_dir))
    samples = list(task.dataset)
    expected = list(episode_prompts(run_options(tiny_dataset, shots=[0, 1, 2], tasks=TASKS.split(","))))
    assert [s.id for s in samples] == [item.key for item in expected]
    assert len(samples) == 3 * 4 * 3  # k = 0, 1, 2; four tasks; three episodes each
    for sample, item in zip(samples, expected, strict=True):
        chat = item.prompt.chat
        assert sample.target == item.episode.query.label
        assert sample.metadata["episode_id"] == item.episode.id
        assert sample.metadata["task"] == item.episode.task
        assert sample.metadata["k"] == item.k
        assert sample.metadata["condition"] is None
        assert sample.metadata["audio_paths"] == list(item.prompt.audio_paths)
        assert [m.role for m in sample.input] == [m.role for m in chat.messages]
        for got, want in zip(sample.input, chat.messages, strict=True):
            parts = [got.content] if isinstance(got.content, str) else got.content
            if isinstance(got.content, str):
                assert got.content == "".join(p.text for p in want.content)
                continue
            assert len(parts) == len(want.content)
            for part, wanted in zip(parts, want.content, strict=True):
                if isinstance(wanted, TextPart):
                    assert part.text == wanted.text
                else:
                    assert isinstance(wanted, AudioPart) and isinstance(part, ContentAudio)
                    assert part.format == "wav"
                    assert Path(part.audio).parent == clip_dir.resolve()
                    assert Path(part.audio).read_bytes() == wav_bytes(wanted)
        clips = len(_audio_contents(sample.input))
        per_shot = {"AudioCount": 1, "MorseCode": 1, "AudioRemap": 3, "AnomalyDetect": 2}[item.episode.task]
        query = {"AudioCount": 1, "MorseCode": 1, "AudioRemap": 3, "AnomalyDetect": 1}[item.episode.task]
        bank = 26 if item.episode.task == "MorseCode" else 0
        assert clips == per_shot * item.k + query + bank
    # a clip file is named by its content, never by a path that could spell the label
    assert all(re.fullmatch(r"[0-9a-f]{32}\.wav", p.name) for p in clip_dir.iterdir())


def test_inline_audio_and_controls(tiny_dataset, tmp_path):
    inline = list(audioicl_bench(data=str(tiny_dataset), k=1, tasks="AudioCount", audio="data").dataset)
    expected = list(episode_prompts(run_options(tiny_dataset, shots=[1], tasks=["AudioCount"])))
    for sample, item in zip(inline, expected, strict=True):
        refs = [c.audio for c in _audio_contents(sample.input)]
        want = [wav_bytes(p) for p in item.prompt.chat.audio_parts()]
        assert [base64.b64decode(r.split("base64,", 1)[1]) for r in refs] == want
        assert all(r.startswith("data:audio/wav;base64,") for r in refs)

    no_audio = list(
        audioicl_bench(data=str(tiny_dataset), k=2, tasks="AudioCount", control="no-audio").dataset
    )
    assert all(not _audio_contents(s.input) for s in no_audio)
    assert all(s.metadata["condition"] == "no-audio" for s in no_audio)
    assert all(isinstance(m.content, str) for s in no_audio for m in s.input)  # text only: plain strings

    shuffled = audioicl_bench(
        data=str(tiny_dataset), k=2, tasks="AudioCount", control="random-labels", seed=3
    )
    want = episode_prompts(
        run_options(tiny_dataset, shots=[2], tasks=["AudioCount"], control="random-labels", seed=3)
    )
    for sample, item in zip(shuffled.dataset, want, strict=True):
        assert _text(sample.input[1:]) == "".join(
            p.text for m in item.prompt.chat.messages[1:] for p in m.content if isinstance(p, TextPart)
        )

    with pytest.raises(AudioICLError, match="control"):
        audioicl_bench(data=str(tiny_dataset), k=1, control="no-such-control")
    with pytest.raises(AudioICLError, match="no meta file for k=7"):
        audioicl_bench(data=str(tiny_dataset), k=7)


def test_mockllm_log_imports_and_scores_as_inspect(tiny_dataset, tmp_path):
    model = get_model("mockllm/model", custom_outputs=_last_label)
    task = audioicl_bench(data=str(tiny_dataset), k="1,2", tasks=TASKS, clip_dir=str(tmp_path / "clips"))
    log = _eval(task, model, tmp_path / "logs")

    # the log's samples carry the clips: k + 1 audio contents for a single-clip task, more for multi-clip
    samples = read_eval_log(log.location).samples
    assert len(samples) == 2 * 4 * 3
    for sample in samples:
        k, task_name = sample.metadata["k"], sample.metadata["task"]
        clips = len(_audio_contents(sample.input))
        if task_name == "AudioCount":
            assert clips == k + 1
        elif task_name == "AudioRemap":
            assert clips == 3 * (k + 1)
        elif task_name == "AnomalyDetect":
            assert clips == 2 * k + 1
        else:
            assert clips == k + 1 + 26  # the Morse bank first
        assert isinstance(sample.messages[0], ChatMessageSystem)
        assert sample.metadata["family"] == "default"

    out = tmp_path / "results"
    audioicl("import-inspect", log.location, "--out", out)
    assert sorted(p.name for p in out.iterdir()) == [  # the provider kept (issue 40, item 5)
        "mockllm-model_results_k1.jsonl",
        "mockllm-model_results_k2.jsonl",
        "mockllm-model_run.json",
    ]
    summary = tmp_path / "summary.csv"
    audioicl("score", "--in", out, "--out", summary, "--data", tiny_dataset)
    rows = list(csv.DictReader(summary.open(newline="")))

    # inspect's own verdicts, per task and k, against audioicl score's
    verdicts: dict[tuple[str, str], list[bool]] = {}
    for sample in samples:
        key = (str(sample.metadata["k"]), sample.metadata["task"])
        verdicts.setdefault(key, []).append(sample.scores["audioicl_rule"].value == "C")
        # and the scorer is audioicl's rule
        rule = judge(sample.metadata["task"], sample.output.completion.strip(), sample.target)
        assert (sample.scores["audioicl_rule"].value == "C") == rule.correct
    assert {(r["shots"], r["task"]) for r in rows} == set(verdicts)
    for row in rows:
        right = verdicts[(row["shots"], row["task"])]
        assert row["model"] == "mockllm-model"
        assert int(row["n"]) == len(right)
        assert row["accuracy"] == f"{sum(right) / len(right):.6f}"
    assert any(float(r["accuracy"]) > 0 for r in rows) and any(float(r["accuracy"]) < 1 for r in rows)
    overall = log.results.scores[0].metrics["accuracy"].value
    assert overall == pytest.approx(sum(sum(v) for v in verdicts.values()) / len(samples))

    # a second import into the same folder is refused, not mixed
    again = cli.audioicl("import-inspect", log.location, "--out", out, rc=2)
    assert "already there" in again.stderr


def test_an_eval_of_some_tasks_imports_as_a_subset(tiny_dataset, tmp_path):
    """Issue 40, item 5: an eval of some tasks scored "incomplete: ... have no line" (a crashed run's status);
    the run record the import writes holds the eval's selection, so it is a subset, named as such."""
    model = get_model("mockllm/model", custom_outputs=_last_label)
    task = audioicl_bench(data=str(tiny_dataset), k=1, tasks="AudioCount,MorseCode", limit=2, audio="data")
    log = _eval(task, model, tmp_path / "logs")
    out = tmp_path / "results"
    audioicl("import-inspect", log.location, "--out", out)
    record = json.loads((out / "mockllm-model_run.json").read_text())
    assert record["model"] == "inspect:mockllm/model" and record["data"] == str(tiny_dataset)
    assert [(r["shots"], r["tasks"], r["limit"]) for r in record["runs"]] == [
        ([1], ["AudioCount", "MorseCode"], 2)
    ]
    audioicl("score", "--in", out, "--out", tmp_path / "scores")
    (row,) = list(csv.DictReader((tmp_path / "scores" / "summary_coverage.csv").open(newline="")))
    assert row["status"] == "subset" and row["episodes_selected"] == "4", row
    assert "tasks AudioCount, MorseCode; first 2 episodes per task" in row["selection"]


def test_import_refuses_other_logs_and_names_conditions(tiny_dataset, tmp_path):
    model = get_model("mockllm/model", custom_outputs=_last_label)
    task = audioicl_bench(
        data=str(tiny_dataset), k=1, tasks="AudioCount", control="noise-query", audio="data"
    )
    log = _eval(task, model, tmp_path / "logs")
    written = import_inspect([tmp_path / "logs"], tmp_path / "out", name="mock")
    assert [w.path.name for w in written] == ["mock+noise-query_results_k1.jsonl"]
    lines = written[0].path.read_text().splitlines()
    assert len(lines) == 3
    with pytest.raises(AudioICLError, match="answered twice"):
        import_inspect([log.location, log.location], tmp_path / "out2")


def test_openai_provider_matches_audioicl_run(tiny_dataset, tmp_path, monkeypatch):
    """inspect's OpenAI-compatible provider and ``audioicl run --model openai:...`` against the same local chat
    server: the same request messages, hence the same answers, and byte-identical score CSVs."""
    pytest.importorskip("openai")
    pytest.importorskip("httpx")
    import chat_server
    from chat_server import ChatServer, messages_digest

    # answers that score now right, now wrong: a digit (or a word) drawn from the messages alone
    words = ("1", "2", "3", "Normal", "Anomalous", "AAB", "apple", "4", "5")
    monkeypatch.setattr(
        chat_server, "answer_for", lambda m: words[int(messages_digest(m)[:8], 16) % len(words)]
    )
    server = ChatServer().start()
    try:
        monkeypatch.setenv("LOCAL_BASE_URL", server.url)
        monkeypatch.setenv("LOCAL_API_KEY", "not-a-key")
        task = audioicl_bench(data=str(tiny_dataset), k="0-2", tasks=TASKS, clip_dir=str(tmp_path / "clips"))
        log = _eval(task, "openai-api/local/test-model", tmp_path / "logs")
        inspect_bodies = {e.digest: e.body for e in server.log}
        audioicl("import-inspect", log.location, "--out", tmp_path / "inspect", "--name", "test-model")
        asked_by_inspect = len(server.log)
        audioicl(
            "run", "--data", tiny_dataset, "--model", "openai:test-model", "--base-url", server.url,
            "--k", "0-2", "--tasks", TASKS, "--out", tmp_path / "run",
        )  # fmt: skip
        run_bodies = {e.digest: e.body for e in server.log[asked_by_inspect:]}
    finally:
        server.stop()
    assert asked_by_inspect == 3 * 4 * 3
    assert set(run_bodies) == set(inspect_bodies)  # the very same messages, clip bytes included
    for digest, body in run_bodies.items():
        assert body["messages"] == inspect_bodies[digest]["messages"]
        assert body["max_tokens"] == inspect_bodies[digest]["max_tokens"] == 16
    for k in (0, 1, 2):
        ours = {
            x["id"]: x["response"] for x in read_jsonl(tmp_path / "run" / f"test-model_results_k{k}.jsonl")
        }
        theirs = {
            x["id"]: x["response"]
            for x in read_jsonl(tmp_path / "inspect" / f"test-model_results_k{k}.jsonl")
        }
        assert ours == theirs
    audioicl("score", "--in", tmp_path / "run", "--out", tmp_path / "run.csv")
    audioicl("score", "--in", tmp_path / "inspect", "--out", tmp_path / "inspect.csv")
    assert (tmp_path / "run.csv").read_bytes() == (tmp_path / "inspect.csv").read_bytes()
    assert (tmp_path / "run_detail.csv").read_bytes() == (tmp_path / "inspect_detail.csv").read_bytes()


def test_inspect_eval_command_finds_the_task(tiny_dataset, tmp_path, monkeypatch):
    """``inspect eval audioicl/audioicl_bench ...`` as a user types it: the entry point registers the task."""
    pytest.importorskip("openai")
    import shutil
    import subprocess

    from chat_server import ChatServer

    inspect = shutil.which("inspect", path=str(Path(sys.executable).parent))
    assert inspect, "the inspect command is not installed beside this python"
    server = ChatServer().start()
    try:
        env = {**os.environ, "LOCAL_BASE_URL": server.url, "LOCAL_API_KEY": "not-a-key"}
        args = [
            inspect, "eval", "audioicl/audioicl_bench", "--model", "openai-api/local/test-model",
            "-T", f"data={tiny_dataset}", "-T", "k=2", "-T", "tasks=AudioCount", "-T", "audio=data",
            "--log-dir", str(tmp_path / "logs"), "--display", "none",
        ]  # fmt: skip
        proc = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    finally:
        server.stop()
    assert len(server.log) == 3
    for entry in server.log:
        audio = [p for m in entry.body["messages"] if isinstance(m["content"], list) for p in m["content"]]
        assert sum(1 for p in audio if p["type"] == "input_audio") == 3  # k + 1
    written = import_inspect([tmp_path / "logs"], tmp_path / "out")
    assert [(w.path.name, w.lines) for w in written] == [("openai-api-test-model_results_k2.jsonl", 3)]
