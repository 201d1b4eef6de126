"""The public corpora the original benchmark drew its sounds from: fetched with pooch into the layouts that
``audioicl build --source KIND=DIR`` reads (``audioicl fetch-sources``), and their provenance for builds.

The registry (``corpora.json`` beside this module, or a file in the same format) pins every file of every
corpus: URL, size and checksum where one is published (sha256, else the md5 a publisher such as Zenodo
states), ``null`` where none could be found. A file without a checksum is fetched only when the user allows
unverified files; the sha256 of what arrived is recorded either way, so a build says exactly what it used.

Layout of the output folder ``DIR``:

- ``DIR/<name>/``: one folder per corpus: what its files unpack to, and ``corpus.json`` (title, licence,
  every file with the sha256 of what was fetched and how it was verified). The folder appears in one rename
  once everything is unpacked and checked, ``corpus.json`` inside it: a corpus folder that exists is complete.
- ``DIR/.<name>.partial/``: unpacking in progress; removed on failure, and by the next run that fetches it.
- ``DIR/.archives/<name>/``: the downloads, pooch's cache (a file that passed its checksum is not fetched
  again); ``<file>.part`` is a download in progress, which the next attempt, or the next run, continues with
  an HTTP range request. Removed once the corpus is complete, unless archives are kept.
- ``DIR/.audioicl.lock``: held by the ``fetch-sources`` writing into ``DIR`` (``audioicl.files.folder_lock``);
  a second one into the same folder is refused, naming the holder.

Archives are unpacked only when every member is safe (``# unpacking``): a member with an absolute path, a
path or link out of the folder, a device file or FIFO, or the sizes of an archive bomb is refused by name.

A build from a folder inside ``DIR/<name>/`` finds ``corpus.json`` above it (``provenance``) and carries the
licence and checksums into its dataset card and manifest. ``AUDIOICL_SOURCES_BASE_URL`` replaces the scheme
and host of every URL: a mirror serving the same paths (the tests' local server is one).

pooch, and requests which it uses, are the optional extra ``audioicl[sources]``, imported only to fetch.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import stat
import tarfile
import time
import zipfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any
from urllib.parse import urlsplit

from tqdm import tqdm

from audioicl import __version__
from audioicl.errors import STORAGE_ERRNOS, AudioICLError, write_failed
from audioicl.files import FOLDER_LOCK, check_output, write_atomic, writing

from .banks import SOURCE_KINDS

REGISTRY_FILE = Path(__file__).with_name("corpora.json")
BASE_URL_ENV = "AUDIOICL_SOURCES_BASE_URL"
CORPUS_RECORD = "corpus.json"
ARCHIVES = ".archives"
PARTIAL_SUFFIX = ".partial"
PART_SUFFIX = ".part"
UNPACK = (None, "zip", "tar")
DEFAULT_RETRIES = 3
RETRY_WAIT_S = 1.0  # the n-th retry waits n times this (at most 10 times)
TIMEOUT_S = (30, 120)  # connect, read
CHUNK_BYTES = 1 << 20
_HEX = {"sha256": re.compile(r"[0-9a-f]{64}"), "md5": re.compile(r"[0-9a-f]{32}")}
_MAC_JUNK = re.compile(r"(^|/)(__MACOSX(/|$)|\._)")  # resource forks some archivers add


# --------------------------------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class CorpusInfo:
    """What a corpus is: the same in the registry and in the record of a fetched copy."""

    name: str  # its folder under DIR
    kind: str  # the sound kind it provides (``sources.banks.SOURCE_KINDS``)
    title: str
    version: str
    homepage: str
    licence: str
    licence_url: str
    citation: str
    root: str  # the folder ``--source KIND=`` takes, relative to DIR/<name>
    attribution: str | None  # the file crediting each recording, relative to DIR/<name>


@dataclass(frozen=True)
class RemoteFile:
    name: str
    url: str
    unpack: str | None  # "zip", "tar", or None: copied as it is
    size: int | None
    sha256: str | None
    md5: str | None
    note: str = ""

    @property
    def checksum(self) -> str | None:
        """The strongest published checksum in pooch's form (``sha256:...``, ``md5:...``), None without one."""
        return f"sha256:{self.sha256}" if self.sha256 else f"md5:{self.md5}" if self.md5 else None

    @property
    def verified_by(self) -> str:
        return "sha256" if self.sha256 else "md5" if self.md5 else "unverified"


