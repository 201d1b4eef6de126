"""The scorer: the original's per-task rules (SPEC §5), file discovery, aggregation, CSV bytes, bad lines."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import write_bare_meta, write_results, write_run_record

from audioicl import AudioICLError
from audioicl.scoring.coverage import (
    COMPLETE,
    COVERAGE_HEADER,
    INCOMPLETE,
    SUBSET,
    UNCHECKED,
    coverage_path,
    describe_gaps,
    describe_mean,
    format_coverage,
    read_coverage,
)
from audioicl.scoring.rules import INT_TASKS, Rule, judge, last_int, rule_for, rule_table
from audioicl.scoring.score import (
    ResultFile,
    ResultKeys,
    ScoreOptions,
    SummaryRow,
    find_result_files,
    format_table,
    iter_scored_lines,
    parse_result_name,
    read_summary,
    score_files,
    score_folder,
    write_detail,
    write_per_example,
    write_summary,
)
from audioicl.scoring.stats import cluster_bootstrap, wilson_interval
from audioicl.tasks import task_of_episode_id

# SPEC §5's numeric tasks, spelled out (not read from the module under test, which could lose one unseen)
NUMERIC_TASKS = [
    "AudioCount",
    "AudioCountHard",
    "AudioLength",
    "AudioLengthHard",
    "AudioOperator",
    "AudioOperatorHard",
]
ALL_TASKS = NUMERIC_TASKS + ["AnomalyDetect", "AudioRemap", "MorseCode", "SomethingElse", ""]


def write_jsonl(path: Path, records: list[object], *, tail: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records) + tail
    path.write_text(text, encoding="utf-8", newline="")
    return path


def line(task: str, response: object, gt: object, id: str = "AudioICL00001") -> dict:
    return {"id": id, "task": task, "response": response, "gt": gt}


# --- rule 1: null -------------------------------------------------------------------------------------


@pytest.mark.parametrize("task", ALL_TASKS)
def test_null_response_is_wrong_and_unparsed_for_every_task(task):
    verdict = judge(task, None, None)
    assert (verdict.correct, verdict.parsed, verdict.prediction) == (False, False, None)
    assert not judge(task, None, "3").correct


# --- rule 2: count, length, operator tasks ------------------------------------------------------------


def test_the_numeric_tasks_are_exactly_the_specs():
    assert sorted(INT_TASKS) == NUMERIC_TASKS


@pytest.mark.parametrize("task", NUMERIC_TASKS)
@pytest.mark.parametrize(
    ("response", "gt", "correct", "prediction"),
    [
        ("Answer: 3", "3", True, 3),
        ("3", 3, True, 3),
        ("3.5", 5, True, 5),  # the LAST integer: the original reads "3.5" as 5
        ("3.5", 3, False, 5),
        ("-2", "-2", True, -2),
        ("+2", 2, True, 2),
        ("-2", 2, False, -2),
        ("between 2-3", -3, True, -3),
        ("I count 4 sounds, so 7", "7", True, 7),
        ("007", 7, True, 7),
        ("\u0663", 3, True, 3),  # ARABIC-INDIC DIGIT THREE: \d is Unicode, as in the original
        (7, "7", True, 7),  # a non-string response reads through str()
    ],
)
def test_last_integer_rule(task, response, gt, correct, prediction):
    verdict = judge(task, response, gt)
    assert (verdict.correct, verdict.parsed, verdict.prediction) == (correct, True, prediction)


@pytest.mark.parametrize("response", ["three", "", "  ", "no idea", "²", "9" * 5000, "x -" + "9" * 5000])
def test_response_without_integer_is_unparsed(response):
    verdict = judge("AudioCount", response, "3")
    assert (verdict.correct, verdict.parsed, verdict.prediction) == (False, False, None)


@pytest.mark.parametrize(
    ("gt", "response", "correct"),
    [
        (7, "7", True),  # an int as is
        ("7", "7", True),
        ("The answer is 7", "7", True),  # else the last integer of its text
        ("6 or 7", "6", False),
        ("seven", "7", False),  # no integer in gt: nothing is right
        (None, "7", False),
        (True, "1", True),  # a bool is an int in Python: the original's quirk
        (7.0, "7", False),  # a float is not: "7.0" → last integer 0
        (7.0, "0", True),
    ],
)
def test_ground_truth_forms(gt, response, correct):
    assert judge("AudioCountHard", response, gt).correct is correct


def test_last_int_fast_path_agrees_with_the_regex_for_every_decimal_digit():
    digits = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isdecimal()]
    assert len(digits) > 300
    for d in digits:
        text = d * 2
        assert last_int(text) == int(re.findall(r"[-+]?\d+", text)[-1])
        assert last_int(f"x{text}") == last_int(text)


# --- rule 3: AnomalyDetect ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "label"),
    [
        ("NORMAL.", "normal"),
        ("Normal", "normal"),
        ("abnormal", "anomalous"),
        ("Anomaly", "anomalous"),
        ("Anomalous!", "anomalous"),
        ("true", "anomalous"),
        ("1", "anomalous"),
        ("false", "normal"),
        ("0", "normal"),
        ("not normal", "normal"),  # "notnormal": no anomal/abnorm, contains normal → normal (original rule)
        ("no anomaly", "anomalous"),  # contains anomal
        ("Abnormality detected", "anomalous"),
        ("The machine sounds normal to me", "normal"),
        ("It is N o r m a l", "normal"),  # whitespace deleted before matching
    ],
)
def test_anomaly_mapping(response, label):
    verdict = judge("AnomalyDetect", response, "Normal" if label == "normal" else "Anomalous")
    assert (verdict.correct, verdict.parsed, verdict.prediction) == (True, True, label)


@pytest.mark.parametrize("response", ["I don't know", "yes", "2", "", "norm"])
def test_anomaly_unparsed(response):
    verdict = judge("AnomalyDetect", response, "Normal")
    assert (verdict.correct, verdict.parsed) == (False, False)


def test_anomaly_needs_a_readable_ground_truth():
    assert not judge("AnomalyDetect", "normal", None).correct
    assert not judge("AnomalyDetect", "normal", "unknown").correct
    assert not judge("AnomalyDetect", "anomalous", "Normal").correct


# --- rule 4: AudioRemap -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "prediction"),
    [
        ("PBP", "PBP"),
        ("P B P", "PBP"),
        ("pbp", "PBP"),
        ("P-B-P.", "PBP"),
        ("P\u00e9BP", "PBP"),  # non-ASCII letters are dropped
        ("1P2B3P", "PBP"),
    ],
)
def test_remap_reads_three_ascii_letters(response, prediction):
    verdict = judge("AudioRemap", response, "PBP")
    assert (verdict.correct, verdict.parsed, verdict.prediction) == (True, True, prediction)


@pytest.mark.parametrize("response", ["PB", "PBPB", "Label: PBP", "\uff30BP", "", "123"])
def test_remap_other_letter_counts_are_unparsed(response):
    verdict = judge("AudioRemap", response, "PBP")
    assert (verdict.correct, verdict.parsed, verdict.prediction) == (False, False, None)


def test_remap_ground_truth_is_read_the_same_way():
    assert judge("AudioRemap", "PBP", "p b p").correct
    assert not judge("AudioRemap", "PBP", None).correct
    assert not judge("AudioRemap", "PBP", "PB").correct
    assert not judge("AudioRemap", "PBB", "PBP").correct


# --- rule 5: MorseCode and everything else ------------------------------------------------------------


@pytest.mark.parametrize("char", list(".,;:!?()[]{}\"'"))
def test_text_rule_deletes_each_listed_punctuation_mark(char):
    assert judge("MorseCode", f"{char}pl{char}ant{char}", "plant").correct


@pytest.mark.parametrize("char", ["-", "*", "`", "/", "_", "\u201c"])
def test_text_rule_keeps_other_characters(char):
    assert not judge("MorseCode", f"pl{char}ant", "plant").correct


@pytest.mark.parametrize("space", [" ", "\t", "\n", "\u00a0", "\u3000", "\u2028"])
def test_text_rule_deletes_whitespace_inside_words(space):
    verdict = judge("MorseCode", f"  P{space}L A N{space}T  ", "plant")
    assert (verdict.correct, verdict.parsed, verdict.prediction) == (True, True, "plant")


@pytest.mark.parametrize("task", ["MorseCode", "SomethingElse", "", "audiocount"])
def test_text_rule_applies_to_morse_and_any_other_task(task):
    assert judge(task, "Plant!", "plant").correct
    assert not judge(task, "The word is plant", "plant").correct


def test_ground_truths_equal_across_types_are_read_apart_whatever_came_first():
    """1, 1.0 and True hash alike; the ground-truth cache must not answer for one with another's reading
    (1.0 is no int: its last integer is 0)."""
    for order in ((1, 1.0, True), (1.0, True, 1), (True, 1, 1.0)):
        for gt in order:
            expected = "0" if type(gt) is float else "1"
            assert judge("AudioCount", expected, gt).correct, (order, gt)
            assert not judge("AudioCount", "1" if expected == "0" else "0", gt).correct, (order, gt)


def test_the_rules_default_to_the_originals_not_the_strict_ones():
    rules, fallback = rule_table()
    assert rules["AudioCount"].judge("The answer is 3", 3).correct
    assert fallback.judge("Plant!", "plant").correct
    assert rule_for("AudioCount").judge("The answer is 3", 3).correct
    assert not rule_for("AudioCount", strict=True).judge("The answer is 3", 3).correct
    assert judge("AnomalyDetect", "It sounds abnormal.", "anomalous").correct


def test_a_rule_cannot_be_changed_in_place():
    """The rule tables are shared by every scorer in the process: a rule is frozen."""
    rule = rule_for("AudioCount")
    assert isinstance(rule, Rule)
    with pytest.raises(AttributeError):
        rule.read_gt = str  # type: ignore[misc]


def test_task_names_are_exact():
    # lower-case "audiocount" is not a count task: it falls to the text rule
    assert judge("AudioCount", "Answer: 3", "3").correct
    assert not judge("audiocount", "Answer: 3", "3").correct


def test_text_rule_empty_response_is_unparsed_but_equal_to_an_empty_gt():
    assert judge("MorseCode", "", "plant") == judge("MorseCode", "..", "plant")
    verdict = judge("MorseCode", "", "plant")
    assert (verdict.correct, verdict.parsed) == (False, False)
    # the original compares normalised strings: empty equals empty (and a null gt normalises to empty)
    assert judge("MorseCode", " . ", None).correct
    assert not judge("MorseCode", " . ", None).parsed


# --- strict mode --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "response", "gt", "correct", "parsed"),
    [
        ("AudioCount", "3", "3", True, True),
        ("AudioCount", " -2\n", -2, True, True),
        ("AudioCount", "3.", "3", False, False),
        ("AudioCount", "Answer: 3", "3", False, False),
        ("AudioCount", "4", "3", False, True),
        ("AnomalyDetect", "Normal", "Normal", True, True),
        ("AnomalyDetect", "ANOMALOUS", "Anomalous", True, True),
        ("AnomalyDetect", "normal.", "Normal", False, False),
        ("AnomalyDetect", "anomaly", "Anomalous", False, False),
        ("AudioRemap", "pbp", "PBP", True, True),
        ("AudioRemap", "P B P", "PBP", False, False),
        ("MorseCode", "Plant", "plant", True, True),
        ("MorseCode", "plant.", "plant", False, False),
        ("MorseCode", "pl ant", "plant", False, False),
        ("MorseCode", "", "", False, False),
    ],
)
def test_strict_mode(task, response, gt, correct, parsed):
    verdict = judge(task, response, gt, strict=True)
    assert (verdict.correct, verdict.parsed) == (correct, parsed)


def test_strict_correct_is_always_default_correct():
    responses = [
        "3",
        "3.",
        " 3 ",
        "Answer: 3",
        "normal",
        "Normal.",
        "anomalous",
        "PBP",
        "p b p",
        "plant",
        "Plant!",
    ]
    cases = [("AudioCount", "3"), ("AnomalyDetect", "Normal"), ("AnomalyDetect", "Anomalous")]
    cases += [("AudioRemap", "PBP"), ("MorseCode", "plant")]
    strict_hits = 0
    for task, gt in cases:
        for response in responses:
            if judge(task, response, gt, strict=True).correct:
                strict_hits += 1
                assert judge(task, response, gt).correct, (task, response)
    assert strict_hits == 6


# --- Wilson interval ----------------------------------------------------------------------------------


def test_wilson_interval_known_values():
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(0.23659, abs=1e-5) and high == pytest.approx(0.76341, abs=1e-5)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.27754, abs=1e-5)
    assert wilson_interval(10, 10)[1] == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(81, 263, z=2.576)[0] < wilson_interval(81, 263)[0]


# --- file discovery -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("Qwen2-Audio-7B-Instruct_results_k3.jsonl", ("Qwen2-Audio-7B-Instruct", 3)),
        ("m_results_meta_k2.jsonl", ("m", 2)),
        ("m_results_k10.jsonl", ("m", 10)),
        ("a_results_k1_results_k1.jsonl", ("a_results_k1", 1)),  # shortest prefix that makes the name match
        ("a_results_meta_results_k4.jsonl", ("a_results_meta", 4)),
        ("_results_k1.jsonl", None),
        ("m_results_k.jsonl", None),
        ("m_result_k1.jsonl", None),
        ("m_results_k1.json", None),
        ("m_results_k1.jsonl.bak", None),
        ("m_results_k1.jsonlx", None),
        ("meta_k1.jsonl", None),
    ],
)
def test_parse_result_name(name, parsed):
    assert parse_result_name(name) == parsed


def test_find_result_files_recursive_sorted_filtered(tmp_path):
    write_jsonl(tmp_path / "b" / "m_results_k1.jsonl", [])
    write_jsonl(tmp_path / "a" / "deep" / "m_results_meta_k2.jsonl", [])
    write_jsonl(tmp_path / "x_results_k1.jsonl", [])
    write_jsonl(tmp_path / "notes.jsonl", [])
    (tmp_path / "dir_results_k1.jsonl").mkdir()
    found = find_result_files(tmp_path)
    assert [(f.path.relative_to(tmp_path).as_posix(), f.model, f.shots) for f in found] == [
        ("a/deep/m_results_meta_k2.jsonl", "m", 2),
        ("b/m_results_k1.jsonl", "m", 1),
        ("x_results_k1.jsonl", "x", 1),
    ]
    assert [f.model for f in find_result_files(tmp_path, models=["x"])] == ["x"]
    assert [f.shots for f in find_result_files(tmp_path, shots=[2])] == [2]
    with pytest.raises(AudioICLError, match="not a folder"):
        find_result_files(tmp_path / "missing")


def test_same_model_and_k_in_two_folders_count_together(tmp_path):
    write_jsonl(tmp_path / "run1" / "m_results_k1.jsonl", [line("AudioCount", "3", "3")] * 3)
    write_jsonl(tmp_path / "run2" / "m_results_meta_k1.jsonl", [line("AudioCount", "2", "3")])
    rows = score_files(find_result_files(tmp_path)).rows
    assert rows == [SummaryRow("m", 1, "AudioCount", 0.75, 4, 3, 0, 0, correct_parsed=3)]


def test_error_lines_are_counted_per_cell_and_stay_in_n_as_wrong(tmp_path):
    """A run's error line (an episode it could not ask, e.g. a clip missing from the dataset) is wrong and
    unparsed like any null response, and the detail counts it apart; the summary CSV does not change."""
    error = {**line("AudioRemap", None, "PBP", "AudioICL02102"), "status": "error", "error": "x: not found"}
    ok = {**line("AudioRemap", "PBP", "PBP"), "status": "ok", "error": None}
    write_jsonl(tmp_path / "m_results_k1.jsonl", [ok, error, line("AudioCount", "3", "3")])
    write_jsonl(tmp_path / "m_results_k2.jsonl", [{**error, "status": "ok"}])  # status decides, not error
    rows = score_files(find_result_files(tmp_path)).rows
    assert [(r.shots, r.task, r.n, r.correct, r.unparsed, r.errors) for r in rows] == [
        (1, "AudioCount", 1, 1, 0, 0),
        (1, "AudioRemap", 2, 1, 1, 1),
        (2, "AudioRemap", 1, 0, 1, 0),
    ]
    summary, detail = tmp_path / "s.csv", tmp_path / "s_detail.csv"
    write_summary(summary, rows)
    write_detail(detail, rows)
    assert summary.read_bytes().split(b"\r\n")[2] == b"m,1,AudioRemap,0.500000,2"
    assert detail.read_bytes().split(b"\r\n")[2].startswith(b"m,1,AudioRemap,0.500000,2,1,1,1,")
    assert [r.errors for r in read_summary(detail)] == [0, 1, 0]
    assert [r.errors for r in read_summary(summary)] == [None, None, None]
    table = format_table(rows).splitlines()
    assert table[0].split()[-2:] == ["unparsed", "errors"]
    assert table[3].split()[-3:] == ["1/2", "1", "1"]


def test_the_table_right_aligns_its_numbers_and_names_a_row_without_task():
    rows = [
        SummaryRow("icl", 1, "AudioCount", 0.5, 2, 1, 0, 0),
        SummaryRow("majority-long-name", 10, "", 1 / 3, 3, 1, 1, 2),
    ]
    assert format_table(rows).splitlines() == [
        "model                k  task        acc %  95% CI       correct/n  unparsed  errors",
        "------------------  --  ----------  -----  -----------  ---------  --------  ------",
        "icl                  1  AudioCount   50.0  [9.5, 90.5]        1/2         0       0",
        "majority-long-name  10  (no task)    33.3  [6.1, 79.2]        1/3         1       2",
    ]


def test_scoring_keeps_no_lines_unless_asked_and_its_rows_are_frozen(tmp_path):
    write_jsonl(tmp_path / "m_results_k1.jsonl", [line("AudioCount", "3", "3")])
    files = find_result_files(tmp_path)
    assert score_files(files).examples == {}
    kept = score_files(files, keep_examples=True).examples
    assert [s.id for s in kept[("m", 1)]] == ["AudioICL00001"]
    row = score_files(files).rows[0]
    with pytest.raises(AttributeError):
        row.n = 5  # type: ignore[misc]


def test_detail_csv_of_earlier_versions_reads_without_errors(tmp_path):
    old = tmp_path / "old_detail.csv"
    old.write_text(
        "model,shots,task,accuracy,n,correct,unparsed,ci_low,ci_high,scoring\r\n"
        "m,1,AudioCount,0.500000,2,1,0,0.094531,0.905469,original\r\n"
    )
    assert read_summary(old) == [SummaryRow("m", 1, "AudioCount", 0.5, 2, 1, 0, None)]


# --- reading lines ------------------------------------------------------------------------------------


def score_text(tmp_path: Path, text: str | bytes, **options) -> list:
    path = tmp_path / "m_results_k1.jsonl"
    if isinstance(text, str):
        text = text.encode("utf-8")
    path.write_bytes(text)
    return list(iter_scored_lines(ResultFile(path, "m", 1), ScoreOptions(**options)))


def test_blank_lines_are_skipped_and_line_numbers_are_physical(tmp_path):
    good = json.dumps(line("AudioCount", "3", "3"))
    scored = score_text(tmp_path, f"\n{good}\n   \n\t\n{good}\n\n")
    assert [s.line for s in scored] == [2, 5]


def test_crlf_and_lone_cr_end_lines_but_u2028_inside_a_string_does_not(tmp_path):
    a = json.dumps(line("MorseCode", "pl\u2028ant\u0085", "plant"), ensure_ascii=False)
    b = json.dumps(line("AudioCount", "3", 3))
    scored = score_text(tmp_path, f"{a}\r\n{b}\r{b}")
    assert [(s.line, s.verdict.correct) for s in scored] == [(1, True), (2, True), (3, True)]


def test_task_missing_is_empty_and_task_null_is_the_string_none(tmp_path):
    records = [
        {"id": "x1", "response": "Plant", "gt": "plant"},
        {"id": "x2", "task": None, "response": "3", "gt": 3},
    ]
    scored = score_text(tmp_path, "".join(json.dumps(r) + "\n" for r in records))
    assert [(s.task, s.verdict.correct) for s in scored] == [("", True), ("None", True)]


def test_missing_gt_key_is_not_malformed(tmp_path):
    scored = score_text(tmp_path, json.dumps({"id": "x", "task": "AudioCount", "response": "3"}) + "\n")
    assert scored[0].gt is None and not scored[0].verdict.correct


def test_missing_response_key_is_wrong_and_stays_in_n(tmp_path):
    """SPEC §5 rule 1, as the original (``record.get("response")``): no response is a wrong answer, not a
    malformed line; it is counted in n and as unparsed, without --skip-bad-lines."""
    good = json.dumps(line("AudioCount", "3", "3"))
    missing = json.dumps({"id": "AudioICL00042", "task": "AudioCount", "gt": "3"})
    scored = score_text(tmp_path, f"{good}\n{missing}\n")
    assert [(s.id, s.malformed, s.response, s.verdict.correct, s.verdict.parsed) for s in scored] == [
        ("AudioICL00001", False, "3", True, True),
        ("AudioICL00042", False, None, False, False),
    ]
    scoring = score_files(find_result_files(tmp_path))
    assert scoring.malformed == 0
    assert [(r.task, r.n, r.correct, r.unparsed) for r in scoring.rows] == [("AudioCount", 2, 1, 1)]


def test_missing_custom_response_key_is_wrong_too(tmp_path):
    record = {"uid": "u7", "kind": "AudioCount", "label": "3", "response": "3"}
    keys = ResultKeys(response="pred", gt="label", task="kind", id="uid")
    scored = score_text(tmp_path, json.dumps(record) + "\n", keys=keys)
    assert (scored[0].id, scored[0].malformed, scored[0].verdict.correct) == ("u7", False, False)


def test_custom_keys(tmp_path):
    record = {"uid": "u7", "kind": "AudioRemap", "pred": "E G E", "label": "EGE"}
    keys = ResultKeys(response="pred", gt="label", task="kind", id="uid")
    scored = score_text(tmp_path, json.dumps(record) + "\n", keys=keys)
    assert (scored[0].id, scored[0].task, scored[0].verdict.correct) == ("u7", "AudioRemap", True)


MALFORMED = [
    ('{"id": "AudioICL00042", "task": "AudioCount", "response": "3"', "not valid JSON", "AudioICL00042"),
    ('{"id": "AudioICL00042", "response": "3"} {"id": 2}', "extra data", "AudioICL00042"),
    ('["AudioICL00042", "3"]', "not a JSON object but list", None),
    ('"just text"', "not a JSON object but str", None),
    ("\ufeff" + json.dumps(line("AudioCount", "3", "3")), "not valid JSON", "AudioICL00001"),
    (
        '{"id": "AudioICL00042", "response": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "nested too deeply",
        "AudioICL00042",
    ),
]


@pytest.mark.parametrize(("bad", "message", "id"), MALFORMED)
def test_malformed_line_raises_naming_file_line_and_id(tmp_path, bad, message, id):
    good = json.dumps(line("AudioCount", "3", "3"))
    with pytest.raises(AudioICLError) as caught:
        score_text(tmp_path, f"{good}\n\n{bad}\n{good}\n")
    error = caught.value
    assert message in error.message
    assert (Path(error.file).name, error.line, error.id) == ("m_results_k1.jsonl", 3, id)


def test_half_written_last_line_is_malformed(tmp_path):
    good = json.dumps(line("AudioCount", "3", "3"))
    with pytest.raises(AudioICLError, match="not valid JSON") as caught:
        score_text(tmp_path, f"{good}\n{good[:30]}")
    assert caught.value.line == 2
    # a complete last line without the final newline is fine
    assert len(score_text(tmp_path, f"{good}\n{good}")) == 2


@pytest.mark.parametrize(("bad", "message", "id"), MALFORMED)
def test_skip_bad_lines_counts_them_as_wrong(tmp_path, bad, message, id):
    good = json.dumps(line("AudioCount", "3", "3"))
    scored = score_text(tmp_path, f"{good}\n{bad}\n", skip_bad_lines=True)
    assert [(s.malformed, s.verdict.correct, s.verdict.parsed) for s in scored] == [
        (False, True, True),
        (True, False, False),
    ]
    assert scored[1].task == ""
    assert scored[1].id == id


def test_a_task_told_only_by_broken_lines_counts_them_wrong_with_their_query_clips(tmp_path):
    """A malformed line counts in the task its text tells (skip_bad_lines), starting that task's tally at
    0 of 1, and in its query clip's cluster; the line itself is malformed, not an error line."""
    good = json.dumps(line("AudioCount", "3", "3", id="e1"))
    broken = '{"id": "e2", "task": "AudioRemap", "response": "AB'
    options = {"skip_bad_lines": True, "query_clips": {(1, "e1"): "q1.wav", (1, "e2"): "q2.wav"}}
    scored = score_text(tmp_path, f"{good}\n{broken}\n{broken.replace('e2', 'e3')}\n", **options)
    assert [(s.malformed, s.error, s.id) for s in scored] == [
        (False, False, "e1"),
        (True, False, "e2"),
        (True, False, "e3"),
    ]
    scoring = score_files(find_result_files(tmp_path), ScoreOptions(**options))
    assert scoring.malformed == 2 and scoring.unreadable == 0
    rows = {r.task: r for r in scoring.rows}
    remap = rows["AudioRemap"]
    assert (remap.correct, remap.n, remap.unparsed, remap.errors, remap.accuracy) == (0, 2, 2, 0, 0.0)
    # e2's clip is known, e3's is not: the clusters are q2.wav's and the unknown one's
    assert remap.query_clips is None and remap.cluster_interval is None
    assert (rows["AudioCount"].correct, rows["AudioCount"].n, rows["AudioCount"].query_clips) == (1, 1, 1)
    # a right AudioRemap answer and the broken line, both of clip q2.wav: that clip is 1 right of 2
    right = json.dumps(line("AudioRemap", "ABA", "ABA", id="e4"))
    options["query_clips"][(1, "e4")] = "q2.wav"
    assert [s.malformed for s in score_text(tmp_path, f"{right}\n{broken}\n", **options)] == [False, True]
    (row,) = score_files(find_result_files(tmp_path), ScoreOptions(**options)).rows
    assert (row.task, row.correct, row.n, row.query_clips) == ("AudioRemap", 1, 2, 1)
    assert row.cluster_interval == cluster_bootstrap([[1, 2]], ("m", 1, "AudioRemap"))


