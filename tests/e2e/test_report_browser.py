"""``audioicl report`` through the CLI, and the page it writes opened in headless Chromium.

The players are checked in the browser itself: a copy of the page with a probe script appended reports, after
load, each ``<audio>`` element's ``readyState``, ``duration`` and error into the DOM that ``--dump-dom`` prints.
"""

from __future__ import annotations

import html
import json
import re
from functools import partial
from html.parser import HTMLParser
from pathlib import Path

import cli
import numpy as np
import pytest
from helpers import CHROMIUM, chromium_dom
from matplotlib.image import imread

from audioicl.audio import write_wav

CLIPS = ("data/audiolength/easy/3_0.wav", "data/audiolength/easy/5_0.wav")


audioicl = partial(cli.audioicl, timeout=300)

# appended to a copy of the page: once every player has loaded its metadata (or 20 s of virtual time went by),
# one line per <audio>: title, readyState, duration, error code, whether it has a source at all
PROBE = """<script>
addEventListener("load", () => {
  const players = [...document.querySelectorAll("audio")];
  const report = () => {
    const out = document.createElement("pre");
    out.id = "audio-check";
    out.textContent = JSON.stringify(players.map(a => [a.title, a.readyState, a.duration,
                                                       a.error && a.error.code, a.currentSrc !== ""]));
    document.body.appendChild(out);
  };
  const waiting = () => players.some(a => a.readyState < 1 && !a.error);
  let tries = 0;
  const poll = () => (waiting() && tries++ < 200 ? setTimeout(poll, 100) : report());
  poll();
});
</script>"""


def player_states(page: Path, tmp_path: Path) -> list[list]:
    """What the browser says of every ``<audio>`` of ``page``: [title, readyState, duration, error, has src]."""
    probed = page.with_name(f".probed-{page.stem}.html")  # beside the page: its players read clips/ there
    probed.write_text(
        page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8"
    )
    try:
        dom = chromium_dom(probed, tmp_path / "probe-profile")
    finally:
        probed.unlink()
    found = re.search(r'<pre id="audio-check">(.*?)</pre>', dom, re.S)
    assert found, "the probe did not report: " + dom[-500:]
    return json.loads(html.unescape(found.group(1)))


def assert_all_play(states: list[list]) -> None:
    silent = [s for s in states if not (s[4] and s[1] >= 1 and s[2] > 0 and s[3] is None)]
    assert not silent, f"{len(silent)} of {len(states)} players have no playable audio: {silent[:5]}"


def write_run(root: Path) -> tuple[Path, Path, Path]:
    """One model, two tasks at k = 2: one AudioLength result with two real clips, one MorseCode result without
    its prompt; the summary scored from them (``report`` refuses scores of other results)."""
    scores = root / "summary.csv"
    data = root / "dataset"
    for seconds, rel in zip((3, 5), CLIPS, strict=True):
        rng = np.random.default_rng(seconds)
        write_wav(data / rel, (0.05 * rng.standard_normal(16000 * seconds)).astype(np.float32), 16000)
    results = root / "results"
    results.mkdir()
    line = {
        "id": "AudioICL00901",
        "task": "AudioLength",
        "response": "5 seconds",
        "gt": "5",
        "status": "ok",
        "prompt": "user: How long?\n\n[Demo Audio 1] <audio> Label: 3\n[Query Audio] <audio> Label:",
        "audio_paths": list(CLIPS),
        "k": 2,
        "model": "tiny",
    }
    morse = {
        "id": "AudioICL01801",
        "task": "MorseCode",
        "response": "plant",
        "gt": "plane",
        "k": 2,
        "model": "tiny",
    }
    (results / "tiny_results_k2.jsonl").write_text(json.dumps(line) + "\n" + json.dumps(morse) + "\n")
    assert audioicl("score", "--in", results, "--out", scores).returncode == 0
    return scores, results, data


class Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

    def handle_starttag(self, tag, attrs):
        self.counts[tag] = self.counts.get(tag, 0) + 1


