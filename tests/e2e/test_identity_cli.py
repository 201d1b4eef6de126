"""Numbers that cannot mix (issue 40): results of one model name that measured different things are never
pooled by ``score``, ``leaderboard`` or ``report``; a run that answered nothing is "no answers", never
"complete 0.0 %" and never ranked; ``report`` takes the examples of the run its scores are of. Through the CLI,
as a user runs it."""

from __future__ import annotations

import csv
import re
import shutil
from functools import partial
from pathlib import Path

import cli
import pytest
from conftest import make_dataset

audioicl = partial(cli.audioicl, timeout=300, rc=0)


def summary_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory, tiny_dataset) -> Path:
    """PARENT/a and PARENT/b: runs of ``builtin:random`` (one name, ``random``) over two datasets, 3 and 2
    episodes a task."""
    parent = tmp_path_factory.mktemp("two_builds")
    other = make_dataset(tmp_path_factory.mktemp("other_build"), per_task=2, ks=(1,))
    audioicl("run", "--data", tiny_dataset, "--model", "builtin:random", "--out", parent / "a", "--k", "1")
    audioicl("run", "--data", other, "--model", "builtin:random", "--out", parent / "b", "--k", "1")
    return parent


def test_score_over_two_builds_of_one_name_gives_two_entries_never_one_mean(two_builds, tmp_path):
    """Issue 40, item 1: ``score --in PARENT`` pooled them (n = 5 on a dataset of 3 episodes a task,
    "complete", exit 0); now each is an entry named by what differs, said on the terminal."""
    summary = tmp_path / "summary.csv"
    done = audioicl("score", "--in", two_builds, "--out", summary, "--require-complete")
    rows = summary_rows(summary)
    n_of = {row["model"]: row["n"] for row in rows}
    assert len(n_of) == 2 and all(name.startswith("random@meta-") for name in n_of)
    assert sorted(n_of.values()) == ["2", "3"]
    assert all(row["n"] == n_of[row["model"]] for row in rows)  # each entry over its own dataset only
    coverage = summary_rows(tmp_path / "summary_coverage.csv")
    assert [(row["status"], row["extra_lines"]) for row in coverage] == [("complete", "0")] * 2
    assert "random: 2 runs that measured different things are scored apart, not pooled" in done.stderr
    a = next(name for name, n in n_of.items() if n == "3")
    assert f"{a} ({two_builds / 'a'})" in done.stderr


def test_leaderboard_over_two_builds_of_one_name_lists_two_entries(two_builds, tmp_path):
    done = audioicl("leaderboard", two_builds / "a", two_builds / "b", "--out", tmp_path / "site")
    names = {row["model"] for row in summary_rows(tmp_path / "site" / "scores.csv")}
    assert len(names) == 2 and all(name.startswith("random@meta-") for name in names)
    assert "scored apart, not pooled" in done.stderr
    page = (tmp_path / "site" / "index.html").read_text()
    assert "scored apart, not pooled" in page and all(name in page for name in names)


def test_report_over_two_builds_shows_two_entries_and_refuses_another_runs_results(two_builds, tmp_path):
    """Issue 40, item 3: ``report --scores A --results B`` took the scores of one run and the examples of
    another, exit 0."""
    summary = tmp_path / "all.csv"
    audioicl("score", "--in", two_builds, "--out", summary)
    audioicl("report", "--scores", summary, "--results", two_builds, "--out", tmp_path / "report")
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert len(set(re.findall(r"random@meta-[0-9a-f]{8}", markdown))) == 2
    only_a = tmp_path / "a.csv"
    audioicl("score", "--in", two_builds / "a", "--out", only_a)
    refused = audioicl(
        "report", "--scores", only_a, "--results", two_builds / "b", "--out", tmp_path / "mixed", rc=2
    )
    assert "--scores and --results are not the same results" in refused.stderr
    assert not (tmp_path / "mixed" / "report.html").exists()


