"""The ``openai`` backend: any OpenAI-compatible chat completions server (``--model openai:NAME``).

Each request becomes one ``POST {base_url}/chat/completions`` whose messages follow the typed chat: the
system message first (a string), then each turn with its text and audio parts interleaved in the chat's
order, audio as ``input_audio`` parts (base64 16-bit PCM WAV, mono, 16 kHz: the clip as read from the
dataset, bit for bit). Adjacent text is one text part; a message without audio is a plain string. No file
name, path or query label is in the payload: the chat has none.

Where the server is: ``--base-url URL`` (``audioicl run``), which is the backend option ``base_url``
(``-o base_url=URL`` says the same; one of them); else ``$OPENAI_BASE_URL``; else OpenAI's. The API key
is read from the environment variable named by ``api_key_env`` (default ``OPENAI_API_KEY``) and sent as a
bearer token; it is never logged nor written to a results file or run record (only the variable's name
is). Without the variable no key is sent (a local ``vllm serve`` needs none), unless ``api_key_env`` was
given, which then must be set.

Before the run, when the backend is made, one ``GET {base_url}/models`` checks that the server is there:
any HTTP answer will do (401 and 404 too), but a refused connection, a name that does not resolve or no
answer within 10 s stops the run at once with one line naming the URL, before any file is written.

Requests of a call run ``concurrency`` at a time; responses come back in request order, so results do
not depend on the concurrency. 429, 5xx, timeouts and dropped connections are retried up to
``max_retries`` times, waiting ``backoff`` x 2^attempt seconds with jitter (half fixed, half random,
at most ``max_backoff``), or what a ``Retry-After`` header asks (at most 10 minutes). A connection that
cannot be made (refused, unknown host, connect timeout) is retried at most ``CONNECT_RETRIES`` (2) times,
and once one request of a call has given up on it the others give up at their first such failure; when
no request of a call reached the server the call raises ``BackendUnreachable`` and the runner stops,
writing nothing for it (a rerun resumes there). Once the server has answered a request of the call it is
there, only busy (a full listen backlog times connections out): a connection that cannot be made is then
retried like a 500, up to ``max_retries`` times. A
request that still fails, another 4xx, or a response that is not a chat completion (malformed JSON, no
choices, no text) is an error response for that request: its episode gets an error line that
``--retry-errors`` asks again. 401, 403 and 404 (bad key, unknown model or URL) and a redirect (3xx: not
followed, since the request and its key would go where ``--base-url`` does not say) fail the whole call:
the runner stops after a few such calls rather than writing an error line for every episode.

The model name each completion says answered is kept (``answered_by`` in the run record, at most 8 names);
one that is not the name asked for is warned of once.

``stop()`` (a signal, through the runner: ``inference.stopping``) makes the call in hand return within
``HALT_POLL_S`` with the requests answered so far (``GenerationStopped``); the others are not retried, and
those in flight are left to their daemon threads, so that neither the run nor the process waits for them.

Options: the kind's declaration (``audioicl.backends.openai.KIND``). Needs the ``api`` extra (httpx).
"""

from __future__ import annotations

import base64
import email.utils
import json
import logging
import os
import queue
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, wait
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote

import httpx

from audioicl import audio
from audioicl.errors import AudioICLError
from audioicl.prompts.chat import AudioPart, Chat, TextPart
from audioicl.prompts.sets import system_family

from ..base import (
    Backend,
    BackendUnreachable,
    GenerationConfig,
    GenerationStopped,
    Request,
    Response,
    Usage,
    Workload,
    hide_url_credentials,
    userinfo_end,
)
from ..kinds import Settings

log = logging.getLogger("audioicl.backends")

