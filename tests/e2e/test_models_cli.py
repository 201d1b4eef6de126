"""``audioicl models``: the family table, as text, JSON and the Markdown that ``docs/models.md`` holds."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import cli
import pytest

from audioicl.backends.families import FAMILIES

audioicl = partial(cli.audioicl, rc=0)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "models.md"


def test_the_table_lists_every_family_with_its_limits():
    """Issue 53, item 4: the listing was about 230 columns wide; now it fits 100, every column is under
    ``--verbose`` and one family's every detail under ``audioicl models NAME``."""
    out = audioicl("models").stdout
    for _, family in FAMILIES.items():
        assert family.label.replace(" (ASR only)", " (ASR)").replace(" (remote code)", " (remote)") in out
    assert max(map(len, out.splitlines())) <= 100
    assert out.splitlines()[0].split() == ["family", "clips", "s/clip", "tok/s", "hf", "vllm", "tiny"]
    verbose = audioicl("models", "--verbose").stdout
    assert "clips per prompt" in verbose and "s per clip" in verbose and "transformers" in verbose
    one = audioicl("models", "gemma4").stdout
    assert "checkpoints       google/gemma-4-E2B-it, google/gemma-4-E4B-it" in one
    assert "transformers      >= 5.25" in one
    near = audioicl("models", "gema4", rc=2)
    assert (
        near.stderr.strip() == "audioicl models: error: unknown model family 'gema4' (did you mean gemma4?)"
    )


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


def test_the_per_clip_column_says_window_engine_or_any_where_no_limit_is_stated():
    """Regression: every family without a stated limit read "window", Apertus 1.5 (no window) and the vLLM-only
    families (the engine's limit) included."""
    rows = {row["family"]: row["s per clip"] for row in json.loads(audioicl("models", "--json").stdout)}
    assert rows["Apertus 1.5"] == "any"
    assert rows["MiniCPM-o"] == "engine's"  # vLLM only
    assert rows["Phi-4-multimodal"] == "window"  # hf: its feature extractor's
    assert rows["Gemma 4"] == "30"


def test_tiny_checkpoints_are_named_by_the_model_type_audioicl_models_lists():
    """Issue 40, item 15: the tiny checkpoints' names were listed nowhere a user looks and spelled two ways.
    ``audioicl models`` lists each family's model type, which ``tiny_checkpoint`` takes (the old names still
    work); a family whose tiny checkpoint cannot be written here says why, not "unknown model family"."""
    pytest.importorskip("transformers")
    from audioicl.testing.build import tiny_name
    from audioicl.testing.registry import UNAVAILABLE

    listed = json.loads(audioicl("models", "--json").stdout)
    names = [row["tiny"] for row in listed if row["tiny"] != "-"]
    assert "qwen2_audio" in names and "qwen2_5_omni" in names
    for name in names:
        try:
            assert tiny_name(name)
        except ValueError as exc:  # only where a package its processor needs is missing here
            assert UNAVAILABLE and "needs torchaudio" in str(exc), exc
    assert tiny_name("qwen2-audio") == tiny_name("qwen2_audio") == "qwen2-audio"
    with pytest.raises(ValueError, match="unknown model family 'nope'"):
        tiny_name("nope")
