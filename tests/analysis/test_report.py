"""Tests of audioicl.analysis.report: chance levels, the accuracy table, example selection, the HTML page."""

from __future__ import annotations

import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from helpers import tone, write_bare_meta, write_results, write_run_record

from audioicl import AudioICLError
from audioicl.analysis.report import ReportOptions, write_report
from audioicl.analysis.report.accuracy import load_grid
from audioicl.analysis.report.examples import interleave, read_scored, select_examples
from audioicl.analysis.report.media import AudioBudget, megabytes
from audioicl.analysis.report.tables import MEAN_ROW, accuracy_tables, markdown_table
from audioicl.audio import write_wav
from audioicl.scoring.score import score_folder
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
COUNT_CLIPS = tuple(f"data/audiocount/easy/s_{i}.wav" for i in range(4))
ANOMALY_CLIPS = (
    "data/anomalous/fan/train/normal_0.wav",
    "data/anomalous/fan/test/anomaly_0.wav",
    "data/anomalous/fan/test/query_0.wav",
)


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
    count_clips = list(COUNT_CLIPS)
    for i, rel in enumerate(count_clips):
        write_wav(data / rel, tone(0.25, 300 + 100 * i), 16000)
    # a 44.1 kHz stereo float clip (write_wav writes only mono PCM16): the page must carry it as 16 kHz mono
    stereo = np.stack([tone(0.2, 440, 44100)] * 2, axis=1)
    (data / "data/anomalous/fan/train").mkdir(parents=True)
    sf.write(data / "data/anomalous/fan/train/normal_0.wav", stereo, 44100, subtype="FLOAT")
    write_wav(data / "data/anomalous/fan/test/anomaly_0.wav", tone(0.2, 880), 16000)
    write_wav(data / "data/anomalous/fan/test/query_0.wav", tone(0.2, 660), 16000)
    anomaly_clips = list(ANOMALY_CLIPS)
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
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        self._in_script = tag == "script"
        if tag == "table":
            self.table_stack.append(attributes.get("class") or "")
        if tag == "tr" and self.table_stack and self.table_stack[-1] == "accuracy":
            self.accuracy_rows += 1

    def handle_endtag(self, tag):
        self._in_script = False
        if tag == "table":
            self.table_stack.pop()

    def handle_data(self, data):
        (self.scripts if self._in_script else self.text).append(data)

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
    tables = accuracy_tables(grid)
    assert [(t.model, t.shots) for t in tables] == [("modelA", (1, 3)), ("modelB", (1, 3))]  # a table a model
    a, b = tables
    assert [row.label for row in a.rows] == [*TASKS, "mean over tasks"]  # no coverage CSV: no episodes row
    # 50 of 100: Wilson 95% interval [40.4, 59.6], its n written out under it
    assert (a.rows[0].cells[0].text, a.rows[0].cells[0].detail) == ("50.0% [40.4, 59.6]", "n 100")
    assert a.rows[0].chance == "12.5%"
    assert a.rows[1].chance == "≈ 0"
    assert b.rows[3].cells[0].text == "–"  # modelB has no AnomalyDetect row at k=1
    assert a.rows[4].cells[0].text == "31.2%"  # (50 + 0 + 20 + 55) / 4 = 31.25
    assert b.rows[4].cells[0].text == "13.7% (3/4 tasks)"  # (25 + 1 + 15) / 3
    lines = markdown_table(a).splitlines()
    assert lines[0] == "### modelA" and lines[2] == "| task | chance | k=1 | k=3 |"
    assert lines[4] == "| AudioCount | 12.5% | 50.0% [40.4, 59.6] (n 100) | 70.0% [60.4, 78.1] (n 100) |"
    assert len(lines) == 2 + 2 + len(TASKS) + 1