def test_skipped_lines_stay_in_n(tmp_path):
    good = json.dumps(line("AudioCount", "3", "3"))
    write_jsonl(
        tmp_path / "m_results_k1.jsonl", [], tail=f'{good}\n{{"task": "AudioCount", "gt": "3"}}\n{good}\n'
    )
    write_jsonl(tmp_path / "m_results_k2.jsonl", [], tail=f"{good}\n{{oops\n")
    scoring = score_files(find_result_files(tmp_path), ScoreOptions(skip_bad_lines=True))
    assert scoring.malformed == 1  # the line without a response is wrong but not malformed
    # "{oops" tells neither id nor task: an unreadable line, apart, in no task (never the task "")
    assert [(r.shots, r.task, r.n, r.correct, r.unparsed) for r in scoring.rows] == [
        (1, "AudioCount", 3, 2, 1),
        (2, "AudioCount", 1, 1, 0),
    ]
    assert scoring.unreadable == 1
    assert [(c.shots, c.unreadable) for c in scoring.coverage] == [(1, 0), (2, 1)]


def test_invalid_utf8_names_the_line(tmp_path):
    good = json.dumps(line("AudioCount", "3", "3")).encode()
    with pytest.raises(AudioICLError, match="not UTF-8") as caught:
        score_text(tmp_path, good + b"\n" + good + b"\n" + b'{"response": "\xff"}\n')
    assert caught.value.line == 3


