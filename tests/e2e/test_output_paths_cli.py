"""Every command refuses an output path it cannot write in one line, before doing the work: a folder where a
file goes, a file where a folder goes, a path under a file (nothing can be created there): exit 2, a usage
error; and a place this user may not write, a folder without write permission (when the tests do not run as
root, for whom permissions do not refuse) or, as root, a read-only file system (a tmpfs mounted read-only
where the machine lets root mount one): exit 1, as a write refused during the work is (the README's exit table). No traceback, no temporary file
left behind, nothing created."""

from __future__ import annotations

import os
import subprocess
from functools import partial
from pathlib import Path

import cli
import pytest
from helpers import quiet

from audioicl import RunOptions, Shard
from audioicl.inference.runner import run
from audioicl.scoring.score import score_folder

audioicl = partial(cli.audioicl, timeout=300)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, tiny_dataset) -> dict[str, Path]:
    """What the commands read: the dataset, a results folder, a shard folder and a summary CSV."""
    base = tmp_path_factory.mktemp("inputs")
    run(RunOptions(tiny_dataset, "builtin:random", base / "results", shots=(1,), limit=1), quiet)
    run(RunOptions(tiny_dataset, "builtin:random", base / "sharded", shots=(1,), shard=Shard(1, 1)), quiet)
    score_folder(base / "results", base / "summary.csv")
    return {
        "data": tiny_dataset,
        "results": base / "results",
        "shard": base / "sharded" / "shard-1-of-1",
        "summary": base / "summary.csv",
    }


# command, option, whether the path is a folder (else a file), the arguments with BAD for the path
COMMANDS = {
    "score --out": (False, ["score", "--in", "{results}", "--out", "BAD"]),
    "score --detail": (False, ["score", "--in", "{results}", "--out", "{tmp}/s.csv", "--detail", "BAD"]),
    "score --per-example-dir": (
        True,
        ["score", "--in", "{results}", "--out", "{tmp}/s.csv", "--per-example-dir", "BAD"],
    ),
    "report --out": (True, ["report", "--scores", "{summary}", "--out", "BAD"]),
    "run --out": (True, ["run", "--data", "{data}", "--model", "builtin:random", "--out", "BAD", "--k", "1"]),
    "demo --out": (True, ["demo", "--out", "BAD", "--episodes", "1", "--k", "1", "--workers", "1"]),
    "study --out": (
        True,
        ["study", "--data", "{data}", "--model", "builtin:random", "--out", "BAD", "--conditions", "plain"],
    ),
    "merge --out": (True, ["merge", "{shard}", "--out", "BAD"]),
    "audit --json": (False, ["audit", "{data}", "--json", "BAD", "--workers", "1"]),
    "validate --json": (False, ["validate", "{data}", "--json", "BAD"]),
    "compare --out": (False, ["compare", "{results}", "{results}", "--out", "BAD"]),
    "build --out": (True, ["build", "--out", "BAD", "--episodes", "1", "--workers", "1"]),
}
KINDS = ("wrong-kind", "under-a-file", "unwritable")


def _bad_path(tmp_path: Path, folder: bool, kind: str, request: pytest.FixtureRequest) -> tuple[Path, str]:
    """The path to give, and what the message says about it."""
    if kind == "wrong-kind":
        if folder:
            path = tmp_path / "a-file"
            path.write_text("keep me\n")
            return path, "is a file, not a folder"
        path = tmp_path / "a-folder"
        path.mkdir()
        return path, "is a folder, not a file"
    if kind == "under-a-file":
        (tmp_path / "a-file").write_text("keep me\n")
        return tmp_path / "a-file" / "sub" / "out.x", "cannot be created"
    if os.geteuid() == 0:
        read_only = tmp_path / "read-only"
        read_only.mkdir()
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", read_only], check=False
        )
        if mounted.returncode != 0:
            pytest.skip(
                "root writes into a folder without write permission, and cannot mount a read-only one"
            )
        request.addfinalizer(lambda: subprocess.run(["umount", read_only], check=True))
        return read_only / "out.x", f"cannot be created: {read_only} is not writable"
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    return locked / "out.x", "cannot be created"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", list(COMMANDS))
def test_unwritable_output_is_one_line(name, kind, inputs, tmp_path, request):
    folder, template = COMMANDS[name]
    command, option = name.split()
    if (name, kind) == ("score --out", "wrong-kind"):
        pytest.skip("score --out takes a folder too (DIR/summary.csv): tests/e2e/test_score_cli.py")
    bad, cause = _bad_path(tmp_path, folder, kind, request)
    before = sorted(tmp_path.rglob("*"))
    values = {key: str(value) for key, value in inputs.items()} | {"tmp": str(tmp_path)}
    args = [str(bad) if arg == "BAD" else arg.format(**values) for arg in template]
    proc = audioicl(*args, cwd=tmp_path, rc=1 if kind == "unwritable" else 2)
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"audioicl {command}: error: {option} "), proc.stderr
    assert str(bad) in last and cause in last
    assert sorted(tmp_path.rglob("*")) == before  # nothing made: no folder, no temporary file (.x.<pid>.tmp)