RETRY_AFTER_CAP_S = 600.0  # a Retry-After beyond this is waited for this long
FATAL_STATUS = (401, 403, 404)  # the backend is misconfigured: no request can succeed
BODY_IN_ERRORS = 300  # characters of a server's answer quoted in an error line
REDACTED = "<API key>"  # what stands for the key where a server quotes it back
CONNECT_RETRIES = 2  # a connection that cannot be made is retried this often (at most max_retries)
PREFLIGHT_TIMEOUT_S = 10.0  # the reachability check before the run waits this long (at most timeout)
HALT_POLL_S = 0.1  # a call looks this often whether it was asked to stop
# A chat completion of a few new tokens is a few KB: a body past this is refused unread (a server's fault or
# an attack, never an answer), so no response can fill the memory.
MAX_RESPONSE_BYTES = 8 << 20
ANSWERING_MODELS_KEPT = 8  # distinct model names a server may say answered, kept for the run record
MODEL_NAME_KEPT = 200  # characters of each


class _Overdue(Exception):  # noqa: N818 (not an error of ours: the server took longer than the timeout)
    """A response whose whole body did not arrive within the attempt's total deadline."""


class _TooLarge(Exception):  # noqa: N818
    """A response body past ``MAX_RESPONSE_BYTES``."""


def bounded_body(answer: httpx.Response, deadline: float) -> bytes:
    """The response's body, read as it streams in: past ``deadline`` (``time.monotonic``) raises ``_Overdue``
    (a timer closes the stream at the deadline, so a server that trickles a byte at a time, each within the
    per-read timeout, is cut off there), past ``MAX_RESPONSE_BYTES`` raises ``_TooLarge``."""
    timer = threading.Timer(max(deadline - time.monotonic(), 0.0), answer.close)
    timer.daemon = True
    timer.start()
    chunks, size = [], 0
    try:
        for chunk in answer.iter_bytes():
            size += len(chunk)
            if size > MAX_RESPONSE_BYTES:
                raise _TooLarge
            if time.monotonic() > deadline:
                raise _Overdue
            chunks.append(chunk)
    except (httpx.StreamError, httpx.TransportError, RuntimeError):
        if time.monotonic() >= deadline:
            raise _Overdue from None
        raise
    finally:
        timer.cancel()
    if time.monotonic() > deadline:
        raise _Overdue
    return b"".join(chunks)


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class ServerURL:
    """``--base-url`` parsed once: ``url`` without user information (what requests go to), the credentials
    (sent as HTTP Basic by httpx's ``auth``), ``shown`` (what records and messages say: ``<credentials>`` in
    their place) and ``secrets`` (what of them a server may quote back, blanked out of what it says)."""

    url: str
    shown: str
    auth: tuple[str, str] | None = None
    secrets: tuple[str, ...] = ()


def server_url(settings: Settings) -> ServerURL:
    """Where the server is: ``base_url`` (``-o`` or ``--base-url``), else ``$OPENAI_BASE_URL``, else OpenAI's.
    User information runs to ``userinfo_end`` (a password may hold ``@`` and ``/``) and is percent-decoded."""
    given = settings.base_url if "base_url" in settings.given else os.environ.get("OPENAI_BASE_URL")
    base_url = str(given or settings.base_url).rstrip("/")
    shown = hide_url_credentials(base_url)
    scheme, found, rest = base_url.partition("://")
    if not found or scheme not in ("http", "https"):
        raise AudioICLError(f"--base-url must start with http:// or https://, got {shown!r}")
    at = userinfo_end(rest)
    url, auth = f"{scheme}://{rest[at + 1 :]}", None
    if at >= 0:
        user, _, password = rest[:at].partition(":")
        auth = (unquote(user), unquote(password))
        shown = f"{scheme}://<credentials>@{hide_url_credentials(url).partition('://')[2]}"
    try:
        httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise AudioICLError(f"--base-url {shown!r} is not a URL httpx can use: {exc}") from None
    return ServerURL(url, shown, auth, _secrets(rest[:at], auth) if auth else ())