def test_cells_say_how_many_episodes_were_error_lines(tmp_path):
    """Error-line counts come from the detail CSV (given, or beside the summary); the summary alone has none."""
    summary = tmp_path / "summary.csv"
    summary.write_text(
        "model,shots,task,accuracy,n\r\nm,1,AudioRemap,0.500000,4\r\nm,1,AudioCount,1.000000,2\r\n"
    )
    assert accuracy_tables(load_grid(summary))[0].rows[1].cells[0].text == "50.0% [15.0, 85.0]"
    detail = tmp_path / "summary_detail.csv"
    detail.write_text(
        "model,shots,task,accuracy,n,correct,unparsed,errors,ci_low,ci_high,scoring\r\n"
        "m,1,AudioRemap,0.500000,4,2,1,1,0.150036,0.849964,original\r\n"
        "m,1,AudioCount,1.000000,2,2,0,0,0.342372,1.000000,original\r\n"
    )
    for scores in (summary, detail):
        (table,) = accuracy_tables(load_grid(scores))
        rows = table.rows
        assert [row.label for row in rows[:2]] == ["AudioCount", "AudioRemap"]
        assert rows[0].cells[0].text == "100.0% [34.2, 100.0]"
        assert (rows[1].cells[0].text, rows[1].cells[0].detail) == (
            "50.0% [15.0, 85.0]",
            "n 4, 1 of them error lines",
        )
        assert "1 error lines" in rows[1].cells[0].title
        assert "(n 4, 1 of them error lines)" in markdown_table(table)


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
        rows = accuracy_tables(grid)[0].rows
        assert rows[1].cells[0].text == "50.0% [0.0, 100.0]"  # the bootstrap's, wider
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
    scores, results, data = write_inputs(tmp_path)
    out = tmp_path / "report"
    files = write_report(ReportOptions(scores=scores, out=out, results=results, examples=3))

    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["clips", "overview.png", "report.md", "report.html", *(f"accuracy_{t}.png" for t in TASKS)]
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
    assert all("controls" in a for a in audio)
    # each distinct clip's file (clips/ beside the page) is named once, on its first player; the others name that player
    sources = {a["id"]: a["src"] for a in audio if "src" in a}
    assert all(src.startswith("clips/") and (out / src).is_file() for src in sources.values())
    assert len(sources) == 4 + 3 == len(set(sources.values()))
    assert all(a["data-clip"] in sources for a in audio if "src" not in a)
    assert page.count("script") == 1  # the one that gives the later players their source
    assert page.accuracy_rows == 2 * (1 + len(TASKS) + 1)  # a table a model: its header row, tasks, mean
    assert page.count("article") == 3 + 1 + 2
    text = "".join(page.text)
    assert "missing audio" in text and "query_missing.wav" in text
    assert "prompt not recorded" in text
    assert "No result lines for this task." in text  # AudioRemap
    assert NASTY in text and "alert" not in "".join(page.scripts)  # shown as text, never as markup
    html_text = files.html.read_text()
    assert "http://" not in html_text and "https://" not in html_text and "<link" not in html_text

    # the 44.1 kHz stereo clip is carried as 16 kHz mono PCM16
    anomaly_uris = [
        a["src"] for a in audio if a["title"] == "data/anomalous/fan/train/normal_0.wav" and "src" in a
    ]
    flac = io.BytesIO((out / anomaly_uris[0]).read_bytes())
    info = sf.info(flac)
    assert (info.format, info.samplerate, info.channels, info.subtype, info.frames) == (
        "FLAC",
        16000,
        1,
        "PCM_16",
        3200,
    )
    # a 16-bit clip at 16 kHz is carried bit-exactly
    count_uri = next(a["src"] for a in audio if a["title"] == "data/audiocount/easy/s_0.wav" and "src" in a)
    carried, _ = sf.read(str(out / count_uri), dtype="int16")
    on_disk, _ = sf.read(data / "data/audiocount/easy/s_0.wav", dtype="int16")
    assert np.array_equal(carried, on_disk)
    assert files.audio_bytes > 0


