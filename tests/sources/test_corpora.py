"""Tests of audioicl.sources.corpora that need no server: the registry, mirrors, unpacking, records and provenance,
and what a build from fetched corpora writes. Fetching runs against a local server in
tests/e2e/test_fetch_sources_cli.py."""

from __future__ import annotations

import gzip
import io
import json
import stat
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
    UNPACK_FACTOR,
    UNPACK_FLOOR_BYTES,
    ZIP_RATIO_MIN_BYTES,
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
    unpack_limit,
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
    with pytest.raises(AudioICLError, match="unsafe member '../outside.wav' in evil.zip"):
        _unpack(RemoteFile("evil.zip", "https://x/evil.zip", "zip", None, None, None), evil, tmp_path / "e")
    tarred = tmp_path / "evil.tar"
    with tarfile.open(tarred, "w") as tar:
        info = tarfile.TarInfo("../outside.wav")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(AudioICLError, match="unsafe member '../outside.wav' in evil.tar"):
        _unpack(RemoteFile("evil.tar", "https://x/evil.tar", "tar", None, None, None), tarred, tmp_path / "t")
    assert not (tmp_path / "outside.wav").exists()
    broken = tmp_path / "broken.zip"
    broken.write_bytes(good.read_bytes()[:40])
    with pytest.raises(AudioICLError, match="broken.zip cannot be unpacked"):
        _unpack(
            RemoteFile("broken.zip", "https://x/broken.zip", "zip", None, None, None), broken, tmp_path / "b"
        )


# ------------------------------------------------------------------------------------- hostile archives
# Each builder returns the archive and the name of the member it must be refused for. ``top`` is the folder
# the archive's good members lie in (a corpus's layout, for the fetch-sources tests that serve them);
# ``outside`` is a folder out of the unpacking target that must stay empty (absolute paths point into it);
# a member written through a link to /etc is named for the folder above it (unique per test).

GOOD_WAV = b"RIFF-not-really-a-wav"
BOMB_BYTES = 80 << 20  # beyond UNPACK_FLOOR_BYTES and UNPACK_FACTOR times any of these archives


def _tar_member(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", link: str = "", size=None):
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode, info.mtime = kind, link, 0o644, 0
    info.size = len(data) if size is None else size
    if kind == tarfile.CHRTYPE:
        info.devmajor, info.devminor = 1, 3  # /dev/null's numbers
    return info, data


def _tar_gz(members: list[tuple[tarfile.TarInfo, bytes]], *, declared_only: bool = False) -> bytes:
    """A gzipped tar; ``declared_only``: headers and data as given, no end: the last member may declare a
    size whose data is not there."""
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=1) as gz:
        if declared_only:
            for info, data in members:
                gz.write(info.tobuf(tarfile.GNU_FORMAT) + data + bytes(-len(data) % tarfile.BLOCKSIZE))
        else:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
                for info, data in members:
                    tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return raw.getvalue()


def path_max_chain(top: str, outside: Path) -> tuple[list[tuple[str, str]], str]:
    """The members of CVE-2025-4517's archive, as (name, symlink target; "/" for a folder, "" for a file): 16
    nested folders of 247 characters, each beside a one-letter link to it; a link through all 16 letters whose
    real path passes PATH_MAX (``os.path.realpath`` gives up on it and answers the rest as text); a link
    ``escape`` through that one and up, whose text stays inside the folder while the kernel, following the
    links, lands in ``outside`` (the tests unpack into ``tmp_path/a/b/into``, ``outside`` is
    ``tmp_path/outside``); and a file written through ``escape``. Refused at the first member that passes
    through links: nothing is written."""
    steps, folder = "abcdefghijklmnop", "d" * 247
    members, path = [], top
    for step in steps:
        members += [(f"{path}/{folder}", "/"), (f"{path}/{step}", folder)]
        path = f"{path}/{folder}"
    long_link = f"{'/'.join(steps)}/{'l' * 254}"
    members.append((f"{top}/{long_link}", "../" * len(steps)))  # back to top, through 16 real folders
    ups = len(top.split("/")) + 3  # from top to tmp_path: top's parts, into, b, a
    members.append((f"{top}/escape", f"{long_link}/" + "../" * ups + outside.name))
    members.append((f"{top}/escape/audioicl-test-{outside.parent.name}.wav", ""))
    return members, f"{top}/{long_link}"