# --- summary, detail and per-example CSV --------------------------------------------------------------


def test_summary_csv_bytes_exact(tmp_path):
    results = tmp_path / "results"
    write_jsonl(
        results / "m_results_k10.jsonl",
        [line("AudioCount", "3", "3"), line("AudioCount", "4", "3"), line("AudioCount", "x", "3")],
    )
    write_jsonl(
        results / "m_results_k2.jsonl",
        [line("MorseCode", "plant", "plant"), line("AnomalyDetect", "normal", "Normal")]
        + [line("AnomalyDetect", "?", "Normal")],
    )
    write_jsonl(results / "B_results_k1.jsonl", [line("AudioRemap", "PBP", "PBP")])
    scoring = score_files(find_result_files(results))
    out = tmp_path / "summary.csv"
    write_summary(out, scoring.rows)
    assert out.read_bytes() == (
        b"model,shots,task,accuracy,n\r\n"
        b"B,1,AudioRemap,1.000000,1\r\n"
        b"m,2,AnomalyDetect,0.500000,2\r\n"
        b"m,2,MorseCode,1.000000,1\r\n"
        b"m,10,AudioCount,0.333333,3\r\n"
    )
    assert read_summary(out) == [
        SummaryRow("B", 1, "AudioRemap", 1.0, 1),
        SummaryRow("m", 2, "AnomalyDetect", 0.5, 2),
        SummaryRow("m", 2, "MorseCode", 1.0, 1),
        SummaryRow("m", 10, "AudioCount", 0.333333, 3),
    ]
    detail = tmp_path / "detail.csv"
    write_detail(detail, scoring.rows)
    lines = detail.read_bytes().split(b"\r\n")
    assert lines[0] == (
        b"model,shots,task,accuracy,n,correct,unparsed,errors,ci_low,ci_high,scoring,"
        b"query_clips,cluster_ci_low,cluster_ci_high,parsed_share,accuracy_parsed"
    )
    assert (
        lines[4] == b"m,10,AudioCount,0.333333,3,1,1,0,0.061490,0.792345,original,unknown,,,0.666667,0.500000"
    )
    assert [(r.correct, r.unparsed) for r in read_summary(detail)] == [(1, 0), (1, 1), (1, 0), (1, 1)]
    table = format_table(scoring.rows)
    assert "1/3" in table.splitlines()[-1] and "33.3" in table