def test_audio_budget_leaves_out_examples_rather_than_silencing_them(tmp_path):
    """A clip on the page costs nothing again; an example whose new clips do not fit is left out whole, and a
    later, cheaper one of its task may still fit. No player is ever shown without its audio."""
    scores, results, data = write_inputs(tmp_path)
    sizes = AudioBudget(10**9)
    size = {path: len(sizes.encoded(data, path)) for path in COUNT_CLIPS + ANOMALY_CLIPS}
    count, anomaly_pair = sum(size[p] for p in COUNT_CLIPS), sum(size[p] for p in ANOMALY_CLIPS[:2])
    budget = count + anomaly_pair  # AudioCount's clips, then the anomaly pair without its query

    files = write_report(
        ReportOptions(scores=scores, out=tmp_path / "r", results=results, audio_budget=budget)
    )
    page = parse_page(files.html)
    # AudioCount: all three examples (they share their 4 clips); AnomalyDetect: the first (3 new clips) does
    # not fit, the second (2 clips on disk, the third missing) does
    assert [a["title"] for a in page.attrs("audio")] == [*COUNT_CLIPS * 3, *ANOMALY_CLIPS[:2]]
    assert files.audio_bytes == budget and files.audio_clips == 6 and files.examples_left_out == 1
    text = " ".join(page.text)
    assert "AudioICL02401" not in text and "AudioICL02402" in text
    assert "1 example whose audio did not fit was left out (AnomalyDetect 1)" in text
    assert "1 more example left out" in text
    assert "not embedded" not in text
    assert f"of the {megabytes(budget)} budget" in text and "0." not in megabytes(budget)[:2]

    # nothing fits: the examples with audio are left out, each task says why; no clip-less player is shown
    tiny = write_report(ReportOptions(scores=scores, out=tmp_path / "t", results=results, audio_budget=1))
    page = parse_page(tiny.html)
    assert page.count("audio") == 0 and tiny.examples_left_out == 3 + 2
    assert " ".join(page.text).count("the audio of even the first did not fit") == 2
    assert page.count("article") == 1  # MorseCode's example, whose lines name no clips

    # a budget of 0 asks for no audio: the examples stay, as text
    none = write_report(ReportOptions(scores=scores, out=tmp_path / "n", results=results, audio_budget=0))
    page = parse_page(none.html)
    assert page.count("audio") == 0 and page.count("article") == 3 + 1 + 2
    assert "audio left out (--audio-budget-mb 0)" in " ".join(page.text)


@pytest.mark.parametrize(
    ("size", "text"), [(650, "1 kB"), (650_000, "650 kB"), (2_666_667, "2.7 MB"), (24_000_000, "24 MB")]
)
def test_sizes_are_written_for_people(size, text):
    assert megabytes(size) == text


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
    headings = [markdown_table(table).splitlines()[0] for table in accuracy_tables(grid)]
    assert headings == ["### modelA", "### modelB", "### text-only (text-only floor)"]
    files = write_report(ReportOptions(scores=scores, out=tmp_path / "report"))
    markdown = files.markdown.read_text(encoding="utf-8")
    assert "## Chance levels and the text-only floor" in markdown
    assert (
        "- AudioCount: 12.5% (uniform guess over the 8 labels); text-only floor 14.3% (k=1), 20.0% (k=3)"
        in markdown
    )
    html = files.html.read_text(encoding="utf-8")
    assert "Text-only floor: 14.3% (k=1), 20.0% (k=3)." in html and "text-only (text-only floor)" in html
    # without the floor's results nothing about a floor appears
    plain = write_report(ReportOptions(scores=scores, out=tmp_path / "plain", floor="nothing"))
    assert "floor" not in plain.html.read_text(encoding="utf-8").lower()


# --- the demo's report ------------------------------------------------------------------------------------