def test_an_all_error_run_is_no_answers_and_is_never_ranked(tiny_dataset, tmp_path):
    """Issue 40, item 2: a run whose every line is an error line scored "complete 0.0 %" and the leaderboard
    ranked it. Every clip is longer than ``max_clip_seconds`` here, so every episode is an error line."""
    broken, working = tmp_path / "broken", tmp_path / "working"
    audioicl("run", "--data", tiny_dataset, "--model", "builtin:icl", "--out", broken, "--k", "1", "--name",
             "model-a", "-o", "max_clip_seconds=0.001", rc=1)  # fmt: skip
    audioicl("run", "--data", tiny_dataset, "--model", "builtin:icl", "--out", working, "--k", "1", "--name",
             "model-b")  # fmt: skip
    summary = tmp_path / "summary.csv"
    done = audioicl("score", "--in", broken, "--out", summary, "--require-complete", rc=1)
    (row,) = summary_rows(tmp_path / "summary_coverage.csv")
    assert row["status"] == "no answers" and row["mean_accuracy"] == ""
    assert "no answers: every one of the 12 lines is an error line" in done.stderr
    # model-a's valid run, in the layout it can take (as a one-clip family's single-clip run): ranked beside the
    # others (built-in solvers here, so among the floors; a model's among the models)
    audioicl("run", "--data", tiny_dataset, "--model", "builtin:icl", "--out", broken, "--k", "1", "--name",
             "model-a", "--layout", "single-clip")  # fmt: skip
    audioicl("leaderboard", broken, working, "--out", tmp_path / "site")
    page = (tmp_path / "site" / "index.html").read_text()
    models = page.split('data-kind="floor"')[1].split("</table>")[0]
    ranks = {
        re.sub(r"<[^>]+>", "", cell).strip(): rank
        for rank, cell in re.findall(r'<tr><td>([^<]*)</td><td class="entry"[^>]*>(.*?)</td>', models)
    }
    assert ranks["model-a"] == "–" and "–" not in {ranks["model-b"], ranks["model-a + single-clip"]}, ranks
    assert "no answers" in page


def test_a_base_models_continuation_run_is_ranked_where_it_has_no_chat_run(tiny_dataset, tmp_path):
    """Issue 42: a base model runs only by continuation (it has no chat format): its ``+continuation`` run is
    ranked beside the others, its name saying the layout; a model that has a chat run too keeps its
    continuation run among the conditions."""
    out = tmp_path / "results"
    common = ("--data", tiny_dataset, "--out", out, "--k", "1")
    audioicl("run", *common, "--model", "builtin:icl", "--name", "base-model", "--layout", "continuation")
    audioicl("run", *common, "--model", "builtin:icl", "--name", "instruct")
    audioicl("run", *common, "--model", "builtin:icl", "--name", "instruct", "--layout", "continuation")
    audioicl("leaderboard", out, "--out", tmp_path / "site")
    page = (tmp_path / "site" / "index.html").read_text()
    ranked = {
        kind: {
            re.sub(r"<[^>]+>", "", cell).strip()
            for cell in re.findall(
                r'<td class="entry"[^>]*>(.*?)</td>',
                page.split(f'data-kind="{kind}"')[1].split("</table>")[0],
            )
        }
        for kind in ("model", "floor")
    }
    # a name with no plain run is taken for a model's (nothing says which it is); "instruct"'s plain run is a
    # built-in solver's, so a floor
    assert ranked == {"model": {"base-model + continuation"}, "floor": {"instruct"}}, ranked
    assert "instruct + continuation" in page  # among the conditions


def test_two_datasets_in_one_folder_are_said_and_never_paired(two_builds, tiny_dataset, tmp_path):
    """Issue 53, item 3: ``run`` into a folder holding another dataset's results said nothing, and ``compare``
    paired episode AudioICL00001 of one build with AudioICL00001 of the other. Now the run warns, naming both
    datasets, and compare refuses in one line; item 6: rerunning a model over another dataset is refused naming
    each dataset by folder and digest prefix (it printed 1.4 KB of sha256 digests)."""
    out = tmp_path / "mixed"
    shutil.copytree(two_builds / "b", out)  # random over the 2-episode build
    done = audioicl("run", "--data", tiny_dataset, "--model", "builtin:majority", "--out", out, "--k", "1")
    warning = next(line for line in done.stderr.splitlines() if line.startswith("warning:"))
    assert f"holds results over another dataset than {tiny_dataset.resolve()} (" in warning
    assert "random over " in warning and "compare refuses" in warning
    refused = audioicl("compare", out, out, "--model-a", "majority", "--model-b", "random", rc=2)
    (line,) = refused.stderr.splitlines()
    assert line.startswith("audioicl compare: error: A (majority in ") and "cannot be paired" in line
    assert re.search(r"digest [0-9a-f]{12}\) and B \(random in .*digest [0-9a-f]{12}\)", line), line
    again = audioicl(
        "run", "--data", tiny_dataset, "--model", "builtin:random", "--out", out, "--k", "1", rc=2
    )
    (line,) = again.stderr.splitlines()
    assert "dataset: was " in line and f"now {tiny_dataset.resolve()} (" in line and len(line) < 700, line
    assert "sha256" not in line
