"""What the three Qwen families' test models share: their registration (``qwen_tiny_family``: the spec into
``FAMILY_SPECS``, a ``TinyFamily`` into ``TINY``), the processor around the tiny tokenizer, the folder writer
(``write_qwen``: the real layout, the full Omni one around the thinker by default) and the full-size builder.
Each family's spec and configurations live in its module of ``testing.families``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from audioicl.testing.configs import Family, full_config, with_head_dim
from audioicl.testing.registry import TinyFamily, register
from audioicl.testing.templates import make_tokenizer
from audioicl.testing.weights import config_from, seeded_model

SAMPLE_RATE = 16_000  # the real feature extractors' sampling_rate (preprocessor_config.json)

# The Qwen families' specs, by name, as their modules under ``testing.families`` register them.
FAMILY_SPECS: dict[str, Family] = {}


def qwen_tiny_family(spec: Family, template_source: str) -> Family:
    """Register a Qwen family's spec, and its ``TinyFamily`` (the folder writer and full-size builder of
    ``testing.build``, which load torch and transformers only when called)."""
    FAMILY_SPECS[spec.name] = spec
    register(
        TinyFamily(
            spec.name,
            lambda out, seed=0, **options: write_qwen(spec, out, seed, **options),
            template_source,
            full_size=lambda device, dtype=None, num_layers=None, seed=0: full_size_qwen(
                spec, device, dtype, num_layers=num_layers, seed=seed
            ),
        )
    )
    return spec


def _processor(spec: Family, real_ids: bool):
    """The family's processor class around the tiny tokenizer, with the real feature extractor settings."""
    import transformers

    feature_extractor = transformers.WhisperFeatureExtractor(
        feature_size=128,
        sampling_rate=SAMPLE_RATE,
        hop_length=160,
        chunk_length=spec.chunk_length,
        n_fft=400,
        padding_value=0.0,
        return_attention_mask=True,
    )
    parts: dict[str, Any] = {
        "feature_extractor": feature_extractor,
        "tokenizer": make_tokenizer(spec.special_tokens, spec.named_tokens, real_ids=real_ids),
    }
    if spec.named_tokens:
        # The Omni processors hold image and video processors even for audio-only use (the video processor
        # needs torchvision). Patch sizes as the real preprocessor_config.json: 14 (Qwen2.5-Omni), 16 (Qwen3-Omni).
        vision = {"patch_size": spec.image_patch_size, "temporal_patch_size": 2, "merge_size": 2}
        parts["image_processor"] = transformers.Qwen2VLImageProcessor(**vision)
        parts["video_processor"] = transformers.Qwen2VLVideoProcessor(**vision)
    return getattr(transformers, spec.processor_class)(chat_template=spec.chat_template, **parts)


def _model_class(name: str):
    import transformers

    return getattr(transformers, name)


def _user_token_id(tokenizer) -> int:
    (user,) = tokenizer("user", add_special_tokens=False).input_ids
    return user


def write_qwen(
    spec: Family, out_dir: Path, seed: int = 0, *, thinker_only: bool = False, head_dim: int | None = None
) -> Path:
    """A Qwen family's tiny checkpoint (``tiny_checkpoint``): loads with ``AutoProcessor.from_pretrained`` and
    ``<spec.model_class>.from_pretrained``."""
    assert spec.tiny_config is not None
    if thinker_only and spec.omni_config is None:
        raise ValueError(f"{spec.name} has no thinker: thinker_only applies to the Omni families")
    out = Path(out_dir)
    processor = _processor(spec, real_ids=False)
    tokenizer = processor.tokenizer
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in spec.special_tokens}
    thinker = spec.tiny_config(spec, ids, vocab=len(tokenizer), user_id=_user_token_id(tokenizer))
    if head_dim is not None:
        thinker = with_head_dim(thinker, head_dim)
    model = seeded_model(_model_class(spec.model_class), config_from(thinker), seed)
    if spec.omni_config is not None and spec.full_class is not None and not thinker_only:
        # The same thinker weights in both layouts: a test of one layout holds for the other.
        full = seeded_model(
            _model_class(spec.full_class), config_from(spec.omni_config(spec, thinker, ids)), seed
        )
        full.thinker.load_state_dict(model.state_dict())
        model = full
    model.generation_config = _generation_config(ids)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def _generation_config(ids: dict[str, int]):
    """Stop at <|im_end|> or <|endoftext|>, pad with <|endoftext|>, as the real generation_config.json."""
    from transformers import GenerationConfig

    return GenerationConfig(
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"],
        bos_token_id=ids["<|endoftext|>"],
    )


def full_size_qwen(spec: Family, device: Any, dtype: Any, *, num_layers: int | None = None, seed: int = 0):
    """A Qwen family's ``full_size_model``."""
    config = config_from(full_config(spec, num_layers))
    model = seeded_model(_model_class(spec.model_class), config, seed, dtype, device)
    model.generation_config = _generation_config(spec.special_tokens)
    return model, _processor(spec, real_ids=True)
