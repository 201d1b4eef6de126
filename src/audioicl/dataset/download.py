"""The released dataset from the Hugging Face hub, fetched with the real client (``huggingface_hub``).

``download`` resolves the revision to a commit, fetches that commit's snapshot into ROOT in the repository's
own layout (``meta/``, ``data/``: what ``audioicl run --data ROOT`` reads) with ``snapshot_download``, checks
that every listed file arrived with its size, and records repo and commit in ``ROOT/download.json``; run
records of runs over ROOT carry them (``dataset_source``). Its ``complete`` turns true (the record rewritten
atomically) only once every file is there, so a download that stopped (a cut, or a write the disk refused:
``WriteFailed``, one line naming the file) never looks complete. The client does the transfer and reads its usual
environment: ``HF_ENDPOINT`` (a mirror), ``HF_TOKEN`` (or the token saved under ``HF_HOME``), ``HF_HUB_CACHE``
(files already in the cache are copied, not fetched), ``HF_HUB_DOWNLOAD_TIMEOUT``, ``HF_HUB_DISABLE_PROGRESS_BARS``.

Resuming: files already complete in ROOT at the same commit are not fetched again, so rerunning an interrupted
download fetches only what is missing; a connection dropped mid-file is retried by the client (from the last
whole 10 MiB chunk it wrote, with a range request). One ROOT holds one commit: a different repo or commit, or a
non-empty folder that is no download, is refused rather than mixed. One download writes into ROOT at a time:
it holds ``ROOT/.audioicl.lock`` (``audioicl.files.folder_lock``), and a second is refused, naming the holder.

``huggingface_hub`` is an optional extra (``audioicl[hub]``), imported only here and only when called.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audioicl import __version__
from audioicl.errors import STORAGE_ERRNOS, AudioICLError, WriteFailed, write_failed
from audioicl.files import FOLDER_LOCK, check_output, folder_lock, write_atomic

from .meta import resolve_audio_path

DEFAULT_REPO = "hongzz-18/AudioICL-Bench"
REPO_TYPE = "dataset"
SOURCE_FILE = "download.json"


@dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int


@dataclass(frozen=True)
class Snapshot:
    """A repository at one commit: what ``revision`` resolved to and the files it holds."""

    repo: str
    revision: str
    commit: str
    endpoint: str
    files: tuple[RemoteFile, ...]

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class Download:
    snapshot: Snapshot
    root: Path
    already_there: int  # files complete in ROOT before this run (not fetched again)


# --------------------------------------------------------------------------- the client and its errors


def _client() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise AudioICLError("audioicl download needs huggingface_hub: pip install 'audioicl[hub]'") from None
    return huggingface_hub


def _one_line(exc: BaseException) -> str:
    text = _without_token(" ".join(str(exc).split()))
    return text or type(exc).__name__


def _without_token(text: str) -> str:
    """``text`` with the hub token (``HF_TOKEN`` or the saved one) blanked out: a mirror or proxy may quote
    the request's headers back in what it says, and what it says goes into our messages."""
    try:
        from huggingface_hub import get_token

        token = get_token()
    except Exception:  # noqa: BLE001 (no client, an unreadable token file: there is no token to hide)
        return text
    return text.replace(token, "<HF_TOKEN>") if token and token in text else text


