"""Format compliance per cell: the parsed share, the accuracy among parsed answers, the protocol's accuracy;
in the detail CSV (last columns) and in the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audioicl.analysis.report import ReportOptions, write_report
from audioicl.analysis.report.accuracy import load_grid
from audioicl.scoring.score import detail_path, find_result_files, read_summary, score_files, score_folder


def write(path: Path, rows: list[tuple[str, str, str | None, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(json.dumps({"id": i, "task": t, "response": r, "gt": g}) + "\n" for i, t, r, g in rows)
    )


COUNT = [
    ("A1", "AudioCount", "3", "3"),  # right
    ("A2", "AudioCount", "I count 4", "4"),  # right, in text
    ("A3", "AudioCount", "5", "4"),  # parsed, wrong
    ("A4", "AudioCount", "three", "3"),  # unparsed
    ("A5", "AudioCount", None, "3"),  # null: unparsed
]
MORSE = [("M1", "MorseCode", "", ""), ("M2", "MorseCode", "?!", "plant")]  # empty-but-right, unparsed


def test_compliance_numbers_on_constructed_lines(tmp_path):
    write(tmp_path / "m_results_k1.jsonl", COUNT + MORSE)
    rows = {r.task: r for r in score_files(find_result_files(tmp_path)).rows}
    count = rows["AudioCount"]
    assert (count.accuracy, count.parsed_share, count.accuracy_parsed) == (0.4, 0.6, pytest.approx(2 / 3))
    morse = rows["MorseCode"]  # the text rule's empty answer: right, yet unparsed, so not among the parsed
    assert (morse.accuracy, morse.parsed_share, morse.accuracy_parsed) == (0.5, 0.0, None)


def test_compliance_columns_end_the_detail_csv_and_read_back(tmp_path):
    write(tmp_path / "results" / "m_results_k1.jsonl", COUNT + MORSE)
    out = tmp_path / "summary.csv"
    score_folder(tmp_path / "results", out)
    text = detail_path(out).read_text().splitlines()
    assert text[0].endswith(",cluster_ci_high,parsed_share,accuracy_parsed")
    assert text[1].endswith(",0.600000,0.666667") and text[2].endswith(",0.000000,")
    back = {r.task: r for r in read_summary(detail_path(out))}
    assert back["AudioCount"].correct_parsed == 2 and back["AudioCount"].accuracy_parsed == pytest.approx(
        2 / 3
    )
    assert back["MorseCode"].accuracy_parsed is None and back["MorseCode"].parsed_share == 0.0
    assert read_summary(out)[0].parsed_share is None  # the summary itself holds no compliance


def test_the_report_draws_compliance_per_task_from_the_detail_csv(tmp_path):
    write(tmp_path / "results" / "m_results_k1.jsonl", COUNT + MORSE)
    write(tmp_path / "results" / "m_results_k2.jsonl", [(i, t, g, g) for i, t, _, g in COUNT])
    out = tmp_path / "summary.csv"
    score_folder(tmp_path / "results", out)
    grid = load_grid(out)
    cell = grid.cell("m", 1, "AudioCount")
    assert (cell.parsed_share, cell.accuracy_parsed) == (0.6, pytest.approx(2 / 3))
    files = write_report(ReportOptions(scores=out, out=tmp_path / "report"))
    assert sorted(files.compliance) == ["AudioCount", "MorseCode"]
    assert all(path.read_bytes().startswith(b"\x89PNG") for path in files.compliance.values())
    markdown = files.markdown.read_text()
    assert (
        "## Format compliance, draws and confusions" in markdown and "(compliance_AudioCount.png)" in markdown
    )
    html = files.html.read_text()
    assert html.count('alt="format compliance vs shots') == 2 and "dashed: the share of answers" in html
    # a summary without its detail CSV has no compliance: no plot
    plain = tmp_path / "plain" / "summary.csv"
    plain.parent.mkdir()
    plain.write_bytes(out.read_bytes())
    assert write_report(ReportOptions(scores=plain, out=tmp_path / "report2")).compliance == {}