def hostile_tar(case: str, top: str, outside: Path) -> tuple[bytes, str]:
    good = _tar_member(f"{top}/0_good_0.wav", data=GOOD_WAV)
    if case == "path-max-chain":
        chain, refused = path_max_chain(top, outside)
        members = [good]
        for name, link in chain:
            kind = tarfile.DIRTYPE if link == "/" else tarfile.SYMTYPE if link else tarfile.REGTYPE
            members.append(
                _tar_member(name, kind, data=b"" if link else b"x", link="" if link == "/" else link)
            )
        return _tar_gz(members), refused
    if case == "through-link":
        inside = _tar_member(f"{top}/in", tarfile.SYMTYPE, link=".")
        return _tar_gz([good, inside, _tar_member(f"{top}/in/x.wav", data=b"x")]), f"{top}/in/x.wav"
    if case == "bomb":
        return _tar_gz([good, _tar_member(f"{top}/bomb.wav", data=bytes(BOMB_BYTES))]), f"{top}/bomb.wav"
    if case == "bomb-declared":
        bomb = _tar_member(f"{top}/bomb.wav", size=10 << 30)
        return _tar_gz([good, bomb], declared_only=True), f"{top}/bomb.wav"
    name, member = {
        "absolute": (str(outside / "x.wav"), lambda n: _tar_member(n, data=b"x")),
        "dotdot": (f"{top}/../../../x.wav", lambda n: _tar_member(n, data=b"x")),
        "symlink-etc": (f"{top}/etc", lambda n: _tar_member(n, tarfile.SYMTYPE, link="/etc")),
        "symlink-out": (f"{top}/up", lambda n: _tar_member(n, tarfile.SYMTYPE, link="../../../..")),
        "hardlink-out": (f"{top}/h.wav", lambda n: _tar_member(n, tarfile.LNKTYPE, link="../../../x.wav")),
        "hardlink-absolute": (f"{top}/h.wav", lambda n: _tar_member(n, tarfile.LNKTYPE, link="/etc/passwd")),
        "device": (f"{top}/null", lambda n: _tar_member(n, tarfile.CHRTYPE)),
        "fifo": (f"{top}/fifo", lambda n: _tar_member(n, tarfile.FIFOTYPE)),
    }[case]
    members = [good, member(name)]
    if case.startswith("symlink"):  # and a member written through the link, which must never land
        members.append(_tar_member(f"{name}/audioicl-test-{outside.parent.name}.wav", data=b"x"))
    return _tar_gz(members), name