@pytest.mark.parametrize("companion", ["summary_detail.csv", "summary_coverage.csv"])
def test_a_companion_csv_that_cannot_be_written_leaves_no_summary(tmp_path, companion):
    """Regression: the summary was written first, so a detail or coverage CSV that failed (a full disk, here a
    folder in its place) left a summary that looked complete, or an earlier run's beside the new detail. The
    summary is now written last, after an earlier one is removed."""
    results = tmp_path / "results"
    write_jsonl(results / "m_results_k1.jsonl", [line("AudioCount", "3", "3")])
    out = tmp_path / "scores" / "summary.csv"
    out.parent.mkdir()
    out.write_text("model,shots,task,accuracy,n\r\nold,1,AudioCount,0.000000,9\r\n")
    (out.parent / companion).mkdir()
    with pytest.raises(AudioICLError, match=companion):
        score_folder(results, out)
    assert not out.exists()
    (out.parent / companion).rmdir()
    score_folder(results, out)
    assert read_summary(out) == [SummaryRow("m", 1, "AudioCount", 1.0, 1)]


def test_read_summary_errors(tmp_path):
    bad_header = tmp_path / "a.csv"
    bad_header.write_text("model,k,task\r\n")
    with pytest.raises(AudioICLError, match="not a summary CSV"):
        read_summary(bad_header)
    bad_row = tmp_path / "b.csv"
    bad_row.write_text("model,shots,task,accuracy,n\r\nm,one,AudioCount,0.5,2\r\n")
    with pytest.raises(AudioICLError, match="bad summary row") as caught:
        read_summary(bad_row)
    assert caught.value.line == 2
    with pytest.raises(AudioICLError, match="cannot read"):
        read_summary(tmp_path / "missing.csv")


