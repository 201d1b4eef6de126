"""``audioicl download`` as a user runs it, against a local hub (``hub_server``) through ``HF_ENDPOINT``.

The real client (huggingface_hub) does every request; the hub serves a few episodes of the release in its
original layout: meta lines from the reference files, byte for byte, and audio the tests make.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import cli
import pytest
from hub_server import original_release, tone_wav
from reference_data import REFERENCE

pytestmark = pytest.mark.skipif(
    not sorted(REFERENCE.glob("meta_k*.jsonl")), reason="reference meta files absent (shared/reference)"
)

REPO = "hongzz-18/AudioICL-Bench"
HANG_GUARD_S = 120  # only stops a hung test; nothing is timed


@pytest.fixture(scope="module")
def release() -> dict[str, bytes]:
    """One episode of each task for every k, as released (the missing-files test takes two)."""
    return original_release(REFERENCE, per_task=1)


def environment(endpoint: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The user's environment with the hub at ``endpoint``, a fresh HF_HOME and no token or proxy of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and "proxy" not in k.lower()}
    env.update(
        HF_ENDPOINT=endpoint,
        HF_HOME=str(tmp_path / "hf-home"),
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        NO_PROXY="127.0.0.1",
    )
    env.update(extra)
    return env


def audioicl(env: dict[str, str], *args: object, rc: int = 0) -> subprocess.CompletedProcess:
    return cli.audioicl(*args, env=env, rc=rc, timeout=HANG_GUARD_S)


def same_files(root: Path, files: dict[str, bytes]) -> bool:
    return all((root / path).is_file() and (root / path).read_bytes() == data for path, data in files.items())


def test_download_then_validate_clean_then_run(hub, tmp_path, release):
    """The README's `audioicl download --out orig && audioicl run --data orig --model ...`."""
    sha = hub.commit(release)
    files = hub.commits[sha]
    env = environment(hub.hub_url, tmp_path)
    out = tmp_path / "orig"
    proc = audioicl(env, "download", "--out", out)
    assert f"{REPO} revision main = commit {sha}: {len(files)} files" in proc.stdout
    assert f"({len(files)} fetched now, 0 already there)" in proc.stdout
    assert "no problems found" in proc.stdout and re.search(r"AudioRemap +nested: no", proc.stdout)
    assert same_files(out, files)
    source = json.loads((out / "download.json").read_text())
    assert (source["repo"], source["revision"], source["commit"]) == (REPO, "main", sha)
    assert source["complete"] is True and source["endpoint"] == hub.hub_url and source["files"] == len(files)
    assert "no problems found" in audioicl(env, "validate", out).stdout

    mark = hub.mark()
    again = audioicl(env, "download", "--out", out, "--no-validate")
    assert f"(0 fetched now, {len(files)} already there)" in again.stdout
    assert hub.fetched(since=mark) == []

    results = tmp_path / "results"
    audioicl(env, "run", "--data", out, "--model", "builtin:random", "--out", results)
    record = json.loads((results / "random_run.json").read_text())
    assert record["dataset_source"] == {"repo": REPO, "commit": sha}
    lines = [json.loads(x) for x in (results / "random_results_k5.jsonl").read_text().splitlines()]
    assert len(lines) == 9 and all(line["status"] == "ok" for line in lines)


def test_list_prints_files_and_sizes_and_fetches_nothing(hub, tmp_path, release):
    sha = hub.commit(release)
    proc = audioicl(environment(hub.hub_url, tmp_path), "download", "--list")
    *rows, last = proc.stdout.splitlines()
    listed = {path: int(size.replace(",", "")) for size, path in (row.split() for row in rows)}
    assert listed == {path: len(data) for path, data in hub.commits[sha].items()}
    assert (
        last
        == f"{REPO} revision main = commit {sha}: {len(listed)} files, {sum(listed.values()) / 1e6:.1f} MB"
    )
    assert hub.fetched() == [] and not hub.requests("cdn")
    assert len([r for r in hub.requests("hub") if "/tree/" in r.path]) > 1  # followed the pages