def _transport_error(exc: BaseException) -> BaseException | None:
    """The network error (refused, unreachable, timed out, cut) behind ``exc``, following its causes."""
    import httpx2  # the client's HTTP library (a dependency of huggingface_hub 2.x)

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, httpx2.TransportError):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _storage_error(exc: BaseException) -> OSError | None:
    """The refused write (full disk, quota, file-size limit, read-only) behind ``exc``, following its causes."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


@contextmanager
def _hub_errors(
    repo: str, revision: str, endpoint: str, doing: str = "", into: Path | None = None
) -> Iterator[None]:
    """Turn the client's exceptions into one-line ``AudioICLError``s that say what to do; a write into ``into``
    that the system refused is a ``WriteFailed`` naming the file (or ``into``)."""
    from huggingface_hub import errors

    try:
        yield
    except AudioICLError:
        raise
    except errors.RevisionNotFoundError:
        raise AudioICLError(f"revision {revision!r} not found in {repo} at {endpoint}{doing}") from None
    except errors.GatedRepoError:
        raise AudioICLError(
            f"{repo} is gated: accept its terms on the hub, then set HF_TOKEN to a token of that account{doing}"
        ) from None
    except errors.RepositoryNotFoundError:
        raise AudioICLError(
            f"dataset {repo} not found at {endpoint} (a private repo needs HF_TOKEN){doing}"
        ) from None
    except errors.OfflineModeIsEnabled:
        raise AudioICLError(f"HF_HUB_OFFLINE is set: downloading needs the network{doing}") from None
    except errors.HfHubHTTPError as exc:
        status = exc.response.status_code
        said = f": {_without_token(' '.join(exc.server_message.split()))}" if exc.server_message else ""
        if status in (401, 403):
            raise AudioICLError(
                f"access to {repo} at {endpoint} denied (HTTP {status}{said}): set HF_TOKEN to a token "
                f"that may read it{doing}"
            ) from None
        raise AudioICLError(f"HTTP {status} from {exc.response.url}{said}{doing}") from None
    except Exception as exc:
        refused = _storage_error(exc) if into is not None else None
        if refused is not None:
            raise write_failed(refused.filename or into or "", refused) from None
        network = _transport_error(exc)
        if network is not None:
            raise AudioICLError(f"cannot reach the hub at {endpoint}: {_one_line(network)}{doing}") from None
        if isinstance(exc, errors.LocalEntryNotFoundError | OSError):
            raise AudioICLError(f"download from {endpoint} failed: {_one_line(exc)}{doing}") from None
        raise


# --------------------------------------------------------------------------- listing


def endpoint() -> str:
    """The hub the client talks to (``HF_ENDPOINT``, else huggingface.co)."""
    return _client().constants.ENDPOINT


def snapshot(repo: str = DEFAULT_REPO, revision: str | None = None) -> Snapshot:
    """Resolve ``revision`` (default: the main branch) to a commit and list that commit's files."""
    hub = _client()
    from huggingface_hub.hf_api import RepoFile

    where = endpoint()
    revision = revision or hub.constants.DEFAULT_REVISION
    api = hub.HfApi()
    with _hub_errors(repo, revision, where):
        commit = api.dataset_info(repo, revision=revision).sha
        entries = api.list_repo_tree(repo, repo_type=REPO_TYPE, revision=commit, recursive=True)
        files = [RemoteFile(e.path, e.size) for e in entries if isinstance(e, RepoFile)]
    for file in files:
        _check_inside(repo, file.path)
    return Snapshot(repo, revision, commit, where, tuple(sorted(files, key=lambda f: f.path)))


def _check_inside(repo: str, path: str) -> None:
    """Refuse a listed path that would land outside ROOT (a parent step, an absolute path, a NUL): the listing
    is the server's answer, and one such file refuses the whole download before anything is fetched."""
    try:
        resolve_audio_path(os.sep, path)  # the meta files' own check of a path inside the dataset, lexically
    except AudioICLError:
        raise AudioICLError(
            f"{repo} lists a file outside the dataset's folder, {path!r}: refused, nothing fetched"
        ) from None


# --------------------------------------------------------------------------- ROOT/download.json


def read_source(root: str | os.PathLike) -> dict[str, Any] | None:
    """What ``ROOT/download.json`` says (repo, revision, commit, endpoint, complete, ...); None without one."""
    path = Path(root) / SOURCE_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise AudioICLError(f"malformed download record: {exc}", file=str(path)) from None
    if not isinstance(record, dict) or not isinstance(record.get("commit"), str):
        raise AudioICLError("download record has no commit", file=str(path))
    return record


