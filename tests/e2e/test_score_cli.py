"""``audioicl score`` as a user runs it: a real subprocess over result files made from the original meta files."""

from __future__ import annotations

import csv
import json
from functools import partial
from pathlib import Path

import cli
import pytest
from helpers import write_bare_meta, write_results, write_run_record
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
        "parsed_share",
        "accuracy_parsed",
    ]
    assert detail[10][:7] == ["mute", "1", "AnomalyDetect", "0.000000", "300", "0", "300"]
    assert {tuple(row[11:14]) for row in detail[1:]} == {("unknown", "", "")}
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
    assert "1 malformed line(s) counted as wrong in their task" in done.stderr
    # its id (AudioICL00003) is in AudioCount's block: a wrong AudioCount line, never a task with no name
    assert read_rows(tmp_path / "s.csv")[1:] == [["m", "1", "AudioCount", "0.666667", "3"]]
    assert "(no task)" not in done.stdout


def test_skip_bad_lines_never_makes_a_task_of_its_own(tmp_path: Path):
    """A line that tells its task by its id stays in it; one that tells nothing is an unreadable line,
    reported apart, in no task, no n and no mean over tasks; the report draws no unnamed task."""
    data = tmp_path / "data"
    episodes = write_bare_meta(data, per_task=2)
    runs = tmp_path / "runs"
    path = write_results(runs / "m_results_k1.jsonl", episodes[:-1])
    last = json.dumps({"id": episodes[-1][0], "task": episodes[-1][1], "response": "Normal", "gt": "Normal"})
    with path.open("a", encoding="utf-8") as handle:
        handle.write("not json at all\n" + last[:25] + "\n")
    scores = tmp_path / "scores" / "summary.csv"
    done = audioicl_score("--in", runs, "--out", scores, "--data", data, "--skip-bad-lines")
    assert done.returncode == 0, done.stderr
    rows = read_rows(scores)[1:]
    assert "" not in {row[2] for row in rows} and len(rows) == 9
    assert ["m", "1", "AnomalyDetect", "0.500000", "2"] in rows
    assert "1 malformed line(s) counted as wrong in their task" in done.stderr
    assert "1 unreadable line(s) whose task cannot be told" in done.stderr
    assert "(no task)" not in done.stdout
    assert "94.4% over all 9 tasks" in done.stdout  # (8 x 100 % + 50 %) / 9: nine tasks, not ten
    coverage = read_rows(tmp_path / "scores" / "summary_coverage.csv")
    assert dict(zip(coverage[0], coverage[1], strict=True))["unreadable"] == "1"
    report = tmp_path / "report"
    cli.audioicl("report", "--scores", scores, "--out", report, rc=0, timeout=120)
    assert not (report / "accuracy_unnamed.png").exists()
    markdown = (report / "report.md").read_text(encoding="utf-8")
    assert "(no task)" not in markdown and "1 unreadable line(s) in no task" in markdown


def truncated_run(tmp_path: Path, *, record: bool) -> tuple[Path, Path]:
    """A crashed, resumable run: 49 of 90 lines (9 tasks x 10 episodes, k = 1), all right: four tasks whole,
    AudioLengthHard 9 of 10, four tasks absent; with its run record (data root, the run's selection) or not."""
    data = tmp_path / "data"
    episodes = write_bare_meta(data, per_task=10)
    runs = tmp_path / "runs"
    write_results(runs / "m_results_k1.jsonl", episodes[:49])
    if record:
        write_run_record(runs, "m", data, [{"shots": [1], "tasks": None, "limit": None}])
    return data, runs


@pytest.mark.parametrize("how", ["run record", "--data"])
def test_truncated_folder_prints_its_coverage_and_no_unmarked_mean(tmp_path: Path, how: str):
    data, runs = truncated_run(tmp_path, record=how == "run record")
    out = tmp_path / "scores" / "summary.csv"
    extra = ("--data", data) if how == "--data" else ()
    done = audioicl_score("--in", runs, "--out", out, *extra)
    assert done.returncode == 0, done.stderr  # scoring a partial folder is routine: exit 0, loudly marked
    assert "100.0% over 4 of 9 tasks: incomplete" in done.stdout
    assert "100.0% over all" not in done.stdout and "over 5" not in done.stdout
    assert "49/90" in done.stdout and "incomplete" in done.stdout
    assert "4 task(s) absent: AudioOperatorHard, MorseCode, AudioRemap, AnomalyDetect" in done.stdout
    assert "partial: AudioLengthHard 9/10" in done.stdout
    assert "warning: m k=1: incomplete: 41 of the 90 episodes have no line" in done.stderr
    assert out.read_bytes().count(b"\r\n") == 6  # the summary: the original's rows for the 5 tasks present
    coverage = read_rows(tmp_path / "scores" / "summary_coverage.csv")
    assert coverage[0][:4] == ["model", "shots", "status", "selection"]
    assert coverage[1][:3] == ["m", "1", "incomplete"]
    strict = audioicl_score("--in", runs, "--out", out, *extra, "--require-complete")
    assert strict.returncode == 1 and "not complete (--require-complete)" in strict.stderr
    assert out.is_file()  # every file is still written

    report = tmp_path / "report"
    cli.audioicl("report", "--scores", out, "--out", report, rc=0, timeout=120)
    markdown = (report / "report.md").read_text(encoding="utf-8")
    mean_row = next(row for row in markdown.splitlines() if row.startswith("| mean over tasks"))
    assert mean_row.endswith("| 100.0% (4 of 9 tasks: incomplete) |")
    assert "AudioLengthHard" in markdown and "(n 9, partial: 9 of 10 episodes)" in markdown
    assert "## Coverage" in markdown and "4 task(s) absent" in markdown


