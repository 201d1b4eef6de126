"""The layers contract (pyproject.toml, import-linter): it holds on the package, and it names the offending
import when a module imports up the pipeline or closes a circle."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(root: Path, src: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [str(LINT), "--no-cache", "--no-logo", str(root / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def planted(tmp_path: Path, module: str, line: str) -> Path:
    """A copy of the package with ``line`` appended to ``module`` (a path under src/audioicl)."""
    shutil.copytree(REPO / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "src" / "audioicl" / module, "a") as f:
        f.write(f"\n{line}\n")
    return tmp_path


def test_the_package_keeps_its_layers():
    done = lint(REPO, REPO / "src")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_an_upward_import_fails_naming_it(tmp_path):
    root = planted(tmp_path, "tasks/base.py", "from audioicl.inference import runner  # noqa")
    done = lint(root, root / "src")
    assert done.returncode != 0
    assert "audioicl.tasks is not allowed to import audioicl.inference" in done.stdout
    assert "audioicl.tasks.base -> audioicl.inference.runner" in done.stdout


def test_a_circle_inside_a_stage_fails_naming_it(tmp_path):
    # prompts.build imports prompts.chat; the planted line closes the circle
    root = planted(tmp_path, "prompts/chat.py", "from audioicl.prompts import build  # noqa")
    done = lint(root, root / "src")
    assert done.returncode != 0
    assert "No cycles are allowed in audioicl.prompts" in done.stdout
    assert ".chat -> .build" in done.stdout
