"""Numbers over demo draws, orders and prompt variants (scoring.draws), their pairing in compare, and plain
runs' CSVs unchanged."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from helpers import write_bare_meta

from audioicl import AudioICLError
from audioicl.analysis.compare import compare, folder_outcomes
from audioicl.scoring.draws import draws_path, read_draws, variance_split
from audioicl.scoring.score import ScoreOptions, query_clips_of, score_folder

QUERIES = [f"AudioICL{i:05d}" for i in range(1, 5)]  # AudioCount ids


def draw_lines(correct: dict[str, list[bool]], **fixed) -> list[str]:
    """One AudioCount line per (id, draw): answer "3" (right) or "4" (wrong), truth "3"."""
    lines = []
    for episode, per_draw in correct.items():
        for draw, right in enumerate(per_draw):
            record = {"id": episode, "task": "AudioCount", "response": "3" if right else "4", "gt": "3"}
            lines.append(json.dumps({**record, "draw": draw, **fixed}) + "\n")
    return lines


def score_draws(tmp_path: Path, lines: list[str], name: str = "m_results_k1.jsonl"):
    results = tmp_path / "results"
    results.mkdir(exist_ok=True)
    (results / name).write_text("".join(lines), encoding="utf-8")
    out = tmp_path / "scores" / "summary.csv"
    return score_folder(results, out), out


def test_a_solver_that_ignores_the_demos_has_no_spread_between_draws(tmp_path):
    """The same answer to a query whatever the demos: every draw scores the same."""
    scoring, out = score_draws(tmp_path, draw_lines({q: [i % 2 == 0] * 3 for i, q in enumerate(QUERIES)}))
    (row,) = read_draws(draws_path(out))
    assert (row.draws, row.orders, row.variants, row.n_queries, row.n) == (3, 1, 1, 4, 12)
    assert row.mean_accuracy == row.accuracy == 0.5 == row.vote_accuracy
    assert row.draw_sd == 0.0 and row.between_draw_var == 0.0 and row.residual_var == 0.0
    assert row.between_query_var == pytest.approx(1 / 3)  # var([1, 0, 1, 0], ddof=1)
    assert row.variant_sd is None and row.order_sd is None  # one variant, one order: undefined
    assert scoring.rows[0].n == 12 and scoring.coverage[0].extra_lines is None  # no dataset


def test_a_solver_that_uses_the_demos_spreads_between_draws(tmp_path):
    """Right on every query at draw 0, wrong on all at draw 1, half at draw 2."""
    correct = {q: [True, False, i < 2] for i, q in enumerate(QUERIES)}
    _, out = score_draws(tmp_path, draw_lines(correct))
    (row,) = read_draws(draws_path(out))
    assert row.mean_accuracy == pytest.approx(0.5)
    assert row.draw_sd == pytest.approx(0.5)  # stdev([1, 0, 0.5])
    assert row.between_draw_var > 0 and row.decomposition_queries == 4
    low, high = row.cluster_interval
    assert low <= row.mean_accuracy <= high and row.clustered_by == "id"


def test_vote_over_draws_differs_from_the_mean_and_ties_are_shared(tmp_path):
    """Two of three draws right on every query: mean 2/3, vote 1. A query answered 3, 4, 5, 6 (one right of
    four tied answers) votes 1/4."""
    lines = draw_lines({q: [True, True, False] for q in QUERIES[:3]})
    for draw, answer in enumerate("3456"):
        record = {"id": QUERIES[3], "task": "AudioCount", "response": answer, "gt": "3", "draw": draw}
        lines.append(json.dumps(record) + "\n")
    _, out = score_draws(tmp_path, lines)
    (row,) = read_draws(draws_path(out))
    assert row.accuracy == pytest.approx(7 / 13)
    assert row.vote_accuracy == pytest.approx((1 + 1 + 1 + 0.25) / 4)
    assert row.vote_ties == 1
    # only one query has all four draws: too few for the split
    assert row.draws == 4 and row.decomposition_queries == 0 and row.between_query_var is None


def test_vote_counts_answers_not_correctness():
    """Plurality of answers: 5, 5, 3 with truth 3 votes 5 (wrong), though one draw was right."""
    from audioicl.scoring.draws import vote
    from audioicl.scoring.lines import ScoredLine
    from audioicl.scoring.rules import judge

    lines = [
        ScoredLine(
            "m", 1, Path("x"), n, "A", "AudioCount", r, "3", judge("AudioCount", r, "3"), replicate=(n, 0, 0)
        )
        for n, r in enumerate(["5", "five: 5", "3"])
    ]
    assert vote(lines).accuracy == 0.0 and vote(lines).ties == 0


def test_variance_split_of_a_known_matrix():
    """y = a_q + b_d exactly: the components are the sample variances of a and b, no residual; a matrix of
    pure interaction has only residual."""
    a, b = np.array([0.0, 1.0, 2.0, 5.0]), np.array([0.0, 3.0])
    split = variance_split(a[:, None] + b[None, :])
    assert split.between_query == pytest.approx(np.var(a, ddof=1))
    assert split.between_draw == pytest.approx(np.var(b, ddof=1))
    assert split.residual == pytest.approx(0.0) and split.queries == 4
    checker = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    split = variance_split(checker)
    assert (split.between_query, split.between_draw) == (0.0, 0.0)
    assert split.residual == pytest.approx(8 * 0.25 / 3)  # Σ residual² (8 cells of ±1/2) / ((4 − 1)(2 − 1))
    assert variance_split(np.ones((1, 3))) is None and variance_split(np.ones((3, 1))) is None


def test_variants_and_orders_have_their_own_spread(tmp_path):
    lines = []
    for q in QUERIES:
        for variant in range(2):
            for order in range(2):
                right = variant == 0  # the first wording always works, the second never
                record = {"id": q, "task": "AudioCount", "response": "3" if right else "0", "gt": "3"}
                lines.append(json.dumps({**record, "variant": variant, "order": order}) + "\n")
    _, out = score_draws(tmp_path, lines)
    (row,) = read_draws(draws_path(out))
    assert (row.draws, row.orders, row.variants) == (1, 2, 2)
    assert row.variant_sd == pytest.approx(np.std([1, 0], ddof=1)) and row.order_sd == 0.0
    assert row.draw_sd is None and row.between_draw_var is None  # one draw: no split
    assert row.vote_ties == 4  # two right, two wrong answers per query: each votes 1/2
    assert row.vote_accuracy == 0.5


def test_repeated_ids_with_draws_are_not_extra_lines_but_a_true_duplicate_is(tmp_path):
    data = tmp_path / "data"
    episodes = write_bare_meta(data, per_task=2)
    lines = []
    for episode, task, gt in episodes:
        for draw in range(3):
            lines.append(
                json.dumps({"id": episode, "task": task, "response": gt, "gt": gt, "draw": draw}) + "\n"
            )
    lines.append(lines[0])  # the same (id, draw) twice
    results = tmp_path / "results"
    results.mkdir()
    (results / "m_results_k1.jsonl").write_text("".join(lines))
    out = tmp_path / "summary.csv"
    scoring = score_folder(results, out, ScoreOptions(data=data, query_clips=query_clips_of(data)))
    coverage = scoring.coverage[0]
    assert coverage.status == "complete" and coverage.extra_lines == 1
    rows = {r.task: r for r in read_draws(draws_path(out))}
    assert rows["AudioCount"].duplicate_lines == 1 and rows["AudioCount"].n == 7
    assert rows["AudioCount"].clustered_by == "query_clip" and rows["MorseCode"].duplicate_lines == 0
    assert len(rows) == 9


def test_an_episode_drawn_only_counts_no_plain_line_of_its_own(tmp_path):
    """Lines with draw fields beside lines without (an episode asked in draws, another plainly): the plain
    presentation is counted only for ids with no line that names its draw, so a true duplicate of a drawn
    line stays an extra line."""
    data = tmp_path / "data"
    (first, task, gt), (second, *_) = write_bare_meta(data, per_task=2)[:2]
    drawn = json.dumps({"id": first, "task": task, "response": gt, "gt": gt, "draw": 1}) + "\n"
    plain = json.dumps({"id": second, "task": task, "response": gt, "gt": gt}) + "\n"
    results = tmp_path / "results"
    results.mkdir()
    (results / "m_results_k1.jsonl").write_text(drawn + drawn + plain)
    scoring = score_folder(results, tmp_path / "summary.csv", ScoreOptions(data=data))
    (coverage,) = scoring.coverage
    assert coverage.episodes_present == 2 and coverage.extra_lines == 1


def test_a_draw_that_is_not_a_non_negative_integer_names_file_line_and_id(tmp_path):
    lines = draw_lines({QUERIES[0]: [True]}) + [
        '{"id": "X1", "task": "AudioCount", "response": "3", "gt": "3", "draw": "1"}\n'
    ]
    with pytest.raises(AudioICLError) as caught:
        score_draws(tmp_path, lines)
    assert (caught.value.line, caught.value.id) == (2, "X1") and "draw must be" in caught.value.message


def test_a_plain_scoring_writes_no_draws_csv_and_removes_a_stale_one(tmp_path):
    _, out = score_draws(tmp_path, draw_lines({QUERIES[0]: [True, False]}))
    assert draws_path(out).is_file()
    plain = '{"id": "AudioICL00001", "task": "AudioCount", "response": "3", "gt": "3"}\n'
    (tmp_path / "results" / "m_results_k1.jsonl").write_text(plain)
    score_folder(tmp_path / "results", out)
    assert not draws_path(out).exists()


# --- plain runs: the same bytes as before ------------------------------------------------------------------

RESPONSES = ["{g}", "Answer: {g}", "nothing", "7"]
# produced by the scoring code before draws and compliance were added, on plain_folder's inputs
SUMMARY_SHA256 = "7dacb6f7405a1378bd5e435eda27e385e9a422b6c1ca1a83ee7424bd24a42da2"
OLD_DETAIL_SHA256 = "a823dd0edd3259de4774c98a9a1ea0016d53e66741f2a541481bd984dde34c83"


def plain_folder(root: Path) -> tuple[Path, Path]:
    """Two models, k = 1 and 2, four episodes of each task, answers right, right in text, unparsed, wrong."""
    data = root / "data"
    episodes = write_bare_meta(data, per_task=4, ks=(1, 2))
    for k in (1, 2):
        for model in ("m1", "m2"):
            lines = []
            for n, (i, t, g) in enumerate(episodes):
                response = RESPONSES[(n * n + 3 * k + (model == "m2") * n) % 4].format(g=g)
                lines.append(json.dumps({"id": i, "task": t, "response": response, "gt": g}))
            path = root / "results" / f"{model}_results_k{k}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n")
    return root / "results", data


def test_plain_runs_score_byte_identically_to_before(tmp_path):
    results, data = plain_folder(tmp_path)
    out = tmp_path / "out" / "summary.csv"
    score_folder(results, out, ScoreOptions(query_clips=query_clips_of(data), data=data))
    assert hashlib.sha256(out.read_bytes()).hexdigest() == SUMMARY_SHA256
    detail = (tmp_path / "out" / "summary_detail.csv").read_bytes()
    rows = list(csv.reader(detail.decode().splitlines()))
    assert rows[0][-2:] == ["parsed_share", "accuracy_parsed"]
    old = "".join(",".join(row[:-2]) + "\r\n" for row in rows).encode()
    assert hashlib.sha256(old).hexdigest() == OLD_DETAIL_SHA256
    assert not draws_path(out).exists()


# --- paired comparisons over draws -------------------------------------------------------------------------


def test_compare_pairs_by_id_and_draw_where_both_sides_have_them(tmp_path):
    a = tmp_path / "a"
    a.mkdir()
    (a / "m_results_k1.jsonl").write_text("".join(draw_lines({q: [True, False, False] for q in QUERIES})))
    (a / "m_results_k2.jsonl").write_text("".join(draw_lines({q: [True, True, True] for q in QUERIES})))
    plain = "".join(
        json.dumps({"id": q, "task": "AudioCount", "response": "3", "gt": "3"}) + "\n" for q in QUERIES
    )
    (a / "p_results_k1.jsonl").write_text(plain)
    cells = folder_outcomes(a)
    assert set(cells[("m", 1)]["AudioCount"]) == {(q, d, 0, 0) for q in QUERIES for d in range(3)}
    (row,) = compare(cells[("m", 1)], cells[("m", 2)], "k2 vs k1")
    assert (row.n, row.only_a, row.only_b) == (12, 0, 8)
    # a plain run against a draws run: only draw 0 is on both sides
    (row,) = compare(cells[("p", 1)], cells[("m", 1)], "draws vs plain")
    assert (row.n, row.acc_a, row.acc_b) == (4, 1.0, 1.0)
    (a / "m_results_k2.jsonl").write_text("".join(draw_lines({QUERIES[0]: [True]}) * 2))
    with pytest.raises(AudioICLError, match=r"AudioICL00001 \(draw 0, order 0, variant 0\) answered twice"):
        folder_outcomes(a)


def test_the_paired_bootstrap_resamples_whole_episodes():
    """Per task, every pair of an episode drawn together: with one pair per episode, the same interval as
    without clusters; with the pairs of two episodes merged, a different one."""
    from audioicl.analysis.compare import bootstrap_mean

    pairs = {"t1": [(False, True), (True, False), (False, True), (True, True)], "t2": [(False, True)] * 2}
    ones = {"t1": ["a", "b", "c", "d"], "t2": ["e", "f"]}
    assert bootstrap_mean(pairs, clusters=ones) == bootstrap_mean(pairs)
    merged = {"t1": ["a", "a", "c", "c"], "t2": ["e", "f"]}
    assert bootstrap_mean(pairs, clusters=merged) != bootstrap_mean(pairs)