@dataclass(frozen=True)
class Corpus:
    info: CorpusInfo
    files: tuple[RemoteFile, ...]


def _info(entry: dict[str, Any]) -> CorpusInfo:
    return CorpusInfo(**{f.name: entry.get(f.name) for f in fields(CorpusInfo)})


def _check_info(info: CorpusInfo) -> None:
    for f in fields(CorpusInfo):
        value = getattr(info, f.name)
        if not (isinstance(value, str) and value) and not (f.name == "attribution" and value is None):
            raise ValueError(f"{info.name!r}: {f.name} must be a non-empty string")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", info.name):
        raise ValueError(f"{info.name!r}: a name is letters, digits, '-' and '_'")
    if info.kind not in SOURCE_KINDS:
        raise ValueError(f"{info.name!r}: kind {info.kind!r} is not one of {', '.join(SOURCE_KINDS)}")
    for where in filter(None, (info.root, info.attribution)):
        path = PurePosixPath(where)
        if path.is_absolute() or ".." in path.parts:
            raise ValueError(f"{info.name!r}: {where!r} must be a path inside the corpus folder")


def _remote_file(corpus: str, entry: dict[str, Any]) -> RemoteFile:
    file = RemoteFile(**entry)
    if not re.fullmatch(r"[A-Za-z0-9._-]+", file.name) or file.name.startswith("."):
        raise ValueError(f"{corpus!r}: file name {file.name!r} must be a plain file name")
    if urlsplit(file.url).scheme not in ("http", "https"):
        raise ValueError(f"{corpus!r}: {file.name}: not an http(s) URL: {file.url!r}")
    if file.unpack not in UNPACK:
        raise ValueError(f"{corpus!r}: {file.name}: unpack must be zip, tar or null")
    if file.size is not None and not (isinstance(file.size, int) and file.size > 0):
        raise ValueError(f"{corpus!r}: {file.name}: size must be a positive integer or null")
    for algorithm, pattern in _HEX.items():
        value = getattr(file, algorithm)
        if value is not None and not (isinstance(value, str) and pattern.fullmatch(value)):
            raise ValueError(f"{corpus!r}: {file.name}: {algorithm} must be lower-case hex or null")
    return file


def load_registry(path: str | os.PathLike | None = None) -> tuple[Corpus, ...]:
    """The corpora of a registry file (default: the one shipped), checked; kinds and names are unique."""
    path = Path(path) if path is not None else REGISTRY_FILE
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AudioICLError(f"unreadable registry: {exc}", file=str(path)) from None
    try:
        corpora = []
        for entry in document["corpora"]:
            info = _info(entry)
            _check_info(info)
            files = tuple(_remote_file(info.name, f) for f in entry["files"])
            if not files or len({f.name for f in files}) != len(files):
                raise ValueError(f"{info.name!r}: files must be listed, each name once")
            corpora.append(Corpus(info, files))
    except (KeyError, TypeError, ValueError) as exc:
        raise AudioICLError(f"malformed registry: {exc}", file=str(path)) from None
    for attribute in ("name", "kind"):
        values = [getattr(c.info, attribute) for c in corpora]
        if len(set(values)) != len(values):
            raise AudioICLError(f"malformed registry: a corpus {attribute} appears twice", file=str(path))
    return tuple(corpora)


def select(corpora: tuple[Corpus, ...], only: list[str]) -> tuple[Corpus, ...]:
    """The corpora whose kind or name is in ``only`` (all of them when it is empty)."""
    known = {c.info.kind for c in corpora} | {c.info.name for c in corpora}
    unknown = [item for item in only if item not in known]
    if unknown:
        raise AudioICLError(
            f"--only: unknown {', '.join(map(repr, unknown))} (kinds: {', '.join(c.info.kind for c in corpora)}; "
            f"corpora: {', '.join(c.info.name for c in corpora)})"
        )
    return tuple(c for c in corpora if not only or c.info.kind in only or c.info.name in only)


def unverified_files(corpora: tuple[Corpus, ...]) -> list[tuple[Corpus, RemoteFile]]:
    return [(c, f) for c in corpora for f in c.files if f.checksum is None]


def mirrored(url: str) -> str:
    """``url`` with the scheme and host (and any path prefix) of ``$AUDIOICL_SOURCES_BASE_URL``, if set."""
    base = os.environ.get(BASE_URL_ENV, "").strip()
    if not base:
        return url
    parts = urlsplit(url)
    return base.rstrip("/") + parts.path + (f"?{parts.query}" if parts.query else "")