def _secrets(userinfo: str, auth: tuple[str, str]) -> tuple[str, ...]:
    """The user information as written and decoded, the password, and the HTTP Basic token of them."""
    user, password = auth
    plain = f"{user}:{password}"
    token = base64.b64encode(plain.encode("utf-8")).decode("ascii")
    found = {userinfo, plain, token, password, userinfo.partition(":")[2]}
    return tuple(sorted((secret for secret in found if len(secret) >= 4), key=len, reverse=True))


def api_key(settings: Settings) -> str | None:
    """The key in ``$api_key_env``, stripped of surrounding space and line breaks; none where it is unset,
    unless ``api_key_env`` was given. A key an HTTP header cannot carry is refused without being shown."""
    key = (os.environ.get(settings.api_key_env) or "").strip()
    if not key and "api_key_env" in settings.given:
        raise AudioICLError(f"backend option api_key_env names ${settings.api_key_env}, which is not set")
    if any(not 32 < ord(char) < 127 for char in key):
        raise AudioICLError(
            f"${settings.api_key_env} holds a character an HTTP header cannot carry (a space, line break, "
            "control or non-ASCII character inside it); the key is not shown: check the variable"
        )
    return key or None


# --------------------------------------------------------------------------- the payload


def wav_base64(part: AudioPart) -> str:
    """The clip as a base64 16-bit PCM WAV at 16 kHz (scaled so that reading it back gives the samples
    of a clip decoded from a 16-bit file exactly)."""
    wave = audio.resample(part.wave, part.sr, audio.SAMPLE_RATE)
    return base64.b64encode(audio.pcm16_bytes(wave, audio.SAMPLE_RATE, scale=32768.0)).decode("ascii")


def chat_messages(chat: Chat) -> list[dict[str, Any]]:
    """The chat as chat-completions messages: text and ``input_audio`` parts in the chat's order."""
    messages: list[dict[str, Any]] = []
    for message in chat.messages:
        parts: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, TextPart):
                if parts and parts[-1]["type"] == "text":
                    parts[-1]["text"] += part.text
                elif part.text:
                    parts.append({"type": "text", "text": part.text})
            else:
                if message.role != "user":
                    raise AudioICLError(
                        f"a {message.role} message holds audio; the API takes it in user turns"
                    )
                parts.append(
                    {"type": "input_audio", "input_audio": {"data": wav_base64(part), "format": "wav"}}
                )
        if all(p["type"] == "text" for p in parts):
            content: Any = "".join(p["text"] for p in parts)
        else:
            content = parts
        messages.append({"role": message.role, "content": content})
    return messages


def request_body(model: str, chat: Chat, config: GenerationConfig) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": chat_messages(chat),
        "max_tokens": config.max_new_tokens,
        "temperature": config.temperature,
        "seed": config.seed,
    }
    if config.stop:
        body["stop"] = list(config.stop)
    return body


def parse_completion(data: Any) -> Response:
    """A chat completion's first choice and usage; anything else is an error response."""
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        return Response.failed(f"malformed response: no choices[0].message in {_quote(data)}")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):  # some servers answer in parts
        texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        content = "".join(t for t in texts if isinstance(t, str)) if texts else None
    if not isinstance(content, str):
        refusal = message.get("refusal") if isinstance(message, dict) else None
        reason = f"refused: {refusal}" if refusal else f"no text in the message {_quote(message)}"
        return Response.failed(f"malformed response: {reason}")
    return Response(content, usage=_usage(data.get("usage")))


def _usage(usage: Any) -> Usage:
    if not isinstance(usage, dict):
        return Usage()
    details = usage.get("prompt_tokens_details")
    audio_tokens = details.get("audio_tokens") if isinstance(details, dict) else None

    def count(value: Any) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return Usage(
        count(usage.get("prompt_tokens")), count(usage.get("completion_tokens")), count(audio_tokens)
    )


