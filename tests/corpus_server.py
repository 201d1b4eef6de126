"""A local file server for the ``audioicl fetch-sources`` tests, and small corpora in the real ones' layouts.

``CorpusServer`` serves ``{path: bytes}`` on 127.0.0.1 (a free port) as GitHub and Zenodo serve archives: a
``Range: bytes=N-`` request is answered 206 with ``Content-Range`` (all of the file when an ``If-Range`` names
another version than the strong ``ETag`` it sends); ``/<owner>/<repo>/archive/...`` answers 302
to ``/codeload/...`` (github.com sends archive downloads to codeload.github.com); query strings (Zenodo's
``?download=1``) are ignored. Faults: ``drop[path]`` is a list of cuts, each the bytes the next answer for that
path sends before closing the connection; ``replace[path]`` serves other bytes than the registry was made
for. Every GET is logged as ``(path, Range header)``.

``make_archives()`` writes each corpus's files as the real ones are laid out and named (a few recordings each:
synthesized sounds, written in the corpus's own sample rate): the Freesound one-shots zip and ``licenses.txt``,
the FSDD v1.0.9 tarball, the ESC-50 master zip, the seven DCASE 2024 Task 2 development zips.
``registry_for(path, archives)`` writes the shipped registry with every published size and checksum replaced
by the test archive's; the ones the real registry lacks stay absent, so the tests meet the same policy.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import socket
import sys
import tarfile
import threading
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from audioicl.audio import SAMPLE_RATE, pcm16_bytes
from audioicl.seeding import rng_for
from audioicl.sources.corpora import REGISTRY_FILE
from audioicl.synth import ambience, machines, percussion, speech

ZIP_TIME = (2024, 4, 1, 0, 0, 0)  # fixed member times: the same archives, hence checksums, every run
ONE_SHOT_IDS = {str(family): [100 * family + 17 * j for j in range(4)] for family in range(1, 6)}
FSDD_SPEAKERS = ("jackson", "nicolas")
ESC50_CLIPS = (  # (fold, clip, take, class, ambience family); class 48 (fireworks) is no background class
    (1, 100032, "A", 0, "animal_calls"),
    (2, 102547, "A", 7, "insects"),
    (3, 104089, "B", 9, "birds"),
    (4, 17367, "A", 10, "rain"),
    (5, 115545, "A", 48, "traffic"),
)
DCASE_TYPES = ("ToyCar", "ToyTrain", "bearing", "fan", "gearbox", "slider", "valve")
DCASE_SECONDS = 2.0  # the real recordings are 10-12 s; the builder copies them as they are
DCASE_TRAIN_NORMALS, DCASE_TEST_NORMALS, DCASE_ANOMALIES = 4, 2, 6


def url_path(url: str) -> str:
    return urlsplit(url).path


# --------------------------------------------------------------------------------------------- the server


@dataclass
class CorpusServer:
    files: dict[str, bytes]
    drop: dict[str, list[int]] = field(default_factory=dict)
    replace: dict[str, bytes] = field(default_factory=dict)
    log: list[tuple[str, str | None]] = field(default_factory=list)
    url: str = ""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def start(self) -> CorpusServer:
        self._server = _Server(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def mark(self) -> int:
        with self._lock:
            return len(self.log)

    def requests(self, since: int = 0) -> list[tuple[str, str | None]]:
        with self._lock:
            return list(self.log[since:])

    def fetched(self, since: int = 0) -> list[str]:
        return [path for path, _ in self.requests(since)]


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """A client that went away (a test's cut) is expected here; anything else is not."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler(server: CorpusServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # noqa: A002 (the base class's name)
            pass

        def do_GET(self):
            path = urlsplit(self.path).path
            if "/archive/" in path and not path.startswith("/codeload/"):
                self.send_response(302)
                self.send_header("Location", f"/codeload{path}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path = path.removeprefix("/codeload")
            with server._lock:
                server.log.append((path, self.headers.get("Range")))
                cuts = server.drop.get(path)
                cut = cuts.pop(0) if cuts else None
            data = server.replace.get(path, server.files.get(path))
            if data is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            etag = f'"{hashlib.sha256(data).hexdigest()}"'
            start = 0
            ranged = (self.headers.get("Range") or "").removeprefix("bytes=").removesuffix("-")
            if self.headers.get("If-Range") not in (None, etag):
                ranged = ""  # the file changed since: all of it
            if ranged.isdigit():
                start = int(ranged)
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
            body = data[start:]
            self.send_response(206 if start else 200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", etag)
            self.send_header("Content-Length", str(len(body)))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()
            if cut is not None:
                self.wfile.write(body[:cut])
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            self.wfile.write(body)

    return Handler


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (connection refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# --------------------------------------------------------------------------------------------- the corpora


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zipped:
        for name, data in members.items():
            zipped.writestr(zipfile.ZipInfo(name, ZIP_TIME), data, zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def _tar_gz(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as zipped,
        tarfile.open(fileobj=zipped, mode="w") as tar,
    ):
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _one_shots() -> tuple[bytes, bytes]:
    """Percussive one-shots padded to 1 s at 16 kHz (as the corpus's are), five numbered folders of Freesound
    ids; and ``licenses.txt`` (JSON: id -> author and licence)."""
    members, licences = {}, {}
    numbered = [(family, number) for family, numbers in ONE_SHOT_IDS.items() for number in numbers]
    for index, (family, number) in enumerate(numbered):
        wave = np.zeros(SAMPLE_RATE, dtype=np.float32)
        sound = percussion.one_shot(11, index).wave[:SAMPLE_RATE]
        wave[: len(sound)] = sound
        members[f"one_shot_percussive_sounds/{family}/{number}.wav"] = pcm16_bytes(wave)
        licences[str(number)] = {
            "username": f"user{number}",
            "license": "http://creativecommons.org/licenses/by/3.0/",
        }
    return _zip(members), json.dumps(licences, indent=1).encode()


def _fsdd() -> bytes:
    """FSDD v1.0.9's tarball: ``recordings/<digit>_<speaker>_<n>.wav`` at 8 kHz (espeak-ng voices stand in
    for the speakers), beside the repository's README."""
    top = "free-spoken-digit-dataset-1.0.9"
    members = {f"{top}/README.md": b"# Free Spoken Digit Dataset (FSDD)\n"}
    for speaker, voice in zip(FSDD_SPEAKERS, speech.VOICES, strict=False):
        for digit in range(10):
            for take in range(2):
                wave = speech.speak_digit(digit, voice, 8000)
                members[f"{top}/recordings/{digit}_{speaker}_{take}.wav"] = pcm16_bytes(
                    wave * (1 - 0.1 * take), 8000
                )
    return _tar_gz(members)


def _esc50() -> bytes:
    """ESC-50's master zip: ``audio/<fold>-<clip>-<take>-<class>.wav``, 5 s at 44.1 kHz, beside meta and LICENSE."""
    top = "ESC-50-master"
    members = {f"{top}/LICENSE": b"Attribution of each clip (test copy)\n", f"{top}/README.md": b"# ESC-50\n"}
    rows = ["filename,fold,target,category,esc10,src_file,take"]
    for fold, clip, take, target, family in ESC50_CLIPS:
        name = f"{fold}-{clip}-{take}-{target}.wav"
        wave = ambience.background(family, rng_for(5, "esc50", name), 5.0, sr=44100)
        members[f"{top}/audio/{name}"] = pcm16_bytes(wave, 44100)
        rows.append(f"{name},{fold},{target},{family},False,{clip},{take}")
    members[f"{top}/meta/esc50.csv"] = ("\n".join(rows) + "\n").encode()
    return _zip(members)


def _dcase(machine_type: str) -> bytes:
    """One DCASE 2024 Task 2 development zip: ``<type>/train`` normals, ``<type>/test`` normals and anomalies,
    named ``section_00_source_<split>_<normal|anomaly>_<nnnn>_<attributes>.wav``, and ``attributes_00.csv``."""
    unit = machines.machine_unit(machine_type, rng_for(3, "dcase", machine_type))
    kinds = machines.ANOMALY_KINDS[machine_type]
    members, rows = {}, ["file_name,d1p,d1v"]
    plan = [("train", "normal", i) for i in range(DCASE_TRAIN_NORMALS)]
    plan += [("test", "normal", i) for i in range(DCASE_TEST_NORMALS)]
    plan += [("test", "anomaly", i) for i in range(DCASE_ANOMALIES)]
    for split, state, i in plan:
        name = f"{machine_type}/{split}/section_00_source_{split}_{state}_{i:04d}_noAttribute.wav"
        rng = rng_for(3, "dcase", name)
        anomaly = kinds[i % len(kinds)] if state == "anomaly" else None
        members[name] = pcm16_bytes(machines.machine_clip(unit, rng, anomaly, seconds=DCASE_SECONDS))
        rows.append(f"{name},noAttribute,")
    members[f"{machine_type}/attributes_00.csv"] = ("\n".join(rows) + "\n").encode()
    return _zip(members)


def make_archives() -> dict[str, bytes]:
    """Every file of the registry, keyed by its URL path."""
    one_shots, licences = _one_shots()
    archives = {
        "one_shot_percussive_sounds.zip": one_shots,
        "licenses.txt": licences,
        "free-spoken-digit-dataset-1.0.9.tar.gz": _fsdd(),
        "ESC-50-master.zip": _esc50(),
        **{f"dev_{t}.zip": _dcase(t) for t in DCASE_TYPES},
    }
    registry = json.loads(REGISTRY_FILE.read_text(encoding="utf-8"))
    return {url_path(f["url"]): archives[f["name"]] for c in registry["corpora"] for f in c["files"]}


def registry_for(path: Path, archives: dict[str, bytes]) -> Path:
    """The shipped registry, each published size and checksum replaced by the test archive's."""
    registry = json.loads(REGISTRY_FILE.read_text(encoding="utf-8"))
    for corpus in registry["corpora"]:
        for f in corpus["files"]:
            data = archives[url_path(f["url"])]
            for key, value in (
                ("size", len(data)),
                ("sha256", hashlib.sha256(data).hexdigest()),
                ("md5", hashlib.md5(data).hexdigest()),
            ):
                if f[key] is not None:
                    f[key] = value
    path.write_text(json.dumps(registry, indent=1), encoding="utf-8")
    return path
