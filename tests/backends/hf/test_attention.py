"""The reuse path's attention implementations (``backends/attention.py``): the same numbers as transformers'
own, in force only inside the reuse path's calls."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("torchvision")

from helpers import noise_clip  # noqa: E402
from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: E402

from audioicl.backends.hf.features import feature_batch  # noqa: E402
from audioicl.backends.hf.reuse import attention  # noqa: E402
from audioicl.backends.hf.reuse.attention import (  # noqa: E402
    REUSE,
    WINDOWS,
    batched_windows,
    reuse_attention,
    reuse_attention_in,
    segment_attention,
)
from audioicl.backends.hf.reuse.parts import PARTS  # noqa: E402


class Grouped(torch.nn.Module):
    def __init__(self, groups: int):
        super().__init__()
        self.num_key_value_groups = groups
        self.is_causal = True


def random_mask(rows: int, queries: int, keys: int, generator: torch.Generator) -> torch.Tensor:
    visible = torch.rand(rows, 1, queries, keys, generator=generator) < 0.6
    visible[..., 0] = True  # every query sees a key
    return torch.zeros(visible.shape).masked_fill_(~visible, torch.finfo(torch.float32).min)


@pytest.mark.parametrize("queries", [1, 5, attention.FOLD_MAX_QUERIES + 3])
@pytest.mark.parametrize("groups", [1, 2, 7])
def test_reuse_attention_equals_sdpa_with_copied_kv_heads(queries, groups):
    generator = torch.Generator().manual_seed(queries * 10 + groups)
    rows, kv_heads, keys, dim = 3, 2, 40, 16
    query = torch.randn(rows, kv_heads * groups, queries, dim, generator=generator)
    key, value = (torch.randn(rows, kv_heads, keys, dim, generator=generator) for _ in range(2))
    mask = random_mask(rows, queries, keys, generator)
    module = Grouped(groups)
    ours, _ = reuse_attention(module, query, key, value, mask, scaling=0.25)
    theirs, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=0.25)
    assert ours.shape == theirs.shape == (rows, queries, kv_heads * groups, dim)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


def test_reuse_attention_does_not_copy_kv_heads_for_few_queries(monkeypatch):
    """The fold is what runs for a decode step's queries: sdpa sees the KV heads as they are."""
    seen = []
    real = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, **kwargs):
        seen.append((q.shape[1], k.shape[1]))
        return real(q, k, v, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(2, 8, 5, 16, generator=generator)
    key, value = (torch.randn(2, 2, 30, 16, generator=generator) for _ in range(2))
    reuse_attention(Grouped(4), query, key, value, random_mask(2, 5, 30, generator))
    assert seen == [(2, 2)]


def test_segment_attention_attends_within_each_window_only():
    generator = torch.Generator().manual_seed(1)
    lengths = [7, 3, 7, 1, 5]
    bounds = torch.tensor(np.cumsum([0, *lengths]), dtype=torch.int32)
    heads, dim = 2, 8
    query, key, value = (torch.randn(1, heads, sum(lengths), dim, generator=generator) for _ in range(3))
    ours, _ = segment_attention(None, query, key, value, scaling=0.3, cu_seq_lens_q=bounds, max_length_q=7)
    expected = torch.cat(
        [
            torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.3)
            for q, k, v in zip(*(t.split(lengths, dim=2) for t in (query, key, value)), strict=True)
        ],
        dim=2,
    ).transpose(1, 2)
    assert ours.shape == (1, sum(lengths), heads, dim)
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-6)


def test_an_implementation_is_in_force_only_inside_its_block():
    config = type("Config", (), {"_attn_implementation": "sdpa"})()
    with reuse_attention_in(config):
        assert config._attn_implementation == REUSE
    assert config._attn_implementation == "sdpa"
    with pytest.raises(RuntimeError), reuse_attention_in(config):
        raise RuntimeError("a failed batch")
    assert config._attn_implementation == "sdpa"
    config._attn_implementation = "eager"  # nothing copied to save: its own stays
    with reuse_attention_in(config):
        assert config._attn_implementation == "eager"
    tower = type(
        "Tower", (), {"config": type("Config", (), {"_attn_implementation": "flash_attention_2"})()}
    )()
    with batched_windows(tower):  # flash-attn already takes every window at once
        assert tower.config._attn_implementation == "flash_attention_2"
    tower.config._attn_implementation = "sdpa"
    with batched_windows(tower):
        assert tower.config._attn_implementation == WINDOWS


@pytest.mark.parametrize("family", ["qwen2.5-omni", "qwen3-omni"])
def test_the_omni_encoders_batched_windows_give_the_encoders_own_embeddings(tiny_backends, family):
    backend = tiny_backends[family]
    made = backend.clips.extract([noise_clip(s, i) for i, s in enumerate((0.05, 1.0, 4.3, 12.0, 29.99, 7.7))])
    features, mask = feature_batch(made, backend.model_family, backend.model.dtype)
    tokens = [clip.tokens for clip in made]
    valid = mask.sum(1)
    frames = torch.arange(features.shape[-1])
    with torch.inference_mode():
        ours = PARTS[family](backend.model).encode(features, valid, tokens)
        own = backend.model.get_audio_features(features, (frames[None, :] < valid[:, None]).long())
    for got, expected in zip(ours, torch.split(own.last_hidden_state, tokens), strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("family", ["qwen2.5-omni", "qwen3-omni"])
def test_the_window_layout_is_made_once_per_encoder_call_not_per_layer(tiny_backends, family, monkeypatch):
    """The layout's host syncs (its width, its real slots) happen once a call: every layer after the first
    finds the layout the first made on the call's ``cu_seqlens``."""
    backend = tiny_backends[family]
    made = backend.clips.extract([noise_clip(s, i) for i, s in enumerate((1.0, 4.3, 12.0))])
    features, mask = feature_batch(made, backend.model_family, backend.model.dtype)
    found: list[bool] = []
    layout = attention._window_layout

    def spy(cu_seqlens, *args):
        found.append(hasattr(cu_seqlens, "_audioicl_windows"))
        return layout(cu_seqlens, *args)

    monkeypatch.setattr(attention, "_window_layout", spy)
    with torch.inference_mode():
        PARTS[family](backend.model).encode(features, mask.sum(1), [clip.tokens for clip in made])
    tower = PARTS[family](backend.model).windowed_tower
    assert len(found) == len(tower.layers) > 1
    assert found == [False] + [True] * (len(found) - 1)


def test_the_run_record_names_the_attention_the_reuse_path_ran(tiny_backends):
    assert tiny_backends["qwen2.5-omni"].info["attention"] == {"decoder": REUSE, "audio_encoder": WINDOWS}
    assert tiny_backends["qwen2-audio"].info["attention"] == {"decoder": REUSE}
