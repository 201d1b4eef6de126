"""``manifest.json``: what a build wrote, with a hash for every file and one fingerprint for the dataset.

No timestamps or machine-dependent values beyond the options themselves, so that the same build gives the
same bytes. The fingerprint is the SHA-256 of the ``sha256sum``-style lines ``<sha256>  <path>\\n`` of every
listed file (``data/`` and ``meta/``), sorted by path: ``sha256sum`` can check the files, and renaming a
file changes the fingerprint.

``read_manifest`` is the one reader of the file (build, validate and the run record all go through it); it
accepts the file lists of other tools' manifests too (``files`` or any key; a list of ``{path, ...}`` or a
``{path: {...}}`` map; ``bytes`` or ``size``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audioicl import __version__
from audioicl.errors import AudioICLError
from audioicl.files import write_atomic

MANIFEST_NAME = "manifest.json"


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative to the dataset root, with "/" separators
    sha256: str
    bytes: int


def fingerprint(entries: Iterable[FileEntry]) -> str:
    lines = "".join(f"{e.sha256}  {e.path}\n" for e in sorted(entries, key=lambda e: e.path))
    return hashlib.sha256(lines.encode()).hexdigest()


def file_entry(root: Path, path: str) -> FileEntry:
    data = (root / path).read_bytes()
    return FileEntry(path, hashlib.sha256(data).hexdigest(), len(data))


def write_manifest(
    root: Path, options: dict, entries: Iterable[FileEntry], totals: dict, corpora: dict | None = None
) -> str:
    """Write ``ROOT/manifest.json`` atomically; returns the dataset fingerprint. ``corpora``: the real corpora
    the build drew from (kind → record with licence and checksums), when it drew from any."""
    entries = sorted(entries, key=lambda e: e.path)
    digest = fingerprint(entries)
    document = {
        "tool": "audioicl",
        "version": __version__,
        "seed": options.get("seed"),
        "options": options,
        **({"corpora": corpora} if corpora else {}),
        "fingerprint": digest,
        "totals": totals,
        "files": [{"path": e.path, "sha256": e.sha256, "bytes": e.bytes} for e in entries],
    }
    write_atomic(root / MANIFEST_NAME, json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    return digest


@dataclass(frozen=True)
class ListedFile:
    """A file as a manifest lists it; ``sha256`` and ``bytes`` are None where the manifest does not say."""

    path: str
    sha256: str | None
    bytes: int | None


def _listed_files(document: dict[str, Any]) -> tuple[ListedFile, ...] | None:
    for value in (document.get("files"), *document.values()):
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            return tuple(
                ListedFile(p, v.get("sha256"), v.get("bytes", v.get("size"))) for p, v in value.items()
            )
        if isinstance(value, list) and value and all(isinstance(v, dict) and "path" in v for v in value):
            return tuple(ListedFile(v["path"], v.get("sha256"), v.get("bytes", v.get("size"))) for v in value)
    return None


@dataclass(frozen=True)
class Manifest:
    """``ROOT/manifest.json`` as read: the whole JSON object, and the sha256 of the file's bytes."""

    path: Path
    document: dict[str, Any]
    sha256: str

    @property
    def fingerprint(self) -> str | None:
        """The dataset fingerprint; None when the manifest records none (one not written by ``build``)."""
        value = self.document.get("fingerprint")
        return value if isinstance(value, str) else None

    @property
    def files(self) -> tuple[ListedFile, ...] | None:
        """The listed files (the first recognisable file list); None when there is none."""
        return _listed_files(self.document)


def read_manifest(root: str | os.PathLike) -> Manifest | None:
    """``ROOT/manifest.json``, or None when the dataset has none; one that is not a JSON object raises
    ``AudioICLError`` naming the file."""
    path = Path(root) / MANIFEST_NAME
    if not path.is_file():
        return None
    data = path.read_bytes()
    try:
        document = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # also UnicodeDecodeError, a number past 4,300 digits
        raise AudioICLError(f"manifest is not valid JSON: {exc}", file=str(path)) from exc
    if not isinstance(document, dict):
        raise AudioICLError(f"manifest is not a JSON object but {type(document).__name__}", file=str(path))
    return Manifest(path, document, hashlib.sha256(data).hexdigest())


def read_fingerprint(root: str | os.PathLike) -> str | None:
    """The fingerprint recorded in ``ROOT/manifest.json``, or None when the dataset has no manifest."""
    manifest = read_manifest(root)
    return manifest.fingerprint if manifest is not None else None


def dataset_fingerprint(root: str | os.PathLike) -> str | None:
    """What pins the dataset in a run record: the manifest's fingerprint, else (a manifest without one, or
    one that cannot be read) the sha256 of ``manifest.json`` itself; None when there is no manifest."""
    try:
        manifest = read_manifest(root)
    except AudioICLError:
        return hashlib.sha256((Path(root) / MANIFEST_NAME).read_bytes()).hexdigest()
    if manifest is None:
        return None
    return manifest.fingerprint if manifest.fingerprint is not None else manifest.sha256
