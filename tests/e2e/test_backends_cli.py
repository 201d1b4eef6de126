"""``audioicl backends``: the kinds, the built-in solvers, the options and defaults read from each kind's
source without importing it, and whether what it needs is installed."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from functools import partial

import cli

from audioicl.backends.base import BACKEND_KINDS, EXECUTION_OPTIONS
from audioicl.solvers.registry import SOLVERS

audioicl = partial(cli.audioicl, timeout=120, rc=0)


def test_backends_json_lists_every_kind_with_its_options_and_extra():
    listed = {kind["kind"]: kind for kind in json.loads(audioicl("backends", "--json").stdout)}
    assert list(listed) == list(BACKEND_KINDS)
    builtin = listed["builtin"]
    assert [s["name"] for s in builtin["solvers"]] == SOLVERS.names()
    assert builtin["extra"] is None and builtin["installed"] and builtin["packages"] == []
    assert [o["name"] for o in builtin["options"]] == ["max_clip_seconds"]  # seed is --seed
    for kind, entry in listed.items():
        assert entry["extra"] == BACKEND_KINDS[kind]
        assert entry["missing"] == [p for p in entry["packages"] if importlib.util.find_spec(p) is None]
        assert entry["installed"] == (not entry["missing"])
        execution = {o["name"] for o in entry["options"] if o["execution"]}
        assert execution == set(EXECUTION_OPTIONS.get(kind, ())) & {o["name"] for o in entry["options"]}
    assert listed["hf"]["packages"] == ["torch", "transformers"] and listed["hf"]["install"] == (
        "pip install 'audioicl[hf]'"
    )
    assert "vllm" in listed["vllm"]["packages"] and listed["openai"]["packages"] == ["httpx"]
    vllm = {o["name"]: o["default"] for o in listed["vllm"]["options"]}
    assert vllm["max_model_len"] == 8192 and vllm["gpu_memory_utilization"] == 0.9


def test_the_options_read_from_the_source_are_those_the_module_declares():
    from audioicl.backends.openai import backend as openai  # httpx: the api extra, installed for the tests

    listed = {kind["kind"]: kind for kind in json.loads(audioicl("backends", "--json").stdout)}
    options = {o["name"]: o["default"] for o in listed["openai"]["options"]}
    assert list(options) == [name for name in openai.OPTIONS if name != "seed"]
    defaults = {f.name: f.default for f in dataclasses.fields(openai.OpenAISettings)}
    assert options == {name: defaults[name] for name in options}


def test_backends_table():
    out = audioicl("backends").stdout
    assert out.startswith("builtin  builtin:SOLVER  needs no extra: installed\n")
    for name in SOLVERS.names():
        assert f"    builtin:{name} " in out
    assert "openai  openai:SERVED_MODEL_NAME  extra 'api' (httpx): installed" in out
    assert "    concurrency*       8\n" in out and "    timeout*           120\n" in out
    hf_line = next(line for line in out.splitlines() if line.startswith("hf  "))
    assert hf_line.startswith("hf  hf:HUB_ID_OR_FOLDER  extra 'hf' (torch, transformers): ")
    if importlib.util.find_spec("vllm") is None:
        assert "(transformers, vllm): not installed (missing vllm); pip install 'audioicl[vllm]'" in out