def test_revision_pins_a_commit(hub, tmp_path, release):
    old = hub.commit(release, tag="v1.0")
    new = hub.commit({**release, "README.md": b"# fixed\n", "data/extra/new.wav": tone_wav("new")})
    env = environment(hub.hub_url, tmp_path)
    pinned = tmp_path / "v1"
    proc = audioicl(env, "download", "--out", pinned, "--revision", "v1.0", "--no-validate")
    assert f"revision v1.0 = commit {old}" in proc.stdout
    assert same_files(pinned, hub.commits[old]) and not (pinned / "data/extra/new.wav").exists()
    assert json.loads((pinned / "download.json").read_text())["commit"] == old

    by_hash = audioicl(env, "download", "--list", "--revision", old)
    assert by_hash.stdout.splitlines()[-1].startswith(f"{REPO} revision {old} = commit {old}: ")

    # main moved on: downloading it into the folder that holds v1.0 is refused, never mixed
    refused = audioicl(env, "download", "--out", pinned, rc=2)
    assert len(refused.stderr.splitlines()) == 1
    assert (
        f"holds {REPO} at commit {old}" in refused.stderr
        and f"revision main is commit {new}" in refused.stderr
    )
    unknown = audioicl(env, "download", "--out", tmp_path / "x", "--revision", "v9", rc=2)
    assert f"revision 'v9' not found in {REPO}" in unknown.stderr and not (tmp_path / "x").exists()

    results = tmp_path / "results"
    audioicl(env, "run", "--data", pinned, "--model", "builtin:majority", "--out", results, "--k", "1")
    assert json.loads((results / "majority_run.json").read_text())["dataset_source"]["commit"] == old


def test_interrupted_download_resumes_and_fetches_only_what_is_missing(hub, tmp_path, release):
    sha = hub.commit(release)
    files = hub.commits[sha]
    env = environment(hub.hub_url, tmp_path)
    out = tmp_path / "orig"
    hub.stall_after = 40  # the CDN holds every answer after the 40th: the download is killed mid-way
    proc = subprocess.Popen(cli.command("download", "--out", out, "--workers", "4"), env=env)
    deadline = time.monotonic() + HANG_GUARD_S
    while len(hub.requests("cdn", "GET")) <= hub.stall_after and proc.poll() is None:
        assert time.monotonic() < deadline, "the download never reached the held answers"
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    hub.stall_after = None
    hub.release()

    assert json.loads((out / "download.json").read_text())["complete"] is False
    complete = {
        path for path, data in files.items() if (out / path).is_file() and (out / path).read_bytes() == data
    }
    missing = set(files) - complete
    assert len(complete) > len(files) // 5 and missing  # about 40 arrived before the kill
    mark = hub.mark()
    again = audioicl(env, "download", "--out", out)
    assert f"({len(missing)} fetched now, {len(complete)} already there)" in again.stdout
    assert set(hub.fetched(since=mark)) == missing
    assert same_files(out, files) and "no problems found" in again.stdout
    assert json.loads((out / "download.json").read_text())["complete"] is True


