"""``audioicl leaderboard`` over the runs a user makes: three built-in solvers (one with two demo draws), a
control and a tiny random-weight ``hf`` model, over the session's nine-task build at k = 1, 2; the page
opened in headless Chromium."""

from __future__ import annotations

import csv
import html
import json
import re
import shlex
from functools import partial
from pathlib import Path

import cli
import pytest
from helpers import CHROMIUM, chromium_dom

from audioicl.analysis.leaderboard.repro import ITEMS

audioicl = partial(cli.audioicl, timeout=900, rc=0)

SOLVERS = ("random", "majority", "text-only")
CONTROL = "random+no-audio"
MODEL = "Qwen2-Audio-7B-Instruct"  # the tiny checkpoint's folder, named as the real one
KS = ("1", "2")

# appended to a copy of the page (which has no script of its own): each <img> as [alt, complete, naturalWidth]
PROBE = """<script>
addEventListener("load", () => {
  const out = document.createElement("pre");
  out.id = "img-check";
  out.textContent = JSON.stringify([...document.images].map(i => [i.alt, i.complete, i.naturalWidth]));
  document.body.appendChild(out);
});
</script>"""


@pytest.fixture(scope="module")
def site(nine_tasks, tmp_path_factory) -> tuple[Path, Path, list[str]]:
    """(site folder, results folder, the hf run's arguments): every run into one results folder, then the
    leaderboard."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from audioicl.testing import tiny_checkpoint

    root = tmp_path_factory.mktemp("leaderboard")
    results = root / "results"
    run = ("run", "--data", nine_tasks, "--out", results, "--k", ",".join(KS))
    audioicl(*run, "--model", "builtin:random", "--draws", "2")
    for solver in SOLVERS[1:]:
        audioicl(*run, "--model", f"builtin:{solver}")
    audioicl(*run, "--model", "builtin:random", "--control", "no-audio")
    checkpoint = tiny_checkpoint("qwen2-audio", root / MODEL)
    hf_run = [*map(str, run), "--model", f"hf:{checkpoint}", "-o", "dtype=fp32", "-o", "device=cpu"]
    audioicl(*hf_run)
    out = root / "site"
    done = audioicl("leaderboard", results, "--out", out)
    assert f"wrote {out / 'index.html'} (1 model, 1 control, 3 floors)" in done.stdout
    return out, results, hf_run


def test_tidy_csv_holds_every_scored_line(site):
    out, results, _ = site
    with (out / "scores.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    lines = sum(1 for path in results.glob("*_results_k*.jsonl") for _ in path.open(encoding="utf-8"))
    assert len(rows) == lines
    names = {(r["model"], r["condition"]) for r in rows}
    assert names == {(MODEL, ""), ("random", "no-audio"), *((s, "") for s in SOLVERS)}
    assert {r["draw"] for r in rows if r["model"] == "random" and not r["condition"]} == {"0", "1"}
    assert {r["k"] for r in rows} == set(KS) and {r["correct"] for r in rows} <= {"0", "1"}


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary")
def test_page_in_chromium(site, tmp_path):
    out, results, hf_run = site
    page = out / "index.html"
    shot = tmp_path / "leaderboard.png"
    dom = chromium_dom(page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,3000")
    assert shot.stat().st_size > 10_000

    ranked = re.findall(r'<table class="ranking" data-kind="(\w+)">(.*?)</table>', dom, re.S)
    entries = {kind: re.findall(r'<td class="entry" data-entry="([^"]+)"', body) for kind, body in ranked}
    assert (entries["model"], entries["control"]) == ([MODEL], [CONTROL])
    assert sorted(entries["floor"]) == sorted(SOLVERS) and list(entries) == ["model", "control", "floor"]
    assert "random" in re.search(r'<table class="draws">(.*?)</table>', dom, re.S).group(1)

    blocks = dict(re.findall(r'<section class="repro"[^>]*data-entry="([^"]+)">(.*?)</section>', dom, re.S))
    assert set(blocks) == {MODEL, CONTROL, *SOLVERS}
    for name, block in blocks.items():
        labels = re.findall(r"<tr><th>([^<]+)</th>", block)
        assert tuple(labels) == ITEMS, name
    items = dict(
        re.findall(r"<tr><th>([^<]+)</th><td[^>]*>(?:<pre>)?(.*?)(?:</pre>)?</td></tr>", blocks[MODEL])
    )
    record = json.loads((results / f"{MODEL}_run.json").read_text())
    info = record["runs"][-1]["backend_info"]
    assert html.unescape(items["checkpoint"]) == record["model"] == hf_run[hf_run.index("--model") + 1]
    assert items["checkpoint config sha256"] == info["config_sha256"]
    assert items["transformers"] == info["transformers"] and items["torch"] == info["torch"]
    assert items["dataset fingerprint"] == record["dataset_fingerprint"]
    assert html.unescape(items["commands"]) == shlex.join(["audioicl", *hf_run])
    assert "max_new_tokens=16" in items["decoding"] and "seed=0" in items["seeds"]

    probed = tmp_path / "probed.html"
    probed.write_text(
        page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8"
    )
    found = re.search(r'<pre id="img-check">(.*?)</pre>', chromium_dom(probed, tmp_path / "probe"), re.S)
    images = json.loads(html.unescape(found.group(1)))
    assert len(images) == 1 + 9  # the overview and one figure per task
    broken = [alt for alt, complete, width in images if not (complete and width > 0)]
    assert not broken