def test_every_example_of_the_demos_report_can_be_listened_to(tmp_path):
    """On the demo's data (its seed, k = 5, the default --examples and audio budget), every task shows its
    examples and every clip of every shown example has a player with audio; the Morse bank is shown once per
    task and each clip's audio is written once."""
    from audioicl.analysis.demo import DemoOptions, run_demo

    outputs = run_demo(
        DemoOptions(out=tmp_path / "demo", episodes=3, shots=(5,), solvers=("random",), workers=1),
        say=lambda _: None,
    )
    html = outputs.report.read_text(encoding="utf-8")
    assert "not embedded" not in html and 'class="clip-missing"' not in html and "more example" not in html
    # issue 53, item 4: the page was 30 MB with 237 clips inline; now they are files beside it
    assert outputs.report.stat().st_size < 5e6
    page = parse_page(outputs.report)
    sources = {a["id"]: a["src"] for a in page.attrs("audio") if a.get("src")}
    assert all(re.fullmatch(r"clips/[0-9a-f]{16}\.flac", src) for src in sources.values())
    assert len(set(sources.values())) == len(sources)  # one copy per distinct clip
    files = sorted(path.name for path in (outputs.report.parent / "clips").iterdir())
    assert files == sorted(src.split("/")[1] for src in sources.values())
    for src in sources.values():
        assert sf.info(str(outputs.report.parent / src)).format == "FLAC"

    records = {
        json.loads(line)["id"]: json.loads(line)
        for line in (outputs.results / "random_results_k5.jsonl").read_text().splitlines()
    }
    sections = html.split('<section id="task-')[1:]
    assert len(sections) == 9
    for section in sections:
        task = section.split('"', 1)[0]
        articles = section.split("<article")[1:]
        assert len(articles) == 3, task
        banks = section.count('<div class="bank">')
        assert banks == (task == "MorseCode")
        for article in articles:
            episode = article.split("<h4>", 1)[1].split(" ", 1)[0]
            players = re.findall(r"<audio [^>]*>", article)
            for player in players:  # a source of its own, or the id of a player that has one
                assert re.search(r' src="clips/[0-9a-f]{16}\.flac"', player) or (
                    re.search(r'data-clip="([^"]+)"', player).group(1) in sources
                ), (task, episode, player[:200])
            bank = 26 if task == "MorseCode" else 0
            assert len(players) + bank == len(records[episode]["audio_paths"]), (task, episode)
    morse = sections[[s.split('"', 1)[0] for s in sections].index("MorseCode")]
    assert morse.count("the 26 letter clips of the Morse bank above") == 3
    assert len(re.findall(r"<audio [^>]*>", morse.split("<article", 1)[0])) == 26


# --- coverage ---------------------------------------------------------------------------------------------


def scored_folder(tmp_path: Path, lines: int, runs: list[dict] | None = None, per_task: int = 10) -> Path:
    """The summary (with its detail and coverage CSVs) of model m at k = 1 over the first ``lines`` of a
    9-task dataset of ``per_task`` episodes each, every answer right; the run record holds ``runs``."""
    data = tmp_path / "data"
    episodes = write_bare_meta(data, per_task=per_task)
    results = tmp_path / "results"
    chosen = episodes[:lines] if runs is None else [e for i, e in enumerate(episodes) if i % per_task < lines]
    write_results(results / "m_results_k1.jsonl", chosen)
    write_run_record(results, "m", data, runs or [{"shots": [1], "tasks": None, "limit": None}])
    summary = tmp_path / "scores" / "summary.csv"
    score_folder(results, summary)
    return summary


def test_mean_over_tasks_is_over_complete_cells_and_marked_incomplete(tmp_path):
    """49 of 90 lines (four tasks absent, AudioLengthHard 9 of 10): the mean is over the four complete tasks,
    marked with its coverage; the partial cell says so; the report lists what is missing."""
    summary = scored_folder(tmp_path, 49)
    grid = load_grid(summary)
    mean = grid.mean("m", 1)
    assert (mean.accuracy, mean.tasks, mean.of, mean.status, mean.complete) == (
        1.0,
        4,
        9,
        "incomplete",
        False,
    )
    (table,) = accuracy_tables(grid)
    rows = {row.label: row.cells[0] for row in table.rows}
    assert rows["mean over tasks"].text == "100.0% (4 of 9 tasks: incomplete)"
    assert rows["AudioLengthHard"].text == "100.0% [70.1, 100.0]"
    assert rows["AudioLengthHard"].detail == "n 9, partial: 9 of 10 episodes"
    assert (rows["episodes"].text, rows["episodes"].detail) == ("49/90", "incomplete")
    assert rows["AudioCount"].text == "100.0% [72.2, 100.0]"
    files = write_report(ReportOptions(scores=summary, out=tmp_path / "report"))
    markdown = files.markdown.read_text(encoding="utf-8")
    assert "## Coverage" in markdown
    assert "- m k=1: incomplete: 41 of the 90 episodes have no line; 4 task(s) absent" in markdown
    text = "".join(parse_page(files.html).text)
    assert "Coverage" in text and "partial: AudioLengthHard 9/10" in text


