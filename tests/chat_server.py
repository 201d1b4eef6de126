"""A local OpenAI-compatible chat completions server for the tests, with faults to inject.

``POST /v1/chat/completions`` answers as the API does: ``{"choices": [{"message": {"role": "assistant",
"content": ...}, "finish_reason": "stop"}], "usage": {...}}``. The answer is ``answer_for(messages)``, a
digest of the request's messages, so a test can tell which request an answer belongs to. Every request is
logged (its time, body, headers and what was done), and the server counts how many it holds at once.

Faults: ``plan(digest, attempt)`` (attempt 1, 2 ... of the same messages) names what to do instead of
answering: ``"429"`` (with ``Retry-After: retry_after``), ``"500"``, ``"drop"`` (close the connection
without an answer), ``"slow"`` (answer after ``slow_s``, longer than the client waits), ``"bad_json"``
(200 with a body that is not JSON), ``"no_choices"`` (200 with JSON that is not a completion), ``"401"``.
``latency(digest)`` delays every answer (default none), so that answers finish out of order.
"""

from __future__ import annotations

import hashlib
import json
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
    retry_after: str = "1"
    slow_s: float = 2.0
    log: list[Logged] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

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
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
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
            self.log.append(Logged(time.monotonic(), digest, attempt, action, body, authorization))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return digest, attempt, action

    def _end(self) -> None:
        with self._lock:
            self.in_flight -= 1


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

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(length)
            if self.path != "/v1/chat/completions":
                self._send(404, b'{"error": {"message": "no such route"}}')
                return
            body = json.loads(raw)
            digest, attempt, action = server._begin(body, self.headers.get("Authorization"))
            try:
                self._act(body, digest, action)
            finally:
                server._end()

        def _act(self, body: dict[str, Any], digest: str, action: str) -> None:
            if action == "drop":
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if action == "slow":
                time.sleep(server.slow_s)
            elif server.latency(digest):
                time.sleep(server.latency(digest))
            if action == "429":
                self._send(
                    429, b'{"error": {"message": "rate limited"}}', {"Retry-After": server.retry_after}
                )
            elif action == "500":
                self._send(500, b'{"error": {"message": "internal error"}}')
            elif action == "401":
                self._send(401, b'{"error": {"message": "invalid api key"}}')
            elif action == "bad_json":
                self._send(200, b'{"choices": [{"message": ')
            elif action == "no_choices":
                self._send(200, b'{"object": "chat.completion", "choices": []}')
            else:
                text = answer_for(body["messages"])
                completion = {
                    "object": "chat.completion",
                    "model": body.get("model"),
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
