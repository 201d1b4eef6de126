"""``audioicl run --model openai:NAME --base-url URL`` against our local chat server with faults: every
episode ends answered or as an error line, none lost or doubled, ``--retry-errors`` completes them; the
API key never reaches a file or the terminal."""

from __future__ import annotations

import json
import os
from functools import partial

import cli
import pytest
from helpers import read_jsonl

pytest.importorskip("httpx")

from chat_server import ChatServer, messages_digest  # noqa: E402

KEY = "sk-test-do-not-write-me-7f3a"
TASKS = 4  # the tiny dataset's task shapes
PER_TASK = 3


audioicl = partial(cli.audioicl, timeout=300)


def test_faults_lose_nothing_and_retry_errors_completes(tiny_dataset, tmp_path):
    # By request: 429 (Retry-After 1), 500 twice, a dropped connection, an answer slower than the timeout,
    # and for one request in six an invalid JSON body on its first attempt (not retried: an error line).
    script = {0: ["429"], 1: ["500", "500"], 2: ["drop"], 3: ["slow"], 4: ["bad_json"], 5: []}

    def plan(digest: str, attempt: int) -> str | None:
        faults = script[int(digest[:8], 16) % 6]
        return faults[attempt - 1] if attempt <= len(faults) else None

    server = ChatServer(plan=plan, slow_s=1.5).start()
    out = tmp_path / "results"
    common = [
        "run", "--data", tiny_dataset, "--model", "openai:gpt-audio-test", "--base-url", server.url,
        "--out", out, "-o", "concurrency=8", "-o", "timeout=0.5", "-o", "backoff=0.01",
        "-o", "api_key_env=AUDIO_KEY",
    ]  # fmt: skip
    try:
        first = audioicl(*common, env={**os.environ, "AUDIO_KEY": KEY})
        bad = {e.digest for e in server.log if e.action == "bad_json"}
        assert bad, "no request drew the invalid-JSON fault"
        assert first.returncode == 1, first.stderr
        for k in (1, 2, 3):
            got = read_jsonl(out / f"gpt-audio-test_results_k{k}.jsonl")
            assert len(got) == len({x["id"] for x in got}) == TASKS * PER_TASK
            errors = [x for x in got if x["status"] == "error"]
            assert all(x["error"].startswith("malformed response (not JSON)") for x in errors)
            assert all(x["response"].startswith("answer ") for x in got if x["status"] == "ok")
        n_errors = sum(
            1 for k in (1, 2, 3) for x in read_jsonl(out / f"gpt-audio-test_results_k{k}.jsonl") if x["error"]
        )
        assert f"{n_errors} episode(s) ended in an error line" in first.stdout

        asked_first = len(server.log)
        second = audioicl(*common, "--retry-errors", env={**os.environ, "AUDIO_KEY": KEY})
        assert second.returncode == 0, second.stderr + second.stdout
    finally:
        server.stop()
    for k in (1, 2, 3):
        got = read_jsonl(out / f"gpt-audio-test_results_k{k}.jsonl")
        assert len(got) == len({x["id"] for x in got}) == TASKS * PER_TASK
        assert {x["status"] for x in got} == {"ok"}
    # every request ended answered; the bad ones were asked again by the second run only
    answered = {e.digest for e in server.log if e.action == "answer"}
    assert {e.digest for e in server.log} == answered
    assert {e.digest for e in server.log[asked_first:]} == bad
    assert {e.action for e in server.log[asked_first:]} == {"answer"}
    # the key went to the server and nowhere else
    assert {e.authorization for e in server.log} == {f"Bearer {KEY}"}
    for path in out.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(encoding="utf-8", errors="replace"), path
    for proc in (first, second):
        assert KEY not in proc.stdout + proc.stderr
    record = json.loads((out / "gpt-audio-test_run.json").read_text())
    assert record["settings"]["backend_options"]["base_url"] == server.url
    assert record["runs"][-1]["backend_info"]["api_key_env"] == "AUDIO_KEY"
    assert record["runs"][-1]["backend_info"]["answered_by"] == ["gpt-audio-test"]  # what the server said


def test_a_bad_key_stops_the_run(tiny_dataset, tmp_path):
    server = ChatServer(plan=lambda digest, attempt: "401").start()
    try:
        proc = audioicl(
            "run", "--data", tiny_dataset, "--model", "openai:m", "--base-url", server.url,
            "--out", tmp_path / "r", "--batch-size", "2", "--window", "4",
        )  # fmt: skip
    finally:
        server.stop()
    assert proc.returncode == 2
    assert "failed 3 calls in a row" in proc.stderr and "HTTP 401" in proc.stderr
    # it stopped after three failed windows; a window of 4 runs on to the end of the episode it cuts
    # (3 k files: at most 2 more prompts)
    assert len({messages_digest(e.body["messages"]) for e in server.log}) <= 3 * (4 + 2)