def test_a_second_download_into_the_same_folder_is_refused_naming_the_first(hub, tmp_path, release):
    """The first holds the folder's lock while the CDN holds its answers; the second is refused in one line
    naming it; after the first is killed, a rerun takes over its stale lock and completes."""
    sha = hub.commit(release)
    env = environment(hub.hub_url, tmp_path)
    out = tmp_path / "orig"
    hub.stall_after = 5
    first = subprocess.Popen(
        cli.command("download", "--out", out, "--workers", "2", "--no-validate"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + HANG_GUARD_S
        while len(hub.requests("cdn", "GET")) <= hub.stall_after:
            assert first.poll() is None and time.monotonic() < deadline, "the first download never stalled"
            time.sleep(0.02)
        second = audioicl(env, "download", "--out", out, "--no-validate", rc=2)
        assert len(second.stderr.splitlines()) == 1, second.stderr
        lock = out / ".audioicl.lock"
        assert f"{out}: being written by process {first.pid} on {socket.gethostname()} (lock {lock};" in (
            second.stderr
        )
        assert first.poll() is None
    finally:
        first.kill()
        first.wait()
        hub.stall_after = None
        hub.release()
    assert lock.is_file()  # killed: its lock stays behind, stale
    audioicl(env, "download", "--out", out, "--no-validate")
    assert same_files(out, hub.commits[sha]) and not lock.exists()


def test_a_file_the_cdn_refuses_stops_the_download_in_one_line_and_a_rerun_completes(hub, tmp_path, release):
    sha = hub.commit(release)
    victim = sorted(path for path in release if path.endswith(".wav"))[5]
    hub.fail_once[victim] = 503
    env = environment(hub.hub_url, tmp_path)
    out = tmp_path / "orig"
    failed = audioicl(env, "download", "--out", out, rc=2)
    assert len(failed.stderr.strip().splitlines()) == 1, failed.stderr
    assert re.search(r"error: download stopped with \d+ of \d+ files missing: HTTP 503 from ", failed.stderr)
    assert failed.stderr.rstrip().endswith("rerun the same command to resume")
    assert not (out / victim).exists()
    audioicl(env, "download", "--out", out, "--no-validate")
    assert same_files(out, hub.commits[sha])


def test_connection_dropped_mid_file_is_resumed_with_a_range_request(hub, tmp_path, release):
    big = "data/extra/long_take.wav"
    sha = hub.commit({**release, big: tone_wav(big, seconds=340)})  # 10.9 MB: more than one 10 MiB chunk
    data = hub.commits[sha][big]
    hub.drop_once[big] = len(data) - 65536  # the connection closes 64 KiB before the end
    out = tmp_path / "orig"
    audioicl(environment(hub.hub_url, tmp_path), "download", "--out", out, "--no-validate")
    assert [r.range for r in hub.requests("cdn", "GET") if r.path == big] == [None, f"bytes={10 * 2**20}-"]
    assert (out / big).read_bytes() == data and same_files(out, hub.commits[sha])


def _lost(meta: Path, omitted: set[str]) -> dict[tuple[str, int], tuple[int, set[str], set[str]]]:
    """(task, k) → (episodes, ids of episodes naming an omitted clip, omitted clips they name)."""
    found: dict[tuple[str, int], tuple[int, set[str], set[str]]] = {}
    for k in range(1, 6):
        for raw in (meta / f"meta_k{k}.jsonl").read_text().splitlines():
            record = json.loads(raw)
            clips = {
                c["audio_path"]
                for part in [*record["demos"], record["query"]]
                for c in part.get("clips", [part])
            }
            count, ids, paths = found.get((record["task"], k), (0, set(), set()))
            if clips & omitted:
                ids, paths = ids | {record["id"]}, paths | (clips & omitted)
            found[(record["task"], k)] = (count + 1, ids, paths)
    return {key: value for key, value in found.items() if value[1]}


def test_missing_files_are_reported_per_task_and_k_and_become_error_lines(hub, tmp_path):
    """As the real release is said to: some AudioRemap and AnomalyDetect clips are not in the snapshot."""
    release = original_release(REFERENCE, per_task=2)
    remap = sorted(p for p in release if p.startswith("data/audioremap/"))[::6]
    anomaly = sorted(p for p in release if p.startswith("data/anomalous/") and "_test_" in p)[::9]
    omitted = {*remap, *anomaly}
    hub.commit({p: d for p, d in release.items() if p not in omitted})
    env = environment(hub.hub_url, tmp_path)
    out = tmp_path / "orig"
    proc = audioicl(
        env, "download", "--out", out
    )  # the snapshot arrived whole: exit 0, the report says the rest
    expected = _lost(out / "meta", omitted)
    assert {task for task, _ in expected} == {"AudioRemap", "AnomalyDetect"}
    table = proc.stdout.split("by task and k:\n")[1].split("\n\n")[0].splitlines()
    assert table[0].split() == ["task", "k", "episodes", "lost", "missing", "files", "broken", "files"]
    assert [row.split() for row in table[1:]] == [
        [task, str(k), str(n), str(len(ids)), str(len(paths)), "0"]
        for (task, k), (n, ids, paths) in sorted(
            expected.items(), key=lambda item: (item[0][0] != "AudioRemap", item[0][1])
        )
    ]
    assert f"{len(omitted)} missing audio" in proc.stdout
    assert audioicl(env, "validate", out, rc=1).returncode == 1

    results = tmp_path / "results"
    partial = ("--allow-missing-audio",)  # the release lacks clips: run anyway, they become error lines
    run = audioicl(env, "run", "--data", out, "--model", "builtin:random", "--out", results, *partial, rc=1)
    for k in range(1, 6):
        lines = [json.loads(x) for x in (results / f"random_results_k{k}.jsonl").read_text().splitlines()]
        assert len(lines) == 18  # every episode has its line: none dropped
        errors = {line["id"]: line for line in lines if line["status"] == "error"}
        want = {i for (_, kk), (_, ids, _) in expected.items() if kk == k for i in ids}
        assert set(errors) == want
        assert f"k={k}: 18 written ({len(want)} errors)" in run.stdout
        for line in errors.values():
            named = re.search(r"/(data/\S+\.wav) AudioICL\d+: audio file not found$", line["error"])
            assert named and named[1] in omitted and line["response"] is None

    score = audioicl(env, "score", "--in", results, "--out", tmp_path / "scores" / "summary.csv")
    assert (tmp_path / "scores" / "summary.csv").read_bytes().startswith(b"model,shots,task,accuracy,n\r\n")
    detail = (tmp_path / "scores" / "summary_detail.csv").read_text().splitlines()
    assert detail[0].split(",")[7] == "errors"
    lost = {(row[2], int(row[1])): int(row[7]) for row in (line.split(",") for line in detail[1:])}
    assert {key: n for key, n in lost.items() if n} == {
        key: len(ids) for key, (_, ids, _) in expected.items()
    }
    assert score.stdout.splitlines()[0].split()[-1] == "errors"


def test_no_network_is_one_line_and_creates_nothing(tmp_path):
    with socket.socket() as probe:  # a port nothing listens on: connection refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = environment(f"http://127.0.0.1:{port}", tmp_path)
    out = tmp_path / "orig"
    for args in (("--out", out), ("--list",)):
        proc = audioicl(env, "download", *args, rc=2)
        assert len(proc.stderr.splitlines()) == 1, proc.stderr
        assert proc.stderr.startswith(
            f"audioicl download: error: cannot reach the hub at http://127.0.0.1:{port}: "
        )
        assert "refused" in proc.stderr.lower()
    assert not out.exists()


def test_private_repo_needs_hf_token(hub, tmp_path, release):
    hub.commit(release)
    hub.token = "hf_test_token"
    env = environment(hub.hub_url, tmp_path)
    denied = audioicl(env, "download", "--out", tmp_path / "a", rc=2)
    assert len(denied.stderr.splitlines()) == 1 and "HF_TOKEN" in denied.stderr
    audioicl({**env, "HF_TOKEN": "hf_test_token"}, "download", "--out", tmp_path / "b", "--no-validate")
    assert (tmp_path / "b" / "meta" / "meta_k1.jsonl").is_file()
    assert all(r.authorization is None for r in hub.requests("cdn"))  # the token never leaves the hub


def test_files_in_the_hub_cache_are_copied_not_fetched(hub, tmp_path, release):
    """HF_HUB_CACHE: a snapshot the user already has in the cache (from the client, e.g. an earlier
    `hf download`) is where the files come from."""
    sha = hub.commit(release)
    env = environment(hub.hub_url, tmp_path, HF_HUB_CACHE=str(tmp_path / "hub-cache"))
    fill = f"from huggingface_hub import snapshot_download; snapshot_download({REPO!r}, repo_type='dataset')"
    subprocess.run(
        [sys.executable, "-c", fill], env=env, check=True, timeout=HANG_GUARD_S, capture_output=True
    )
    mark = hub.mark()
    out = tmp_path / "orig"
    audioicl(env, "download", "--out", out, "--no-validate")
    assert hub.fetched(since=mark) == []
    assert same_files(out, hub.commits[sha])


@pytest.mark.parametrize("hostile", ["../outside.txt", "data/../../outside.txt", "/tmp/outside.txt"])
def test_a_repository_listing_a_file_outside_its_folder_is_refused_before_anything_is_fetched(
    hub, tmp_path, release, hostile
):
    """The hub's listing is a server's answer: a path that would land outside ROOT (a parent step, an absolute
    path) refuses the whole download in one line naming it, before a byte is fetched or ROOT is made."""
    hub.commit({**release, hostile: b"written by the repository"})
    env = environment(hub.hub_url, tmp_path)
    out = tmp_path / "deep" / "orig"
    for args in (["--out", out], ["--list"]):
        proc = audioicl(env, "download", *args, rc=2)
        assert proc.stderr.splitlines() == [
            f"audioicl download: error: {REPO} lists a file outside the dataset's folder, {hostile!r}: "
            "refused, nothing fetched"
        ]
    assert hub.fetched() == [] and not hub.requests("cdn")
    assert not out.exists() and not (tmp_path / "outside.txt").exists()
    assert not (tmp_path / "deep" / "outside.txt").exists()
