"""``audioicl report`` through the CLI, and the page it writes opened in headless Chromium."""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import partial
from html.parser import HTMLParser
from pathlib import Path

import cli
import numpy as np
import pytest
from matplotlib.image import imread

from audioicl.audio import write_wav

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CLIPS = ("data/audiolength/easy/3_0.wav", "data/audiolength/easy/5_0.wav")


audioicl = partial(cli.audioicl, timeout=300)


def write_run(root: Path) -> tuple[Path, Path, Path]:
    """One model, two tasks at k = 1, 2; one AudioLength result at k=2 with two real clips."""
    scores = root / "summary.csv"
    scores.write_bytes(
        b"model,shots,task,accuracy,n\r\n"
        b"tiny,1,AudioLength,0.200000,50\r\ntiny,1,MorseCode,0.000000,50\r\n"
        b"tiny,2,AudioLength,0.300000,50\r\ntiny,2,MorseCode,0.020000,50\r\n"
    )
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
    (results / "tiny_results_k2.jsonl").write_text(json.dumps(line) + "\n")
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
    dom = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            f"--screenshot={shot}",
            "--dump-dom",
            "--window-size=1280,2000",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    ).stdout
    pixels = imread(shot)
    assert pixels.shape[:2] == (2000, 1280)
    rgb = pixels[..., :3].reshape(-1, 3)
    assert rgb.std(axis=0).max() > 0.05  # not one flat colour
    codes = (rgb * 255).round().astype(np.uint32) @ np.array([1 << 16, 1 << 8, 1], dtype=np.uint32)
    assert len(np.unique(codes)) > 50  # plots and text drawn, not a few flat boxes

    elements = Elements()
    elements.feed(dom)
    assert elements.counts.get("img") == 3  # overview + two tasks
    assert elements.counts.get("audio") == len(CLIPS)
    assert elements.counts.get("table") == 2  # accuracy table + one example's answers
    assert "AudioICL00901" in dom and "5 seconds" in dom
