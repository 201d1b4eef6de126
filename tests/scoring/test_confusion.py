"""Confusion views (scoring.confusion) on constructed lines, and the report's tables of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import CHROMIUM, chromium_dom

from audioicl.analysis.report import ReportOptions, write_report
from audioicl.scoring.confusion import GAP, align, label_priors, letter_errors, majority_label, offsets
from audioicl.scoring.lines import ScoredLine
from audioicl.scoring.rules import judge
from audioicl.scoring.score import score_folder


def line(task: str, episode: str, response: str | None, gt: str, k: int = 3, replicate=None) -> ScoredLine:
    verdict = judge(task, response, gt)
    return ScoredLine("m", k, Path("f"), 1, episode, task, response, gt, verdict, replicate=replicate)


def test_offsets_count_answer_minus_truth():
    lines = [
        line("AudioCount", "a", "4", "3"),
        line("AudioCount", "b", "answer: 2", "3"),
        line("AudioCount", "c", "3", "3"),
        line("AudioCount", "d", "8", "3"),
        line("AudioCount", "e", "many", "3"),
        line("AudioLengthHard", "f", "4", "5"),
        line("MorseCode", "g", "plant", "plant"),  # not a numeric task: no offsets
    ]
    found = {o.task: o for o in offsets(lines)}
    assert set(found) == {"AudioCount", "AudioLengthHard"}
    assert found["AudioCount"].counts == {-1: 1, 0: 1, 1: 1, 5: 1} and found["AudioCount"].unparsed == 1
    assert found["AudioLengthHard"].counts == {-1: 1} and found["AudioLengthHard"].parsed == 1


def test_label_prior_against_the_demos_labels():
    demos = {(3, "a"): ("2", "2", "5"), (3, "b"): ("1", "2", "3"), (3, "c"): ("4", "4", "6")}
    lines = [
        line("AudioCount", "a", "2", "5"),  # the majority (2), not the truth; truth is the last label
        line("AudioCount", "b", "3", "7"),  # no majority (all differ); answers the last label
        line("AudioCount", "c", "4", "4"),  # the majority, which is the truth
        line("AudioCount", "d", "4", "4"),  # episode not in the meta
        line("AudioCount", "a", "2", "5", replicate=(1, 0, 0)),  # another draw: other demos
        line("AudioCount", "c", "6", "4", replicate=(0, 0, 2)),  # draw 0, order 0, another wording: counts
    ]
    (prior,) = label_priors(lines, demos)
    assert (prior.lines, prior.majority_lines, prior.other_demos, prior.unknown) == (4, 3, 1, 1)
    assert (prior.answered_majority, prior.truth_majority) == (2, 2)
    assert (prior.answered_last, prior.truth_last) == (2, 1)
    assert majority_label(["x", "y"]) is None and majority_label(["x", "y", "y"]) == "y"


def test_letter_alignment_and_morse_confusions():
    assert align("plant", "plant") == list(zip("plant", "plant", strict=True))
    assert align("plant", "blunt") == [("p", "b"), ("l", "l"), ("a", "u"), ("n", "n"), ("t", "t")]
    assert align("plant", "pant") == [("p", "p"), ("l", GAP), ("a", "a"), ("n", "n"), ("t", "t")]
    assert align("tea", "teas") == [("t", "t"), ("e", "e"), ("a", "a"), (GAP, "s")]
    lines = [
        line("MorseCode", "a", "blunt", "plant"),
        line("MorseCode", "b", "Pant.", "plant"),
        line("MorseCode", "c", "?", "plant"),
    ]
    (errors,) = letter_errors(lines)
    assert (errors.words, errors.unparsed) == (2, 1)
    assert errors.errors() == [(("a", "u"), 1), (("l", GAP), 1), (("p", "b"), 1)]
    rates = errors.letter_error_rate()
    assert rates["p"] == 0.5 and rates["l"] == 0.5 and rates["t"] == 0.0


def result(episode: str, task: str, response: str, gt: str) -> str:
    return json.dumps({"id": episode, "task": task, "response": response, "gt": gt}) + "\n"


def confusion_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """A dataset with demo labels, plain results at k = 2, scored (with the detail CSV)."""
    data = tmp_path / "data"
    meta = data / "meta" / "meta_k2.jsonl"
    meta.parent.mkdir(parents=True)
    episodes = [
        ("AudioICL00001", "AudioCount", ["2", "2"], "5"),
        ("AudioICL00002", "AudioCount", ["6", "6"], "4"),
        ("AudioICL01801", "MorseCode", ["tree", "leaf"], "plant"),
    ]
    meta.write_text(
        "".join(
            json.dumps(
                {
                    "id": i,
                    "task": t,
                    "demos": [
                        {"audio_path": f"data/{i}_{n}.wav", "label": label} for n, label in enumerate(labels)
                    ],
                    "query": {"audio_path": f"data/{i}.wav", "label": gt},
                }
            )
            + "\n"
            for i, t, labels, gt in episodes
        )
    )
    results = tmp_path / "results"
    results.mkdir()
    (results / "m_results_k2.jsonl").write_text(
        result("AudioICL00001", "AudioCount", "2", "5")
        + result("AudioICL00002", "AudioCount", "5", "4")
        + result("AudioICL01801", "MorseCode", "plamt", "plant")
    )
    summary = tmp_path / "scores" / "summary.csv"
    score_folder(results, summary)
    return summary, data


def test_the_report_shows_the_confusion_views_with_the_demos_labels(tmp_path):
    summary, data = confusion_inputs(tmp_path)
    files = write_report(
        ReportOptions(
            scores=summary, out=tmp_path / "report", results=tmp_path / "results", data=data, examples=0
        )
    )
    markdown = files.markdown.read_text()
    assert "#### Answer − truth" in markdown and "#### Label-prior bias" in markdown
    assert "| m | 2 | 0 | 1 | 0 | 0 | 0 | 1 | 0 | 0 | 0 | 0 |" in markdown  # offsets −3 (once), +1 (once)
    # AudioCount: majority 2 answered once of two, the truth never; MorseCode: no majority (tree, leaf)
    assert "| m | 2 | 2 | 50.0% | 0.0% | 50.0% | 0.0% | 0 |" in markdown
    assert "| m | 2 | 1 | – | – | 0.0% | 0.0% | 0 |" in markdown
    assert "#### Letter errors" in markdown and "| m | 2 | 1 | 0 | n→m 1 | n 100% |" in markdown
    html = files.html.read_text()
    assert html.count('<table class="confusion">') == 4  # AudioCount: offsets, prior; Morse: prior, letters


def test_the_report_finds_the_demos_labels_through_the_run_record(tmp_path):
    from helpers import write_run_record

    summary, data = confusion_inputs(tmp_path)
    write_run_record(tmp_path / "results", "m", data, [{"shots": [2], "tasks": None, "limit": None}])
    markdown = write_report(
        ReportOptions(scores=summary, out=tmp_path / "report", results=tmp_path / "results", examples=0)
    ).markdown.read_text()
    assert "| m | 2 | 2 | 50.0% | 0.0% | 50.0% | 0.0% | 0 |" in markdown
    (tmp_path / "results" / "m_run.json").unlink()  # no dataset: every line counted apart
    markdown = write_report(
        ReportOptions(scores=summary, out=tmp_path / "report", results=tmp_path / "results", examples=0)
    ).markdown.read_text()
    assert "| m | 2 | 0 | – | – | – | – | 2 |" in markdown


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium")
def test_the_new_views_render_in_a_browser(tmp_path):
    summary, data = confusion_inputs(tmp_path)
    files = write_report(
        ReportOptions(
            scores=summary, out=tmp_path / "report", results=tmp_path / "results", data=data, examples=1
        )
    )
    dom = chromium_dom(files.html, tmp_path / "profile")
    assert dom.count('<table class="confusion">') == 4
    assert dom.count('alt="format compliance vs shots') == 2
    assert "Letter errors" in dom and "n→m 1" in dom
