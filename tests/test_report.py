"""Tests of audioicl.analysis.report: chance levels, the accuracy table, example selection, the HTML page."""

from __future__ import annotations

import base64
import io
import json
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from helpers import tone

from audioicl import AudioICLError
from audioicl.analysis.report import ReportOptions, write_report
from audioicl.analysis.report.accuracy import load_grid
from audioicl.analysis.report.examples import interleave, read_scored, select_examples
from audioicl.analysis.report.tables import accuracy_table, markdown_table
from audioicl.audio import write_wav
from audioicl.tasks.chance import chance_level

SUMMARY = """model,shots,task,accuracy,n\r
modelA,1,AudioCount,0.500000,100\r
modelA,1,MorseCode,0.000000,100\r
modelA,1,AudioRemap,0.200000,100\r
modelA,1,AnomalyDetect,0.550000,100\r
modelA,3,AudioCount,0.700000,100\r
modelA,3,MorseCode,0.100000,100\r
modelA,3,AudioRemap,0.300000,100\r
modelA,3,AnomalyDetect,0.600000,100\r
modelB,1,AudioCount,0.250000,100\r
modelB,1,MorseCode,0.010000,100\r
modelB,1,AudioRemap,0.150000,100\r
modelB,3,AudioCount,0.400000,100\r
modelB,3,MorseCode,0.050000,100\r
modelB,3,AudioRemap,0.250000,100\r
modelB,3,AnomalyDetect,0.500000,100\r
"""
TASKS = ("AudioCount", "MorseCode", "AudioRemap", "AnomalyDetect")
COUNT_PROMPT = (
    "system: You are a helpful assistant.\nuser: Count the hits.\n\n"
    "[Demo Audio 1] <audio> Label: 2\n[Demo Audio 2] <audio> Label: 3\n[Demo Audio 3] <audio> Label: 1\n"
    "[Query Audio] <audio> Label:"
)
ANOMALY_PROMPT = (
    "user: Normal or anomalous?\n\n[Demo 1 Normal] <audio>\n[Demo 1 Anomalous] <audio>\n[Query] <audio>"
)
NASTY = "<script>alert(1)</script> 5"


def result_line(episode: str, task: str, response: str | None, gt: str, k: int, model: str, **extra) -> str:
    record = {
        "id": episode,
        "task": task,
        "response": response,
        "gt": gt,
        "status": "ok",
        "k": k,
        "model": model,
    }
    return json.dumps({**record, **extra}) + "\n"


def write_inputs(root: Path) -> tuple[Path, Path, Path]:
    """A summary CSV, a results folder (two models, run.json) and a data root with a few WAVs.

    AudioCount at k=3: episode 1 solved by modelA only, 2 unsolved (modelB's response is HTML), 3 solved.
    AnomalyDetect at k=1 (modelA): two episodes, one of whose clips is missing on disk.
    MorseCode lines carry only the original's four fields. AudioRemap has no results.
    """
    scores = root / "summary.csv"
    scores.write_bytes(SUMMARY.encode())
    data = root / "data_root"
    count_clips = [f"data/audiocount/easy/s_{i}.wav" for i in range(4)]
    for i, rel in enumerate(count_clips):
        write_wav(data / rel, tone(0.25, 300 + 100 * i), 16000)
    # a 44.1 kHz stereo float clip (write_wav writes only mono PCM16): the page must carry it as 16 kHz mono
    stereo = np.stack([tone(0.2, 440, 44100)] * 2, axis=1)
    (data / "data/anomalous/fan/train").mkdir(parents=True)
    sf.write(data / "data/anomalous/fan/train/normal_0.wav", stereo, 44100, subtype="FLOAT")
    write_wav(data / "data/anomalous/fan/test/anomaly_0.wav", tone(0.2, 880), 16000)
    write_wav(data / "data/anomalous/fan/test/query_0.wav", tone(0.2, 660), 16000)
    anomaly_clips = [
        "data/anomalous/fan/train/normal_0.wav",
        "data/anomalous/fan/test/anomaly_0.wav",
        "data/anomalous/fan/test/query_0.wav",
    ]
    missing = [*anomaly_clips[:2], "data/anomalous/fan/test/query_missing.wav"]

    results = root / "results"
    results.mkdir()
    (results / "run.json").write_text(json.dumps({"data": str(data), "model": "builtin:random"}))
    count = {"prompt": COUNT_PROMPT, "audio_paths": count_clips}
    a3 = [
        result_line("AudioICL00001", "AudioCount", "2", "2", 3, "modelA", **count),
        result_line("AudioICL00002", "AudioCount", "7", "4", 3, "modelA", **count),
        result_line("AudioICL00003", "AudioCount", "Answer: 3", "3", 3, "modelA", **count),
        result_line("AudioICL01801", "MorseCode", "hello", "hello", 3, "modelA"),
    ]
    b3 = [
        result_line("AudioICL00003", "AudioCount", "three", "3", 3, "modelB", **count),
        result_line("AudioICL00002", "AudioCount", NASTY, "4", 3, "modelB", **count),
        "\n",
        result_line(
            "AudioICL00001", "AudioCount", None, "2", 3, "modelB", status="error", error="timeout", **count
        ),
    ]
    a1 = [
        result_line("AudioICL00001", "AudioCount", "1", "1", 1, "modelA", **count),
        result_line(
            "AudioICL02401",
            "AnomalyDetect",
            "normal",
            "Normal",
            1,
            "modelA",
            prompt=ANOMALY_PROMPT,
            audio_paths=anomaly_clips,
        ),
        result_line(
            "AudioICL02402",
            "AnomalyDetect",
            "normal",
            "Anomalous",
            1,
            "modelA",
            prompt=ANOMALY_PROMPT,
            audio_paths=missing,
        ),
    ]
    (results / "modelA_results_k3.jsonl").write_text("".join(a3))
    (results / "sub").mkdir()
    (results / "sub" / "modelB_results_k3.jsonl").write_text("".join(b3))
    (results / "modelA_results_k1.jsonl").write_text("".join(a1))
    return scores, results, data