def test_per_example_csv(tmp_path):
    write_jsonl(tmp_path / "r" / "m_results_k1.jsonl", [line("AudioCount", "3", 3, "e1")])
    write_jsonl(
        tmp_path / "s" / "m_results_k1.jsonl",
        [line("MorseCode", None, "plant", "e2"), {"task": "MorseCode", "response": "Plant,", "gt": "plant"}],
    )
    scoring = score_files(find_result_files(tmp_path), keep_examples=True)
    [path] = write_per_example(tmp_path / "pe", scoring)
    assert path.name == "m_k1.csv"
    assert path.read_bytes() == b"id,task,correct\r\ne1,AudioCount,1\r\ne2,MorseCode,0\r\n,MorseCode,1\r\n"
    [path] = write_per_example(tmp_path / "pe", scoring, keep_text=True)
    assert path.read_bytes().split(b"\r\n")[:3] == [
        b"id,task,correct,gt,pred",
        b"e1,AudioCount,1,3,3",
        b"e2,MorseCode,0,plant,",
    ]


def test_unhashable_ground_truth_is_read_through_str_like_the_original():
    # str(["a"]) is "['a']"; the text rule deletes the brackets and quotes
    assert judge("MorseCode", "a", ["a"]).correct
    assert judge("AudioCount", "7", {"n": 7}).correct
    assert judge("AudioRemap", "PBP", ["P", "B", "P"]).correct  # "['P', 'B', 'P']": three ASCII letters


