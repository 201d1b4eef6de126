"""``audioicl build`` as a user runs it: a subprocess in a temporary folder."""

from __future__ import annotations

import json
from functools import partial

import cli
import pytest

SMALL = ["--tasks", "AudioCount,MorseCode,AnomalyDetect", "--episodes", "2", "--k", "1-2", "--seed", "5"]


audioicl = partial(cli.audioicl, timeout=300)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli") / "bench"
    done = audioicl("build", "--out", str(root), "--workers", "2", *SMALL)
    assert done.returncode == 0, done.stderr
    return root, done


def test_build_writes_the_dataset_and_a_summary(dataset):
    root, done = dataset
    assert "built 6 episodes" in done.stdout and "audio files" in done.stdout and " MB" in done.stdout
    meta = sorted(p.name for p in (root / "meta").iterdir())
    assert meta == ["meta_k1.jsonl", "meta_k2.jsonl", "transcripts.jsonl"]
    first = json.loads((root / "meta/meta_k2.jsonl").read_text().splitlines()[0])
    assert first["id"] == "AudioICL00001" and first["task"] == "AudioCount" and len(first["demos"]) == 2
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["options"]["shots"] == [1, 2] and manifest["seed"] == 5


def test_rerun_with_same_options_succeeds_and_changes_nothing(dataset):
    root, _ = dataset
    before = (root / "manifest.json").read_bytes()
    again = audioicl("build", "--out", str(root), "--workers", "1", "--quiet", *SMALL)
    assert again.returncode == 0, again.stderr
    assert (root / "manifest.json").read_bytes() == before


def test_foreign_folder_is_refused_with_exit_2(tmp_path):
    (tmp_path / "thesis.tex").write_text("\\begin{document}")
    done = audioicl("build", "--out", str(tmp_path), *SMALL)
    assert done.returncode == 2
    assert "not empty" in done.stderr and str(tmp_path) in done.stderr and "Traceback" not in done.stderr


def test_bad_source_is_refused_with_exit_2(tmp_path):
    done = audioicl("build", "--out", str(tmp_path / "x"), "--source", f"voices={tmp_path}", *SMALL)
    assert done.returncode == 2 and "unknown source kind" in done.stderr


def test_validate_accepts_the_build(dataset):
    root, _ = dataset
    done = audioicl("validate", str(root), "--verify-hashes")
    assert done.returncode == 0, done.stdout + done.stderr
    meta_files = len(list((root / "meta").glob("meta_k*.jsonl")))
    assert f"dataset {root}: {meta_files} meta files" in done.stdout
    assert done.stdout.rstrip().endswith("no problems found")


def test_construction_original_with_an_explicit_override(tmp_path):
    """``--construction original`` sets every construction option to the original's; an option given
    explicitly wins; the build state, the manifest and the card record what was built."""
    root = tmp_path / "orig"
    done = audioicl(
        "build", "--out", str(root), "--quiet", "--construction", "original", "--queries", "distinct", *SMALL
    )
    assert done.returncode == 0, done.stderr
    options = json.loads((root / "manifest.json").read_text())["options"]
    assert options["anomaly_order"] == options["file_names"] == options["label_prior"] == "original"
    assert options["remap_demos"] == "same-pair" and options["queries"] == "distinct"
    assert json.loads((root / "build.json").read_text())["options"] == options
    card = (root / "README.md").read_text()
    assert "| `--anomaly-order original` | the original's |" in card
    assert "| `--queries distinct` | ours (default) |" in card
    first = json.loads((root / "meta/meta_k2.jsonl").read_text().splitlines()[0])
    assert first["query"]["audio_path"].endswith(f"_{first['query']['label']}.wav")  # the original's names
    bad = audioicl("build", "--out", str(tmp_path / "x"), "--anomaly-order", "sideways", *SMALL)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_a_second_build_into_a_folder_being_built_is_refused_naming_the_first(tmp_path):
    """Two builds into one folder at once (issue 39, item 7: with other seeds both exited 0 and left a dataset
    mixing both): the second is refused in one line naming the first's process, the first completes whole."""
    import subprocess
    import time

    out = tmp_path / "bench"
    first = subprocess.Popen(
        cli.command("build", "--out", out, "--episodes", "6", "--seed", "1", "--quiet"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lock = tmp_path / "bench.lock"
    for _ in range(600):  # until the first holds the folder (it takes it before writing anything)
        if lock.exists() or first.poll() is not None:
            break
        time.sleep(0.05)
    assert lock.exists(), first.communicate()
    second = cli.audioicl("build", "--out", out, "--episodes", "6", "--seed", "2", "--quiet", rc=2)
    assert "being written by" in second.stderr and "bench.lock" in second.stderr
    assert first.wait(timeout=600) == 0, first.communicate()
    cli.audioicl("validate", out, rc=0)
    assert not lock.exists()