class PageParser(HTMLParser):
    """Counts tags and collects attributes and text of the report page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.table_stack: list[str] = []
        self.accuracy_rows = 0

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "table":
            self.table_stack.append(attributes.get("class") or "")
        if tag == "tr" and self.table_stack and self.table_stack[-1] == "accuracy":
            self.accuracy_rows += 1

    def handle_endtag(self, tag):
        if tag == "table":
            self.table_stack.pop()

    def handle_data(self, data):
        self.text.append(data)

    def count(self, tag: str) -> int:
        return sum(1 for t, _ in self.tags if t == tag)

    def attrs(self, tag: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag]


def parse_page(path: Path) -> PageParser:
    parser = PageParser()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    return parser


# --- chance levels and the table --------------------------------------------------------------------------


def test_chance_levels_follow_the_label_spaces():
    assert chance_level("AudioCount").value == pytest.approx(1 / 8)
    assert chance_level("AudioLengthHard").value == pytest.approx(1 / 21)
    assert chance_level("AnomalyDetect").value == pytest.approx(0.5)
    assert chance_level("AudioRemap").value == pytest.approx(1 / 6)
    assert chance_level("MorseCode").value == 0.0
    assert "open vocabulary" in chance_level("MorseCode").note
    assert chance_level("NoSuchTask").value is None


def test_table_rows_columns_and_wilson_cells(tmp_path):
    scores, _, _ = write_inputs(tmp_path)
    grid = load_grid(scores)
    assert grid.tasks == TASKS  # benchmark order, not alphabetical
    assert grid.models == ("modelA", "modelB") and grid.shots == (1, 3)
    table = accuracy_table(grid)
    assert table.columns == (("modelA", 1), ("modelA", 3), ("modelB", 1), ("modelB", 3))
    assert [row.label for row in table.rows] == [*TASKS, "mean over tasks"]
    # 50 of 100: Wilson 95% interval [40.4, 59.6]
    assert table.rows[0].cells[0].text == "50.0% [40.4, 59.6]"
    assert table.rows[0].chance == "12.5%"
    assert table.rows[1].chance == "≈ 0"
    anomaly = table.rows[3]
    assert anomaly.cells[2].text == "–"  # modelB has no AnomalyDetect row at k=1
    mean = table.rows[4]
    assert mean.cells[0].text == "31.2%"  # (50 + 0 + 20 + 55) / 4 = 31.25
    assert mean.cells[2].text == "13.7% (3/4 tasks)"  # (25 + 1 + 15) / 3
    lines = markdown_table(table).splitlines()
    assert len(lines) == 2 + len(TASKS) + 1
    assert lines[0] == "| task | chance | modelA k=1 | modelA k=3 | modelB k=1 | modelB k=3 |"


def test_cells_say_how_many_episodes_were_error_lines(tmp_path):
    """Error-line counts come from the detail CSV (given, or beside the summary); the summary alone has none."""
    summary = tmp_path / "summary.csv"
    summary.write_text(
        "model,shots,task,accuracy,n\r\nm,1,AudioRemap,0.500000,4\r\nm,1,AudioCount,1.000000,2\r\n"
    )
    assert accuracy_table(load_grid(summary)).rows[1].cells[0].text == "50.0% [15.0, 85.0]"
    detail = tmp_path / "summary_detail.csv"
    detail.write_text(
        "model,shots,task,accuracy,n,correct,unparsed,errors,ci_low,ci_high,scoring\r\n"
        "m,1,AudioRemap,0.500000,4,2,1,1,0.150036,0.849964,original\r\n"
        "m,1,AudioCount,1.000000,2,2,0,0,0.342372,1.000000,original\r\n"
    )
    for scores in (summary, detail):
        rows = accuracy_table(load_grid(scores)).rows
        assert [row.label for row in rows[:2]] == ["AudioCount", "AudioRemap"]
        assert rows[0].cells[0].text == "100.0% [34.2, 100.0]"
        assert rows[1].cells[0].text == "50.0% [15.0, 85.0] (1 of 4 errors)"
        assert "1 error lines" in rows[1].cells[0].title
        assert "(1 of 4 errors)" in markdown_table(accuracy_table(load_grid(scores)))


CLUSTER_DETAIL = (
    "model,shots,task,accuracy,n,correct,unparsed,errors,ci_low,ci_high,scoring,query_clips,cluster_ci_low,"
    "cluster_ci_high\r\n"
    "m,1,AudioRemap,0.500000,4,2,1,1,0.150036,0.849964,original,2,0.000000,1.000000\r\n"
    "m,1,AudioCount,1.000000,2,2,0,0,0.342372,1.000000,original,2,1.000000,1.000000\r\n"
)


def test_cluster_intervals_come_from_the_detail_csv_and_are_labelled(tmp_path):
    """``interval="cluster"``: each cell's interval is the cluster bootstrap over query clips (honest where a
    query clip serves several episodes), read from the detail CSV, and every label says so."""
    summary = tmp_path / "summary.csv"
    summary.write_text(
        "model,shots,task,accuracy,n\r\nm,1,AudioRemap,0.500000,4\r\nm,1,AudioCount,1.000000,2\r\n"
    )
    (tmp_path / "summary_detail.csv").write_text(CLUSTER_DETAIL)
    for scores in (summary, tmp_path / "summary_detail.csv"):
        grid = load_grid(scores, interval="cluster")
        rows = accuracy_table(grid).rows
        assert rows[1].cells[0].text == "50.0% [0.0, 100.0] (1 of 4 errors)"  # the bootstrap's, wider
        assert rows[0].cells[0].text == "100.0% [34.2, 100.0]"  # Wilson's: the bootstrap's is a point here
        assert "cluster" in grid.interval_label
    assert "Wilson" in load_grid(summary).interval_label
    files = write_report(ReportOptions(scores=summary, out=tmp_path / "r", interval="cluster"))
    assert "spanning Wilson's and the cluster bootstrap's" in files.markdown.read_text()
    assert "spanning Wilson&#x27;s and the cluster bootstrap&#x27;s" in files.html.read_text()


def test_cluster_intervals_that_the_scores_do_not_hold_are_refused(tmp_path):
    summary = tmp_path / "summary.csv"
    summary.write_text("model,shots,task,accuracy,n\r\nm,1,AudioRemap,0.500000,4\r\n")
    with pytest.raises(AudioICLError, match="no detail CSV") as info:
        load_grid(summary, interval="cluster")
    assert info.value.file == str(summary)
    (tmp_path / "summary_detail.csv").write_text(
        CLUSTER_DETAIL.replace("original,2,0.000000,1.000000", "original,unknown,,")
    )
    with pytest.raises(AudioICLError, match="query clips .* unknown .*--data") as info:
        load_grid(summary, interval="cluster")
    assert info.value.line == 2 and "AudioRemap" in str(info.value)
    with pytest.raises(AudioICLError, match="interval must be wilson or cluster"):
        load_grid(summary, interval="bayes")


@pytest.mark.parametrize(
    ("content", "line", "words"),
    [
        (b"", 1, "header"),
        (b"model,shots,task,accuracy\r\nm,1,AudioCount,0.5\r\n", 1, "header"),
        (b"model,shots,task,accuracy,n\r\n", 2, "no rows"),
        (b"model,shots,task,accuracy,n\r\nm,1,AudioCount,0.5,10\r\nm,x,AudioCount,0.5,10\r\n", 3, "bad"),
        (
            b"model,shots,task,accuracy,n\r\nm,1,AudioCount,0.5,10\r\nm,1,AudioCount,0.6,10\r\n",
            3,
            "second row",
        ),
        (b"model,shots,task,accuracy,n\r\nm,1,AudioCount,1.5,10\r\n", 2, "accuracy"),
    ],
)
def test_bad_summary_names_file_and_line(tmp_path, content, line, words):
    path = tmp_path / "summary.csv"
    path.write_bytes(content)
    with pytest.raises(AudioICLError) as caught:
        load_grid(path)
    assert caught.value.file == str(path) and caught.value.line == line
    assert words in caught.value.message


def test_missing_summary_names_the_file(tmp_path):
    with pytest.raises(AudioICLError) as caught:
        load_grid(tmp_path / "nope.csv")
    assert caught.value.file == str(tmp_path / "nope.csv")


# --- example selection ------------------------------------------------------------------------------------


def test_interleave_alternates_and_fills_in():
    assert interleave(["s1", "s2", "s3"], ["u1"], 4) == ["s1", "u1", "s2", "s3"]
    assert interleave([], ["u1", "u2"], 3) == ["u1", "u2"]
    assert interleave(["s1"], ["u1"], 1) == ["s1"]


def test_examples_come_from_the_highest_k_solved_first(tmp_path):
    _, results, data = write_inputs(tmp_path)
    chosen = select_examples(read_scored(results), 2, results)
    assert list(chosen) == ["AudioCount", "MorseCode", "AnomalyDetect"]
    count = chosen["AudioCount"]
    assert [e.id for e in count] == ["AudioICL00001", "AudioICL00002"]  # first solved, first unsolved
    assert {e.k for e in count} == {3}
    first = count[0]
    assert first.solved and [a.model for a in first.answers] == ["modelA", "modelB"]
    assert [a.verdict.correct for a in first.answers] == [True, False]
    assert first.answers[1].response is None and first.answers[1].error == "timeout"
    assert first.data_root == data  # from the folder's run.json of older runs
    assert first.prompt == COUNT_PROMPT and len(first.audio_paths) == 4
    assert not count[1].solved
    morse = chosen["MorseCode"][0]
    assert morse.prompt is None and morse.audio_paths is None
    anomaly = chosen["AnomalyDetect"]
    assert [e.id for e in anomaly] == ["AudioICL02401", "AudioICL02402"] and anomaly[0].k == 1
    override = select_examples(read_scored(results), 1, results, data=tmp_path / "elsewhere")
    assert override["AudioCount"][0].data_root == tmp_path / "elsewhere"


def test_data_root_comes_from_the_models_run_record(tmp_path):
    """``<model>_run.json`` of the example's model wins over a folder-wide run.json; another model's
    record is not used."""
    _, results, data = write_inputs(tmp_path)
    (results / "modelA_run.json").write_text(json.dumps({"data": "../moved", "model_name": "modelA"}))
    chosen = select_examples(read_scored(results), 1, results)
    assert chosen["AudioCount"][0].answers[0].model == "modelA"
    assert chosen["AudioCount"][0].data_root == results / "../moved"  # relative to the record's folder
    (results / "run.json").unlink()
    (results / "modelA_run.json").unlink()
    (results / "modelB_run.json").write_text(json.dumps({"data": str(data), "model_name": "modelB"}))
    assert select_examples(read_scored(results), 1, results)["AudioCount"][0].data_root is None


def test_malformed_result_line_names_file_and_line(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "m_results_k1.jsonl").write_text(
        result_line("AudioICL00001", "AudioCount", "1", "1", 1, "m") + "{oops\n"
    )
    with pytest.raises(AudioICLError) as caught:
        read_scored(folder)
    assert caught.value.line == 2 and caught.value.file.endswith("m_results_k1.jsonl")


# --- the whole report -------------------------------------------------------------------------------------


def test_report_files_and_html_structure(tmp_path):
    scores, results, _ = write_inputs(tmp_path)
    out = tmp_path / "report"
    files = write_report(ReportOptions(scores=scores, out=out, results=results, examples=3))

    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["overview.png", "report.md", "report.html", *(f"accuracy_{t}.png" for t in TASKS)]
    )
    for png in out.glob("*.png"):
        assert png.read_bytes().startswith(b"\x89PNG")
    markdown = files.markdown.read_text()
    assert "| AudioCount | 12.5% | 50.0% [40.4, 59.6]" in markdown and "(overview.png)" in markdown

    page = parse_page(files.html)
    assert page.count("img") == len(TASKS) + 1
    assert all(a["src"].startswith("data:image/png;base64,") for a in page.attrs("img"))
    # AudioCount: 3 examples x 4 clips; AnomalyDetect: 2 examples x 3 clips, one missing; MorseCode: none recorded
    audio = page.attrs("audio")
    assert len(audio) == 3 * 4 + 2 * 3 - 1
    assert all(a["src"].startswith("data:audio/wav;base64,") and "controls" in a for a in audio)
    assert page.accuracy_rows == 2 + len(TASKS) + 1  # two header rows, tasks, mean
    assert page.count("article") == 3 + 1 + 2
    text = "".join(page.text)
    assert "missing audio" in text and "query_missing.wav" in text
    assert "prompt not recorded" in text
    assert "No result lines for this task." in text  # AudioRemap
    assert NASTY in text and page.count("script") == 0  # shown as text, never as markup
    html_text = files.html.read_text()
    assert "http://" not in html_text and "https://" not in html_text and "<link" not in html_text

    # the 44.1 kHz stereo clip is carried as 16 kHz mono PCM16
    anomaly_uris = [a["src"] for a in audio if a["title"] == "data/anomalous/fan/train/normal_0.wav"]
    wav = io.BytesIO(base64.b64decode(anomaly_uris[0].split(",", 1)[1]))
    info = sf.info(wav)
    assert (info.samplerate, info.channels, info.subtype, info.frames) == (16000, 1, "PCM_16", 3200)
    assert files.audio_bytes > 0


def test_audio_budget_caps_the_embedded_clips(tmp_path):
    scores, results, _ = write_inputs(tmp_path)
    share = (
        40_000  # per task: one AudioCount example (4 x 8,044 bytes), both AnomalyDetect ones (3 + 2 clips)
    )
    budget = 3 * share  # three tasks have examples
    files = write_report(
        ReportOptions(scores=scores, out=tmp_path / "r", results=results, audio_budget=budget)
    )
    page = parse_page(files.html)
    assert len(page.attrs("audio")) == 4 + 3 + 2
    assert [a["title"] for a in page.attrs("audio")][:5] == [
        "data/audiocount/easy/s_0.wav",
        "data/audiocount/easy/s_1.wav",
        "data/audiocount/easy/s_2.wav",
        "data/audiocount/easy/s_3.wav",
        "data/anomalous/fan/train/normal_0.wav",
    ]
    assert files.audio_bytes <= budget
    assert "audio budget" in "".join(page.text)


def test_report_without_results_has_no_examples(tmp_path):
    scores, _, _ = write_inputs(tmp_path)
    files = write_report(ReportOptions(scores=scores, out=tmp_path / "r"))
    page = parse_page(files.html)
    assert page.count("audio") == 0 and page.count("article") == 0
    assert page.count("img") == len(TASKS) + 1
    assert "pass --results" in "".join(page.text)


def test_text_only_results_are_drawn_as_the_floor(tmp_path: Path):
    scores = tmp_path / "summary.csv"
    floor_rows = "".join(f"text-only,{k},AudioCount,{1 / (8 - k):.6f},100\r\n" for k in (1, 3))
    scores.write_bytes((SUMMARY + floor_rows).encode())
    grid = load_grid(scores)
    assert grid.floor == "text-only" and grid.lines == ("modelA", "modelB")
    assert load_grid(scores, floor="nothing").floor is None
    header = markdown_table(accuracy_table(grid)).splitlines()[0]
    assert "text-only (floor) k=1" in header and "modelA k=1" in header
    files = write_report(ReportOptions(scores=scores, out=tmp_path / "report"))
    markdown = files.markdown.read_text(encoding="utf-8")
    assert "## Chance levels and the text-only floor" in markdown
    assert (
        "- AudioCount: 12.5% (uniform guess over the 8 labels); text-only floor 14.3% (k=1), 20.0% (k=3)"
        in markdown
    )
    html = files.html.read_text(encoding="utf-8")
    assert "Text-only floor: 14.3% (k=1), 20.0% (k=3)." in html and "text-only (floor)" in html
    # without the floor's results nothing about a floor appears
    plain = write_report(ReportOptions(scores=scores, out=tmp_path / "plain", floor="nothing"))
    assert "floor" not in plain.html.read_text(encoding="utf-8").lower()