def test_unchecked_folder_says_so(tmp_path: Path):
    _, runs = truncated_run(tmp_path, record=False)
    done = audioicl_score("--in", runs, "--out", tmp_path / "s.csv")
    assert done.returncode == 0, done.stderr
    assert "100.0% over 5 of 9 tasks: coverage unchecked" in done.stdout
    assert "pass --data ROOT" in done.stderr
    assert audioicl_score("--in", runs, "--out", tmp_path / "s.csv", "--require-complete").returncode == 1


def test_score_prints_the_mean_over_tasks(tmp_path: Path):
    data = tmp_path / "data"
    episodes = write_bare_meta(data, per_task=3)
    write_results(tmp_path / "runs" / "m_results_k1.jsonl", episodes, lambda gt: gt if gt == "3" else "no")
    out = tmp_path / "summary.csv"
    done = audioicl_score("--in", tmp_path / "runs", "--out", out, "--data", data, "--require-complete")
    assert done.returncode == 0, done.stderr
    # six integer tasks right, MorseCode, AudioRemap, AnomalyDetect wrong: 6 / 9
    assert "coverage and mean over tasks" in done.stdout and "66.7% over all 9 tasks" in done.stdout
    assert "complete" in done.stdout and "warning" not in done.stderr


def test_limit_run_is_labelled_a_subset(tmp_path: Path, nine_tasks: Path):
    """``run --limit 1`` asks the first episode of each task: score and report say so, from its run record."""
    runs = tmp_path / "runs"
    cli.audioicl(
        "run",
        "--model",
        "builtin:random",
        "--data",
        nine_tasks,
        "--out",
        runs,
        "--k",
        "1",
        "--limit",
        "1",
        rc=0,
        timeout=300,
    )
    out = tmp_path / "scores" / "summary.csv"
    done = audioicl_score("--in", runs, "--out", out)
    assert done.returncode == 0, done.stderr
    assert "subset (first 1 episode per task)" in done.stdout
    assert "9/9 of 27" in done.stdout
    assert "warning: random k=1: subset: first 1 episode per task (9 of 27 episodes)" in done.stderr
    report = tmp_path / "report"
    cli.audioicl("report", "--scores", out, "--out", report, rc=0, timeout=120)
    markdown = (report / "report.md").read_text(encoding="utf-8")
    assert "(subset)" in markdown and "subset: first 1 episode per task (9 of 27 episodes)" in markdown


@pytest.mark.parametrize("given", ["existing", "new"])
def test_out_and_scores_take_a_folder_as_every_other_command(tmp_path: Path, given: str):
    """Issue 40, item 12: ``score --out NEWDIR`` wrote a file named NEWDIR, ``score --out DIR`` was refused, and
    ``report --scores DIR`` said "Is a directory". A folder now holds ``summary.csv`` and its companions."""
    data = tmp_path / "data"
    episodes = write_bare_meta(data, per_task=1)
    write_results(tmp_path / "runs" / "m_results_k1.jsonl", episodes, lambda gt: gt)
    folder = tmp_path / "scores"
    if given == "existing":
        folder.mkdir()
    done = audioicl_score("--in", tmp_path / "runs", "--out", folder, "--data", data)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in folder.iterdir()) == [
        "summary.csv", "summary_coverage.csv", "summary_detail.csv", "summary_runs.json"
    ]  # fmt: skip
    assert f"summary {folder / 'summary.csv'}" in done.stdout
    report = cli.audioicl("report", "--scores", folder, "--results", tmp_path / "runs", "--out", tmp_path / "r",
                          rc=0)  # fmt: skip
    assert (tmp_path / "r" / "report.html").is_file(), report.stderr


def test_one_task_is_said_in_the_singular(tmp_path: Path):
    """Issue 40, item 14: "over all 1 tasks"."""
    data = tmp_path / "data"
    episodes = [ep for ep in write_bare_meta(data, per_task=1) if ep[1] == "AudioCount"]
    meta = data / "meta" / "meta_k1.jsonl"  # a dataset of the one task
    meta.write_text("".join(line for line in meta.read_text().splitlines(True) if '"AudioCount"' in line))
    write_results(tmp_path / "runs" / "m_results_k1.jsonl", episodes, lambda gt: gt)
    done = audioicl_score("--in", tmp_path / "runs", "--out", tmp_path / "s.csv", "--data", data)
    assert done.returncode == 0, done.stderr
    assert "100.0% over the one task" in done.stdout and "1 tasks" not in done.stdout


def test_a_task_name_of_no_task_is_said_not_scored_silently(tmp_path):
    """Issue 53: lines whose task is none of the benchmark's were a task of their own without a word."""
    results = tmp_path / "r"
    results.mkdir()
    lines = [{"id": f"AudioICL{i:05d}", "task": "AudioCont", "response": "3", "gt": "3"} for i in range(1, 4)]
    lines.append({"id": "AudioICL00004", "task": "AudioCount", "response": "2", "gt": "2"})
    lines.append({"id": "AudioICL00005", "task": "Evil\x1b[2J", "response": "2", "gt": "2"})
    (results / "m_results_k1.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    proc = audioicl_score("--in", results, "--out", tmp_path / "s.csv", rc=0)
    warnings = [line for line in proc.stderr.splitlines() if "no task of the benchmark" in line]
    assert warnings == [
        "warning: 3 line(s) of task 'AudioCont' (m k=1), no task of the benchmark or its dataset: scored as a "
        "task of its own (did you mean AudioCount?)",
        "warning: 1 line(s) of task 'Evil\\x1b[2J' (m k=1), no task of the benchmark or its dataset: scored as "
        "a task of its own",
    ]
    assert "\x1b" not in proc.stderr
