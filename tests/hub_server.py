"""A local Hugging Face hub for the tests: the HTTP endpoints ``huggingface_hub`` calls to fetch a dataset.

Read from the client's source (``HfApi.dataset_info``, ``HfApi.list_repo_tree``, ``get_hf_file_metadata``,
``http_get``), the calls of ``snapshot_download`` and ``hf_hub_download`` are served as the real hub serves them:

- ``GET /api/datasets/{repo}/revision/{rev}``: repo info (``id``, ``sha`` = the commit ``rev`` resolves to,
  ``siblings``); ``rev`` is a branch, a tag or a commit.
- ``GET /api/datasets/{repo}/tree/{rev}?recursive=...``: the file list, in pages linked by a ``Link: <...>;
  rel="next"`` header (the hub's cursor pagination), folders included as ``directory`` entries.
- ``HEAD``/``GET /datasets/{repo}/resolve/{rev}/{path}``: a regular file answers 200 with ``X-Repo-Commit``,
  ``ETag`` (its git blob sha1) and ``Content-Length``; an LFS file (``*.wav``, as ``.gitattributes`` says)
  answers 302 to the CDN with ``X-Linked-Etag`` (sha256) and ``X-Linked-Size``.
- The CDN is a second server (another origin, so the client treats it as one: no auth header sent there):
  ``GET /{sha256}`` with ``Range: bytes=N-`` answered by 206 and ``Content-Range``.
- Errors as the hub sends them: 404 with ``X-Error-Code`` ``RepoNotFound``, ``RevisionNotFound`` or
  ``EntryNotFound``; a private repo answers 401 to requests without its token.

Faults for the tests: ``drop_once`` (paths whose first CDN answer sends part of the body, half by default, and
closes the connection), ``fail_once`` (paths whose first CDN answer is an HTTP error), ``stall_after`` (CDN
answers after that many hold until ``release()``). Every request is logged.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

LFS_SUFFIX = ".wav"
GITATTRIBUTES = b"*.wav filter=lfs diff=lfs merge=lfs -text\n"
STALL_LIMIT_S = 60.0  # a held request gives up after this long, so a test that forgets release() still ends

API = re.compile(r"^/api/datasets/(?P<repo>[^/]+/[^/]+)/(?P<kind>revision|tree)/(?P<rev>[^/?]+)$")
RESOLVE = re.compile(r"^/datasets/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(data: bytes) -> bytes:
    digest = hashlib.sha256(data).hexdigest()
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{digest}\nsize {len(data)}\n".encode()


@dataclass(frozen=True)
class Logged:
    server: str  # "hub" or "cdn"
    method: str
    path: str  # the repo path for resolve and CDN requests, else the URL path
    range: str | None
    authorization: str | None


@dataclass
class Hub:
    """The repository's commits and refs, the fault switches and the request log."""

    repo: str
    token: str | None = None  # set: the repo is private and needs this token
    page_size: int = 40
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    drop_once: dict[str, int | None] = field(default_factory=dict)  # path → bytes sent before the cut
    fail_once: dict[str, int] = field(default_factory=dict)  # path → HTTP status of its first CDN answer
    stall_after: int | None = None
    log: list[Logged] = field(default_factory=list)
    hub_url: str = ""
    cdn_url: str = ""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._served = 0  # CDN bodies sent in full
        self._blobs: dict[str, tuple[str, bytes]] = {}  # sha256 → (repo path, data)

    def commit(self, files: dict[str, bytes], *, branch: str = "main", tag: str | None = None) -> str:
        """Add a commit holding ``files`` (and ``.gitattributes``) and point ``branch`` (and ``tag``) at it."""
        files = {".gitattributes": GITATTRIBUTES, **files}
        digest = hashlib.sha1(json.dumps(sorted(self.refs.values())).encode())
        for path in sorted(files):
            digest.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
        sha = digest.hexdigest()
        self.commits[sha] = files
        for ref in (branch, tag):
            if ref:
                self.refs[ref] = sha
        for path, data in files.items():
            if path.endswith(LFS_SUFFIX):
                digest = hashlib.sha256(data).hexdigest()
                assert self._blobs.get(digest, (path,))[0] == path, (
                    "two paths with one content: log is ambiguous"
                )
                self._blobs[digest] = (path, data)
        return sha

    def resolve(self, rev: str) -> str | None:
        return rev if rev in self.commits else self.refs.get(rev)

    def release(self) -> None:
        self._released.set()

    def served(self) -> int:
        with self._lock:
            return self._served

    def requests(self, server: str, method: str | None = None) -> list[Logged]:
        with self._lock:
            return [r for r in self.log if r.server == server and (method is None or r.method == method)]

    def mark(self) -> int:
        """A position in the log, for ``fetched(since=...)``."""
        with self._lock:
            return len(self.log)

    def fetched(self, since: int = 0) -> list[str]:
        """Repo paths asked for with a GET (from the CDN, or a resolve GET of a regular file) after ``since``."""
        with self._lock:
            entries = self.log[since:]
        return [r.path for r in entries if r.method == "GET" and not r.path.startswith("/api/")]

    # -- serving

    def start(self) -> None:
        self._servers = [
            _Server(("127.0.0.1", 0), _handler(self, "hub")),
            _Server(("127.0.0.1", 0), _handler(self, "cdn")),
        ]
        for server in self._servers:
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.hub_url, self.cdn_url = (f"http://127.0.0.1:{s.server_address[1]}" for s in self._servers)

    def stop(self) -> None:
        self.release()
        for server in self._servers:
            server.shutdown()
            server.server_close()

    def _record(self, entry: Logged) -> None:
        with self._lock:
            self.log.append(entry)

    def _take_turn(self) -> bool:
        """Whether this CDN answer may be sent now (False: hold it until release)."""
        with self._lock:
            return self.stall_after is None or self._served < self.stall_after

    def _count_served(self) -> None:
        with self._lock:
            self._served += 1


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """A client that went away (killed, or a test's fault) is expected here; anything else is not."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler(hub: Hub, name: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects

        def log_message(self, format, *args):  # noqa: A002 (the base class's name)
            pass

        def do_HEAD(self):
            self._dispatch(head=True)

        def do_GET(self):
            self._dispatch(head=False)

        # -- plumbing

        def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None, head=False):
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _error(self, status: int, code: str | None, head: bool, message: str = "") -> None:
            headers = {"Content-Type": "application/json"}
            if code:
                headers["X-Error-Code"] = code
            body = json.dumps({"error": message or code or "error"}).encode()
            self._send(status, body, headers, head=head)

        def _json(self, value, headers: dict[str, str] | None = None) -> None:
            self._send(
                200, json.dumps(value).encode(), {"Content-Type": "application/json", **(headers or {})}
            )

        def _dispatch(self, head: bool) -> None:
            url = urlsplit(self.path)
            path = unquote(url.path)
            resolve = RESOLVE.match(url.path)
            logged = unquote(resolve["path"]) if resolve else path
            if name == "cdn":
                logged = hub._blobs.get(path.lstrip("/"), (path, b""))[0]
            hub._record(
                Logged(
                    name, self.command, logged, self.headers.get("Range"), self.headers.get("Authorization")
                )
            )
            if name == "cdn":
                self._cdn(path.lstrip("/"), head)
                return
            if hub.token and self.headers.get("Authorization") != f"Bearer {hub.token}":
                self._error(
                    401, "RepoNotFound", head, "Repository not found"
                )  # what the hub says to strangers
                return
            api = API.match(url.path)
            if api and not head:
                self._api(api["repo"], api["kind"], unquote(api["rev"]), parse_qs(url.query))
            elif resolve:
                self._resolve(resolve["repo"], unquote(resolve["rev"]), unquote(resolve["path"]), head)
            else:
                self._error(404, None, head, f"no such endpoint: {self.command} {url.path}")

        # -- the hub

        def _commit(self, repo: str, rev: str, head: bool) -> tuple[str, dict[str, bytes]] | None:
            if repo != hub.repo:
                self._error(404, "RepoNotFound", head, "Repository not found")
                return None
            sha = hub.resolve(rev)
            if sha is None:
                self._error(404, "RevisionNotFound", head, f"Invalid rev id: {rev}")
                return None
            return sha, hub.commits[sha]

        def _api(self, repo: str, kind: str, rev: str, query: dict[str, list[str]]) -> None:
            found = self._commit(repo, rev, head=False)
            if found is None:
                return
            sha, files = found
            if kind == "revision":
                siblings = [{"rfilename": path} for path in sorted(files)]
                self._json(
                    {
                        "_id": "0" * 24,
                        "id": repo,
                        "sha": sha,
                        "private": bool(hub.token),
                        "siblings": siblings,
                    }
                )
                return
            entries = _tree_entries(files, recursive=query.get("recursive", ["false"])[0] == "true")
            start = int(query.get("cursor", ["0"])[0])
            page = entries[start : start + hub.page_size]
            headers = {}
            if start + hub.page_size < len(entries):
                link = f"{hub.hub_url}/api/datasets/{repo}/tree/{quote(rev, safe='')}?"
                link += f"recursive={query.get('recursive', ['false'])[0]}&cursor={start + hub.page_size}"
                headers["Link"] = f'<{link}>; rel="next"'
            self._json(page, headers)

        def _resolve(self, repo: str, rev: str, path: str, head: bool) -> None:
            found = self._commit(repo, rev, head)
            if found is None:
                return
            sha, files = found
            if path not in files:
                self._error(404, "EntryNotFound", head, f"{path} does not exist on {rev}")
                return
            data = files[path]
            if path.endswith(LFS_SUFFIX):
                digest = hashlib.sha256(data).hexdigest()
                headers = {
                    "Location": f"{hub.cdn_url}/{digest}",
                    "X-Repo-Commit": sha,
                    "X-Linked-Etag": f'"{digest}"',
                    "X-Linked-Size": str(len(data)),
                    "ETag": f'"{git_blob_sha1(lfs_pointer(data))}"',
                }
                self._send(302, b"", headers, head=head)
                return
            headers = {"X-Repo-Commit": sha, "ETag": f'"{git_blob_sha1(data)}"', "Accept-Ranges": "bytes"}
            self._send(200, data, headers, head=head)

        # -- the CDN

        def _cdn(self, digest: str, head: bool) -> None:
            if digest not in hub._blobs:
                self._error(404, None, head)
                return
            path, data = hub._blobs[digest]
            if path in hub.fail_once:
                self._error(hub.fail_once.pop(path), None, head, "Service Unavailable")
                return
            if not head and not hub._take_turn():
                hub._released.wait(STALL_LIMIT_S)
                self.close_connection = True
                return
            start = 0
            match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
            if match:
                start = int(match[1])
            body = data[start:]
            self.send_response(206 if match else 200)
            self.send_header("Content-Type", "audio/wav")
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", f'"{digest}"')
            self.send_header("Content-Length", str(len(body)))
            if match:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()
            if head:
                return
            if path in hub.drop_once:
                cut = hub.drop_once.pop(path)
                self.wfile.write(body[: len(body) // 2 if cut is None else cut])
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            self.wfile.write(body)
            hub._count_served()

    return Handler


def _tree_entries(files: dict[str, bytes], recursive: bool) -> list[dict]:
    """The tree API's entries: folders then files per level, as the hub lists them (recursive: every level)."""
    folders: set[str] = set()
    for path in files:
        parts = path.split("/")[:-1]
        folders.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    entries = []
    for folder in sorted(folders):
        if recursive or "/" not in folder:
            entries.append(
                {
                    "type": "directory",
                    "oid": hashlib.sha1(folder.encode()).hexdigest(),
                    "size": 0,
                    "path": folder,
                }
            )
    for path in sorted(files):
        if not recursive and "/" in path:
            continue
        data = files[path]
        entry = {"type": "file", "oid": git_blob_sha1(data), "size": len(data), "path": path}
        if path.endswith(LFS_SUFFIX):
            pointer = lfs_pointer(data)
            entry["oid"] = git_blob_sha1(pointer)
            entry["lfs"] = {
                "oid": hashlib.sha256(data).hexdigest(),
                "size": len(data),
                "pointerSize": len(pointer),
            }
        entries.append(entry)
    return entries