def _quote(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= BODY_IN_ERRORS else text[:BODY_IN_ERRORS] + "..."


def _transport_problem(exc: Exception) -> str:
    """A connection failure on one line: its type and httpx's text (``[Errno 111] Connection refused``)."""
    text = " ".join(str(exc).split()) or "no detail"
    return f"{type(exc).__name__}: {text}"


def redirect_refused(url: str, status: int, location: str | None) -> str:
    """Why a redirect is not followed: the request and its key would go to an address nobody named."""
    where = f"to {_quote(location)!r}" if location else "with no Location header"
    return (
        f"{url} answered HTTP {status}, a redirect {where}: not followed (the request and its key would go "
        "where --base-url does not say); name the address that answers with --base-url"
    )


def retry_after(response: httpx.Response) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date), None without one."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


# --------------------------------------------------------------------------- the backend


class Fatal(AudioICLError):
    """An answer that no retry and no other request can change (bad key, unknown model or URL)."""


class _DaemonPool:
    """``workers`` daemon threads running what is submitted: unlike ``ThreadPoolExecutor``'s, a request still
    in flight when the run stops holds up neither ``close`` (without ``wait``) nor the process's exit."""

    def __init__(self, workers: int, name: str):
        self._queue: queue.SimpleQueue[tuple[Future, Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}_{i}", daemon=True) for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        self._queue.put((future, fn, args))
        return future

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as exc:  # noqa: BLE001 (handed to the caller, as an executor does)
                future.set_exception(exc)
            else:
                future.set_result(result)

    def shutdown(self, wait: bool) -> None:
        for _ in self._threads:
            self._queue.put(None)
        if wait:
            for thread in self._threads:
                thread.join()


@dataclass
class OpenAIBackend:
    """Chat completions over HTTP with bounded concurrency and retries; see the module docstring."""

    name: str
    model: str
    settings: Settings
    family: str = "default"
    info: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.max_clip_seconds = self.settings.max_clip_seconds
        server = server_url(self.settings)
        self.base_url = server.url
        self.shown_url = server.shown  # what records and messages may say of it
        self.info = {"base_url": self.shown_url, **self.info}
        headers = {"Content-Type": "application/json"}
        key = api_key(self.settings)
        self._key = key  # blanked out of everything a server says (``_redact``): some quote headers back
        self._url_secrets = server.secrets  # likewise: httpx sends them as HTTP Basic
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(
            headers=headers,
            auth=server.auth,
            timeout=httpx.Timeout(self.settings.timeout),
            limits=httpx.Limits(max_connections=self.settings.concurrency),
        )
        self._pool = _DaemonPool(self.settings.concurrency, "audioicl-openai")
        self._stop = threading.Event()
        self._halted = False  # stop() was called: calls return what they have (set in a signal handler)
        self._unreachable = threading.Event()  # a request of this call gave up: no connection could be made
        self._reached = threading.Event()  # the server answered a request of this call: it is there
        self.attempts = 0  # HTTP requests sent, retries included
        self._answered_by: list[str] = []  # the distinct model names the completions said
        self._answered_lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _wait(self, attempt: int, asked: float | None, jitter: random.Random) -> float:
        if asked is not None:
            return min(asked, RETRY_AFTER_CAP_S)
        ceiling = min(self.settings.backoff * 2**attempt, self.settings.max_backoff)
        return ceiling / 2 + jitter.uniform(0, ceiling / 2)

    def _post(self, body: dict[str, Any]) -> tuple[Response | None, str, float | None, bool]:
        """One attempt: (the response, or None to retry; why it is retried; seconds the server asks;
        whether no connection could be made)."""
        self.attempts += 1
        deadline = time.monotonic() + self.settings.timeout  # for the whole attempt, not each read
        try:
            with self._client.stream("POST", self.url, json=body) as answer:
                self._reached.set()
                content = bounded_body(answer, deadline)
        except _Overdue:
            return None, f"timed out: no whole answer within {self.settings.timeout:g} s", None, False
        except _TooLarge:
            why = f"the answer passed {MAX_RESPONSE_BYTES:,} bytes: refused unread"
            return Response.failed(why), "", None, False
        except httpx.ConnectTimeout as exc:
            return None, f"connection failed: {_transport_problem(exc)}", None, True
        except httpx.TimeoutException as exc:
            return None, f"timed out after {self.settings.timeout:g} s ({type(exc).__name__})", None, False
        except httpx.ConnectError as exc:
            return None, f"connection failed: {_transport_problem(exc)}", None, True
        except httpx.TransportError as exc:
            return None, f"connection failed: {_transport_problem(exc)}", None, False
        status, text = answer.status_code, content.decode("utf-8", "replace")
        if 300 <= status < 400:
            raise Fatal(self._redact(redirect_refused(self.url, status, answer.headers.get("location"))))
        if status == 429 or status >= 500:
            return None, f"HTTP {status}: {_quote(text)}", retry_after(answer), False
        if status in FATAL_STATUS:
            raise Fatal(self._redact(f"{self.url} answered HTTP {status}: {_quote(text)}"))
        if status >= 400:
            return Response.failed(f"HTTP {status}: {_quote(text)}"), "", None, False
        try:
            data = json.loads(content)
        except ValueError:
            return Response.failed(f"malformed response (not JSON): {_quote(text)}"), "", None, False
        self._note_answering_model(data)
        return parse_completion(data), "", None, False

    def _note_answering_model(self, data: Any) -> None:
        """Keep the model name the completion says answered (run record: ``answered_by``), and warn once when
        it is not the one asked for (a server that maps names, a proxy routing elsewhere)."""
        said = data.get("model") if isinstance(data, dict) else None
        if not isinstance(said, str) or said in self._answered_by:
            return
        with self._answered_lock:
            if said in self._answered_by or len(self._answered_by) >= ANSWERING_MODELS_KEPT:
                return
            self._answered_by.append(said[:MODEL_NAME_KEPT])
            self.info = {**self.info, "answered_by": list(self._answered_by)}
        if said != self.model:
            log.warning(
                "openai backend: asked for model %r, the server at %s says %r answered",
                self.model,
                self.shown_url,
                said[:MODEL_NAME_KEPT],
            )

    def _ask(self, request: Request, config: GenerationConfig) -> tuple[Response, bool]:
        """The request's response, and whether it failed because no connection could be made."""
        try:
            body = request_body(self.model, request.chat, config)
        except AudioICLError as exc:
            return Response.failed(f"cannot prepare the request: {exc}"), False
        jitter = random.Random(f"{self.settings.seed}:{request.key}")
        attempts = self.settings.max_retries + 1
        connect_attempts = min(self.settings.max_retries, CONNECT_RETRIES) + 1
        problem = ""
        failed_to_connect = 0
        for attempt in range(attempts):
            if self._halted:
                return Response.failed("not sent: the run was stopped"), False
            if self._stop.is_set():
                return Response.failed("not sent: an earlier request of the call failed for good"), False
            response, problem, asked, unconnected = self._post(body)
            if response is not None:
                return response, False
            unconnected = unconnected and not self._reached.is_set()  # else busy: retried like a 500
            failed_to_connect = failed_to_connect + 1 if unconnected else 0
            if unconnected and (failed_to_connect >= connect_attempts or self._unreachable.is_set()):
                self._unreachable.set()  # the others give up at their next failed connection
                return Response.failed(f"gave up after {attempt + 1} attempts: {problem}"), True
            if attempt + 1 < attempts:
                self._stop.wait(self._wait(attempt, asked, jitter))
        return Response.failed(f"gave up after {attempts} attempts: {problem}"), False

    def check_reachable(self) -> None:
        """One ``GET {base_url}/models``: any HTTP answer means a server is there; none raises, naming the
        URL (the run stops before its first request)."""
        url = f"{self.base_url}/models"
        shown = self.shown_url
        try:
            self._client.get(url, timeout=min(self.settings.timeout, PREFLIGHT_TIMEOUT_S))
        except httpx.TimeoutException as exc:
            why = f"no answer within {min(self.settings.timeout, PREFLIGHT_TIMEOUT_S):g} s ({type(exc).__name__})"
        except httpx.TransportError as exc:
            why = _transport_problem(exc)
        else:
            return
        raise AudioICLError(
            f"cannot reach the server at {shown} (GET {shown}/models: {self._redact(why)}); start it, or name "
            "another with --base-url"
        )

    def stop(self) -> None:
        """Make the call in hand (and any later one) return what it has answered (``GenerationStopped``);
        called from a signal handler: it only sets a flag."""
        self._halted = True

    def _stopped(self, futures: Sequence[Future]) -> GenerationStopped:
        self._stop.set()  # the others are not sent, nor retried; waits for a retry end now
        for future in futures:
            future.cancel()
        answered = {
            index: self._redacted(future.result()[0])
            for index, future in enumerate(futures)
            if future.done() and not future.cancelled() and future.exception() is None
        }
        return GenerationStopped(answered)

    def generate(self, requests: Sequence[Request], config: GenerationConfig) -> list[Response]:
        if self._halted:
            raise GenerationStopped({})
        self._stop.clear()
        self._unreachable.clear()
        self._reached.clear()
        futures = [self._pool.submit(self._ask, request, config) for request in requests]
        pending = set(futures)
        while pending:  # in steps, so that a stop is seen mid-call
            done, pending = wait(pending, timeout=HALT_POLL_S, return_when=FIRST_EXCEPTION)
            if self._halted:
                raise self._stopped(futures)
            failed = next((future.exception() for future in done if future.exception() is not None), None)
            if isinstance(failed, Fatal):
                self._stop.set()  # the others give up at their next attempt
                for future in futures:
                    future.cancel()
                while not self._halted and wait(futures, timeout=HALT_POLL_S).not_done:
                    pass
                raise failed
            if failed is not None:
                raise failed
        answers = [future.result() for future in futures]
        if answers and all(unconnected for _, unconnected in answers):
            raise BackendUnreachable(
                f"no request of the call could reach the server at {self.shown_url} "
                f"({self._redact(answers[0][0].error or '')})"
            )
        return [self._redacted(response) for response, _ in answers]

    def _redact(self, text: str) -> str:
        """``text`` with the API key blanked out (a server or proxy may quote the request's headers back) and
        any URL's credentials hidden (an error may quote the ``--base-url`` it was given)."""
        text = text.replace(self._key, REDACTED) if self._key and self._key in text else text
        for secret in self._url_secrets:
            text = text.replace(secret, "<credentials>")
        return hide_url_credentials(text)

    def _redacted(self, response: Response) -> Response:
        text, error = response.text, response.error
        text = None if text is None else self._redact(text)
        error = None if error is None else self._redact(error)
        if (text, error) == (response.text, response.error):
            return response
        return replace(response, text=text, error=error)

    def close(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=not self._halted)  # after a stop, requests in flight are not waited for
        if not self._halted:
            self._client.close()


def make_openai(name: str, settings: Settings, workload: Workload | None = None) -> Backend:
    if workload is not None and not workload.chats:
        raise AudioICLError(
            "--layout continuation sends a text to continue, and a chat completions server applies its chat "
            "template to every request: run base models through hf: or vllm:"
        )
    info = {  # and base_url, as the backend parsed it
        "api_key_env": settings.api_key_env,  # the variable's name, never its value
        "concurrency": settings.concurrency,
        "max_retries": settings.max_retries,
        "httpx": httpx.__version__,
    }
    backend = OpenAIBackend(f"openai:{name}", name, settings, family=system_family(name), info=info)
    try:
        backend.check_reachable()
    except AudioICLError:
        backend.close()
        raise
    return backend
