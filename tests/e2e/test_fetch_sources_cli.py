"""``audioicl fetch-sources`` then ``audioicl build --sources`` as a user runs them, against a local server.

The server (``corpus_server``) serves small archives in each corpus's real layout and naming at the shipped
registry's URL paths; ``AUDIOICL_SOURCES_BASE_URL`` points the registry's URLs at it, and ``--registry`` gives
the shipped registry with the test archives' sizes and checksums where the real one has them (so ESC-50 and
DCASE are unverified here too). pooch and requests do every request.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

# the label-truth checks (tests/tasks) and the hostile archives (tests/sources) run here on real corpora too
sys.path[:0] = [str(Path(__file__).resolve().parents[1] / folder) for folder in ("tasks", "sources")]

import cli  # noqa: E402
import pytest  # noqa: E402
import test_label_truth as truth  # noqa: E402
from corpus_server import CorpusServer, closed_port_url, make_archives, registry_for, url_path  # noqa: E402
from test_corpora import WHY, hostile_tar, hostile_zip, refused_cleanly  # noqa: E402

from audioicl import read_meta  # noqa: E402
from audioicl.dataset.meta import find_meta_files  # noqa: E402
from audioicl.sources.corpora import REGISTRY_FILE  # noqa: E402

HANG_GUARD_S = 300  # only stops a hung test; nothing is timed
EPISODES = truth.EPISODES
REGISTRY = json.loads(REGISTRY_FILE.read_text(encoding="utf-8"))
PATHS = {f["name"]: url_path(f["url"]) for c in REGISTRY["corpora"] for f in c["files"]}
FSDD = PATHS["free-spoken-digit-dataset-1.0.9.tar.gz"]
DCASE = [
    PATHS[f"dev_{t}.zip"] for t in ("ToyCar", "ToyTrain", "bearing", "fan", "gearbox", "slider", "valve")
]


@pytest.fixture(scope="module")
def archives() -> dict[str, bytes]:
    return make_archives()


@pytest.fixture
def server(archives):
    served = CorpusServer(dict(archives)).start()
    yield served
    served.stop()


@pytest.fixture(scope="module")
def registry(archives, tmp_path_factory) -> Path:
    return registry_for(tmp_path_factory.mktemp("registry") / "registry.json", archives)


def environment(base_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(AUDIOICL_SOURCES_BASE_URL=base_url, NO_PROXY="127.0.0.1")
    return env


def audioicl(env: dict[str, str], *args: object, rc: int = 0) -> subprocess.CompletedProcess:
    proc = cli.audioicl(*args, env=env, rc=rc, timeout=HANG_GUARD_S)
    if rc:
        assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return proc


def fetch(env, out: Path, registry: Path, *args: object, rc: int = 0) -> subprocess.CompletedProcess:
    return audioicl(env, "fetch-sources", "--out", out, "--registry", registry, "--quiet", *args, rc=rc)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_fetch_then_build_validates_and_its_labels_are_true(server, registry, archives, tmp_path):
    """The README's two commands: every corpus fetched, unpacked where ``--source`` reads it, licences printed
    and recorded; a build from them validates, its labels are true of its audio, its card and manifest say
    which corpora and checksums it used."""
    env = environment(server.url)
    corpora = tmp_path / "corpora"
    refused = fetch(env, corpora, registry, rc=2)
    assert "no published checksum for 8 file(s): ESC-50-master.zip (esc50), dev_ToyCar.zip" in refused.stderr
    assert "--allow-unverified" in refused.stderr and server.fetched() == [] and not corpora.exists()

    done = fetch(env, corpora, registry, "--allow-unverified")
    assert sorted(server.fetched()) == sorted(PATHS.values())  # each file once, through the GitHub redirect
    for corpus in REGISTRY["corpora"]:
        assert f"  licence: {corpus['licence']} <{corpus['licence_url']}>" in done.stdout
        record = json.loads((corpora / corpus["name"] / "corpus.json").read_text())
        assert (record["kind"], record["licence"]) == (corpus["kind"], corpus["licence"])
        for f in record["files"]:
            assert f["sha256"] == sha256(archives[url_path(f["url"])]) and f["bytes"] == len(
                archives[url_path(f["url"])]
            )
    assert "verified (sha256)" in done.stdout and "verified (md5)" in done.stdout
    assert done.stdout.count("UNVERIFIED: no published checksum") == 8
    assert sorted(p.name for p in corpora.iterdir()) == [
        "dcase2024-task2-dev",
        "esc50",
        "freesound-one-shots",
        "fsdd",
    ]
    recordings = corpora / "fsdd/free-spoken-digit-dataset-1.0.9/recordings"
    assert len(list(recordings.glob("*_jackson_*.wav"))) == 20
    assert (
        corpora / "dcase2024-task2-dev/fan/test/section_00_source_test_anomaly_0005_noAttribute.wav"
    ).is_file()

    mark = server.mark()
    again = fetch(env, corpora, registry)  # complete corpora: nothing to check, nothing fetched
    assert again.stdout.count("(already there)") == 4 and server.fetched(mark) == []

    real = tmp_path / "real"
    built = audioicl(
        env, "build", "--sources", corpora, "--out", real, "--episodes", EPISODES, "--workers", "2"
    )
    for corpus in REGISTRY["corpora"]:
        assert f"{corpus['kind']}: {corpus['title']} (licence: {corpus['licence']})" in built.stdout
    assert "no problems found" in audioicl(env, "validate", real).stdout

    card = (real / "README.md").read_text()
    manifest = json.loads((real / "manifest.json").read_text())
    assert set(manifest["corpora"]) == {"one-shots", "digits", "backgrounds", "machines"}
    for corpus in REGISTRY["corpora"]:
        assert f"[{corpus['licence']}]({corpus['licence_url']})" in card
        used = manifest["corpora"][corpus["kind"]]
        assert used["name"] == corpus["name"] and used["licence"] == corpus["licence"]
        for f in corpus["files"]:
            digest = sha256(archives[url_path(f["url"])])
            assert f"`{f['name']}`" in card and digest in card
            assert any(g["sha256"] == digest for g in used["files"])
    assert (
        card.count("**unverified**") == 8
        and "synthesized" not in card.split("## Sound sources")[1].split("##")[0]
    )

    by_task: dict[str, list] = {}
    for episode in read_meta(find_meta_files(real)[5]):
        by_task.setdefault(episode.task, []).append(episode)
    truth.test_every_task_is_built(by_task)
    truth.test_audiocount_events_counted_by_onsets(real, by_task)
    truth.test_audiolength_label_is_the_file_duration(real, by_task)
    truth.test_audiolengthhard_label_is_the_non_silent_seconds(real, by_task)
    truth.test_morse_words_decode_to_their_labels(real, by_task)
    truth.test_operator_labels_are_one_meaning_per_filler_applied_to_the_spoken_digits(
        real, by_task, "AudioOperator", 2
    )
    truth.test_operator_labels_are_one_meaning_per_filler_applied_to_the_spoken_digits(
        real, by_task, "AudioOperatorHard", 3
    )
    truth.test_remap_mix_matches_its_references(real, by_task)
    # A machine recording is copied as it is: its bytes are a DCASE file's, whose name says normal or anomaly.
    named = {sha256(p.read_bytes()): p.name for p in (corpora / "dcase2024-task2-dev").rglob("*.wav")}
    for episode in by_task["AnomalyDetect"]:
        clips = [(c, c.label) for d in episode.demos for c in d.clips] + [
            (episode.query.target, episode.query.label)
        ]
        for clip, label in clips:
            original = named[sha256((real / clip.audio_path).read_bytes())]
            assert ("_anomaly_" if label == "Anomalous" else "_normal_") in original, (
                clip.audio_path,
                original,
            )


def test_a_checksum_mismatch_leaves_nothing_that_looks_complete(server, registry, archives, tmp_path):
    """A file that fails its checksum is discarded before anything is unpacked; an archive that cannot be
    unpacked leaves no corpus folder; a rerun fetches again only what failed."""
    env = environment(server.url)
    corpora = tmp_path / "corpora"
    licences = PATHS["licenses.txt"]
    server.replace[licences] = archives[licences].replace(b"user", b"USER")
    bad = fetch(env, corpora, registry, "--only", "one-shots", rc=2)
    assert "MD5 hash of downloaded file (licenses.txt) does not match the known hash" in bad.stderr
    assert "Nothing of it was unpacked; rerun to fetch it again" in bad.stderr
    assert sorted(p.name for p in corpora.iterdir()) == [".archives"]  # no corpus, no partial folder
    assert sorted(p.name for p in (corpora / ".archives/freesound-one-shots").iterdir()) == [
        "one_shot_percussive_sounds.zip"  # verified, kept for the rerun; the bad file is gone
    ]

    valve = PATHS["dev_valve.zip"]
    server.replace[valve] = archives[valve][: len(archives[valve]) // 2]  # unverified, and broken
    broken = fetch(env, corpora, registry, "--only", "machines", "--allow-unverified", rc=2)
    assert "dev_valve.zip cannot be unpacked" in broken.stderr
    assert sorted(p.name for p in corpora.iterdir()) == [".archives"]

    del server.replace[licences], server.replace[valve]
    (
        corpora / ".archives/dcase2024-task2-dev/dev_valve.zip"
    ).unlink()  # what the user does with a broken file
    mark = server.mark()
    fetch(env, corpora, registry, "--allow-unverified", "--only", "one-shots,machines")
    assert sorted(server.fetched(mark)) == sorted([licences, valve])
    assert (corpora / "freesound-one-shots/corpus.json").is_file() and (
        corpora / "dcase2024-task2-dev/corpus.json"
    ).is_file()


@pytest.mark.parametrize(
    "kind, case",
    [
        ("tar", "absolute"),
        ("tar", "dotdot"),
        ("tar", "symlink-etc"),
        ("tar", "hardlink-out"),
        ("tar", "fifo"),
        ("tar", "bomb"),
        ("zip", "absolute"),
        ("zip", "dotdot"),
        ("zip", "symlink-out"),
        ("zip", "bomb-declared"),
    ],
)
def test_a_hostile_archive_is_refused_by_member_and_nothing_lands_outside(
    server, archives, tmp_path, kind, case
):
    """An archive served with its checksum pinned (so it passes every check of the download) that holds an
    unsafe member is refused with one line naming the archive and the member; no corpus folder, no partial
    folder, nothing outside the output folder."""
    outside = tmp_path / "outside"
    outside.mkdir()
    if kind == "tar":
        path, only, name = FSDD, "digits", "free-spoken-digit-dataset-1.0.9.tar.gz"
        data, member = hostile_tar(case, "free-spoken-digit-dataset-1.0.9/recordings", outside)
    else:
        path, only, name = (
            PATHS["one_shot_percussive_sounds.zip"],
            "one-shots",
            "one_shot_percussive_sounds.zip",
        )
        data, member = hostile_zip(case, "one_shot_percussive_sounds", outside)
    server.files[path] = data
    registry = registry_for(tmp_path / "registry.json", {**archives, path: data})
    corpora = tmp_path / "corpora"
    refused = fetch(environment(server.url), corpora, registry, "--only", only, rc=2)
    corpus = {"digits": "fsdd", "one-shots": "freesound-one-shots"}[only]
    assert f"{corpora / '.archives' / corpus / name}: unsafe member {member!r} in {name}: " in refused.stderr
    assert WHY[case] in refused.stderr
    assert sorted(p.name for p in corpora.iterdir()) == [".archives"]  # no corpus, no partial folder, no lock
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpora", "outside", "registry.json"]
    refused_cleanly(tmp_path, outside)


def test_an_interrupted_download_is_resumed(server, registry, archives, tmp_path):
    """A cut transfer is continued with a range request: by the next attempt of the same run and, when the
    attempts run out, by the next run, which fetches nothing that was complete; a file that changed on the
    server since is fetched anew, never spliced."""
    env = environment(server.url)
    corpora = tmp_path / "corpora"
    server.drop[FSDD] = [5000]
    fetch(env, corpora, registry, "--only", "digits")
    assert server.requests() == [(FSDD, None), (FSDD, "bytes=5000-")]
    assert json.loads((corpora / "fsdd/corpus.json").read_text())["files"][0]["sha256"] == sha256(
        archives[FSDD]
    )

    fan, gearbox = PATHS["dev_fan.zip"], PATHS["dev_gearbox.zip"]
    machines = ("--only", "machines", "--allow-unverified", "--retries", "1")
    server.drop[fan] = [70_000, 30_000]
    mark = server.mark()
    cut = fetch(env, corpora, registry, *machines, rc=2)
    assert "rerun the same command to resume (100,000 bytes kept)" in cut.stderr
    assert server.requests(mark) == [*((p, None) for p in DCASE[:3]), (fan, None), (fan, "bytes=70000-")]
    assert (corpora / ".archives/dcase2024-task2-dev/dev_fan.zip.part").stat().st_size == 100_000
    assert not (corpora / "dcase2024-task2-dev").exists()

    server.drop[gearbox] = [50_000, 10_000]
    mark = server.mark()
    fetch(env, corpora, registry, *machines, rc=2)  # the fan continued and completed, then the gearbox cut
    assert server.requests(mark) == [(fan, "bytes=100000-"), (gearbox, None), (gearbox, "bytes=50000-")]

    changed = io.BytesIO(archives[gearbox])
    with zipfile.ZipFile(changed, "a") as zipped:
        zipped.writestr("gearbox/README.txt", "a new version of the archive")
    server.replace[gearbox] = changed.getvalue()
    mark = server.mark()
    fetch(env, corpora, registry, *machines)
    assert server.requests(mark) == [(gearbox, "bytes=60000-"), *((p, None) for p in DCASE[5:])]
    record = json.loads((corpora / "dcase2024-task2-dev/corpus.json").read_text())
    fetched = {f["name"]: f["sha256"] for f in record["files"]}
    assert fetched["dev_fan.zip"] == sha256(archives[fan])
    assert fetched["dev_gearbox.zip"] == sha256(changed.getvalue())  # the new version, whole
    assert (corpora / "dcase2024-task2-dev/gearbox/README.txt").is_file()
    assert not (corpora / ".archives").exists()


def test_only_fetches_the_kinds_asked_for(server, registry, tmp_path):
    env = environment(server.url)
    corpora = tmp_path / "corpora"
    fetch(env, corpora, registry, "--only", "digits,esc50", "--allow-unverified")
    assert sorted(server.fetched()) == sorted([FSDD, PATHS["ESC-50-master.zip"]])
    assert sorted(p.name for p in corpora.iterdir()) == ["esc50", "fsdd"]
    unknown = fetch(env, corpora, registry, "--only", "voices", rc=2)
    assert "--only: unknown 'voices' (kinds: one-shots, digits, backgrounds, machines;" in unknown.stderr

    real = tmp_path / "real"
    audioicl(
        env,
        "build",
        "--sources",
        corpora,
        "--out",
        real,
        "--tasks",
        "AudioOperator,AudioCountHard",
        "--episodes",
        2,
        "--k",
        1,
    )
    sources = (real / "README.md").read_text().split("## Sound sources")[1].split("\n## ")[0]
    assert "| digits | [Free Spoken Digit Dataset (FSDD) v1.0.9]" in sources
    assert "| backgrounds | [ESC-50" in sources
    assert "| one-shots | synthesized" in sources and "| machines | synthesized" in sources
    assert set(json.loads((real / "manifest.json").read_text())["corpora"]) == {"digits", "backgrounds"}


def test_no_network_is_one_line(registry, tmp_path):
    url = closed_port_url()
    done = fetch(environment(url), tmp_path / "corpora", registry, "--only", "digits", rc=2)
    assert f"cannot reach {url.removeprefix('http://')} (" in done.stderr
    assert "fetching needs the network; rerun the same command to resume" in done.stderr
    assert not (tmp_path / "corpora/fsdd").exists()