def test_worker_processes_give_the_same_scores_as_one_process(tmp_path, monkeypatch):
    """The parallel path (worker processes over files) must not change a single number or count."""
    import random

    from audioicl.scoring import score as scoring

    rnd = random.Random(0)
    for k in (1, 2, 3):
        lines = []
        for i in range(400):
            task = rnd.choice(["AudioCount", "MorseCode", "AudioRemap", "AnomalyDetect", ""])
            response = rnd.choice(["3", "The answer is 7.", None, "plant", "P B P", "abnormal", "x"])
            lines.append(
                json.dumps({"id": f"AudioICL{i:05d}", "task": task, "response": response, "gt": "3"})
            )
        (tmp_path / f"m_results_k{k}.jsonl").write_text("\n".join(lines) + "\n")
    files = scoring.find_result_files(tmp_path)
    single = scoring.score_files(files, scoring.ScoreOptions(workers=1))
    monkeypatch.setattr(scoring, "PARALLEL_MIN_BYTES", 0)
    parallel = scoring.score_files(files, scoring.ScoreOptions(workers=2))
    assert parallel.rows == single.rows
    assert len(single.rows) == 15 and sum(r.n for r in single.rows) == 1200


# --- query clips and the cluster bootstrap ------------------------------------------------------------


def test_query_clip_is_the_last_audio_path_or_the_datasets(tmp_path):
    ours = {**line("AudioCount", "3", "3", id="e1"), "audio_paths": ["d/1.wav", "d/q1.wav"]}
    theirs = line("AudioCount", "3", "3", id="e2")
    scored = score_text(tmp_path, json.dumps(ours) + "\n" + json.dumps(theirs) + "\n")
    assert [s.query_clip for s in scored] == ["d/q1.wav", None]
    scored = score_text(
        tmp_path, json.dumps(ours) + "\n" + json.dumps(theirs) + "\n", query_clips={(1, "e2"): "d/q2.wav"}
    )
    assert [s.query_clip for s in scored] == ["d/q1.wav", "d/q2.wav"]


def test_rows_count_query_clips_only_when_every_line_tells_its_clip(tmp_path):
    lines = [
        {**line("AudioLength", "3" if i % 2 else "4", "3", id=f"e{i}"), "audio_paths": [f"q{i // 3}.wav"]}
        for i in range(12)
    ]
    write_jsonl(tmp_path / "m_results_k1.jsonl", lines + [line("MorseCode", "a", "a")])
    rows = score_files(find_result_files(tmp_path)).rows
    assert [(r.task, r.n, r.query_clips, r.recurring) for r in rows] == [
        ("AudioLength", 12, 4, True),
        ("MorseCode", 1, None, False),
    ]
    assert rows[0].cluster_interval is not None and rows[1].cluster_interval is None