def test_base_url_flag_and_option_must_agree(tiny_dataset, tmp_path):
    proc = audioicl(
        "run", "--data", tiny_dataset, "--model", "openai:m", "--out", tmp_path,
        "--base-url", "http://127.0.0.1:1/v1", "-o", "base_url=http://127.0.0.1:2/v1",
    )  # fmt: skip
    assert proc.returncode == 2 and "disagree" in proc.stderr


def test_a_run_resumes_with_other_concurrency_and_timeouts_but_not_another_server(tiny_dataset, tmp_path):
    """Lowering the concurrency after a rate limit, or raising the timeout, changes how the answers are
    fetched, not what they are: the resumed run is taken. Another server is another model's answers."""
    server = ChatServer(plan=lambda digest, attempt: None).start()
    out = tmp_path / "r"
    common = ["run", "--data", tiny_dataset, "--model", "openai:m", "--base-url", server.url, "--out", out]
    try:
        first = audioicl(*common, "--limit", "1", "-o", "concurrency=8", "-o", "timeout=5")
        assert first.returncode == 0, first.stderr
        second = audioicl(*common, "-o", "concurrency=1", "-o", "max_retries=9")
        assert second.returncode == 0, second.stderr
        elsewhere = audioicl(*common[:6], "http://127.0.0.1:9/v1", *common[7:])
    finally:
        server.stop()
    assert elsewhere.returncode == 2 and "base_url" in elsewhere.stderr
    for k in (1, 2, 3):
        ids = [line["id"] for line in read_jsonl(out / f"m_results_k{k}.jsonl")]
        assert len(ids) == len(set(ids)) == TASKS * PER_TASK
    record = json.loads((out / "m_run.json").read_text())
    assert [run["backend_options"] for run in record["runs"]] == [
        {"base_url": server.url, "concurrency": "8", "timeout": "5"},
        {"base_url": server.url, "concurrency": "1", "max_retries": "9"},
    ]


def _dead_url() -> str:
    """A local port that refuses connections."""
    import socket

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"http://127.0.0.1:{port}/v1"


def test_a_dead_server_stops_the_run_before_anything_is_written(tiny_dataset, tmp_path):
    """One reachability check before the first request: no retries, one line naming the URL, exit 2, and
    no results file, run record or output folder left behind."""
    url = _dead_url()
    out = tmp_path / "r"
    proc = audioicl(
        "run", "--data", tiny_dataset, "--model", "openai:m", "--base-url", url, "--out", out,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"audioicl run: error: cannot reach the server at {url} (GET {url}/models: ")
    assert "Connection refused" in line and "--base-url" in line
    assert not out.exists()


def test_a_server_that_dies_mid_run_stops_the_run_and_a_rerun_completes(tiny_dataset, tmp_path):
    """The server answers the first windows, then refuses connections: the run stops at the first window
    none of whose requests got through, writing no line for it (not an error line per episode left)."""
    import threading

    state = {"answered": 0, "gone": False}
    lock = threading.Lock()
    server: ChatServer

    def plan(digest: str, attempt: int) -> str | None:
        with lock:
            if state["gone"]:
                return "drop"
            state["answered"] += 1
            if state["answered"] == 8:
                state["gone"] = True
                threading.Thread(target=server.stop, daemon=True).start()
        return None

    server = ChatServer(plan=plan).start()
    out = tmp_path / "r"
    common = ["run", "--data", tiny_dataset, "--model", "openai:m", "--out", out, "--window", "4"]
    dead = audioicl(*common, "--base-url", server.url, "-o", "backoff=0.01", "-o", "concurrency=1")
    assert dead.returncode == 2, dead.stderr
    assert "no request of the call could reach the server" in dead.stderr
    assert "the same command resumes" in dead.stderr
    written = [x for k in (1, 2, 3) for x in read_jsonl(out / f"m_results_k{k}.jsonl")]
    assert 8 <= len(written) < 3 * TASKS * PER_TASK
    assert sum(1 for x in written if x["status"] == "error") <= 4  # at most the window it died in
    record = json.loads((out / "m_run.json").read_text())
    assert record["runs"][-1]["timing"]["outcome"] == "stopped"

    again = ChatServer(port=int(server.url.rsplit(":", 1)[1].split("/")[0])).start()  # the same URL
    try:
        done = audioicl(*common, "--base-url", again.url, "--retry-errors")
    finally:
        again.stop()
    assert done.returncode == 0, done.stderr
    for k in (1, 2, 3):
        got = read_jsonl(out / f"m_results_k{k}.jsonl")
        assert len(got) == len({x["id"] for x in got}) == TASKS * PER_TASK
        assert {x["status"] for x in got} == {"ok"}