# --------------------------------------------------------------------------- a release in the original layout


def tone_wav(path: str, seconds: float = 0.1) -> bytes:
    """A short 16 kHz PCM16 tone, its pitch from the path; its first 16 samples are the path's digest, so
    every file has its own bytes (the CDN, like the hub's, stores blobs by content)."""
    import numpy as np

    from audioicl.audio import SAMPLE_RATE, pcm16_bytes

    digest = hashlib.sha256(path.encode()).digest()
    freq = 200 + int.from_bytes(digest[:2]) % 1800
    wave = 0.3 * np.sin(2 * np.pi * freq * np.arange(round(seconds * SAMPLE_RATE)) / SAMPLE_RATE)
    wave[:16] = np.frombuffer(digest[:16], dtype=np.uint8) / 32767
    return pcm16_bytes(wave.astype(np.float32))


def original_release(reference, per_task: int = 2, omit: set[str] = frozenset()) -> dict[str, bytes]:
    """A few episodes of the released dataset: the first ``per_task`` lines of each task of every reference
    ``meta_k{k}.jsonl``, byte for byte, under ``meta/``; a tone for every audio path they name except
    ``omit``; the Morse alphabet bank; a dataset card."""
    from pathlib import Path

    files: dict[str, bytes] = {"README.md": b"# AudioICL-Bench (test copy)\n"}
    audio: set[str] = set()
    for k in range(1, 6):
        kept, seen = [], {}
        for raw in (Path(reference) / f"meta_k{k}.jsonl").read_bytes().splitlines(keepends=True):
            record = json.loads(raw)
            seen[record["task"]] = seen.get(record["task"], 0) + 1
            if seen[record["task"]] > per_task:
                continue
            kept.append(raw)
            for part in [*record["demos"], record["query"]]:
                audio.update(clip["audio_path"] for clip in part.get("clips", [part]))
        files[f"meta/meta_k{k}.jsonl"] = b"".join(kept)
    audio.update(f"data/MorseCode/alphabet/{letter}.wav" for letter in "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    for path in sorted(audio - set(omit)):
        files[path] = tone_wav(path)
    return files