def test_cluster_bootstrap_is_deterministic_and_widens_for_shared_clips():
    # 40 clips, each answered in 5 episodes, all right or all wrong together: 20 right clips
    shared = [[5, 5] if i % 2 else [0, 5] for i in range(40)]
    independent = [[1, 1] if i % 2 else [0, 1] for i in range(200)]
    low, high = cluster_bootstrap(shared, ("m", 1, "t"))
    assert (low, high) == cluster_bootstrap(shared, ("m", 1, "t"))
    assert low < 0.5 < high
    wilson_low, wilson_high = wilson_interval(100, 200)
    assert high - low > 1.8 * (wilson_high - wilson_low)
    low, high = cluster_bootstrap(independent, ("m", 1, "t"))
    assert abs((high - low) - (wilson_high - wilson_low)) < 0.03
    assert cluster_bootstrap([[3, 3], [2, 2]], ("m", 1, "t")) == (1.0, 1.0)


# --- coverage -----------------------------------------------------------------------------------------

NINE = [
    "AudioCount",
    "AudioCountHard",
    "AudioOperator",
    "AudioLength",
    "AudioLengthHard",
    "AudioOperatorHard",
    "MorseCode",
    "AudioRemap",
    "AnomalyDetect",
]


def truncated_folder(tmp_path: Path) -> tuple[Path, Path]:
    """A crashed run: 49 of the 90 episodes (9 tasks x 10) of k = 1, all right: four tasks whole, the fifth
    9 of 10, four tasks absent. Returns (dataset root, results folder)."""
    data = tmp_path / "data"
    episodes = write_bare_meta(data, per_task=10)
    results = tmp_path / "results"
    write_results(results / "m_results_k1.jsonl", episodes[:49])
    return data, results


def test_task_of_episode_id_follows_the_released_id_blocks():
    assert task_of_episode_id("AudioICL00001") == task_of_episode_id("AudioICL00300") == "AudioCount"
    assert task_of_episode_id("AudioICL00301") == "AudioCountHard"
    assert task_of_episode_id("AudioICL01801") == "MorseCode"
    assert task_of_episode_id("AudioICL02700") == "AnomalyDetect"
    for other in ("AudioICL02701", "AudioICL00000", "AudioICL1", "x", None, 7):
        assert task_of_episode_id(other) is None


def test_truncated_folder_is_incomplete_and_its_mean_is_over_complete_tasks_only(tmp_path):
    """49 of 90 lines, four tasks absent, one partial: the mean over tasks is not an unmarked mean over the
    five tasks present (100 % "over tasks"), but over the four complete ones, marked incomplete."""
    data, results = truncated_folder(tmp_path)
    scoring = score_files(find_result_files(results), ScoreOptions(data=data))
    assert [r.task for r in scoring.rows] == sorted(NINE[:5])  # the summary rows are the original's
    (row,) = scoring.coverage
    assert (row.model, row.shots, row.status, row.selection) == ("m", 1, INCOMPLETE, "")
    assert (row.tasks_expected, row.tasks_present, row.tasks_complete) == (9, 5, 4)
    counts = (row.episodes_expected, row.episodes_selected, row.episodes_present, row.episodes_missing)
    assert counts == (90, 90, 49, 41)
    assert row.missing_tasks == tuple(NINE[5:])
    assert row.partial_tasks == (("AudioLengthHard", 9, 10),)
    assert row.complete_tasks == tuple(NINE[:4])
    assert (row.mean_accuracy, row.mean_tasks, row.extra_lines) == (1.0, 4, 0)
    assert not row.complete
    assert describe_mean(row) == "100.0% over 4 of 9 tasks: incomplete"
    gaps = "; ".join(describe_gaps(row))
    assert "41 of the 90 episodes have no line" in gaps and "4 task(s) absent: AudioOperatorHard" in gaps
    assert "partial: AudioLengthHard 9/10" in gaps
    text = format_coverage(scoring.coverage)
    assert "incomplete" in text and "49/90" in text and "over 4 of 9 tasks: incomplete" in text
    assert "9/10" in format_table(scoring.rows, scoring.coverage)


def test_the_run_record_tells_the_dataset_without_data(tmp_path):
    data, results = truncated_folder(tmp_path)
    without = score_files(find_result_files(results)).coverage[0]
    assert without.status == UNCHECKED  # no dataset known: only the benchmark's task names are checked
    assert without.missing_tasks == tuple(NINE[5:]) and without.tasks_expected == 9
    assert describe_mean(without) == "100.0% over 5 of 9 tasks: coverage unchecked"
    assert "pass --data" in "; ".join(describe_gaps(without))
    write_run_record(results, "m", data, [{"shots": [1], "tasks": None, "limit": None}])
    row = score_files(find_result_files(results)).coverage[0]
    assert (row.status, row.episodes_missing, row.expected_from) == (INCOMPLETE, 41, str(data))


def test_complete_folder(tmp_path):
    data = tmp_path / "data"
    episodes = write_bare_meta(data, per_task=2, ks=(1, 2))
    write_results(tmp_path / "r" / "m_results_k1.jsonl", episodes)
    write_results(tmp_path / "r" / "m_results_k2.jsonl", episodes, lambda gt: "wrong")
    scoring = score_files(find_result_files(tmp_path / "r"), ScoreOptions(data=data))
    assert [(c.shots, c.status, c.mean_accuracy, c.mean_tasks) for c in scoring.coverage] == [
        (1, COMPLETE, 1.0, 9),
        (2, COMPLETE, 0.0, 9),
    ]
    assert all(c.complete and not c.missing_tasks and not c.partial_tasks for c in scoring.coverage)
    assert describe_mean(scoring.coverage[0]) == "100.0% over all 9 tasks"


def test_a_limit_run_is_a_subset_and_labelled_so(tmp_path):
    """``run --limit 2``: the first 2 episodes of each task; complete for what it selected, but a subset."""
    data = tmp_path / "data"
    episodes = write_bare_meta(data, per_task=5)
    first_two = [ep for index, ep in enumerate(episodes) if index % 5 < 2]
    results = tmp_path / "results"
    write_results(results / "m_results_k1.jsonl", first_two)
    write_run_record(results, "m", data, [{"shots": [1], "tasks": None, "limit": 2}])
    row = score_files(find_result_files(results)).coverage[0]
    assert (row.status, row.selection) == (SUBSET, "first 2 episodes per task")
    assert (row.episodes_expected, row.episodes_selected, row.episodes_present, row.episodes_missing) == (
        45,
        18,
        18,
        0,
    )
    assert row.tasks_complete == 9 and not row.complete
    assert describe_mean(row) == "100.0% over 9 of 9 tasks: subset (first 2 episodes per task)"
    assert "subset: first 2 episodes per task (18 of 45 episodes)" in describe_gaps(row)
    # the same run, cut short: one selected episode has no line
    write_results(results / "m_results_k1.jsonl", first_two[:-1])
    cut = score_files(find_result_files(results)).coverage[0]
    assert (cut.status, cut.episodes_missing, cut.partial_tasks) == (
        INCOMPLETE,
        1,
        (("AnomalyDetect", 1, 2),),
    )
    assert "1 of the 18 episodes selected (first 2 episodes per task) have no line" in "; ".join(
        describe_gaps(cut)
    )