def _zip_entry(name: str, mode: int = 0) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, (2024, 4, 1, 0, 0, 0))
    if mode:
        info.create_system, info.external_attr = 3, mode << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def hostile_zip(case: str, top: str, outside: Path) -> tuple[bytes, str]:
    name = {
        "absolute": str(outside / "x.wav"),
        "dotdot": f"{top}/../../../x.wav",
        "symlink-etc": f"{top}/etc",
        "symlink-out": f"{top}/up",
        "fifo": f"{top}/fifo",
        "bomb-ratio": f"{top}/bomb.wav",
        "bomb-declared": f"{top}/bomb.wav",
        # members each small enough for the ratio bound, together beyond the floor: the first past it
        "bomb-total": f"{top}/1/b{UNPACK_FLOOR_BYTES // (ZIP_RATIO_MIN_BYTES - 1):03d}.wav",
        "through-link": f"{top}/in/x.wav",
        "path-max-chain": "",
    }[case]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr(_zip_entry(f"{top}/1/good.wav"), GOOD_WAV)
        if case == "path-max-chain":
            chain, name = path_max_chain(top, outside)
            for member, link in chain:
                if link == "/":
                    zipped.writestr(_zip_entry(f"{member}/", stat.S_IFDIR | 0o755), b"")
                elif link:
                    zipped.writestr(_zip_entry(member, stat.S_IFLNK | 0o777), link)
                else:
                    zipped.writestr(_zip_entry(member), b"x")
        elif case == "through-link":
            zipped.writestr(_zip_entry(f"{top}/in", stat.S_IFLNK | 0o777), ".")
            zipped.writestr(_zip_entry(name), b"x")
        elif case == "bomb-total":
            for i in range(BOMB_BYTES // ZIP_RATIO_MIN_BYTES):
                zipped.writestr(_zip_entry(f"{top}/1/b{i:03d}.wav"), bytes(ZIP_RATIO_MIN_BYTES - 1))
        elif case.startswith("symlink"):  # and a member written through the link, which must never land
            target = "/etc" if case == "symlink-etc" else "../../../.."
            zipped.writestr(_zip_entry(name, stat.S_IFLNK | 0o777), target)
            zipped.writestr(_zip_entry(f"{name}/audioicl-test-{outside.parent.name}.wav"), b"x")
        elif case == "fifo":
            zipped.writestr(_zip_entry(name, stat.S_IFIFO | 0o644), b"")
        elif case == "bomb-ratio":
            zipped.writestr(_zip_entry(name), bytes(4 * ZIP_RATIO_MIN_BYTES))
        elif case == "bomb-declared":  # the central directory says 3 GiB: only the declaration is a bomb
            zipped.writestr(_zip_entry(name), b"x" * 1000)
            zipped.getinfo(name).file_size = 3 << 30
        else:
            zipped.writestr(_zip_entry(name), b"x")
    return buffer.getvalue(), name


TAR_CASES = (
    "absolute",
    "dotdot",
    "symlink-etc",
    "symlink-out",
    "hardlink-out",
    "hardlink-absolute",
    "device",
    "fifo",
    "bomb",
    "bomb-declared",
    "path-max-chain",
    "through-link",
)
ZIP_CASES = (
    "absolute",
    "dotdot",
    "symlink-etc",
    "symlink-out",
    "fifo",
    "bomb-ratio",
    "bomb-declared",
    "bomb-total",
    "path-max-chain",
    "through-link",
)
WHY = {
    "absolute": "its path is absolute",
    "dotdot": "it would be written outside the folder",
    "symlink-etc": "it links to an absolute path ('/etc')",
    "symlink-out": "it links outside the folder ('../../../..')",
    "hardlink-out": "it links outside the folder ('../../../x.wav')",
    "hardlink-absolute": "it links to an absolute path ('/etc/passwd')",
    "device": "it is a device file, FIFO or socket",
    "fifo": "it is a device file, FIFO or socket",
    "bomb": "an archive bomb?",
    "bomb-declared": "an archive bomb?",
    "bomb-ratio": "an archive bomb?",
    "bomb-total": "an archive bomb?",
    "path-max-chain": "it passes through more than 8 links",
    "through-link": "it would be written through a link",
}


def refused_cleanly(root: Path, outside: Path) -> None:
    """Nothing of a refused archive outside its target: ``outside`` is empty, no ``x.wav`` under ``root``, no
    file written through a link (to /etc, or up from the target, as far as /)."""
    assert not any(outside.iterdir()), sorted(outside.iterdir())
    assert not list(root.rglob("x.wav"))
    marker = f"audioicl-test-{outside.parent.name}.wav"
    for folder in (Path("/etc"), outside, root, *root.parents):
        assert not (folder / marker).exists(), folder / marker


@pytest.mark.parametrize("case", TAR_CASES)
def test_a_hostile_tar_is_refused_naming_its_member(tmp_path, case):
    """Every unsafe member is refused by name before anything is written, by checks of our own that do not
    depend on the interpreter's tar filter (which CVE-2025-4517's chain defeats before Python 3.11.13)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    data, member = hostile_tar(case, "top/recordings", outside)
    archive = tmp_path / "a" / "evil.tar.gz"
    archive.parent.mkdir()
    archive.write_bytes(data)
    into = tmp_path / "a" / "b" / "into"
    with pytest.raises(AudioICLError) as caught:
        _unpack(RemoteFile("evil.tar.gz", "https://x/evil.tar.gz", "tar", None, None, None), archive, into)
    assert caught.value.file == str(archive)
    assert f"unsafe member {member!r} in evil.tar.gz: " in caught.value.message
    assert WHY[case] in caught.value.message
    assert "\n" not in str(caught.value)
    assert not any(into.rglob("*"))  # refused before anything was written
    refused_cleanly(tmp_path, outside)


@pytest.mark.parametrize("case", ZIP_CASES)
def test_a_hostile_zip_is_refused_naming_its_member(tmp_path, case):
    outside = tmp_path / "outside"
    outside.mkdir()
    data, member = hostile_zip(case, "top", outside)
    archive = tmp_path / "a" / "evil.zip"
    archive.parent.mkdir()
    archive.write_bytes(data)
    into = tmp_path / "a" / "b" / "into"
    with pytest.raises(AudioICLError) as caught:
        _unpack(RemoteFile("evil.zip", "https://x/evil.zip", "zip", None, None, None), archive, into)
    assert caught.value.file == str(archive)
    assert f"unsafe member {member!r} in evil.zip: " in caught.value.message
    assert WHY[case] in caught.value.message
    assert "\n" not in str(caught.value)
    assert not any(into.rglob("*"))
    refused_cleanly(tmp_path, outside)


@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_a_link_already_in_the_folder_is_not_written_through(tmp_path, kind):
    """A link that is on disk before the archive (made by anyone) is refused on the way, not followed."""
    outside = tmp_path / "outside"
    outside.mkdir()
    into = tmp_path / "into"
    (into / "top").mkdir(parents=True)
    (into / "top" / "recordings").symlink_to(outside, target_is_directory=True)
    if kind == "tar":
        data = _tar_gz([_tar_member("top/recordings/x.wav", data=b"x")])
    else:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as zipped:
            zipped.writestr(_zip_entry("top/recordings/x.wav"), b"x")
        data = buffer.getvalue()
    archive = tmp_path / f"a.{kind}"
    archive.write_bytes(data)
    with pytest.raises(AudioICLError, match="it would be written through a link"):
        _unpack(RemoteFile(archive.name, f"https://x/{archive.name}", kind, None, None, None), archive, into)
    assert not any(outside.iterdir())


def test_links_inside_the_folder_are_kept_and_bounds_follow_the_pinned_size(tmp_path):
    """A link to a file of the archive is unpacked (tar: a symlink and a hard link; zip: a symlink); the
    size bound is the larger of the floor and UNPACK_FACTOR times the registry's size."""
    tarred = _tar_gz(
        [
            _tar_member("top/a.wav", data=b"a"),
            _tar_member("top/s.wav", tarfile.SYMTYPE, link="a.wav"),
            _tar_member("top/h.wav", tarfile.LNKTYPE, link="top/a.wav"),
        ]
    )
    (tmp_path / "ok.tar.gz").write_bytes(tarred)
    _unpack(
        RemoteFile("ok.tar.gz", "https://x/ok.tar.gz", "tar", None, None, None),
        tmp_path / "ok.tar.gz",
        tmp_path / "t",
    )
    assert [(tmp_path / "t/top" / n).read_bytes() for n in ("a.wav", "s.wav", "h.wav")] == [b"a"] * 3
    assert (tmp_path / "t/top/s.wav").is_symlink()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        zipped.writestr(_zip_entry("top/a.wav"), b"a")
        zipped.writestr(_zip_entry("top/s.wav", stat.S_IFLNK | 0o777), "a.wav")
    (tmp_path / "ok.zip").write_bytes(buffer.getvalue())
    _unpack(
        RemoteFile("ok.zip", "https://x/ok.zip", "zip", None, None, None), tmp_path / "ok.zip", tmp_path / "z"
    )
    assert (tmp_path / "z/top/s.wav").is_symlink() and (tmp_path / "z/top/s.wav").read_bytes() == b"a"

    small = RemoteFile("f.zip", "https://x/f.zip", "zip", None, None, None)
    assert unpack_limit(small, tmp_path / "ok.zip") == UNPACK_FLOOR_BYTES
    pinned = RemoteFile("f.zip", "https://x/f.zip", "zip", 10 << 20, None, None)
    assert unpack_limit(pinned, tmp_path / "ok.zip") == UNPACK_FACTOR * (10 << 20)


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
