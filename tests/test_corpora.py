"""Tests of audioicl.sources.corpora that need no server: the registry, mirrors, unpacking, records and provenance,
and what a build from fetched corpora writes. Fetching runs against a local server in
tests/e2e/test_fetch_sources_cli.py."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest
from test_sources import corpora as source_folders  # noqa: F401  (the fixture: tiny corpora in their layouts)

from audioicl import AudioICLError, BuildOptions, build
from audioicl.sources.banks import SOURCE_KINDS, parse_sources
from audioicl.sources.corpora import (
    BASE_URL_ENV,
    CORPUS_RECORD,
    REGISTRY_FILE,
    CorpusInfo,
    CorpusRecord,
    FetchedFile,
    RemoteFile,
    _unpack,
    check_out,
    fetched_sources,
    find_record,
    load_registry,
    mirrored,
    select,
    unverified_files,
)


def test_the_shipped_registry_pins_what_was_found_and_nothing_else():
    corpora = load_registry()
    assert tuple(c.info.kind for c in corpora) == SOURCE_KINDS
    fsdd = {c.info.name: c for c in corpora}["fsdd"].files[0]
    assert (fsdd.size, fsdd.sha256) == (
        11975353,
        "8bc44cde129d505cbbb6b365c09f80c663f2aa77578afc634e6141a2f87100c0",
    )
    assert fsdd.checksum == f"sha256:{fsdd.sha256}" and fsdd.verified_by == "sha256"
    one_shots = {c.info.name: c for c in corpora}["freesound-one-shots"].files
    assert [f.verified_by for f in one_shots] == ["md5", "md5"]
    missing = [(c.info.name, f.name) for c, f in unverified_files(corpora)]
    assert missing == [("esc50", "ESC-50-master.zip")] + [
        ("dcase2024-task2-dev", f"dev_{t}.zip")
        for t in ("ToyCar", "ToyTrain", "bearing", "fan", "gearbox", "slider", "valve")
    ]
    assert all(f.note for c in corpora for f in c.files)  # every value (or its absence) says where it is from


def _registry(tmp_path: Path, change) -> Path:
    document = json.loads(REGISTRY_FILE.read_text())
    change(document["corpora"])
    path = tmp_path / "registry.json"
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c[0]["files"][0].update(sha256="ABC"), "sha256 must be lower-case hex"),
        (lambda c: c[1].update(kind="voices"), "kind 'voices' is not one of"),
        (lambda c: c[2].update(root="../elsewhere"), "must be a path inside the corpus folder"),
        (lambda c: c[3]["files"][0].update(url="ftp://x/y.zip"), r"not an http\(s\) URL"),
        (lambda c: c[3]["files"][0].update(unpack="rar"), "unpack must be zip, tar or null"),
        (lambda c: c[0].update(kind="digits"), "a corpus kind appears twice"),
        (lambda c: c[0].pop("licence"), "licence must be a non-empty string"),
    ],
)
def test_a_malformed_registry_is_refused_with_its_file(tmp_path, change, message):
    path = _registry(tmp_path, change)
    with pytest.raises(AudioICLError, match=message) as caught:
        load_registry(path)
    assert caught.value.file == str(path)


def test_only_selects_by_kind_or_name():
    corpora = load_registry()
    assert [c.info.name for c in select(corpora, ["digits", "esc50"])] == ["fsdd", "esc50"]
    assert select(corpora, []) == corpora
    with pytest.raises(AudioICLError, match="--only: unknown 'voices'"):
        select(corpora, ["voices"])


def test_the_base_url_replaces_scheme_and_host_only(monkeypatch):
    url = "https://zenodo.org/records/10902294/files/dev_fan.zip?download=1"
    monkeypatch.delenv(BASE_URL_ENV, raising=False)
    assert mirrored(url) == url
    monkeypatch.setenv(BASE_URL_ENV, "http://127.0.0.1:8000/mirror/")
    assert mirrored(url) == "http://127.0.0.1:8000/mirror/records/10902294/files/dev_fan.zip?download=1"


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        for name, data in members.items():
            zipped.writestr(name, data)
    return buffer.getvalue()


def test_unpacking_skips_resource_forks_and_refuses_paths_out_of_the_folder(tmp_path):
    good = tmp_path / "good.zip"
    good.write_bytes(_zip({"top/a.wav": b"a", "__MACOSX/top/._a.wav": b"fork", "top/._b.wav": b"fork"}))
    _unpack(RemoteFile("good.zip", "https://x/good.zip", "zip", None, None, None), good, tmp_path / "out")
    assert sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*")) == [
        "top",
        "top/a.wav",
    ]

    evil = tmp_path / "evil.zip"
    evil.write_bytes(_zip({"../outside.wav": b"x"}))
    with pytest.raises(AudioICLError, match="unsafe path '../outside.wav'"):
        _unpack(RemoteFile("evil.zip", "https://x/evil.zip", "zip", None, None, None), evil, tmp_path / "e")
    tarred = tmp_path / "evil.tar"
    with tarfile.open(tarred, "w") as tar:
        info = tarfile.TarInfo("../outside.wav")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(AudioICLError, match="evil.tar cannot be unpacked"):
        _unpack(RemoteFile("evil.tar", "https://x/evil.tar", "tar", None, None, None), tarred, tmp_path / "t")
    assert not (tmp_path / "outside.wav").exists()
    broken = tmp_path / "broken.zip"
    broken.write_bytes(good.read_bytes()[:40])
    with pytest.raises(AudioICLError, match="broken.zip cannot be unpacked"):
        _unpack(
            RemoteFile("broken.zip", "https://x/broken.zip", "zip", None, None, None), broken, tmp_path / "b"
        )


INFO = {c.info.kind: c.info for c in load_registry()}


def _record(folder: Path, kind: str, sha256: str = "0" * 64, root: str = ".") -> CorpusRecord:
    info = INFO[kind]
    info = CorpusInfo(**{**info.__dict__, "root": root})
    record = CorpusRecord(info, (FetchedFile("x.zip", "https://x/x.zip", 10, sha256, "unverified"),), 3)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CORPUS_RECORD).write_text(json.dumps(record.to_json()))
    return record


def test_a_folder_inside_a_fetched_corpus_finds_its_record(tmp_path):
    record = _record(tmp_path / "fsdd", "digits", root="v1/recordings")
    (tmp_path / "fsdd/v1/recordings").mkdir(parents=True)
    assert find_record(tmp_path / "fsdd/v1/recordings", "digits") == record
    assert find_record(tmp_path / "fsdd/v1/recordings", "backgrounds") is None  # another kind's folder
    assert find_record(tmp_path / "elsewhere", "digits") is None
    assert fetched_sources(tmp_path) == (("digits", str((tmp_path / "fsdd/v1/recordings").resolve())),)

    _record(tmp_path / "fsdd-copy", "digits")
    with pytest.raises(AudioICLError, match="two corpora provide digits sounds"):
        fetched_sources(tmp_path)
    with pytest.raises(AudioICLError, match="no fetched corpus here"):
        fetched_sources(tmp_path / "fsdd/v1")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / CORPUS_RECORD).write_text("{")
    with pytest.raises(AudioICLError, match="unreadable corpus record") as caught:
        find_record(tmp_path / "broken", "digits")
    assert caught.value.file == str(tmp_path / "broken" / CORPUS_RECORD)


def test_the_output_folder_holds_only_what_fetch_sources_writes(tmp_path):
    corpora = load_registry()
    check_out(tmp_path / "new", corpora)
    (tmp_path / ".archives").mkdir()
    (tmp_path / ".esc50.partial").mkdir()
    _record(tmp_path / "fsdd", "digits")
    check_out(tmp_path, corpora)
    (tmp_path / "esc50").mkdir()
    with pytest.raises(AudioICLError, match="esc50 holds no corpus.json"):
        check_out(tmp_path, corpora)
    (tmp_path / "esc50").rmdir()
    (tmp_path / "thesis.tex").write_text("x")
    with pytest.raises(AudioICLError, match="files fetch-sources did not write"):
        check_out(tmp_path, corpora)


def test_a_build_from_a_fetched_corpus_carries_its_licence_and_checksums(source_folders, tmp_path):  # noqa: F811
    """The records are found above the folders ``--source`` names; card, manifest and build state say which
    corpora and checksums the build used; rebuilding into the folder from other corpus files is refused."""
    corpora = source_folders
    _record(corpora["digits"], "digits")
    _record(corpora["backgrounds"], "backgrounds", sha256="1" * 64)
    sources = parse_sources([f"{kind}={folder}" for kind, folder in corpora.items()])
    options = BuildOptions(episodes=2, shots=(1,), tasks=("AudioOperator", "AudioCountHard"), sources=sources)
    out = tmp_path / "ds"
    summary = build(out, options)
    assert {u.kind: u.record is not None for u in summary.corpora} == {
        "backgrounds": True,
        "digits": True,
        "machines": False,
        "one-shots": False,
    }
    card = (out / "README.md").read_text()
    section = card.split("## Sound sources and licences")[1].split("\n## ")[0]
    assert f"[{INFO['digits'].licence}]({INFO['digits'].licence_url})" in section
    assert "sha256 `" + "1" * 64 + "`, **unverified** (no published checksum)" in section
    assert section.count("a corpus folder given with `--source`") == 2  # one-shots, machines: no record
    assert INFO["backgrounds"].citation in section and "`esc50/ESC-50-master/LICENSE`" in section
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["corpora"]["digits"]["files"][0]["sha256"] == "0" * 64
    assert manifest["corpora"]["machines"] is None

    _record(corpora["digits"], "digits", sha256="2" * 64)  # the corpus was fetched again, other bytes
    try:
        with pytest.raises(AudioICLError, match="the real corpora .* differ"):
            build(out, options)
    finally:
        (corpora["digits"] / CORPUS_RECORD).unlink()
        (corpora["backgrounds"] / CORPUS_RECORD).unlink()


def test_a_synthesized_build_says_so_and_keeps_its_manifest(tmp_path):
    out = tmp_path / "ds"
    build(out, BuildOptions(episodes=1, shots=(1,), tasks=("MorseCode",)))
    section = (out / "README.md").read_text().split("## Sound sources and licences")[1].split("\n## ")[0]
    assert section.count("| synthesized: ") == 4
    assert "corpora" not in json.loads((out / "manifest.json").read_text())
    assert "corpora" not in json.loads((out / "build.json").read_text())
