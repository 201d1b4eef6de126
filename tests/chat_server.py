"""A local OpenAI-compatible chat completions server for the tests, with faults to inject.

``POST /v1/chat/completions`` answers as the API does: ``{"choices": [{"message": {"role": "assistant",
"content": ...}, "finish_reason": "stop"}], "usage": {...}}``. The answer is ``answer_for(messages)``, a
digest of the request's messages, so a test can tell which request an answer belongs to. Every request is
logged (its time, body, headers and what was done), and the server counts how many it holds at once.

Faults: ``plan(digest, attempt)`` (attempt 1, 2 ... of the same messages) names what to do instead of
answering: ``"429"`` (with ``Retry-After: retry_after``), ``"500"``, ``"drop"`` (close the connection
without an answer), ``"slow"`` (answer after ``slow_s``, longer than the client waits), ``"bad_json"``
(200 with a body that is not JSON), ``"no_choices"`` (200 with JSON that is not a completion), ``"401"``,
``"trickle"`` (200 whose body comes a byte every ``trickle_s``, for ``trickle_bytes`` bytes: no read waits
long, the whole takes long) and ``"huge"`` (200 with ``huge_bytes`` of body, sent as fast as it is read), ``"echo_headers"`` (an answer whose
text is every request header, as a misconfigured proxy or debug server gives back), ``"redirect"`` (HTTP
``redirect_status`` to ``redirect_to``, as a proxy in front of another host answers).
``answering_model`` is the model name each completion says answered (default: the one asked for).
``latency(digest)`` delays every answer (default none), so that answers finish out of order.
``retry_after`` is the header's value, or a function of (digest, attempt) giving it. ``keep_bodies=False``
logs each request without its body (a load test's thousands of base64 clips would pile up otherwise).
A request whose body the client stopped sending (it gave up waiting) is counted in ``cut_short``, not
logged; a client that resets a connection is not reported as an error of the server.

``GET /v1/models`` (the backend's reachability check before a run) answers ``models_status``: 200 with a
model list as ``vllm serve`` does, or e.g. 401 or 404, which still say that a server is there; each is
counted in ``model_lists``, not logged.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Plan = Callable[[str, int], str | None]


def messages_digest(messages: Any) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()


def answer_for(messages: Any) -> str:
    """What the server answers to ``messages``: a function of them alone."""
    return f"answer {messages_digest(messages)[:12]}"


@dataclass(frozen=True)
class Logged:
    time: float
    digest: str
    attempt: int
    action: str  # "answer" or the fault
    body: dict[str, Any]
    authorization: str | None


@dataclass
class ChatServer:
    plan: Plan = lambda digest, attempt: None  # noqa: E731
    latency: Callable[[str], float] = lambda digest: 0.0  # noqa: E731
    retry_after: str | Callable[[str, int], str] = "1"
    slow_s: float = 2.0
    trickle_s: float = 0.2
    trickle_bytes: int = 400
    huge_bytes: int = 64 << 20
    trickled: int = 0  # bytes of "trickle" bodies sent before the client stopped reading
    log: list[Logged] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    models_status: int = 200
    model_lists: int = 0
    port: int = 0  # 0: any free port; another server's port, to stand in for it after it stopped
    keep_bodies: bool = True
    cut_short: int = 0
    redirect_status: int = 302
    redirect_to: str = "https://elsewhere.example/v1/chat/completions"
    answering_model: str | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._attempts: dict[str, int] = {}
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ChatServer:
        self._server = _Server(("127.0.0.1", self.port), _handler(self))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def attempts(self, digest: str) -> list[Logged]:
        return [entry for entry in self.log if entry.digest == digest]

    def _begin(self, body: dict[str, Any], authorization: str | None) -> tuple[str, int, str]:
        digest = messages_digest(body.get("messages"))
        with self._lock:
            attempt = self._attempts[digest] = self._attempts.get(digest, 0) + 1
            action = self.plan(digest, attempt) or "answer"
            kept = body if self.keep_bodies else {}
            self.log.append(Logged(time.monotonic(), digest, attempt, action, kept, authorization))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return digest, attempt, action

    def _end(self) -> None:
        with self._lock:
            self.in_flight -= 1


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet when a client reset its connection (it timed out or gave up); loud otherwise."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the client stopped waiting (a slow answer)
                self.close_connection = True

        def do_GET(self) -> None:  # noqa: N802
            with server._lock:
                server.model_lists += 1
            if self.path != "/v1/models":
                self._send(404, b'{"error": {"message": "no such route"}}')
            elif server.models_status != 200:
                self._send(server.models_status, b'{"error": {"message": "not for you"}}')
            else:
                self._send(200, b'{"object": "list", "data": [{"id": "test-model", "object": "model"}]}')

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length", 0))
            try:
                raw = self.rfile.read(length)
            except ConnectionError:
                raw = b""
            if len(raw) < length:  # the client stopped sending: nobody waits for an answer
                with server._lock:
                    server.cut_short += 1
                self.close_connection = True
                return
            if self.path != "/v1/chat/completions":
                self._send(404, b'{"error": {"message": "no such route"}}')
                return
            body = json.loads(raw)
            digest, attempt, action = server._begin(body, self.headers.get("Authorization"))
            try:
                self._act(body, digest, attempt, action)
            finally:
                server._end()

        def _stream(self, action: str) -> None:
            size = server.trickle_bytes if action == "trickle" else server.huge_bytes
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(size))
                self.end_headers()
                if action == "huge":
                    block = b" " * (1 << 20)
                    for start in range(0, size, len(block)):
                        self.wfile.write(block[: size - start])
                    return
                for _ in range(size):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    with server._lock:
                        server.trickled += 1
                    time.sleep(server.trickle_s)
            except (BrokenPipeError, ConnectionResetError):  # the client stopped reading: as it should
                self.close_connection = True

        def _act(self, body: dict[str, Any], digest: str, attempt: int, action: str) -> None:
            if action == "drop":
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if action in ("trickle", "huge"):
                self._stream(action)
                return
            if action == "slow":
                time.sleep(server.slow_s)
            elif server.latency(digest):
                time.sleep(server.latency(digest))
            if action == "429":
                wait = server.retry_after
                wait = wait if isinstance(wait, str) else wait(digest, attempt)
                self._send(429, b'{"error": {"message": "rate limited"}}', {"Retry-After": wait})
            elif action == "500":
                self._send(500, b'{"error": {"message": "internal error"}}')
            elif action == "401":
                self._send(401, b'{"error": {"message": "invalid api key"}}')
            elif action == "redirect":
                self._send(server.redirect_status, b"", {"Location": server.redirect_to})
            elif action == "bad_json":
                self._send(200, b'{"choices": [{"message": ')
            elif action == "no_choices":
                self._send(200, b'{"object": "chat.completion", "choices": []}')
            else:
                text = answer_for(body["messages"])
                if action == "echo_headers":
                    text = " ".join(f"{key}: {value}" for key, value in self.headers.items())
                completion = {
                    "object": "chat.completion",
                    "model": server.answering_model or body.get("model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 3, "total_tokens": 103},
                }
                self._send(200, json.dumps(completion).encode())

    return Handler
