"""What careless or hostile input cannot make audioicl do: show model output as markup in the report, or write
an API key or hub token anywhere.

The report: responses, ids, ground truths, task and model names, prompts, error messages and audio paths that
hold ``<script>`` or ``"><img onerror=...>`` render as text: the page's HTML has no element or event handler
they brought, and headless Chromium (where there is one; ``apt-get install chromium``) runs none of them.

Secrets: a distinctive key is planted where each backend takes one (``$OPENAI_API_KEY``, the variable
``-o api_key_env`` names, ``$HF_TOKEN``) and ``audioicl run`` / ``audioicl download`` are run as a user runs
them against the local servers (``tests/chat_server.py``, ``tests/hub_server.py``) and a server that quotes
the request's ``Authorization`` header back in everything it says, in answers that succeed and that fail
(401, 403, 500, malformed, a dead port). Every file under the output folders (and the client's cache) and
the captured stdout and stderr are searched for the key.
"""

from __future__ import annotations

import csv
import json
import os
import re
import socket
import subprocess
import sys
import threading
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from helpers import CHROMIUM, chromium_dom

from audioicl.analysis.report import ReportOptions, write_report
from audioicl.audio import write_wav

API_KEY = "sk-audioicl-PLANTED-key-7d41c9e2b5"
HUB_TOKEN = "hf_audioiclPLANTEDtoken93b1f0c7"
HANG_GUARD_S = 240  # only stops a hung command; nothing is timed


