"""``audioicl backends``: the kinds, the built-in solvers, each kind's options as its declaration
(``backends.<kind>.KIND``) has them, and whether what it needs is installed."""

from __future__ import annotations

import importlib.util
import json
from functools import partial

import cli

from audioicl.backends.base import KIND_PACKAGES, kind_of
from audioicl.solvers.registry import SOLVERS

audioicl = partial(cli.audioicl, timeout=120, rc=0)


def test_backends_json_lists_every_kind_with_its_options_and_extra():
    listed = {kind["kind"]: kind for kind in json.loads(audioicl("backends", "--json").stdout)}
    assert list(listed) == list(KIND_PACKAGES)
    builtin = listed["builtin"]
    assert [s["name"] for s in builtin["solvers"]] == SOLVERS.names()
    assert builtin["extra"] is None and builtin["installed"] and builtin["packages"] == []
    assert [o["name"] for o in builtin["options"]] == ["max_clip_seconds"]  # seed is --seed
    for name, entry in listed.items():
        kind = kind_of(name)
        assert entry["extra"] == kind.extra
        assert entry["missing"] == [p for p in entry["packages"] if importlib.util.find_spec(p) is None]
        assert entry["installed"] == (not entry["missing"])
        assert [o["name"] for o in entry["options"]] == [o.name for o in kind.listed]
        keeps = {o["name"] for o in entry["options"] if o["keeps_answers"]}
        assert keeps == {o.name for o in kind.listed if o.keeps_answers}
    hf_keeps = {o["name"] for o in listed["hf"]["options"] if o["keeps_answers"]}
    assert {"allocator", "decode_batches", "encode_ahead", "reuse", "pack"} <= hf_keeps
    assert "dtype" not in hf_keeps
    assert listed["hf"]["packages"] == ["torch", "transformers"] and listed["hf"]["install"] == (
        "pip install 'audioicl[hf]'"
    )
    assert "vllm" in listed["vllm"]["packages"] and listed["openai"]["packages"] == ["httpx"]
    vllm = {o["name"]: o["default"] for o in listed["vllm"]["options"]}
    assert vllm["max_model_len"] == 8192 and vllm["gpu_memory_utilization"] == 0.9


def test_backends_table():
    out = audioicl("backends").stdout
    assert out.startswith("builtin  builtin:SOLVER  needs no extra: installed\n")
    for name in SOLVERS.names():
        assert f"    builtin:{name} " in out
    assert "openai  openai:SERVED_MODEL_NAME  extra 'api' (httpx): installed" in out
    assert "    concurrency*       a whole number, at least 1; 8\n" in out
    assert "    timeout*           a number above 0; 120\n" in out
    hf_line = next(line for line in out.splitlines() if line.startswith("hf  "))
    assert hf_line.startswith("hf  hf:HUB_ID_OR_FOLDER  extra 'hf' (torch, transformers): ")
    if importlib.util.find_spec("vllm") is None:
        assert "(transformers, vllm): not installed (missing vllm); pip install 'audioicl[vllm]'" in out


def test_backends_markdown_is_the_docs_table():
    from audioicl.backends.catalog import options_markdown

    assert audioicl("backends", "--markdown").stdout == options_markdown()