def test_a_shard_is_a_subset_and_all_shards_together_are_complete(tmp_path):
    from audioicl.inference.options import Shard

    data = tmp_path / "data"
    episodes = write_bare_meta(data, per_task=4)
    results = tmp_path / "results"
    for index in (1, 2):
        shard = Shard(index, 2)
        mine = [ep for ep in episodes if shard.holds(ep[0])]
        write_results(results / shard.folder / "m_results_k1.jsonl", mine)
        write_run_record(results / shard.folder, "m", data, [{"shots": [1]}], shard=str(shard))
    one = score_files(find_result_files(results / "shard-1-of-2")).coverage[0]
    assert (one.status, one.selection) == (SUBSET, "shard 1/2")
    both = score_files(find_result_files(results)).coverage[0]  # the parent folder counts them together
    assert (both.status, both.episodes_present) == (COMPLETE, 36)


def test_tasks_selection_is_a_subset_of_the_tasks(tmp_path):
    data = tmp_path / "data"
    episodes = write_bare_meta(data, per_task=2)
    results = tmp_path / "results"
    write_results(results / "m_results_k1.jsonl", [ep for ep in episodes if ep[1] == "MorseCode"])
    write_run_record(results, "m", data, [{"shots": [1], "tasks": ["MorseCode"], "limit": None}])
    row = score_files(find_result_files(results)).coverage[0]
    assert (row.status, row.selection, row.tasks_complete, row.complete_tasks) == (
        SUBSET,
        "tasks MorseCode",
        1,
        ("MorseCode",),
    )
    assert describe_mean(row) == "100.0% over 1 of 9 tasks: subset (tasks MorseCode)"


def test_a_malformed_line_stays_in_its_task_or_is_unreadable_never_a_task(tmp_path):
    """--skip-bad-lines: a broken line is a wrong line of the task its id tells (through the dataset, else the
    id range of the file's well-formed lines, else the released id blocks) or its text names; a line that
    tells neither is unreadable: in no summary row, no n, no mean."""
    data = tmp_path / "data"
    episodes = write_bare_meta(data, per_task=2)
    results = tmp_path / "results"
    path = write_results(results / "m_results_k1.jsonl", episodes[:-1])
    cut = json.dumps({"id": episodes[-1][0], "task": episodes[-1][1], "response": "3", "gt": "3"})[:30]
    with path.open("a", encoding="utf-8") as handle:
        handle.write("{oops\n" + cut)
    options = ScoreOptions(skip_bad_lines=True)
    for with_data in (False, True):
        scoring = score_files(find_result_files(results), replace(options, data=data if with_data else None))
        assert "" not in {r.task for r in scoring.rows}
        assert (scoring.malformed, scoring.unreadable) == (2, 1)
        anomaly = next(r for r in scoring.rows if r.task == "AnomalyDetect")
        assert (anomaly.n, anomaly.correct, anomaly.unparsed) == (2, 1, 1)
        (row,) = scoring.coverage
        assert row.unreadable == 1 and not row.complete
        assert sum(r.n for r in scoring.rows) == 18  # the unreadable line is in no n
    assert row.status == COMPLETE and row.mean_tasks == 9  # its episode is there, as a wrong line
    assert "1 unreadable line(s) in no task" in describe_gaps(row)


def test_a_broken_line_of_a_small_build_goes_by_the_files_id_ranges(tmp_path):
    """A build of 20 episodes per task numbers ids in blocks of 20: the id range of the well-formed lines of
    each task, not the released blocks of 300, tells the task."""
    lines = [
        line(task, "3", "3", id=f"AudioICL{20 * t + i + 1:05d}")
        for t, task in enumerate(NINE)
        for i in (0, 5)
    ]
    path = write_jsonl(tmp_path / "m_results_k1.jsonl", lines, tail='{"id": "AudioICL00023", "respo')
    broken = [
        s
        for s in iter_scored_lines(ResultFile(path, "m", 1), ScoreOptions(skip_bad_lines=True))
        if s.malformed
    ]
    assert [(s.id, s.task) for s in broken] == [("AudioICL00023", "")]  # the line as read: no task
    scoring = score_files(find_result_files(tmp_path), ScoreOptions(skip_bad_lines=True), keep_examples=True)
    assert {r.task: r.n for r in scoring.rows}["AudioCountHard"] == 3
    assert [s.task for s in scoring.examples[("m", 1)] if s.malformed] == ["AudioCountHard"]


def test_coverage_csv_beside_the_summary_round_trips(tmp_path):
    data, results = truncated_folder(tmp_path)
    out = tmp_path / "scores" / "summary.csv"
    scoring = score_folder(results, out, ScoreOptions(data=data))
    path = tmp_path / "scores" / "summary_coverage.csv"
    assert coverage_path(out) == coverage_path(tmp_path / "scores" / "summary_detail.csv") == path
    text = path.read_bytes().decode()
    assert text.startswith(",".join(COVERAGE_HEADER) + "\r\n")
    assert text.splitlines()[1] == (
        "m,1,incomplete,,9,5,4,90,90,49,41,0,0,0,0,1.000000,4,"
        "AudioOperatorHard;MorseCode;AudioRemap;AnomalyDetect,AudioLengthHard:9/10,"
        f"AudioCount;AudioCountHard;AudioOperator;AudioLength,{data}"
    )
    assert read_coverage(path) == scoring.coverage
    # the summary itself keeps the original's format, byte for byte
    assert out.read_bytes().splitlines()[0] == b"model,shots,task,accuracy,n"
