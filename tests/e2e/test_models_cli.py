"""``audioicl models``: the family table, as text, JSON and the Markdown that ``docs/models.md`` holds."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import cli

from audioicl.backends.families import FAMILIES

audioicl = partial(cli.audioicl, rc=0)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "models.md"


def test_the_table_lists_every_family_with_its_limits():
    out = audioicl("models").stdout
    for _, family in FAMILIES.items():
        assert family.label in out
    assert "clips per prompt" in out and "s per clip" in out


def test_json_has_one_row_per_family():
    rows = json.loads(audioicl("models", "--json").stdout)
    assert len(rows) == len(FAMILIES.names())
    assert {"family", "backends", "clips per prompt", "s per clip", "hf", "vllm", "checkpoints"} <= set(
        rows[0]
    )


def test_docs_models_holds_the_current_table():
    table = audioicl("models", "--markdown").stdout.strip()
    assert table in DOCS.read_text(encoding="utf-8"), (
        "docs/models.md is stale: paste `audioicl models --markdown`"
    )
