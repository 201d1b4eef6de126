"""The ``openai`` backend against a real HTTP server of ours on 127.0.0.1 (``chat_server.ChatServer``):
the payload, ordering under concurrency, retries (429 with Retry-After, 500, dropped connections, answers
slower than the timeout), malformed answers, fatal statuses and the API key."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import threading
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

pytest.importorskip("httpx")

from chat_server import ChatServer, answer_for, messages_digest  # noqa: E402

from audioicl import AudioICLError, read_meta  # noqa: E402
from audioicl.backends import ModelSpec, load_backend  # noqa: E402
from audioicl.backends.base import GenerationConfig, Request  # noqa: E402
from audioicl.backends.openai.backend import CONNECT_RETRIES, chat_messages  # noqa: E402
from audioicl.prompts.build import build_prompt  # noqa: E402
from audioicl.prompts.chat import AudioPart, TextPart  # noqa: E402
from audioicl.prompts.clips import ClipStore  # noqa: E402

FAST = {"backoff": "0.01", "max_backoff": "0.05"}


@pytest.fixture
def server():
    running = ChatServer().start()
    yield running
    running.stop()


def requests_for(dataset: Path, ks: tuple[int, ...] = (1, 2)) -> list[Request]:
    store = ClipStore(dataset)
    out = []
    for k in ks:
        for ep in read_meta(dataset / "meta" / f"meta_k{k}.jsonl"):
            out.append(Request(f"{ep.id}@k{k}", ep.id, ep.task, k, build_prompt(ep, store).chat))
    return out


def backend(server: ChatServer, **options: str):
    return load_backend(ModelSpec("openai", "test-model"), base_url=server.url, **{**FAST, **options})


def expected(request: Request) -> str:
    return answer_for(chat_messages(request.chat))


# --------------------------------------------------------------------------- the payload


def test_payload_follows_the_typed_chat(server, tiny_dataset):
    (request,) = [r for r in requests_for(tiny_dataset, (2,)) if r.task == "AudioRemap"][:1]
    client = backend(server)
    (response,) = client.generate([request], GenerationConfig(max_new_tokens=5, stop=("\n",)))
    client.close()
    assert response.text == expected(request) and response.usage.input_tokens == 100
    body = server.log[0].body
    assert body["model"] == "test-model" and body["max_tokens"] == 5 and body["temperature"] == 0
    assert body["stop"] == ["\n"]
    system, user = body["messages"]
    assert system == {"role": "system", "content": request.chat.messages[0].content[0].text}
    # text and audio parts alternate as in the chat, adjacent text joined, each clip a 16 kHz mono WAV
    parts = [p for p in request.chat.messages[1].content]
    assert [p["type"] for p in user["content"]] == [
        "text" if isinstance(p, TextPart) else "input_audio" for p in parts
    ]
    for sent, part in zip(user["content"], parts, strict=True):
        if isinstance(part, TextPart):
            assert sent["text"] == part.text
            continue
        assert sent["input_audio"]["format"] == "wav"
        wave, rate = sf.read(io.BytesIO(base64.b64decode(sent["input_audio"]["data"])), dtype="float32")
        assert rate == 16_000 and wave.ndim == 1
        assert np.array_equal(wave, part.wave)  # bit-exact: the clip as decoded from its 16-bit file


def test_no_path_and_no_query_label_reach_the_server(server, tiny_dataset):
    requests = requests_for(tiny_dataset)
    client = backend(server, concurrency="4")
    client.generate(requests, GenerationConfig())
    client.close()
    assert len(server.log) == len(requests)
    for entry in server.log:
        text = json.dumps(entry.body)
        assert ".wav" not in text and "data/" not in text
        last = _parts(entry.body["messages"][-1])
        # the query's target clip is the last part but one; after it only " Label:", no label
        assert last[-2]["type"] == "input_audio" and last[-1] == {"type": "text", "text": " Label:"}


def _digest(request: Request) -> str:
    """The server's name for a request's messages."""
    return messages_digest(chat_messages(request.chat))


def _parts(message: dict) -> list[dict]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def test_audio_outside_a_user_turn_is_an_error_response(server):
    from audioicl.prompts.chat import Chat, Message

    clip = AudioPart.of(np.zeros(1600, dtype=np.float32), 16_000)
    chat = Chat("AudioCount", (Message("system", (clip,)), Message("user", (TextPart("x"),))), ())
    client = backend(server)
    (response,) = client.generate([Request("a@k1", "a", "AudioCount", 1, chat)], GenerationConfig())
    client.close()
    assert response.text is None and "system message holds audio" in response.error
    assert server.log == []


# --------------------------------------------------------------------------- concurrency and order


def test_results_in_request_order_whatever_the_concurrency(tiny_dataset):
    # answers take 0-40 ms depending on the request, so they finish out of order
    server = ChatServer(latency=lambda digest: int(digest[:2], 16) % 5 * 0.01).start()
    requests = requests_for(tiny_dataset)
    try:
        answers = {}
        for concurrency in ("1", "8"):
            client = backend(server, concurrency=concurrency)
            answers[concurrency] = [r.text for r in client.generate(requests, GenerationConfig())]
            client.close()
            assert server.max_in_flight <= int(concurrency)
    finally:
        server.stop()
    assert answers["1"] == answers["8"] == [expected(r) for r in requests]
    assert server.max_in_flight > 1  # concurrency 8 did overlap requests


# --------------------------------------------------------------------------- faults


def _bucket(digest: str, buckets: int) -> int:
    return int(digest[:8], 16) % buckets


def test_retries_429_500_drops_and_timeouts_then_answers(tiny_dataset):
    faults = {0: ["429"], 1: ["500", "500"], 2: ["drop"], 3: ["slow"], 4: []}

    def plan(digest: str, attempt: int) -> str | None:
        script = faults[_bucket(digest, 5)]
        return script[attempt - 1] if attempt <= len(script) else None

    server = ChatServer(plan=plan, retry_after="1", slow_s=1.5).start()
    requests = list({_digest(r): r for r in requests_for(tiny_dataset)}.values())  # one per distinct prompt
    try:
        client = backend(server, concurrency="8", timeout="0.5", max_retries="3")
        responses = client.generate(requests, GenerationConfig())
        client.close()
    finally:
        server.stop()
    assert [r.text for r in responses] == [expected(r) for r in requests]
    assert all(r.error is None for r in responses)
    kinds = {_bucket(_digest(r), 5) for r in requests}
    assert kinds == set(faults)  # every fault was exercised
    for request in requests:
        attempts = server.attempts(_digest(request))
        script = faults[_bucket(_digest(request), 5)]
        assert [a.action for a in attempts] == [*script, "answer"]
        if script == ["429"]:  # the second attempt waited for Retry-After
            assert attempts[1].time - attempts[0].time >= 0.95


def test_a_request_that_keeps_failing_is_an_error_after_max_retries(server, tiny_dataset):
    server.plan = lambda digest, attempt: "500"
    requests = requests_for(tiny_dataset, (1,))[:3]
    client = backend(server, max_retries="2")
    responses = client.generate(requests, GenerationConfig())
    client.close()
    assert all(r.text is None and "gave up after 3 attempts: HTTP 500" in r.error for r in responses)
    assert len(server.log) == 3 * len(requests)


@pytest.mark.parametrize("fault", ["bad_json", "no_choices"])
def test_a_malformed_answer_is_an_error_response_not_retried(server, tiny_dataset, fault):
    requests = requests_for(tiny_dataset, (1,))[:4]
    broken = _digest(requests[1])
    server.plan = lambda digest, attempt: fault if digest == broken else None
    client = backend(server)
    responses = client.generate(requests, GenerationConfig())
    client.close()
    assert responses[1].text is None and responses[1].error.startswith("malformed response")
    assert [r.text for i, r in enumerate(responses) if i != 1] == [
        expected(r) for i, r in enumerate(requests) if i != 1
    ]
    assert len(server.attempts(broken)) == 1


def test_a_bad_key_fails_the_call(server, tiny_dataset):
    server.plan = lambda digest, attempt: "401"
    client = backend(server, concurrency="2")
    with pytest.raises(AudioICLError, match="HTTP 401"):
        client.generate(requests_for(tiny_dataset, (1,)), GenerationConfig())
    client.close()
    assert len(server.log) < len(requests_for(tiny_dataset, (1,)))  # the rest were not sent


# --------------------------------------------------------------------------- the key and the options


def test_api_key_from_the_named_variable(server, tiny_dataset, monkeypatch):
    monkeypatch.setenv("MY_AUDIO_KEY", "sk-secret-123")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = backend(server, api_key_env="MY_AUDIO_KEY")
    client.generate(requests_for(tiny_dataset, (1,))[:1], GenerationConfig())
    assert "sk-secret-123" not in json.dumps(dict(client.info))
    client.close()
    assert server.log[0].authorization == "Bearer sk-secret-123"
    monkeypatch.delenv("MY_AUDIO_KEY")
    with pytest.raises(AudioICLError, match=r"\$MY_AUDIO_KEY, which is not set"):
        backend(server, api_key_env="MY_AUDIO_KEY")


def test_no_key_is_sent_without_one(server, tiny_dataset, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = backend(server)
    client.generate(requests_for(tiny_dataset, (1,))[:1], GenerationConfig())
    client.close()
    assert server.log[0].authorization is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": "0"}, "concurrency must be a whole number, at least 1"),
        ({"timeout": "soon"}, "timeout must be a number"),
        ({"base_url": "localhost:8000"}, "must start with http"),
        ({"temperature": "1"}, "takes no option temperature"),
    ],
)
def test_bad_options_are_refused(options, message):
    with pytest.raises(AudioICLError, match=message):
        load_backend(ModelSpec("openai", "m"), **options)


# --------------------------------------------------------------------------- a server that is not there


def _dead_url() -> str:
    """A local port that refuses connections: bound (so nobody else takes it), never listened on."""
    import socket

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"http://127.0.0.1:{port}/v1"


def test_the_backend_checks_the_server_once_when_it_is_made(server):
    client = backend(server)
    client.close()
    assert server.model_lists == 1 and server.log == []  # one GET /models, no chat request


@pytest.mark.parametrize("status", [401, 404])
def test_a_server_that_refuses_the_model_list_is_still_reachable(server, status):
    server.models_status = status
    backend(server).close()
    assert server.model_lists == 1


def test_a_dead_server_is_refused_when_the_backend_is_made():
    url = _dead_url()
    with pytest.raises(AudioICLError, match="cannot reach the server at") as caught:
        load_backend(ModelSpec("openai", "m"), base_url=url, **FAST)
    message = str(caught.value)
    assert url in message and "Connection refused" in message and "\n" not in message


def test_a_server_that_goes_away_stops_the_call_after_a_few_connection_attempts(tiny_dataset):
    """Connection refused is retried twice, not max_retries times, and once one request gave up the others
    give up at their first refused connection: the call raises BackendUnreachable instead of answering
    every request with an error."""
    from audioicl.backends.base import BackendUnreachable
    from audioicl.backends.openai.backend import CONNECT_RETRIES

    gone = False
    server = ChatServer(plan=lambda digest, attempt: "drop" if gone else None).start()
    requests = requests_for(tiny_dataset)
    client = backend(server, concurrency="2", max_retries="6")
    server.stop()
    gone = True  # a connection kept alive from the check is dropped, as a dead server's would be
    try:
        with pytest.raises(BackendUnreachable, match="could reach the server at") as caught:
            client.generate(requests, GenerationConfig())
    finally:
        client.close()
    assert "attempts: connection failed: ConnectError" in str(caught.value)
    # the requests in flight when the first gave up (the concurrency: 2) each had a dropped connection and
    # CONNECT_RETRIES + 1 refused ones at most; every other request one refused connection
    assert client.attempts <= 2 * (CONNECT_RETRIES + 2) + len(requests)
    assert client.attempts < 3 * len(requests)  # max_retries=6 would have made it 7 x


def test_connect_timeouts_to_a_server_that_answers_others_are_retried(server, tiny_dataset, monkeypatch):
    """A busy server (its listen backlog full) lets some connections time out while it answers others:
    found at concurrency 64 (``benchmarks/openai_load.py``), where 19 of 10,035 prompts became error lines
    after 1-3 connect timeouts, the others giving up at their first once one had. A server that answered a
    request of the call is there: its connect timeouts are retried like a 500, up to max_retries."""
    import httpx

    real = httpx.HTTPTransport.handle_request
    tries: dict[bytes, int] = {}
    lock = threading.Lock()

    def busy(self, request):
        key = hashlib.sha256(request.read()).digest()
        with lock:
            tries[key] = tries.get(key, 0) + 1
            attempt = tries[key]
        # once the client has had an answer (its own record of it: the transport returning one is not yet
        # the client knowing, and a timeout in between is a server not yet reached, rightly given up on)
        if client._reached.is_set() and key[0] % 2 and attempt <= CONNECT_RETRIES + 2:
            raise httpx.ConnectTimeout("timed out", request=request)
        return real(self, request)

    requests = list({_digest(r): r for r in requests_for(tiny_dataset)}.values())  # one per distinct prompt
    client = backend(server, concurrency="4", max_retries="6")
    monkeypatch.setattr(httpx.HTTPTransport, "handle_request", busy)
    try:
        responses = client.generate(requests, GenerationConfig())
    finally:
        client.close()
    assert [r.error for r in responses] == [None] * len(requests)
    assert [r.text for r in responses] == [expected(r) for r in requests]
    assert max(tries.values()) == CONNECT_RETRIES + 3  # timed out more often than a dead server is tried


def test_a_body_trickled_past_the_timeout_is_cut_off_at_the_deadline(tiny_dataset):
    """A byte every 0.2 s (each read well within the timeout; 400 bytes would take 80 s): ``timeout`` bounds
    the whole attempt (issue 39, item 4: it ran past -o timeout=3 for 40 s until stopped), then retried and
    given up as any timeout is."""
    trickling = ChatServer(plan=lambda digest, attempt: "trickle").start()
    try:
        client = backend(trickling, timeout="1", max_retries="1")
        (response,) = client.generate(requests_for(tiny_dataset, (1,))[:1], GenerationConfig())
        client.close()
    finally:
        trickling.stop()
    assert response.text is None
    assert "gave up after 2 attempts: timed out: no whole answer within 1 s" in response.error
    # each attempt was cut off after about 1 s of a 400-byte, 80 s body: far from whole
    assert trickling.trickled < 200, trickling.trickled


def test_a_body_past_the_size_bound_is_an_error_line_read_no_further(tiny_dataset):
    from audioicl.backends.openai.backend import MAX_RESPONSE_BYTES

    huge = ChatServer(plan=lambda digest, attempt: "huge").start()
    try:
        client = backend(huge, max_retries="0")
        (response,) = client.generate(requests_for(tiny_dataset, (1,))[:1], GenerationConfig())
        client.close()
    finally:
        huge.stop()
    assert response.text is None and f"the answer passed {MAX_RESPONSE_BYTES:,} bytes" in response.error


def test_url_credentials_and_the_key_never_come_back_from_a_server_that_echoes_headers(
    tiny_dataset, monkeypatch
):
    """A password holding ``@`` in the URL is sent as HTTP Basic by httpx; a server that echoes the request's
    headers gives back the key and the Basic token: none of them reaches a response, an error or the backend's
    info (issue 39, item 2)."""
    import base64

    monkeypatch.setenv("AUDIOICL_TEST_KEY", "sk-canary-0123456789")
    echoing = ChatServer(plan=lambda digest, attempt: "echo_headers").start()
    try:
        url = echoing.url.replace("http://", "http://alice:p%40ss-w0rd@ss@")
        client = load_backend(ModelSpec("openai", "m"), base_url=url, api_key_env="AUDIOICL_TEST_KEY", **FAST)
        (response,) = client.generate(requests_for(tiny_dataset, (1,))[:1], GenerationConfig())
        client.close()
    finally:
        echoing.stop()
    token = base64.b64encode(b"alice:p@ss-w0rd@ss").decode()
    said = f"{response.text} {response.error} {client.info}"
    assert "authorization" in said.lower()  # the server did echo the headers
    for secret in ("sk-canary-0123456789", token, "p@ss-w0rd@ss", "p%40ss-w0rd@ss", "w0rd"):
        assert secret not in said, secret


@pytest.mark.parametrize("value", ["sk-canary-0123456789\n", "sk-canary 0123456789"])
def test_a_key_a_header_cannot_carry_is_refused_without_being_shown(server, monkeypatch, value):
    monkeypatch.setenv("AUDIOICL_TEST_KEY", value)
    if value.endswith("\n"):  # a trailing line break is stripped: the key works
        backend(server, api_key_env="AUDIOICL_TEST_KEY").close()
        return
    with pytest.raises(AudioICLError) as caught:
        backend(server, api_key_env="AUDIOICL_TEST_KEY")
    assert "canary" not in str(caught.value) and "$AUDIOICL_TEST_KEY holds a character" in str(caught.value)


def test_a_key_given_as_api_key_env_by_mistake_is_not_echoed(server):
    with pytest.raises(AudioICLError) as caught:
        backend(server, api_key_env="sk-canary-0123456789")
    assert "canary" not in str(caught.value) and "the value given is not shown" in str(caught.value)


def test_a_password_holding_a_slash_is_a_password_and_never_shown():
    """A ``/`` in the URL's password ended its host as httpx reads it (issue 39, item 10: a traceback); the user
    information now runs to the last ``@`` and the password is sent as HTTP Basic, never shown."""
    with pytest.raises(AudioICLError) as caught:
        load_backend(ModelSpec("openai", "m"), base_url="http://user:se/cret@127.0.0.1:9/v1")
    said = str(caught.value)
    assert "cannot reach the server at http://<credentials>@127.0.0.1:9/v1" in said and "cret" not in said


def test_a_base_url_httpx_cannot_read_is_refused_without_its_password():
    with pytest.raises(AudioICLError) as caught:
        load_backend(ModelSpec("openai", "m"), base_url="http://user:secret@[::1/v1")
    said = str(caught.value)
    assert "is not a URL httpx can use" in said and "<credentials>" in said and "secret" not in said


def test_the_continuation_layout_is_refused_before_any_request():
    """A chat completions server applies its template to every request: a text to continue cannot reach a
    base model through it (issue 42); refused before the server is asked anything."""
    from audioicl.backends.base import Workload

    with pytest.raises(AudioICLError, match="continuation sends a text to continue.*hf: or vllm:"):
        load_backend(
            ModelSpec("openai", "base-model"),
            Workload(prompts=1, max_audio_per_prompt=3, chats=False),
            base_url="http://127.0.0.1:9",
        )


def test_a_body_still_streaming_at_its_deadline_is_overdue_whichever_sees_it_first():
    """The deadline is checked between chunks as well as by the timer that closes the stream: a body whose
    chunks keep coming past it (a stream that the close does not stop, the race the timer can lose) is cut
    off between two chunks."""
    import time

    from audioicl.backends.openai import backend as openai_backend

    class Trickle:
        def iter_bytes(self):
            for _ in range(50):
                time.sleep(0.02)
                yield b"x"

        def close(self):  # the timer's close reaches a stream that goes on
            pass

    with pytest.raises(openai_backend._Overdue):
        openai_backend.bounded_body(Trickle(), time.monotonic() + 0.1)


@pytest.mark.parametrize("status", [302, 307])
def test_a_redirect_fails_the_call_saying_where_to_not_malformed(server, tiny_dataset, status):
    """A proxy's 302/307 to another host is not followed (the key would go there) and is said as a redirect,
    not as "malformed response (not JSON): " with an empty quote."""
    server.plan = lambda digest, attempt: "redirect"
    server.redirect_status = status
    client = backend(server)
    with pytest.raises(AudioICLError) as raised:
        client.generate(requests_for(tiny_dataset, (1,))[:3], GenerationConfig())
    client.close()
    said = str(raised.value)
    assert f"answered HTTP {status}, a redirect to 'https://elsewhere.example/v1/chat/completions'" in said
    assert "not followed" in said and "--base-url" in said and "malformed" not in said


def test_the_model_the_server_says_answered_is_recorded_and_a_different_one_warned_of_once(
    server, tiny_dataset, caplog
):
    requests = requests_for(tiny_dataset, (1,))[:4]
    client = backend(server)
    client.generate(requests, GenerationConfig())
    assert client.info["answered_by"] == ["test-model"] and not caplog.records
    server.answering_model = "gpt-4o-mini\x1b[2J"  # a hostile server's name: kept as text, warned escaped
    with caplog.at_level("WARNING", logger="audioicl.backends"):
        client.generate(requests, GenerationConfig())
        client.generate(requests, GenerationConfig())
    client.close()
    assert client.info["answered_by"] == ["test-model", "gpt-4o-mini\x1b[2J"]
    [warning] = caplog.records
    assert "asked for model 'test-model'" in warning.getMessage()
    assert "'gpt-4o-mini\\x1b[2J' answered" in warning.getMessage() and "\x1b" not in warning.getMessage()
