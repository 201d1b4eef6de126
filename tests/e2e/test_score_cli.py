"""``audioicl score`` as a user runs it: a real subprocess over result files made from the original meta files."""

from __future__ import annotations

import csv
import json
from functools import partial
from pathlib import Path

import cli
import pytest
from reference_data import REFERENCE

audioicl_score = partial(cli.audioicl, "score", timeout=120)


def results_from_meta(meta: Path, out: Path, respond) -> None:
    """One result line per reference episode, the response made from its query label by ``respond``."""
    with meta.open(encoding="utf-8") as source, out.open("w", encoding="utf-8") as sink:
        for text in source:
            episode = json.loads(text)
            gt = episode["query"]["label"]
            record = {"id": episode["id"], "task": episode["task"], "response": respond(gt), "gt": gt}
            sink.write(json.dumps(record, ensure_ascii=False) + "\n")


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """Model ``echo`` answers every reference episode with its label (k = 1 in one folder, k = 2 in
    another, both with the label in a sentence); model ``mute`` answers nothing useful at k = 1."""
    if not (REFERENCE / "meta_k2.jsonl").is_file():
        pytest.skip(f"reference meta files absent from {REFERENCE}")
    root = tmp_path / "runs"
    for folder, k, respond in (("a", 1, lambda gt: gt), ("b", 2, lambda gt: f"The answer is {gt}.")):
        (root / folder).mkdir(parents=True)
        results_from_meta(REFERENCE / f"meta_k{k}.jsonl", root / folder / f"echo_results_k{k}.jsonl", respond)
    results_from_meta(REFERENCE / "meta_k1.jsonl", root / "a" / "mute_results_meta_k1.jsonl", lambda gt: None)
    return root