def audioicl(*args: object, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``audioicl ARGS`` as a user runs it, stdout and stderr captured."""
    return subprocess.run(
        [sys.executable, "-m", "audioicl", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=HANG_GUARD_S,
    )


def clean_environment(**extra: str) -> dict[str, str]:
    """This environment without any key, endpoint or proxy of ours, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "HF_", "AUDIO_KEY")) and "proxy" not in k.lower()
    }
    env.update(NO_PROXY="127.0.0.1", HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1", **extra)
    return env


def leaks(secret: str, folders: list[Path], *outputs: str) -> list[str]:
    """Every file under ``folders`` and every captured output that holds ``secret`` (as bytes, so that a
    binary file or one in another encoding is searched too)."""
    needle = secret.encode()
    found = [
        str(path)
        for folder in folders
        if folder.exists()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and needle in path.read_bytes()
    ]
    return found + [f"output {i}" for i, text in enumerate(outputs) if secret in text]


def closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --------------------------------------------------------------------------- the report shows text as text

MARK = "document.documentElement.dataset.xss"  # what each payload would set: <html data-xss=...>
PAYLOADS = {
    "response": f"<script>{MARK}='response'</script> 5",
    "gt": f'"><img src=x onerror="{MARK}=\'gt\'">',
    "id": f"AudioICL<script>{MARK}='id'</script>",
    "error": f"</td></tr></table><svg onload=\"{MARK}='error'\">",
    "prompt": f"user: <b onmouseover=\"{MARK}='prompt'\">hi</b> <audio> </textarea><script>{MARK}='prompt'</script>",
    "path": f'data/"><img src=x onerror="{MARK}=\'path\'">.wav',
}
MODEL = f"m\"><img src=x onerror={MARK}='model'>"  # a file name: no slash
TASK = f"<img src=x onerror={MARK}='task'>"


def write_hostile_run(root: Path) -> tuple[Path, Path, Path]:
    """A summary, a results folder and a data root whose every user-given text carries a payload."""
    data = root / "data_root"
    write_wav(data / "data/audiocount/easy/a_1.wav", np.full(1600, 0.1, dtype=np.float32))
    scores = root / "summary.csv"
    with scores.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["model", "shots", "task", "accuracy", "n"])
        writer.writerow([MODEL, 1, "AudioCount", "0.500000", 2])
        writer.writerow([MODEL, 1, TASK, "0.000000", 1])
    results = root / "results"
    results.mkdir()
    lines = [
        {
            "id": "AudioICL00001",
            "task": "AudioCount",
            "response": PAYLOADS["response"],
            "gt": "5",
            "prompt": PAYLOADS["prompt"],
            "audio_paths": ["data/audiocount/easy/a_1.wav"],
        },
        {
            "id": PAYLOADS["id"],
            "task": "AudioCount",
            "response": None,
            "gt": PAYLOADS["gt"],
            "status": "error",
            "error": PAYLOADS["error"],
            "prompt": "<audio> <audio>",
            "audio_paths": [PAYLOADS["path"], "data/audiocount/easy/a_1.wav"],
        },
        {"id": "AudioICL00003", "task": TASK, "response": PAYLOADS["response"], "gt": PAYLOADS["gt"]},
    ]
    (results / f"{MODEL}_results_k1.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return scores, results, data


class Page(HTMLParser):
    """The elements, attributes, script bodies and text of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        (self.scripts if self._in_script else self.text).append(data)


def test_report_html_shows_hostile_text_as_text(tmp_path):
    scores, results, data = write_hostile_run(tmp_path)
    files = write_report(ReportOptions(scores=scores, out=tmp_path / "report", results=results, data=data))
    page = Page()
    page.feed(files.html.read_text(encoding="utf-8"))

    handlers = [(tag, name) for tag, attrs in page.tags for name in attrs if name.startswith("on")]
    assert handlers == []
    assert {tag for tag, _ in page.tags}.isdisjoint({"svg", "textarea", "iframe", "object", "embed"})
    for tag, attrs in page.tags:
        if tag == "img":  # only the plots, inline
            assert (attrs.get("src") or "").startswith("data:image/png;base64,"), attrs
        assert not any((value or "").strip().lower().startswith("javascript:") for value in attrs.values())
        assert tag != "b" or not attrs, attrs
    assert all("xss" not in script for script in page.scripts)  # the page's own script only, if any
    shown = "".join(page.text)
    for where in ("response", "gt", "error", "prompt", "id", "path"):
        assert all(piece in shown for piece in PAYLOADS[where].split("<audio>")), where
    assert TASK in shown and MODEL in shown


def html_element(dom: str) -> str:
    match = re.search(r"<html[^>]*>", dom)
    assert match, dom[:500]
    return match[0]


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary")
def test_report_runs_no_payload_in_chromium(tmp_path):
    # the check itself: a page whose payload is markup does set the marker
    control = tmp_path / "control.html"
    control.write_text(
        f"<!DOCTYPE html><html><body><img src=x onerror=\"{MARK}='control'\"></body></html>", encoding="utf-8"
    )
    assert 'data-xss="control"' in html_element(
        chromium_dom(control, tmp_path / "profile-control", budget_ms=3000, timeout=180)
    )

    scores, results, data = write_hostile_run(tmp_path)
    files = write_report(ReportOptions(scores=scores, out=tmp_path / "report", results=results, data=data))
    dom = chromium_dom(files.html, tmp_path / "profile", budget_ms=3000, timeout=180)
    assert "data-xss" not in html_element(dom)
    assert "AudioICL-Bench report" in dom and "&lt;script&gt;" in dom  # the payload shown, as text
    assert "AudioICL00001" in dom


# --------------------------------------------------------------------------- the openai backend's key


class EchoServer:
    """A chat completions server that quotes the request's ``Authorization`` header back in what it answers,
    as a careless proxy might: ``mode`` is the answer (``401``, ``403``, ``500``, ``400``, ``bad_json``,
    ``no_choices``, ``content``: a completion whose text is the header). ``GET /models`` answers 200."""

    def __init__(self, mode: str):
        self.mode = mode
        self.seen: list[str | None] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> EchoServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):  # noqa: A002
                pass

            def _send(self, status: int, body: bytes) -> None:
                auth = self.headers.get("Authorization") or ""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Echo", auth)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):  # noqa: N802
                self._send(200, b'{"data": []}')

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                auth = self.headers.get("Authorization") or ""
                server.seen.append(auth)
                said = json.dumps({"error": {"message": f"not allowed with {auth}", "header": auth}}).encode()
                if server.mode in ("401", "403", "500", "400"):
                    self._send(int(server.mode), said)
                elif server.mode == "bad_json":
                    self._send(200, f"<html>proxy error for {auth}</html>".encode())
                elif server.mode == "no_choices":
                    self._send(200, json.dumps({"choices": [], "echo": auth}).encode())
                else:
                    completion = {
                        "choices": [{"message": {"role": "assistant", "content": f"I was sent {auth}"}}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
                    }
                    self._send(200, json.dumps(completion).encode())

        return Handler


FAST = ["-o", "timeout=2", "-o", "backoff=0.01", "-o", "max_retries=1", "-o", "concurrency=4"]


def run_openai(dataset: Path, out: Path, url: str, *, key_env: str | None) -> subprocess.CompletedProcess:
    env = clean_environment(**{key_env or "OPENAI_API_KEY": API_KEY})
    options = [*FAST, "-o", f"api_key_env={key_env}"] if key_env else FAST
    return audioicl(
        "run", "--data", dataset, "--model", "openai:gpt-audio-test", "--base-url", url, "--out", out,
        "--k", "1", *options, env=env,
    )  # fmt: skip


@pytest.fixture
def httpx_available():
    pytest.importorskip("httpx")


@pytest.mark.parametrize("plan", ["answer", "500", "401", "drop"])
def test_openai_key_reaches_the_server_and_nothing_else(httpx_available, tiny_dataset, tmp_path, plan):
    from chat_server import ChatServer

    server = ChatServer(plan=lambda digest, attempt: None if plan == "answer" else plan).start()
    out, other = tmp_path / "results", tmp_path / "results-key-env"
    try:
        first = run_openai(tiny_dataset, out, server.url, key_env=None)  # $OPENAI_API_KEY
        second = run_openai(tiny_dataset, other, server.url, key_env="AUDIO_KEY_VAR")  # -o api_key_env=...
    finally:
        server.stop()
    assert server.log and {e.authorization for e in server.log} == {f"Bearer {API_KEY}"}
    expected = {"answer": 0, "500": 1, "401": 1, "drop": 1}[plan]  # 401: error lines, the run stops
    for done in (first, second):
        assert done.returncode == expected, done.stderr[-2000:]
    found = leaks(API_KEY, [out, other], first.stdout, first.stderr, second.stdout, second.stderr)
    assert found == []
    if plan in ("500", "drop"):
        errors = [json.loads(x) for x in (out / "gpt-audio-test_results_k1.jsonl").read_text().splitlines()]
        assert errors and all(x["status"] == "error" for x in errors)


@pytest.mark.parametrize("mode", ["401", "403", "500", "400", "bad_json", "no_choices", "content"])
def test_openai_key_quoted_back_by_the_server_is_never_written(httpx_available, tiny_dataset, tmp_path, mode):
    out = tmp_path / "results"
    with EchoServer(mode) as server:
        done = run_openai(tiny_dataset, out, server.url, key_env="AUDIO_KEY_VAR")
    assert server.seen and set(server.seen) == {f"Bearer {API_KEY}"}
    assert done.returncode in (0, 1, 2), done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert leaks(API_KEY, [out], done.stdout, done.stderr) == []
    said = done.stderr + "".join(p.read_text() for p in out.glob("*_results_k1.jsonl"))
    assert "Bearer" in said  # what the server said is still shown, the key blanked out


@pytest.mark.parametrize("reachable", [True, False])
def test_credentials_in_the_base_url_are_written_nowhere(httpx_available, tiny_dataset, tmp_path, reachable):
    """Regression: ``--base-url https://user:TOKEN@host`` put the token into the run record (argv, the backend's
    info) and into the error naming a server it could not reach. The URL's user information is shown as
    ``<credentials>``; the run still answers through it."""
    from chat_server import ChatServer

    secret = "url-pass-" + API_KEY[-12:]
    out = tmp_path / "results"
    server = ChatServer(plan=lambda digest, attempt: None).start() if reachable else None
    port = server.url.split(":")[2].split("/")[0] if server else str(closed_port())
    try:
        done = run_openai(tiny_dataset, out, f"http://someone:{secret}@127.0.0.1:{port}/v1", key_env=None)
    finally:
        if server:
            server.stop()
    assert done.returncode == (0 if reachable else 2), done.stderr[-2000:]
    assert leaks(secret, [out], done.stdout, done.stderr) == []
    if reachable:
        (record,) = out.glob("*_run.json")
        assert "http://<credentials>@127.0.0.1" in record.read_text()
    else:
        assert "http://<credentials>@127.0.0.1" in done.stderr


CANARY_USER, CANARY_PASSWORD = "canary@user", "pa@ss/wörd-" + API_KEY[-10:]


def test_canary_secrets_reach_no_file_of_run_score_report_leaderboard_study(
    httpx_available, tiny_dataset, tmp_path
):
    """Issue 39: an API key and a URL password (holding ``@``, ``/`` and a non-ASCII letter, written as a user
    would, unencoded) against a server that quotes the request's ``Authorization`` header back in every
    answer: the secrets, and the HTTP Basic token made of them, are in no file that ``run``, ``score``,
    ``report``, ``leaderboard`` and ``study`` write, nor in what they print. The server still got them."""
    import base64

    basic = base64.b64encode(f"{CANARY_USER}:{CANARY_PASSWORD}".encode()).decode()
    env = clean_environment(OPENAI_API_KEY=API_KEY)
    with EchoServer("content") as server:
        url = server.url.replace("http://", f"http://{CANARY_USER}:{CANARY_PASSWORD}@")
        steps = [
            ["run", "--data", tiny_dataset, "--model", "openai:m", "--base-url", url, "--out", tmp_path / "res",
             "--k", "1", *FAST],
            ["score", "--in", tmp_path / "res", "--out", tmp_path / "scores" / "summary.csv"],
            ["report", "--scores", tmp_path / "scores" / "summary.csv", "--out", tmp_path / "report"],
            ["leaderboard", tmp_path / "res", "--out", tmp_path / "site"],
            ["study", "--data", tiny_dataset, "--model", "openai:m", "--base-url", url, "--out", tmp_path / "study",
             "--conditions", "plain,no-audio", "--k", "1", "--limit", "1", *FAST],
        ]  # fmt: skip
        done = [audioicl(*step, env=env, cwd=tmp_path) for step in steps]
    assert set(server.seen) == {f"Basic {basic}"}  # the URL's credentials win over the key, as HTTP Basic
    for step, proc in zip(steps, done, strict=True):
        assert proc.returncode == 0, (step[0], proc.stderr[-2000:])
    outputs = [text for proc in done for text in (proc.stdout, proc.stderr)]
    for secret in (API_KEY, CANARY_PASSWORD, basic, "ss/wörd", CANARY_USER):
        assert leaks(secret, [tmp_path], *outputs) == [], secret
    results = (tmp_path / "res" / "m_results_k1.jsonl").read_text()
    assert "I was sent Basic <credentials>" in results  # the answer kept, the token blanked out


def test_openai_dead_port_error_names_no_key(httpx_available, tiny_dataset, tmp_path):
    out = tmp_path / "results"
    done = run_openai(tiny_dataset, out, f"http://127.0.0.1:{closed_port()}/v1", key_env="AUDIO_KEY_VAR")
    assert done.returncode == 2 and "127.0.0.1" in done.stderr
    assert leaks(API_KEY, [out], done.stdout, done.stderr) == []


def test_keys_in_the_environment_reach_no_file_of_a_builtin_run(tiny_dataset, tmp_path):
    out = tmp_path / "results"
    env = clean_environment(OPENAI_API_KEY=API_KEY, HF_TOKEN=HUB_TOKEN)
    done = audioicl("run", "--data", tiny_dataset, "--model", "builtin:random", "--out", out, env=env)
    assert done.returncode == 0, done.stderr
    scored = audioicl("score", "--in", out, "--out", tmp_path / "summary.csv", env=env)
    assert scored.returncode == 0, scored.stderr
    for secret in (API_KEY, HUB_TOKEN):
        assert leaks(secret, [out, tmp_path], done.stdout, done.stderr, scored.stdout, scored.stderr) == []


@pytest.mark.slow
def test_hub_token_in_the_environment_reaches_no_file_of_an_hf_run(tiny_dataset, tmp_path):
    for module in ("torch", "transformers", "torchvision"):
        pytest.importorskip(module)
    from audioicl.testing import tiny_checkpoint

    checkpoint = tiny_checkpoint("qwen2-audio", tmp_path / "Qwen2-Audio-7B-Instruct")
    out = tmp_path / "results"
    env = clean_environment(HF_TOKEN=HUB_TOKEN, OPENAI_API_KEY=API_KEY, HF_HOME=str(tmp_path / "hf-home"))
    done = audioicl(
        "run", "--data", tiny_dataset, "--model", f"hf:{checkpoint}", "--out", out, "--k", "1", "--limit", "1",
        "-o", "dtype=fp32", "-o", "device=cpu", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    for secret in (API_KEY, HUB_TOKEN):
        assert leaks(secret, [out, tmp_path / "hf-home"], done.stdout, done.stderr) == []


# --------------------------------------------------------------------------- the hub token of ``download``


def hub_environment(endpoint: str, tmp_path: Path, token: str) -> dict[str, str]:
    return clean_environment(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "hf-home"), HF_TOKEN=token)


@pytest.fixture
def release():
    from hub_server import original_release
    from reference_data import REFERENCE

    if not sorted(REFERENCE.glob("meta_k*.jsonl")):
        pytest.skip("reference meta files absent (shared/reference)")
    pytest.importorskip("huggingface_hub")
    return original_release(REFERENCE, per_task=1)


def test_download_sends_the_token_and_writes_it_nowhere(hub, tmp_path, release):
    hub.token = HUB_TOKEN  # a private repo: the token is needed
    hub.commit(release)
    env = hub_environment(hub.hub_url, tmp_path, HUB_TOKEN)
    out = tmp_path / "orig"
    listed = audioicl("download", "--list", env=env)
    done = audioicl("download", "--out", out, env=env)
    assert listed.returncode == 0 and done.returncode == 0, done.stderr
    assert f"Bearer {HUB_TOKEN}" in {r.authorization for r in hub.requests("hub")}
    assert all(r.authorization is None for r in hub.requests("cdn"))
    assert (
        leaks(HUB_TOKEN, [out, tmp_path / "hf-home"], listed.stdout, listed.stderr, done.stdout, done.stderr)
        == []
    )


def test_download_refused_for_a_wrong_token_names_no_token(hub, tmp_path, release):
    hub.token = "hf_the_right_one"
    hub.commit(release)
    out = tmp_path / "orig"
    done = audioicl("download", "--out", out, env=hub_environment(hub.hub_url, tmp_path, HUB_TOKEN))
    assert done.returncode == 2 and "HF_TOKEN" in done.stderr
    assert leaks(HUB_TOKEN, [out, tmp_path / "hf-home"], done.stdout, done.stderr) == []


class EchoHub:
    """A hub that answers every request with ``status`` and quotes the request's ``Authorization`` header in
    its error message (``X-Error-Message`` and the JSON body), as a careless mirror might."""

    def __init__(self, status: int):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):  # noqa: A002
                pass

            def _answer(self, head: bool) -> None:
                auth = self.headers.get("Authorization") or "none"
                hub.seen.append(auth)
                body = json.dumps({"error": f"cannot serve {auth}"}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Error-Message", f"cannot serve {auth}")
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def do_GET(self):  # noqa: N802
                self._answer(False)

            def do_HEAD(self):  # noqa: N802
                self._answer(True)

        self.seen: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> EchoHub:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.mark.parametrize("status", [403, 500, 400])
def test_download_error_quoting_the_token_names_no_token(tmp_path, status):
    pytest.importorskip("huggingface_hub")
    out = tmp_path / "orig"
    with EchoHub(status) as hub:
        env = hub_environment(hub.url, tmp_path, HUB_TOKEN) | {"HF_HUB_ETAG_TIMEOUT": "5"}
        listed = audioicl("download", "--list", env=env)
        done = audioicl("download", "--out", out, env=env)
    assert f"Bearer {HUB_TOKEN}" in hub.seen
    for proc in (listed, done):
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert (
        leaks(HUB_TOKEN, [out, tmp_path / "hf-home"], listed.stdout, listed.stderr, done.stdout, done.stderr)
        == []
    )


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://user:tok@host/v1", "https://<credentials>@host/v1"),
        ("https://u:p@ss@host/v1?x=1", "https://<credentials>@host/v1?x=1"),  # the whole password, @ and all
        ("see http://a@b and ftp://x:y@z/q", "see http://<credentials>@b and ftp://<credentials>@z/q"),
        ("x https://host/a@b", "x https://host/a@b"),  # an @ in the path is no credential
        ("x https://host:8080/a@b", "x https://host:8080/a@b"),
        ("http://[::1]/a@b http://[::1]:9/a@b", "http://[::1]/a@b http://[::1]:9/a@b"),
        ("https://u:p@ss/wörd@host/v1", "https://<credentials>@host/v1"),  # a / in a password holding @
        ("https://u:ab/cd@host:1/v1", "https://<credentials>@host:1/v1"),  # no port is "ab": a password
        ("1://u@h", "1://u@h"),  # a scheme starts with a letter
        ("https://host/v1?api_key=XYZ&model=a#f", "https://host/v1?api_key=<hidden>&model=a#f"),
        ("http://h/?token=1&sig=2&q=3 more", "http://h/?token=<hidden>&sig=<hidden>&q=3 more"),
    ],
)
def test_url_credentials_are_hidden_up_to_the_authoritys_last_at(text, shown):
    from audioicl.backends.base import hide_url_credentials

    assert hide_url_credentials(text) == shown


def test_hiding_credentials_is_linear_in_a_long_response():
    """A 30 MB run of letters held a CPU for over 10 minutes with the quadratic regex (issue 39, item 3): each
    ``://`` is now looked at once, so these pass in well under a second each."""
    from audioicl.backends.base import hide_url_credentials

    letters = "a" * 30_000_000
    assert hide_url_credentials(letters) == letters
    tail = "http://" + "b" * 10_000_000
    assert hide_url_credentials(tail) == tail
    assert hide_url_credentials("x://u@h " * 100_000) == "x://<credentials>@h " * 100_000