def dataset_source(root: str | os.PathLike) -> dict[str, str] | None:
    """Repo and commit of a downloaded dataset, for run records (what identifies its content); else None."""
    record = read_source(root)
    return None if record is None else {"repo": record.get("repo"), "commit": record["commit"]}


def _write_source(root: Path, snap: Snapshot, complete: bool) -> None:
    record = {
        "repo": snap.repo,
        "repo_type": REPO_TYPE,
        "revision": snap.revision,
        "commit": snap.commit,
        "endpoint": snap.endpoint,
        "files": len(snap.files),
        "bytes": snap.bytes,
        "complete": complete,
        "audioicl_version": __version__,
    }
    write_atomic(root / SOURCE_FILE, json.dumps(record, indent=2) + "\n", durable=True)


def _check_root(root: Path, snap: Snapshot) -> None:
    """ROOT is new, empty, or a download of this very commit (complete or not): never a mix of two."""
    check_output(root, "--out", folder=True)
    if not root.exists():
        return
    earlier = read_source(root)
    if earlier is None:
        if any(p.name != FOLDER_LOCK for p in root.iterdir()):
            raise AudioICLError(
                f"folder is not empty and holds no {SOURCE_FILE}: download into a new or empty folder",
                file=str(root),
            )
        return
    if (earlier.get("repo"), earlier["commit"]) != (snap.repo, snap.commit):
        raise AudioICLError(
            f"folder holds {earlier.get('repo')} at commit {earlier['commit']}; {snap.repo} "
            f"revision {snap.revision} is commit {snap.commit}: download into another folder",
            file=str(root),
        )


def missing_files(root: Path, snap: Snapshot) -> list[RemoteFile]:
    """The snapshot's files that ROOT lacks, or holds with another size."""
    missing = []
    for f in snap.files:
        try:
            size = (root / f.path).stat().st_size
        except OSError:
            size = None
        if size != f.size:
            missing.append(f)
    return missing


# --------------------------------------------------------------------------- downloading


def download(
    out: str | os.PathLike,
    repo: str = DEFAULT_REPO,
    revision: str | None = None,
    workers: int = 8,
) -> Download:
    """Fetch ``repo`` at ``revision`` into ``out`` (see the module docstring); raises ``AudioICLError``."""
    if workers < 1:
        raise AudioICLError(f"--workers must be at least 1, got {workers}")
    hub = _client()
    root = Path(out)
    snap = snapshot(repo, revision)
    _check_root(root, snap)
    root.mkdir(parents=True, exist_ok=True)
    with folder_lock(root):  # one download per folder: a second is refused, naming the holder
        _check_root(root, snap)  # again, now that no other download writes here
        return _download(hub, root, snap, workers)


def _download(hub: Any, root: Path, snap: Snapshot, workers: int) -> Download:
    repo = snap.repo
    already = len(snap.files) - len(missing_files(root, snap))
    _write_source(root, snap, complete=False)
    try:
        with _hub_errors(
            repo, snap.revision, snap.endpoint, doing="; rerun the same command to resume", into=root
        ):
            hub.snapshot_download(
                repo,
                repo_type=REPO_TYPE,
                revision=snap.commit,
                local_dir=root,
                max_workers=workers,
            )
    except WriteFailed:
        raise
    except AudioICLError as exc:
        left = len(missing_files(root, snap))
        exc.message = f"download stopped with {left} of {len(snap.files)} files missing: {exc.message}"
        raise
    left = missing_files(root, snap)
    if left:
        raise AudioICLError(
            f"download ended with {len(left)} of {len(snap.files)} files missing or of the wrong size "
            f"(first: {left[0].path}); rerun the same command to resume",
            file=str(root),
        )
    _write_source(root, snap, complete=True)
    return Download(snap, root, already)