def test_a_limit_run_is_labelled_a_subset_in_the_report(tmp_path):
    summary = scored_folder(tmp_path, 2, [{"shots": [1], "tasks": None, "limit": 2}], per_task=5)
    grid = load_grid(summary)
    mean = grid.mean("m", 1)
    assert (mean.status, mean.selection, mean.tasks, mean.of) == ("subset", "first 2 episodes per task", 9, 9)
    cell = next(row for row in accuracy_tables(grid)[0].rows if row.label == MEAN_ROW).cells[0]
    assert cell.text == "100.0% (subset)" and cell.title == "subset: first 2 episodes per task"
    markdown = write_report(ReportOptions(scores=summary, out=tmp_path / "r")).markdown.read_text()
    assert "- m k=1: subset: first 2 episodes per task (18 of 45 episodes)" in markdown


def test_complete_scores_and_old_summaries_without_coverage_read_as_before(tmp_path):
    summary = scored_folder(tmp_path, 90)
    assert (tmp_path / "scores" / "summary_coverage.csv").is_file()
    grid = load_grid(summary)
    assert grid.mean("m", 1).complete and grid.short() == []
    assert next(r for r in accuracy_tables(grid)[0].rows if r.label == MEAN_ROW).cells[0].text == "100.0%"
    assert "## Coverage" not in markdown_report_text(summary, tmp_path / "r")
    (tmp_path / "scores" / "summary_coverage.csv").unlink()  # a summary from before coverage CSVs
    old = load_grid(summary)
    assert old.coverage == {} and old.mean("m", 1).status is None
    assert accuracy_tables(old)[0].rows[-1].cells[0].text == "100.0%"


def markdown_report_text(summary: Path, out: Path) -> str:
    return write_report(ReportOptions(scores=summary, out=out)).markdown.read_text(encoding="utf-8")


# --- the cluster interval in the plots --------------------------------------------------------------------


def test_the_cluster_interval_is_drawn_as_a_labelled_band(tmp_path):
    from audioicl.analysis.report.plots import CLUSTER_BAND, task_plot
    from audioicl.scoring.score import ScoreOptions, query_clips_of

    data = tmp_path / "data"
    episodes = write_bare_meta(data, per_task=6)
    write_results(tmp_path / "results" / "m_results_k1.jsonl", episodes, respond=lambda gt: gt)
    clustered = tmp_path / "clustered" / "summary.csv"
    score_folder(tmp_path / "results", clustered, ScoreOptions(query_clips=query_clips_of(data)))
    plain = tmp_path / "plain" / "summary.csv"
    score_folder(tmp_path / "results", plain)  # no query clips: no cluster interval
    grid = load_grid(clustered)
    assert grid.clustered("AudioCount") and grid.cell("m", 1, "AudioCount").cluster == (1.0, 1.0)
    legend = [t.get_text() for t in task_plot(grid, "AudioCount").axes[0].get_legend().get_texts()]
    assert CLUSTER_BAND in legend and "m" in legend
    bare = load_grid(plain)
    assert not bare.clustered("AudioCount")
    legend = [t.get_text() for t in task_plot(bare, "AudioCount").axes[0].get_legend().get_texts()]
    assert CLUSTER_BAND not in legend
    html = write_report(ReportOptions(scores=clustered, out=tmp_path / "report")).html.read_text()
    assert "bands: 95% cluster bootstrap over query clips" in html


def test_untrusted_text_in_report_md_cannot_become_html():
    """A model's answer or name in report.md (issue 39, item 10: it was kept as raw HTML, which Python-Markdown
    renders): entities for <, > and &, pipes escaped, line breaks as spaces, one cell each."""
    from audioicl.analysis.report.confusion import ViewTable, markdown_view
    from audioicl.analysis.report.tables import markdown_cell

    hostile = '<script>alert(1)</script> & <img src=x onerror="x()"> | a\nb'
    assert markdown_cell(hostile) == (
        '&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;img src=x onerror="x()"&gt; \\| a b'
    )
    made = markdown_view(ViewTable("answers", "what was said", ("label", "answer"), (("3", hostile),)))
    assert "<script>" not in made and "<img" not in made and "&lt;script&gt;" in made
    assert made.count("\n| ") == 2  # the header row and one row: the break did not split the row