def test_cli_reports_a_bad_summary_with_file_and_line(tmp_path):
    bad = tmp_path / "summary.csv"
    bad.write_text("model,shots,task,accuracy,n\nm,1,AudioCount,0.5,10\nm,one,AudioCount,0.5,10\n")
    done = audioicl("report", "--scores", str(bad), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert f"{bad}:3" in done.stderr
    assert not (tmp_path / "out" / "report.html").exists()


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary")
def test_report_page_renders_in_chromium(tmp_path):
    scores, results, data = write_run(tmp_path)
    out = tmp_path / "report"
    done = audioicl(
        "report", "--scores", str(scores), "--results", str(results), "--data", str(data), "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    page = out / "report.html"
    shot = tmp_path / "shot.png"
    dom = chromium_dom(page, tmp_path / "chromium-profile", f"--screenshot={shot}", "--window-size=1280,2000")
    pixels = imread(shot)
    assert pixels.shape[:2] == (2000, 1280)
    rgb = pixels[..., :3].reshape(-1, 3)
    assert rgb.std(axis=0).max() > 0.05  # not one flat colour
    codes = (rgb * 255).round().astype(np.uint32) @ np.array([1 << 16, 1 << 8, 1], dtype=np.uint32)
    assert len(np.unique(codes)) > 50  # plots and text drawn, not a few flat boxes

    elements = Elements()
    elements.feed(dom)
    assert elements.counts.get("img") == 5  # overview, two tasks, their format compliance
    assert elements.counts.get("audio") == len(CLIPS)
    # the model's accuracy table, two examples' answers, AudioLength's confusion views (answer − truth, label
    # prior) and MorseCode's (label prior, letter errors)
    assert elements.counts.get("table") == 7 and dom.count('<table class="confusion">') == 4
    assert "AudioICL00901" in dom and "5 seconds" in dom

    states = player_states(page, tmp_path)
    assert [s[0] for s in states] == list(CLIPS)
    assert_all_play(states)
    assert [round(s[2]) for s in states] == [3, 5]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """``audioicl demo`` over 3 episodes at k = 1..5, made once for the module's pages (read-only)."""
    out = tmp_path_factory.mktemp("demo") / "demo"
    done = audioicl("demo", "--out", out, "--episodes", "3", "--k", "1-5", "--workers", "1", timeout=600)
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary")
def test_every_player_of_the_demo_report_plays_in_chromium(demo, tmp_path):
    """The demo's report as a user opens it (its examples are k = 5's): every <audio> element, including the
    players that take their source from a shared clip's first player, has audio Chromium can play."""
    page = demo / "report" / "report.html"
    text = page.read_text(encoding="utf-8")
    assert "not embedded" not in text
    states = player_states(page, tmp_path)
    assert len(states) == text.count("<audio ") > 9 * 3 * 6  # nine tasks, three examples, six clips or more
    assert_all_play(states)


# appended to a copy of a page: the viewport's width, the page's, and each accuracy or ranking table's width
# against its container's, after load
WIDTHS = """<script>
addEventListener("load", () => {
  const out = document.createElement("pre");
  out.id = "width-check";
  const tables = [...document.querySelectorAll("table.accuracy, table.ranking, table.study")];
  out.textContent = JSON.stringify({viewport: innerWidth, page: document.documentElement.scrollWidth,
                                    tables: tables.map(t => [t.scrollWidth, t.parentElement.clientWidth])});
  document.body.appendChild(out);
});
</script>"""


def widths_at_1400(page: Path, tmp_path: Path) -> dict:
    probed = tmp_path / f"widths-{page.stem}.html"
    probed.write_text(
        page.read_text(encoding="utf-8").replace("</body>", WIDTHS + "</body>"), encoding="utf-8"
    )
    shot = tmp_path / f"{page.stem}.png"
    dom = chromium_dom(
        probed, tmp_path / "width-profile", f"--screenshot={shot}", "--window-size=1400,1000", budget_ms=5000
    )
    assert imread(shot).shape[1] == 1400  # the page as a 1,400 px wide window shows it
    found = re.search(r'<pre id="width-check">(.*?)</pre>', dom, re.S)
    assert found, dom[-500:]
    return json.loads(html.unescape(found.group(1)))


def visible_text(page: Path) -> str:
    """The page's text as a reader sees it without hovering: no tags, no title attributes, no scripts."""
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", text))


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary")
def test_demo_report_and_leaderboard_say_what_they_cover_at_1400_px(demo, tmp_path):
    """Issue 40, item 4: the report's accuracy table was 26 columns wide and scrolled sideways, and n, the
    dataset's fingerprint and the seed were not on the page (n only on hover). At 1,400 px, neither the demo's
    report nor a leaderboard of its results scrolls sideways in its accuracy or ranking tables, and each shows
    n, the coverage, the fingerprint and the seed as text."""
    out = demo
    site = tmp_path / "site"
    assert audioicl("leaderboard", out / "results", "--out", site).returncode == 0
    fingerprint = json.loads((out / "results" / "icl_run.json").read_text())["dataset_fingerprint"]
    for page in (out / "report" / "report.html", site / "index.html"):
        widths = widths_at_1400(page, tmp_path)
        assert widths["viewport"] == 1400 and widths["page"] <= 1400, (page, widths)
        assert widths["tables"] and all(used <= room for used, room in widths["tables"]), (page, widths)
        text = visible_text(page)
        assert "n 27" in text or "n 3" in text, page  # a cell's lines, written out
        assert "complete" in text and fingerprint[:12] in text and re.search(r"seed[= ]0\b", text), page


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary")
def test_the_study_page_fits_1400_px_and_shows_no_raw_markup(demo, tmp_path):
    """Issue 53, item 4: study.html's header showed Markdown's backticks raw (`` `ST/results` ``) and its
    per-model tables were cut off at 1,400 px (k = 5 past the edge)."""
    out = tmp_path / "study"
    args = ("study", "--data", demo / "data", "--model", "builtin:icl", "--out", out)
    assert audioicl(*args, "--conditions", "plain,random-labels", "--no-floor").returncode == 0
    page = out / "study.html"
    widths = widths_at_1400(page, tmp_path)
    assert widths["viewport"] == 1400 and widths["page"] <= 1400, widths
    assert widths["tables"] and all(used <= room for used, room in widths["tables"]), widths
    text = visible_text(page)
    assert "`" not in text and "**" not in text
    assert f"Results: {out / 'results'} ;" in " ".join(text.split())  # a <code> path, no backticks