def read_rows(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def test_score_reference_labels_against_themselves(runs: Path, tmp_path: Path):
    out = tmp_path / "out" / "summary.csv"
    per_example = tmp_path / "per_example"
    done = audioicl_score("--in", runs, "--out", out, "--per-example-dir", per_example, "--only-shots", "1")
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    assert rows[0] == ["model", "shots", "task", "accuracy", "n"]
    tasks = sorted(
        ["AudioCount", "AudioCountHard", "AudioOperator", "AudioLength", "AudioLengthHard"]
        + ["AudioOperatorHard", "MorseCode", "AudioRemap", "AnomalyDetect"]
    )
    assert rows[1:] == [["echo", "1", t, "1.000000", "300"] for t in tasks] + [
        ["mute", "1", t, "0.000000", "300"] for t in tasks
    ]
    assert out.read_bytes().count(b"\r\n") == 19
    detail = read_rows(tmp_path / "out" / "summary_detail.csv")
    assert detail[0][5:] == ["correct", "unparsed", "errors", "ci_low", "ci_high", "scoring"] + [
        "query_clips",
        "cluster_ci_low",
        "cluster_ci_high",
    ]
    assert detail[10][:7] == ["mute", "1", "AnomalyDetect", "0.000000", "300", "0", "300"]
    assert {tuple(row[11:]) for row in detail[1:]} == {("unknown", "", "")}
    assert "without known query clips" in done.stdout
    assert "echo" in done.stdout and "300/300" in done.stdout and "0/300" in done.stdout
    echo = read_rows(per_example / "echo_k1.csv")
    assert echo[0] == ["id", "task", "correct"] and len(echo) == 2701
    assert {row[2] for row in echo[1:]} == {"1"}


def test_cluster_interval_over_the_reference_query_clips(tmp_path: Path):
    """The original's result lines hold no paths; --data tells each line's query clip. Where query clips
    recur (AudioLength: 205 clips for 300 episodes), the cluster bootstrap widens the interval."""
    if not (REFERENCE / "meta_k1.jsonl").is_file():
        pytest.skip(f"reference meta files absent from {REFERENCE}")
    runs = tmp_path / "runs"
    runs.mkdir()
    # right on every other query clip: episodes that share a clip are all right or all wrong together
    clips = {}
    with (REFERENCE / "meta_k1.jsonl").open(encoding="utf-8") as source:
        episodes = [json.loads(text) for text in source]
    for ep in episodes:
        target = (ep["query"].get("clips") or [ep["query"]])[-1]["audio_path"]
        clips.setdefault(target, len(clips))
    with (runs / "half_results_k1.jsonl").open("w", encoding="utf-8") as sink:
        for ep in episodes:
            target = (ep["query"].get("clips") or [ep["query"]])[-1]["audio_path"]
            gt = ep["query"]["label"]
            response = gt if clips[target] % 2 == 0 else "no idea"
            sink.write(
                json.dumps({"id": ep["id"], "task": ep["task"], "response": response, "gt": gt}) + "\n"
            )
    out = tmp_path / "summary.csv"
    done = audioicl_score("--in", runs, "--out", out, "--data", REFERENCE)
    assert done.returncode == 0, done.stderr
    assert "serve several episodes" in done.stdout
    detail = {row[2]: row for row in read_rows(tmp_path / "summary_detail.csv")[1:]}
    assert read_rows(out)[1:] == [row[:5] for row in read_rows(tmp_path / "summary_detail.csv")[1:]]
    header = read_rows(tmp_path / "summary_detail.csv")[0]
    clips, low, high = (header.index(name) for name in ("query_clips", "cluster_ci_low", "cluster_ci_high"))
    wilson_low, wilson_high = header.index("ci_low"), header.index("ci_high")
    length = detail["AudioLength"]
    assert length[clips] == "205"
    wilson = float(length[wilson_high]) - float(length[wilson_low])
    assert float(length[high]) - float(length[low]) > 1.2 * wilson
    assert float(length[low]) < float(length[3]) < float(length[high])
    morse = detail["MorseCode"]  # 300 distinct words: clusters of one, about as wide as Wilson
    assert morse[clips] == "300"
    morse_wilson = float(morse[wilson_high]) - float(morse[wilson_low])
    assert abs((float(morse[high]) - float(morse[low])) - morse_wilson) < 0.03
    again = audioicl_score("--in", runs, "--out", tmp_path / "again.csv", "--data", REFERENCE)
    assert again.returncode == 0
    assert (tmp_path / "again_detail.csv").read_bytes() == (tmp_path / "summary_detail.csv").read_bytes()


def test_score_all_shots_strict_and_detail_path(runs: Path, tmp_path: Path):
    out = tmp_path / "summary.csv"
    detail = tmp_path / "elsewhere" / "d.csv"
    done = audioicl_score("--in", runs, "--out", out, "--only-model", "echo", "--detail", detail, "--strict")
    assert done.returncode == 0, done.stderr
    assert "STRICT" in done.stdout
    rows = read_rows(out)
    # at k = 2 the label sits in a sentence: strict counts none of it
    assert {(r[1], r[3]) for r in rows[1:]} == {("1", "1.000000"), ("2", "0.000000")}
    assert {r[10] for r in read_rows(detail)[1:]} == {"strict"}
    default = audioicl_score("--in", runs, "--out", out, "--only-model", "echo", "--only-shots", "2")
    assert default.returncode == 0, default.stderr
    # the original's rules read a number or a label out of a sentence, but not three letters or a word
    accuracy = {r[2]: r[3] for r in read_rows(out)[1:]}
    assert accuracy.pop("AudioRemap") == accuracy.pop("MorseCode") == "0.000000"
    assert set(accuracy.values()) == {"1.000000"} and len(accuracy) == 7


def test_score_errors_and_skip_bad_lines(tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "meta_k1.jsonl").write_text("{}\n")
    done = audioicl_score("--in", empty, "--out", tmp_path / "s.csv")
    assert done.returncode == 2 and "no result files" in done.stderr and not (tmp_path / "s.csv").exists()

    runs = tmp_path / "runs"
    runs.mkdir()
    good = json.dumps({"id": "AudioICL00001", "task": "AudioCount", "response": "3", "gt": "3"})
    (runs / "m_results_k1.jsonl").write_text(f'{good}\n{good}\n{{"id": "AudioICL00003", "task": "Audio')
    done = audioicl_score("--in", runs, "--out", tmp_path / "s.csv")
    assert done.returncode == 2
    assert "m_results_k1.jsonl:3 AudioICL00003: malformed result line" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1

    done = audioicl_score("--in", runs, "--out", tmp_path / "s.csv", "--skip-bad-lines")
    assert done.returncode == 0, done.stderr
    assert "1 malformed line(s) counted as wrong" in done.stderr
    assert read_rows(tmp_path / "s.csv")[1:] == [
        ["m", "1", "", "0.000000", "1"],
        ["m", "1", "AudioCount", "1.000000", "2"],
    ]