def test_a_hostile_model_name_is_escaped_in_every_part_of_report_md(tiny_dataset, tmp_path):
    """Issue 53, item 7: the coverage bullets quoted the model name of a results file's name raw
    (``<img src=x onerror=...>`` live once the Markdown is rendered), where the tables escaped it."""
    from audioicl import RunOptions, run

    folder = tmp_path / "results"
    run(
        RunOptions(data=tiny_dataset, model="builtin:random", out=folder, shots=(1,), limit=1), lambda _: None
    )
    hostile = "<img src=x onerror=alert(1)>"
    for path in list(folder.iterdir()):
        path.rename(path.with_name(path.name.replace("random", hostile)))
    summary = tmp_path / "scores" / "summary.csv"
    score_folder(folder, summary)
    files = write_report(
        ReportOptions(scores=summary, out=tmp_path / "report", results=folder, data=tiny_dataset)
    )
    markdown = files.markdown.read_text(encoding="utf-8")
    assert "## Coverage" in markdown and "&lt;img src=x onerror=alert(1)&gt; k=1: " in markdown
    assert "<img" not in markdown and hostile not in files.html.read_text(encoding="utf-8")


def test_a_studys_conditions_are_small_multiples_of_at_most_three_lines_a_panel(tmp_path):
    """Issue 53, item 4: the study's "every condition" figure drew 11 series with bands in each task's
    panel. Now a panel per condition: its mean over tasks, the plain run's in grey, chance."""
    from audioicl.analysis.report.plots import condition_plot

    data = tmp_path / "data"
    episodes = write_bare_meta(data, per_task=2, ks=(1, 2))
    conditions = ["plain", *(f"c{i}" for i in range(10))]
    for index, name in enumerate(conditions):
        for k in (1, 2):
            respond = (lambda gt: gt) if index % 2 == 0 else (lambda gt: "wrong")
            write_results(tmp_path / "results" / f"{name}_results_k{k}.jsonl", episodes, respond=respond)
    summary = tmp_path / "scores" / "summary.csv"
    score_folder(tmp_path / "results", summary)
    figure = condition_plot(load_grid(summary), "plain")
    shown = [ax for ax in figure.axes if ax.get_visible()]
    assert [ax.get_title() for ax in shown] == conditions  # the plain run first, then each condition
    for ax in shown:
        lines = ax.get_lines()
        drawn = [x for x in lines if len(x.get_xdata()) > 1 and x.get_linestyle() not in ("--", "None")]
        assert 1 <= len(drawn) <= 2, ax.get_title()  # the condition, and the plain run beside it
        assert [line.get_xdata().tolist() for line in drawn][0] == [1, 2]


def test_a_name_with_dollar_signs_is_drawn_as_written_in_every_figure(tmp_path):
    """Model and condition names are drawn as text, not mathtext: ``a$^$b`` made matplotlib's parser fail the
    whole report ("Expected end of text") and ``$x$`` was drawn as math (issue 53's gap)."""
    from audioicl.analysis.report.plots import (
        compliance_figure,
        condition_plot,
        overview_figure,
        task_figure,
        task_plot,
    )

    data = tmp_path / "data"
    episodes = write_bare_meta(data, per_task=2, ks=(1, 2))
    names = ["plain", "a$^$b", "$x$"]
    for name in names:
        for k in (1, 2):
            write_results(
                tmp_path / "results" / f"{name}_results_k{k}.jsonl", episodes, respond=lambda gt: gt
            )
    summary = tmp_path / "scores" / "summary.csv"
    score_folder(tmp_path / "results", summary)
    grid = load_grid(summary)
    task = grid.tasks[0]
    assert task_figure(grid, task) and overview_figure(grid) and compliance_figure(grid, task) is not None
    legend = task_plot(grid, task).axes[0].get_legend().get_texts()
    assert {"a$^$b", "$x$"} <= {text.get_text() for text in legend}
    assert not any(text._parse_math for text in legend)
    titles = [ax.get_title() for ax in condition_plot(grid, "plain").axes if ax.get_visible()]
    assert titles[0] == "plain" and sorted(titles) == sorted(names)
