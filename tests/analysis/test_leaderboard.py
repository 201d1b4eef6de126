"""The leaderboard's tables, tidy file, reproducibility blocks and page, from results written by hand over a
dataset of meta files alone (``helpers.write_bare_meta``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from helpers import write_bare_meta, write_results, write_run_record

from audioicl.analysis.leaderboard import LeaderboardOptions, write_leaderboard
from audioicl.analysis.leaderboard.board import CONTROL, FLOOR, MODEL, classify, load_board
from audioicl.analysis.leaderboard.repro import ITEMS, NOT_RECORDED, command_line, per_run, reproductions
from audioicl.analysis.leaderboard.tables import (
    board_tasks,
    compliance_rows,
    draw_spreads,
    mean_interval,
    rankings,
)
from audioicl.analysis.leaderboard.tidy import TIDY_COLUMNS, tidy_rows
from audioicl.errors import AudioICLError

SOLVERS = frozenset({"random", "icl"})
RUN = {"shots": [1, 2], "tasks": None, "limit": None}


def right(gt: str) -> str:
    return gt


def wrong(gt: str) -> str:
    return "wrong answer"


def write_model(results: Path, data: Path, name: str, per_k: dict, spec: str | None = None) -> None:
    """``per_k``: k → (episodes, respond); a run record naming ``spec`` (default ``hf:/ckpt/<name>``)."""
    for k, (episodes, respond) in per_k.items():
        write_results(results / f"{name}_results_k{k}.jsonl", episodes, respond)
    path = write_run_record(results, name, data, [RUN])
    record = json.loads(path.read_text())
    record["model"] = spec or f"hf:/ckpt/{name}"
    path.write_text(json.dumps(record))


@pytest.fixture
def bench(tmp_path):
    data = tmp_path / "data"
    episodes = write_bare_meta(data, per_task=2, ks=(1, 2))
    return data, episodes, tmp_path / "results"


# --------------------------------------------------------------------------- entries


@pytest.mark.parametrize(
    ("name", "spec", "expected"),
    [
        (
            "Qwen2-Audio-7B-Instruct",
            "hf:Qwen/Qwen2-Audio-7B-Instruct",
            ("Qwen2-Audio-7B-Instruct", "", MODEL),
        ),
        ("icl", "builtin:icl", ("icl", "", FLOOR)),
        ("random", None, ("random", "", FLOOR)),  # no record: by the solvers' names
        ("mine", None, ("mine", "", MODEL)),
        ("m+random-labels", "hf:/x/m", ("m", "random-labels", CONTROL)),
        ("icl+no-audio", "builtin:icl", ("icl", "no-audio", CONTROL)),
        ("m+style-general+probe", "hf:/x/m", ("m", "style-general+probe", CONTROL)),
    ],
)
def test_results_names_are_models_controls_or_floors(name, spec, expected):
    assert classify(name, spec, SOLVERS) == expected


def test_a_folder_without_results_or_given_twice_is_refused(bench):
    data, episodes, results = bench
    empty = results.parent / "empty"
    empty.mkdir()
    with pytest.raises(AudioICLError, match="no result files") as caught:
        load_board((empty,))
    assert caught.value.file == str(empty)
    write_model(results, data, "a", {1: (episodes, right)})
    with pytest.raises(AudioICLError, match="reached twice"):
        load_board((results, results))


# --------------------------------------------------------------------------- ranking


def test_ranking_ranks_complete_models_and_marks_the_others(bench):
    data, episodes, results = bench
    half = [e for e in episodes if e[1] != "MorseCode"]  # MorseCode missing at k=2
    write_model(results, data, "good", {1: (episodes, right), 2: (episodes, right)})
    write_model(results, data, "bad", {1: (episodes, wrong), 2: (episodes, wrong)})
    write_model(results, data, "gappy", {1: (episodes, right), 2: (half, right)})
    write_model(results, data, "short", {1: (episodes, right)})  # no k=2
    write_model(results, data, "random", {1: (episodes, wrong), 2: (episodes, wrong)}, "builtin:random")
    board = load_board((results,))
    (models, floors) = rankings(board)
    assert (models.kind, floors.kind) == (MODEL, FLOOR)
    assert models.shots == (1, 2) and len(models.tasks) == 9
    order = [(s.entry.name, s.rank) for s in models.standings]
    assert order == [("good", 1), ("bad", 2), ("gappy", None), ("short", None)]
    good, bad, gappy, short = models.standings
    assert good.overall.accuracy == 1.0 and good.overall.complete and good.overall.cells == 18
    assert bad.overall.accuracy == 0.0 and bad.overall.interval == (0.0, 0.0)
    # never averaged silently over fewer tasks: 17 of 18 cells, and why
    assert (gappy.overall.cells, gappy.overall.of) == (17, 18)
    assert gappy.per_k[1].complete and not gappy.per_k[2].complete
    assert any("MorseCode" in gap for gap in gappy.per_k[2].gaps)
    assert (short.overall.cells, short.overall.of) == (9, 18)
    assert "k=2 absent" in short.overall.gaps and short.per_k[2].accuracy is None
    assert [s.entry.name for s in floors.standings] == ["random"]


def test_a_subset_run_is_not_ranked(bench):
    data, episodes, results = bench
    first = [e for e in episodes if e[0].endswith("1")]  # the first episode of each task
    write_results(results / "m_results_k1.jsonl", first)
    write_run_record(results, "m", data, [{"shots": [1], "tasks": None, "limit": 1}])
    (models,) = rankings(load_board((results,)))
    (standing,) = models.standings
    assert standing.rank is None and standing.overall.accuracy == 1.0
    assert any(gap.startswith("subset") for gap in standing.overall.gaps)


def test_the_mean_interval_draws_one_query_clip_at_every_k(bench):
    """A query clip's lines at k=1 and k=2 go together: two identical cells give the interval of one, not a
    narrower one (independent draws per k would shrink it)."""
    cell = {f"clip{i}": (i % 2, 1) for i in range(20)}
    one = mean_interval({("AudioCount", 1): cell}, ("x",))
    two = mean_interval({("AudioCount", 1): cell, ("AudioCount", 2): cell}, ("x",))
    assert one == two and one[0] < 0.5 < one[1]
    apart = mean_interval({("AudioCount", 1): cell, ("MorseCode", 1): cell}, ("x",))
    assert apart[1] - apart[0] < one[1] - one[0]  # two tasks are independent strata
    assert mean_interval({}, ("x",)) is None
    assert mean_interval({("AudioCount", 1): cell}, ("x",)) == one  # seeded


# --------------------------------------------------------------------------- compliance and draws


def test_compliance_counts_parsed_answers_and_accuracy_among_them(bench):
    data, episodes, results = bench
    count = [e for e in episodes if e[1] == "AudioCount"]  # gt "3", two episodes
    answers = iter(["the answer is 3", "three"])
    write_results(results / "m_results_k1.jsonl", count, lambda gt: next(answers))
    write_run_record(results, "m", data, [{"shots": [1], "tasks": ["AudioCount"], "limit": None}])
    board = load_board((results,))
    (row,) = compliance_rows(board, board_tasks(board))
    assert (row.overall.n, row.overall.parsed, row.overall.correct) == (2, 1, 1)
    assert row.overall.parsed_share == 0.5 and row.overall.accuracy_parsed == 1.0
    assert row.per_task["AudioCount"].parsed_share == 0.5
    assert row.per_task["MorseCode"].n == 0 and row.per_task["MorseCode"].parsed_share is None


def test_draw_spread_needs_several_draws(bench):
    data, episodes, results = bench
    write_model(results, data, "plain", {1: (episodes, right)})
    lines = [
        {"id": i, "task": t, "response": g if draw else "no", "gt": g, "draw": draw}
        for draw in (0, 1)
        for i, t, g in episodes
    ]
    path = results / "drawn_results_k1.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    write_run_record(results, "drawn", data, [{"shots": [1], "tasks": None, "limit": None}])
    board = load_board((results,))
    (spread,) = draw_spreads(board)
    assert (spread.entry.name, spread.k, spread.tasks) == ("drawn", 1, 9)
    (draws,) = spread.parts
    assert draws.part == "draw" and dict(draws.means) == {0: 0.0, 1: 1.0}
    assert draws.sd == pytest.approx(2**-0.5)
    assert spread.widest is not None and spread.widest[1] == pytest.approx(2**-0.5)
    (models,) = rankings(board)
    pooled = {s.entry.name: s.overall.accuracy for s in models.standings}
    assert pooled == {"plain": 1.0, "drawn": 0.5}  # the ranking pools every line, as the scorer


# --------------------------------------------------------------------------- the tidy table


def test_tidy_rows_are_one_per_scored_line(bench):
    data, episodes, results = bench
    write_model(results, data, "m", {1: (episodes, right)})
    write_model(results, data, "m+random-labels", {1: (episodes[:2], lambda gt: None)})
    rows = tidy_rows(load_board((results,)))
    assert len(rows) == len(episodes) + 2
    plain, control = rows[0], rows[-1]
    assert (plain.model, plain.condition, plain.k, plain.id) == ("m", "", 1, episodes[0][0])
    assert (plain.draw, plain.order, plain.variant, plain.correct, plain.parsed) == (0, 0, 0, True, True)
    assert (control.model, control.condition, control.response, control.correct) == (
        "m",
        "random-labels",
        None,
        False,
    )


def test_leaderboard_files_and_page(bench):
    data, episodes, results = bench
    write_model(results, data, 'we<ird>&"name', {1: (episodes, right), 2: (episodes, wrong)})
    write_model(results, data, "icl", {1: (episodes, right)}, "builtin:icl")
    out = results.parent / "site"
    files = write_leaderboard(LeaderboardOptions((results,), out))
    assert files.entries == {MODEL: 1, CONTROL: 0, FLOOR: 1}
    with (out / "scores.csv").open(newline="", encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    assert tuple(table[0]) == TIDY_COLUMNS and len(table) == 1 + 3 * len(episodes) == 1 + files.rows
    assert table[1][:5] == ['we<ird>&"name', "", "1", episodes[0][1], episodes[0][0]]  # models first
    assert table[1][-2:] == ["1", "1"] and table[1 + len(episodes)][-4:] == ["wrong answer", "3", "0", "0"]
    assert table[-1][:3] == ["icl", "", "1"]
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "we&lt;ird&gt;&amp;&quot;name" in page and "we<ird>" not in page
    assert "http://" not in page.replace("http://www.w3.org", "") and "<script" not in page
    assert page.count("<img ") == 1 + 9  # the overview and one figure per task
    for item in ITEMS:
        assert f"<th>{item}</th>" in page
    if files.parquet is not None:
        pq = pytest.importorskip("pyarrow.parquet")
        frame = pq.read_table(files.parquet).to_pylist()
        assert len(frame) == files.rows and frame[0]["correct"] is True and frame[0]["k"] == 1
        assert "scores.parquet: the same" in page
    else:
        assert "scores.parquet not written" in page


# --------------------------------------------------------------------------- reproducibility


def test_reproducibility_items_say_not_recorded_where_the_record_is_silent(bench):
    data, episodes, results = bench
    write_results(results / "bare_results_k1.jsonl", episodes)
    write_model(results, data, "m", {1: (episodes, right)})
    record_path = results / "m_run.json"
    record = json.loads(record_path.read_text())
    record["settings"] = {"max_new_tokens": 16, "seed": 7, "prompts_sha256": None, "style": "specific"}
    record["audioicl_version"] = "0.1.0"
    record["runs"] = [
        {
            "backend": "hf:/ckpt/m",
            "backend_info": {"config_sha256": "abc", "transformers": "5.1", "torch": "2.14.1"},
            "environment": {"argv": ["/venv/bin/audioicl", "run", "--out", "my results"]},
        },
        {
            "backend": "hf:/ckpt/m",
            "backend_info": {"config_sha256": "abc", "transformers": "5.2", "torch": "2.14.1"},
            "environment": {"argv": ["/src/audioicl/__main__.py", "run", "--k", "2"]},
        },
    ]
    record_path.write_text(json.dumps(record))
    board = load_board((results,), data=None)
    (block,) = reproductions(board.entries["m"], None)
    items = {item.label: item for item in block.items}
    assert tuple(items) == ITEMS
    assert items["checkpoint"].value == "hf:/ckpt/m" and items["checkpoint config sha256"].value == "abc"
    assert items["transformers"].value == "5.1 (run 1); 5.2 (run 2)"
    assert not items["vllm"].recorded and items["vllm"].value == NOT_RECORDED
    assert items["decoding"].value == "max_new_tokens=16; temperature=not recorded"
    assert (
        not items["prompt set sha256"].recorded and "built-in prompt set" in items["prompt set sha256"].value
    )
    assert items["seeds"].value == "seed=7"
    assert not items["dataset fingerprint"].recorded
    assert block.commands == ("audioicl run --out 'my results'", "audioicl run --k 2")
    (bare,) = reproductions(board.entries["bare"], None)
    assert bare.record is None and all(not item.recorded for item in bare.items)


def test_the_prompt_set_digest_of_each_run_is_the_item_built_in_or_from_a_file(bench):
    """A run records ``prompt_set_sha256`` (the wording, built-in or from a file): the block shows it, says
    which, and names the file with its own sha256 where there was one."""
    data, episodes, results = bench
    write_model(results, data, "m", {1: (episodes, right)})
    record_path = results / "m_run.json"
    record = json.loads(record_path.read_text())
    record["runs"] = [{**run, "prompt_set_sha256": "a" * 64} for run in record["runs"]]
    record["settings"] = {"prompts_sha256": None}
    record_path.write_text(json.dumps(record))
    (block,) = reproductions(load_board((results,), data=None).entries["m"], None)
    item = next(i for i in block.items if i.label == "prompt set sha256")
    assert item.recorded and item.value == "a" * 64 + " (the built-in prompt set)"
    record["settings"]["prompts_sha256"], record["prompts"] = "b" * 64, "/p/mine.yaml"
    record_path.write_text(json.dumps(record))
    (block,) = reproductions(load_board((results,), data=None).entries["m"], None)
    item = next(i for i in block.items if i.label == "prompt set sha256")
    assert item.value == "a" * 64 + " (prompts file (/p/mine.yaml), file sha256 " + "b" * 64 + ")"
    # regression: a probe run's digest is the probe questions', which the block called "the built-in prompt set"
    record["settings"] = {"prompts_sha256": None, "condition": "probe"}
    record_path.write_text(json.dumps(record))
    (block,) = reproductions(load_board((results,), data=None).entries["m"], None)
    item = next(i for i in block.items if i.label == "prompt set sha256")
    assert item.value == "a" * 64 + " (the built-in probe questions)"


def test_the_dataset_fingerprint_comes_from_data_when_the_record_has_none(bench):
    data, episodes, results = bench
    (data / "manifest.json").write_text(json.dumps({"fingerprint": "f" * 64, "files": {}}))
    write_model(results, data, "m", {1: (episodes, right)})
    board = load_board((results,), data=data)
    (block,) = reproductions(board.entries["m"], data)
    item = next(i for i in block.items if i.label == "dataset fingerprint")
    assert item.recorded and item.value.startswith("f" * 64) and "of --data" in item.value


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["/usr/bin/audioicl", "run", "--model", "hf:a b"], "audioicl run --model 'hf:a b'"),
        (["/x/audioicl/__main__.py", "demo"], "audioicl demo"),
        (["bench.py", "--n", "3"], "bench.py --n 3"),
        ([], None),
        ("audioicl run", None),
    ],
)
def test_command_lines(argv, line):
    assert command_line(argv) == line


def test_per_run_values():
    assert per_run([None, None]) is None
    assert per_run(["a", "a"]) == "a"
    assert per_run(["a", "b", "a"]) == "a (runs 1, 3); b (run 2)"
    assert per_run([None, "b"]) == f"{NOT_RECORDED} (run 1); b (run 2)"