# --------------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class FetchedFile:
    name: str
    url: str  # the registry's URL (not a mirror's)
    bytes: int
    sha256: str  # of what arrived
    verified: str  # "sha256" or "md5": checked against the registry before unpacking; "unverified": not


@dataclass(frozen=True)
class CorpusRecord:
    """``DIR/<name>/corpus.json``: a fetched, complete corpus."""

    info: CorpusInfo
    files: tuple[FetchedFile, ...]
    audio_files: int  # .wav files under its root

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self.info),
            "audio_files": self.audio_files,
            "files": [asdict(f) for f in self.files],
        }


def read_record(folder: Path) -> CorpusRecord:
    path = folder / CORPUS_RECORD
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        info = _info(data)
        _check_info(info)
        files = tuple(
            FetchedFile(**{f.name: entry[f.name] for f in fields(FetchedFile)}) for entry in data["files"]
        )
        return CorpusRecord(info, files, int(data["audio_files"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise AudioICLError(f"unreadable corpus record: {exc}", file=str(path)) from None


@dataclass(frozen=True)
class SourceUse:
    """A real corpus a build drew one kind of sound from: its folder and, when ``fetch-sources`` fetched it,
    its record (None for a folder the user assembled)."""

    kind: str
    folder: str
    record: CorpusRecord | None


def find_record(folder: Path, kind: str) -> CorpusRecord | None:
    """The record of the fetched corpus ``folder`` lies in (the nearest ``corpus.json`` at or above it), if
    that corpus provides ``kind``."""
    for parent in (folder, *folder.parents):
        if (parent / CORPUS_RECORD).is_file():
            record = read_record(parent)
            return record if record.info.kind == kind else None
    return None


def provenance(sources: tuple[tuple[str, str], ...]) -> tuple[SourceUse, ...]:
    return tuple(SourceUse(kind, folder, find_record(Path(folder), kind)) for kind, folder in sources)


def fetched_sources(out: str | os.PathLike) -> tuple[tuple[str, str], ...]:
    """``(kind, root folder)`` of every complete corpus in a ``fetch-sources`` folder (``--sources DIR``)."""
    out = Path(out).expanduser().resolve()
    if not out.is_dir():
        raise AudioICLError("--sources: not a folder", file=str(out))
    found: dict[str, str] = {}
    for path in sorted(out.glob(f"*/{CORPUS_RECORD}")):
        record = read_record(path.parent)
        if record.info.kind in found:
            raise AudioICLError(
                f"--sources: two corpora provide {record.info.kind} sounds (keep one)", file=str(path)
            )
        root = path.parent / record.info.root
        if not root.is_dir():
            raise AudioICLError(f"--sources: {record.info.root} is missing from the corpus", file=str(path))
        found[record.info.kind] = str(root.resolve())
    if not found:
        raise AudioICLError(
            "--sources: no fetched corpus here (<name>/corpus.json); run 'audioicl fetch-sources --out DIR' "
            "first",
            file=str(out),
        )
    return tuple(sorted(found.items()))


# --------------------------------------------------------------------------------------------- downloading


class _NoRetry(Exception):
    """A failure another attempt cannot mend (unreachable host, HTTP 4xx); pooch lets it through."""


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _pooch() -> Any:
    try:
        import pooch
    except ImportError:
        raise AudioICLError("audioicl fetch-sources needs pooch: pip install 'audioicl[sources]'") from None
    pooch.get_logger().setLevel(logging.WARNING)  # our own lines say what is fetched
    return pooch


def _get(url: str, start: int, validator: str | None = None):
    """GET ``url`` from byte ``start`` (a range request when not 0, conditional on ``validator``: a server
    whose file changed sends all of the new one), streamed, uncompressed in transit."""
    import requests
    import urllib3

    headers = {"Accept-Encoding": "identity", "User-Agent": f"audioicl/{__version__} (pooch)"}
    if start:
        headers["Range"] = f"bytes={start}-"
        if validator:
            headers["If-Range"] = validator
    try:
        response = requests.get(url, headers=headers, stream=True, timeout=TIMEOUT_S)
    except requests.ConnectionError as exc:
        reason = getattr(exc.args[0], "reason", None) if exc.args else None
        if isinstance(reason, urllib3.exceptions.NewConnectionError):  # refused, or no such host
            said = _one_line(reason).split(": ", 1)[-1]
            raise _NoRetry(
                f"cannot reach {urlsplit(url).netloc} ({said}): fetching needs the network"
            ) from exc
        raise
    if 400 <= response.status_code < 500 and response.status_code not in (408, 416, 429):
        response.close()
        raise _NoRetry(f"HTTP {response.status_code} from {url}")
    return response


def _read_some(response) -> bytes:
    """What has arrived of the body, up to ``CHUNK_BYTES`` (one read of the socket: bytes received before a
    cut are returned, not lost with the read that fails); the body's own bytes, whatever its encoding."""
    import requests
    import urllib3

    try:
        return response.raw.read1(CHUNK_BYTES, decode_content=False)
    except urllib3.exceptions.HTTPError as exc:  # cut, reset, timed out: a transfer to continue
        raise requests.exceptions.ChunkedEncodingError(_one_line(exc)) from exc


def _validator(response) -> str | None:
    """What identifies this version of the file for ``If-Range``: a strong ETag, else Last-Modified."""
    etag = response.headers.get("ETag")
    return etag if etag and not etag.startswith("W/") else response.headers.get("Last-Modified")


class RangeDownloader:
    """A pooch downloader that survives cut connections: it streams into ``part`` and, when ``part`` holds
    bytes already (an earlier attempt, or an earlier run), asks only for the rest with an HTTP range request,
    on condition that the file is still the version those bytes came from (``If-Range`` with the validator
    kept beside them); it retries a dropped transfer ``retries`` times. The whole file then goes to pooch,
    which checks its checksum and moves it into the cache, or deletes it. A file with no checksum to check
    is continued only when the server gave a validator: otherwise it is fetched again from the start."""

    def __init__(self, part: Path, label: str, retries: int, progress: bool, checked: bool):
        self.part = part
        self.validator_file = part.with_name(part.name + ".validator")
        self.label = label
        self.retries = retries
        self.progress = progress
        self.checked = checked

    def __call__(self, url: str, output_file: str, pooch: Any, check_only: bool = False) -> None:
        import requests

        for attempt in range(self.retries + 1):
            try:
                self._stream(url)
                break
            except requests.RequestException:
                if attempt == self.retries:
                    raise
                time.sleep(RETRY_WAIT_S * min(attempt + 1, 10))
        os.replace(self.part, output_file)
        self.validator_file.unlink(missing_ok=True)

    def _stream(self, url: str) -> None:
        import requests

        have = self.part.stat().st_size if self.part.is_file() else 0
        validator = self.validator_file.read_text() if self.validator_file.is_file() else None
        if not validator and not self.checked:
            have = 0  # nothing shows that the bytes held are of the file served now
        response = _get(url, have, validator)
        if have and response.status_code == 416:  # nothing after the bytes we hold: they are stale
            response.close()
            have = 0
            response = _get(url, 0)
        response.raise_for_status()
        if have and not (
            response.status_code == 206
            and response.headers.get("Content-Range", "").startswith(f"bytes {have}-")
        ):
            have = 0  # the server sent the whole file (it changed, or it ignores ranges)
        if not have:
            fresh = _validator(response)
            if fresh:
                self.validator_file.write_text(fresh)
            else:
                self.validator_file.unlink(missing_ok=True)
        length = response.headers.get("Content-Length")
        expected = int(length) if length is not None else None
        received = 0
        total = have + expected if expected is not None else None
        with (
            response,
            self.part.open("ab" if have else "wb") as handle,
            tqdm(
                total=total,
                initial=have,
                desc=f"  {self.label}",
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                leave=False,
                disable=None if self.progress else True,
            ) as bar,
        ):
            while chunk := _read_some(response):
                handle.write(chunk)  # every byte that arrived is kept: a cut loses nothing
                received += len(chunk)
                bar.update(len(chunk))
        if expected is not None and received != expected:
            raise requests.exceptions.ChunkedEncodingError(
                f"connection closed after {have + received:,} of {total:,} bytes"
            )


def _download(pooch: Any, file: RemoteFile, archives: Path, retries: int, progress: bool) -> Path:
    """The file in ``archives``, fetched unless pooch's cache holds it with the registry's checksum."""
    import requests

    url = mirrored(file.url)
    part = archives / f"{file.name}{PART_SUFFIX}"
    store = pooch.create(
        path=archives, base_url="", registry={file.name: file.checksum}, urls={file.name: url}
    )
    try:
        with writing(part, any_error=False):  # a full disk: one line naming the file (the bytes are kept)
            path = Path(
                store.fetch(
                    file.name,
                    downloader=RangeDownloader(
                        part, file.name, retries, progress, checked=file.checksum is not None
                    ),
                )
            )
    except ValueError as exc:  # pooch: the checksum does not match (it deleted the download)
        raise AudioICLError(
            f"{_one_line(exc)} Nothing of it was unpacked; rerun to fetch it again", file=url
        ) from None
    except _NoRetry as exc:
        raise AudioICLError(f"{exc}; rerun the same command to resume", file=url) from None
    except requests.RequestException as exc:
        kept = part.stat().st_size if part.is_file() else 0
        raise AudioICLError(
            f"download of {file.name} failed: {_one_line(exc)}; rerun the same command to resume"
            + (f" ({kept:,} bytes kept)" if kept else ""),
            file=url,
        ) from None
    if file.size is not None and path.stat().st_size != file.size:
        size = path.stat().st_size
        path.unlink()
        raise AudioICLError(
            f"{file.name} has {size:,} bytes, the registry says {file.size:,}; the download was discarded",
            file=url,
        )
    return path


# --------------------------------------------------------------------------------------------- unpacking
#
# An archive is checked member by member before anything of it is written, and refused with the member named
# when a member is unsafe: an absolute path; a path or a link (symbolic or hard) leading out of the folder; a
# member written through a link; a chain of more than LINK_HOPS links; a device file, FIFO or socket; or sizes of
# an archive bomb: more unpacked bytes in all than UNPACK_FACTOR times the archive's size (the registry's pinned
# size, else what arrived) or UNPACK_FLOOR_BYTES, whichever is more; and, in a zip, a member of at least
# ZIP_RATIO_MIN_BYTES that would unpack to more than ZIP_MAX_RATIO times its compressed size.
#
# Where a member lands is worked out from the archive alone (``_Tree``: its names and its own links, resolved
# lexically), never from the file system: ``os.path.realpath`` gives up silently on a chain of links longer than
# PATH_MAX and returns a path that looks inside while the kernel resolves it outside (CVE-2025-4517, which also
# defeats Python's own tar "data" filter before 3.13.4 and 3.11.13). Both kinds are then written by our own code,
# one member at a time: folders made component by component with no link on the way (``os.lstat``), files opened
# with ``O_NOFOLLOW`` and counted against their declared size, modes 0o644 / 0o755 (no setuid, no owner), a hard
# link written as a copy of the file it names. The corpora are audio, which compresses little (about 1.1-2
# times).

UNPACK_FACTOR = 20
UNPACK_FLOOR_BYTES = 64 << 20
ZIP_MAX_RATIO = 100
ZIP_RATIO_MIN_BYTES = 1 << 20
LINK_HOPS = 8  # links one path may pass through: a corpus has none, a chain of many is an attack
_LINK_TARGET_MAX = 4096


class _Unsafe(Exception):
    """A member refused: ``member`` its name, ``why`` the reason."""

    def __init__(self, member: str, why: str):
        super().__init__(member, why)
        self.member, self.why = member, why


def unpack_limit(file: RemoteFile, archive: Path) -> int:
    """The most bytes ``archive`` may unpack to (see ``# unpacking``)."""
    return max(UNPACK_FACTOR * (file.size or archive.stat().st_size), UNPACK_FLOOR_BYTES)


def _absolute(name: str) -> bool:
    return name.startswith(("/", "\\")) or bool(PureWindowsPath(name).drive)


class _Total:
    """Unpacked bytes so far, against the limit."""

    def __init__(self, limit: int, archive_bytes: int):
        self.limit, self.archive_bytes, self.bytes = limit, archive_bytes, 0

    def add(self, member: str, size: int) -> None:
        self.bytes += size
        if self.bytes > self.limit:
            raise _Unsafe(
                member,
                f"with it the archive unpacks to more than {self.limit:,} bytes, the bound for its "
                f"{self.archive_bytes:,} ({UNPACK_FACTOR} times, at least {UNPACK_FLOOR_BYTES:,}): an "
                "archive bomb?",
            )


_WHY = {
    "absolute": "its path is absolute",
    "outside": "it would be written outside the folder",
    "special": "it is a device file, FIFO or socket",
    "absolute link": "it links to an absolute path",
    "link outside": "it links outside the folder",
    "through link": "it would be written through a link",
    "chain": f"it passes through more than {LINK_HOPS} links",
}


class _Tree:
    """The archive's own tree as far as read: its symbolic links (path → target) and its files. ``resolve``
    follows a path through those links lexically, as the kernel would once they are written, and refuses one
    that leaves the folder or passes through too many links."""

    def __init__(self) -> None:
        self.links: dict[tuple[str, ...], str] = {}
        self.files: set[tuple[str, ...]] = set()

    def resolve(self, parts: tuple[str, ...] | list[str], member: str) -> tuple[str, ...]:
        todo, done, hops = list(parts), [], 0
        while todo:
            part = todo.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                if not done:
                    raise _Unsafe(member, "")
                done.pop()
                continue
            done.append(part)
            link = self.links.get(tuple(done))
            if link is None:
                continue
            hops += 1
            if hops > LINK_HOPS:
                raise _Unsafe(member, _WHY["chain"])
            done.pop()
            todo = [*_parts(link), *todo]
        return tuple(done)

    def place(self, name: str) -> tuple[str, ...]:
        """Where the member ``name`` is written, refused when absolute, outside or through a link."""
        if _absolute(name):
            raise _Unsafe(name, _WHY["absolute"])
        try:
            parts = self.resolve(_parts(name), name)
        except _Unsafe as exc:
            raise _Unsafe(name, exc.why or _WHY["outside"]) from None
        if not parts:
            raise _Unsafe(name, _WHY["outside"])
        if parts != _lexical(name) or any(parts[:i] in self.links for i in range(1, len(parts))):
            raise _Unsafe(name, _WHY["through link"])
        return parts

    def link(self, name: str, where: tuple[str, ...], target: str) -> None:
        """A symbolic link at ``where`` to ``target``, refused when its target is absolute or leads out."""
        if len(target) > _LINK_TARGET_MAX:
            raise _Unsafe(name, f"a symbolic link of {len(target):,} characters")
        if _absolute(target):
            raise _Unsafe(name, f"{_WHY['absolute link']} ({target!r})")
        try:
            self.resolve([*where[:-1], *_parts(target)], name)
        except _Unsafe as exc:
            raise _Unsafe(name, f"{exc.why or _WHY['link outside']} ({target!r})") from None
        self.links[where] = target

    def hard_link(self, name: str, target: str) -> tuple[str, ...]:
        """The file a hard link names (relative to the archive's top), which must be one written before."""
        if _absolute(target):
            raise _Unsafe(name, f"{_WHY['absolute link']} ({target!r})")
        try:
            found = self.resolve(_parts(target), name)
        except _Unsafe as exc:
            raise _Unsafe(name, f"{exc.why or _WHY['link outside']} ({target!r})") from None
        if found not in self.files:
            raise _Unsafe(name, f"it links to no file of the archive ({target!r})")
        return found


def _parts(name: str) -> list[str]:
    return [part for part in name.replace("\\", "/").split("/") if part not in ("", ".")]


def _lexical(name: str) -> tuple[str, ...]:
    """``name``'s components with ``..`` applied (already checked to stay inside)."""
    done: list[str] = []
    for part in _parts(name):
        if part == "..":
            done.pop()
        else:
            done.append(part)
    return tuple(done)


class _Writer:
    """Writes members under ``dest``, never through a link: each folder on the way is checked with ``lstat``
    (a link there, made by anyone, refuses the member), files are opened with ``O_NOFOLLOW``."""

    def __init__(self, dest: Path):
        self.dest = dest

    def folder(self, parts: tuple[str, ...], member: str) -> Path:
        path = self.dest
        for part in parts:
            path = path / part
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                os.mkdir(path, 0o755)
                continue
            if not stat.S_ISDIR(mode):
                raise _Unsafe(member, _WHY["through link"] if stat.S_ISLNK(mode) else _WHY["outside"])
        return path

    def file(self, parts: tuple[str, ...], member: str, source: Any, size: int) -> None:
        """``source``'s bytes (a file object) as the file ``parts``, refused if more come than ``size``."""
        path = self.folder(parts[:-1], member) / parts[-1]
        self._clear(path)
        flags = (
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        )
        written = 0
        with os.fdopen(os.open(path, flags, 0o644), "wb") as handle:
            while chunk := source.read(CHUNK_BYTES):
                written += len(chunk)
                if written > size:
                    raise _Unsafe(member, f"it unpacks to more than the {size:,} bytes it declares")
                handle.write(chunk)

    def symlink(self, parts: tuple[str, ...], member: str, target: str) -> None:
        path = self.folder(parts[:-1], member) / parts[-1]
        self._clear(path)
        os.symlink(target, path)

    @staticmethod
    def _clear(path: Path) -> None:
        """What a member replaces: a file or link (a folder stays, and the write into it fails)."""
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                os.unlink(path)


def _tar_plan(tar: tarfile.TarFile, total: _Total) -> list[tuple[tarfile.TarInfo, tuple[str, ...], Any, int]]:
    """Every member checked (``_Tree``) before anything is written: (member, where, link target or the linked
    file, size)."""
    tree, plan, sizes = _Tree(), [], {}
    for member in tar:  # one header at a time: a bomb's first huge member stops it here
        if _MAC_JUNK.search(member.name):
            continue
        if (
            member.ischr()
            or member.isblk()
            or member.isfifo()
            or not (member.isreg() or member.isdir() or member.issym() or member.islnk())
        ):
            raise _Unsafe(member.name, _WHY["special"])
        where = tree.place(member.name)
        extra: Any = None
        if member.issym():
            tree.link(member.name, where, member.linkname)
            extra = member.linkname
        elif member.islnk():
            extra = tree.hard_link(member.name, member.linkname)
            sizes[where] = sizes[extra]
            total.add(member.name, sizes[where])
        elif member.isreg():
            sizes[where] = member.size
            total.add(member.name, member.size)
        if member.isreg() or member.islnk():
            tree.files.add(where)
        plan.append((member, where, extra, sizes.get(where, 0)))
    return plan


def _untar(archive: Path, into: Path, total: _Total) -> None:
    writer = _Writer(into.resolve())
    with tarfile.open(archive) as tar:
        for member, where, extra, size in _tar_plan(tar, total):
            if member.isdir():
                writer.folder(where, member.name)
            elif member.issym():
                writer.symlink(where, member.name, extra)
            elif member.islnk():  # a copy of the file it names, already written (inside, no link on the way)
                with open(writer.folder(extra[:-1], member.name) / extra[-1], "rb") as source:
                    writer.file(where, member.name, source, size)
            else:
                source = tar.extractfile(member)
                assert source is not None  # a regular member
                writer.file(where, member.name, source, member.size)


def _zip_kind(member: zipfile.ZipInfo) -> str:
    """What a zip member is: a file, a folder or a symlink, by the unix mode bits where the archiver stored
    them; anything else (a device, FIFO, socket) is refused."""
    kind = stat.S_IFMT(member.external_attr >> 16)
    if kind == stat.S_IFLNK:
        return "symlink"
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise _Unsafe(member.filename, _WHY["special"])
    return "folder" if kind == stat.S_IFDIR or member.is_dir() else "file"


def _zip_plan(
    zipped: zipfile.ZipFile, total: _Total
) -> list[tuple[zipfile.ZipInfo, str, tuple[str, ...], str]]:
    """Every member checked before anything is written: (member, kind, where, link target)."""
    tree, plan = _Tree(), []
    for member in zipped.infolist():
        name = member.filename
        if _MAC_JUNK.search(name):
            continue
        kind = _zip_kind(member)
        where = tree.place(name)
        big = member.file_size >= ZIP_RATIO_MIN_BYTES
        if big and member.file_size > ZIP_MAX_RATIO * max(member.compress_size, 1):
            raise _Unsafe(
                name,
                f"it would unpack {member.compress_size:,} bytes to {member.file_size:,} (more than "
                f"{ZIP_MAX_RATIO} times): an archive bomb?",
            )
        total.add(name, member.file_size)
        link = ""
        if kind == "symlink":
            if member.file_size > _LINK_TARGET_MAX:
                raise _Unsafe(name, f"a symbolic link of {member.file_size:,} bytes")
            link = zipped.read(member).decode("utf-8", "replace")
            tree.link(name, where, link)
        elif kind == "file":
            tree.files.add(where)
        plan.append((member, kind, where, link))
    return plan


def _unzip(archive: Path, into: Path, total: _Total) -> None:
    writer = _Writer(into.resolve())
    with zipfile.ZipFile(archive) as zipped:
        for member, kind, where, link in _zip_plan(zipped, total):
            if kind == "folder":
                writer.folder(where, member.filename)
            elif kind == "symlink":
                writer.symlink(where, member.filename, link)
            else:
                with zipped.open(member) as source:
                    writer.file(where, member.filename, source, member.file_size)


def _unpack(file: RemoteFile, path: Path, into: Path) -> None:
    """Unpack (or copy) the fetched ``file`` at ``path`` into ``into``; an unsafe member is refused with its
    name (see ``# unpacking``), and what was written of the archive is left for the caller to remove."""
    into.mkdir(parents=True, exist_ok=True)
    total = _Total(unpack_limit(file, path), file.size or path.stat().st_size)
    try:
        if file.unpack == "zip":
            _unzip(path, into, total)
        elif file.unpack == "tar":
            _untar(path, into, total)
        else:
            shutil.copyfile(path, into / file.name)
    except _Unsafe as exc:
        raise AudioICLError(
            f"unsafe member {exc.member!r} in {file.name}: {exc.why}; the archive was refused, nothing of it "
            "unpacked",
            file=str(path),
        ) from None
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, KeyError) as exc:  # KeyError: a link
        if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
            raise write_failed(exc.filename or into, exc) from None
        raise AudioICLError(f"{file.name} cannot be unpacked: {_one_line(exc)}", file=str(path)) from None


def count_wavs(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*") if p.suffix.lower() == ".wav" and p.is_file())


# --------------------------------------------------------------------------------------------- fetching


@dataclass(frozen=True)
class Fetched:
    record: CorpusRecord
    folder: Path  # DIR/<name>
    now: bool  # fetched by this run (False: complete already)

    @property
    def root(self) -> Path:
        return self.folder / self.record.info.root


def check_out(out: Path, corpora: tuple[Corpus, ...]) -> None:
    """``out`` is new, empty, or holds only what ``fetch-sources`` writes (complete corpora, downloads and
    unpacking in progress): never anything else, which a rerun could clobber."""
    check_output(out, "--out", folder=True)
    if not out.is_dir():
        return
    names = {c.info.name for c in corpora}
    for entry in sorted(out.iterdir()):
        ours = entry.name in (ARCHIVES, FOLDER_LOCK, f"{FOLDER_LOCK}.break") or (
            entry.name.startswith(".") and entry.name.endswith(PARTIAL_SUFFIX)
        )
        if ours:
            continue
        if (entry / CORPUS_RECORD).is_file():
            continue
        if entry.name in names:
            raise AudioICLError(
                f"{entry.name} holds no {CORPUS_RECORD}: it is not a corpus fetch-sources completed; remove it",
                file=str(entry),
            )
        raise AudioICLError(
            "--out holds files fetch-sources did not write: give a new or empty folder, or one fetch-sources "
            "wrote",
            file=str(entry),
        )


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def fetch_corpus(
    out: Path,
    corpus: Corpus,
    *,
    keep_archives: bool = False,
    retries: int = DEFAULT_RETRIES,
    progress: bool = True,
) -> Fetched:
    """Download the corpus's files (checked against the registry's checksums and sizes), unpack them into
    ``DIR/.<name>.partial``, check the layout, write the record and rename the folder into place."""
    info = corpus.info
    folder = out / info.name
    if (folder / CORPUS_RECORD).is_file():
        return Fetched(read_record(folder), folder, now=False)
    pooch = _pooch()
    archives = out / ARCHIVES / info.name
    downloads = [(f, _download(pooch, f, archives, retries, progress)) for f in corpus.files]
    partial = out / f".{info.name}{PARTIAL_SUFFIX}"
    _remove(partial)
    try:
        for file, path in downloads:
            _unpack(file, path, partial)
        root = partial / info.root
        wavs = count_wavs(root) if root.is_dir() else 0
        if not wavs:
            raise AudioICLError(
                f"{info.name}: no .wav files under {info.root} after unpacking (the registry's layout is not "
                "what was fetched)",
                file=str(archives),
            )
        record = CorpusRecord(
            info,
            tuple(
                FetchedFile(f.name, f.url, path.stat().st_size, pooch.file_hash(str(path)), f.verified_by)
                for f, path in downloads
            ),
            wavs,
        )
        document = {**record.to_json(), "fetched_with": f"audioicl {__version__}"}
        text = json.dumps(document, indent=1, ensure_ascii=False) + "\n"
        write_atomic(partial / CORPUS_RECORD, text, durable=True)
        os.replace(partial, folder)
    except BaseException:
        _remove(partial)
        raise
    if not keep_archives:
        _remove(archives)
        if not any((out / ARCHIVES).iterdir()):
            (out / ARCHIVES).rmdir()
    return Fetched(record, folder, now=True)
