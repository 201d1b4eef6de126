"""A backend kind from another installed package (the ``audioicl.backends`` entry-point group, as inspect_ai's
``inspect_ai`` group takes providers): listed by ``audioicl backends``, its ``-o`` options checked, run and
recorded as a built-in kind's are. The package is installed as pip lays a wheel out (its module and a
``.dist-info`` with ``entry_points.txt``) into a folder of its own on the child's ``PYTHONPATH``."""

from __future__ import annotations

import json
import os
import textwrap
from functools import partial
from pathlib import Path

import cli
from helpers import read_jsonl

audioicl = partial(cli.audioicl, timeout=300)

KIND = """
from audioicl.backends.kinds import Kind, Option, choice

KIND = Kind(
    name="echo",
    summary="Answers each prompt with its task's name, or a word of its own.",
    spec="echo:NAME",
    factory="echo_kind.backend:make",
    options=(Option("say", choice("task", "nothing"), "task", "what to answer"),),
)
"""
BACKEND = """
from audioicl.backends.base import Response


class Echo:
    family, max_clip_seconds = "qwen", None

    def __init__(self, name, settings):
        self.name, self.say = f"echo:{name}", settings.say
        self.info = {"said": self.say}

    def generate(self, requests, config):
        return [Response(request.task if self.say == "task" else "") for request in requests]

    def close(self):
        pass


def make(name, settings, workload=None):
    return Echo(name, settings)
"""


def installed(folder: Path, entry: str = "echo = echo_kind:KIND") -> dict[str, str]:
    """The ``echo`` kind's package installed into ``folder``: the environment that finds it."""
    package = folder / "echo_kind"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(KIND))
    (package / "backend.py").write_text(textwrap.dedent(BACKEND))
    info = folder / "echo_kind-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-kind\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[audioicl.backends]\n{entry}\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}


def test_a_kind_another_package_declares_is_listed_checked_and_run(tiny_dataset, tmp_path):
    env = installed(tmp_path / "site")
    listed = json.loads(audioicl("backends", "--json", env=env, rc=0).stdout)
    echo = next(kind for kind in listed if kind["kind"] == "echo")
    assert echo["spec"] == "echo:NAME" and [o["name"] for o in echo["options"]] == ["say"]
    assert "### `echo`: `echo:NAME`" in audioicl("backends", "--markdown", env=env, rc=0).stdout
    assert "echo  echo:NAME  needs no extra: installed" in audioicl("backends", env=env, rc=0).stdout
    refused = audioicl(
        "run",
        "--data",
        tiny_dataset,
        "--model",
        "echo:x",
        "--out",
        tmp_path / "no",
        "-o",
        "say=loud",
        env=env,
    )
    assert refused.returncode != 0 and "say must be task or nothing" in refused.stderr
    out = tmp_path / "results"
    audioicl("run", "--data", tiny_dataset, "--model", "echo:x", "--out", out, "--k", "1", env=env, rc=0)
    lines = read_jsonl(out / "x_results_k1.jsonl")
    assert lines and all(line["response"] == line["task"] for line in lines)
    record = json.loads((out / "x_run.json").read_text())
    assert record["runs"][-1]["backend_info"]["said"] == "task"


def test_a_kind_that_cannot_be_imported_names_its_package_and_spares_the_others(tiny_dataset, tmp_path):
    env = installed(tmp_path / "site", entry="echo = echo_kind_missing:KIND")
    failed = audioicl("run", "--data", tiny_dataset, "--model", "echo:x", "--out", tmp_path / "o", env=env)
    assert failed.returncode != 0
    assert (
        "backend kind 'echo' (echo_kind_missing:KIND, declared by echo-kind) cannot be imported"
        in failed.stderr
    )
    audioicl(
        "run", "--data", tiny_dataset, "--model", "builtin:oracle", "--out", tmp_path / "b", "--k", "1",
        env=env, rc=0,
    )  # fmt: skip
