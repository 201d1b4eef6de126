"""Random-weight checkpoints of every model family, for tests and GPU performance work; the Qwen families' own
builders.

``tiny_checkpoint(family, out_dir)`` writes, offline and in seconds, a folder that loads exactly like the real
checkpoint: ``AutoProcessor.from_pretrained(dir)`` gives the family's processor class (tokenizer, 128-bin
``WhisperFeatureExtractor`` and, for the Omni families, image and video processors), and the family's model class
loads the weights with ``from_pretrained(dir)``. The model has 2 small layers but keeps the real audio encoder's
downsampling (Qwen2-Audio and Qwen2.5-Omni: 25 audio tokens per second; Qwen3-Omni: 13 per 100-frame second),
the real chat template and the real special tokens, so prompt rendering, placeholder expansion and
generation run through the same transformers code as the real models.

``full_size_model(family)`` builds the real full-size configuration (Qwen2-Audio-7B, the Qwen2.5-Omni-7B
thinker, the Qwen3-Omni-30B-A3B thinker) with random weights directly on the device, plus a processor whose
(tiny) tokenizer gives the special tokens the real ids, for throughput measurements where the weights do not
matter but the shapes and the cost do. ``audio_tokens`` counts the placeholder tokens a clip costs.

``thinker_only=False`` (the default for the Omni families) writes the real checkpoints' full layout
(``audioicl.testing.configs`` describes it): the full Omni config with a tiny talker and vocoder and the
weights of the whole model, as ``save_pretrained`` of the full class writes them. ``thinker_only=True`` writes
a thinker-only folder (``model_type`` ``qwen2_5_omni_thinker`` / ``qwen3_omni_moe_thinker``), the layout of
thinker-only exports.

Needs the ``hf`` extra (torch, transformers, torchvision for the Omni processors' video processor), imported
on first use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from audioicl.testing.configs import Family, full_config
from audioicl.testing.families import TINY  # registers every family
from audioicl.testing.qwen import FAMILY_SPECS, SAMPLE_RATE
from audioicl.testing.weights import config_from

__all__ = ["SAMPLE_RATE", "audio_tokens", "family", "full_size_config", "full_size_model", "tiny_checkpoint"]


def family(name: str) -> Family:
    """A Qwen family's spec."""
    try:
        return FAMILY_SPECS[name]
    except KeyError:
        raise ValueError(f"unknown model family {name!r} (known: {', '.join(FAMILY_SPECS)})") from None


def audio_tokens(family_name: str, samples: int, longest: int | None = None) -> int:
    """Audio placeholder tokens the family's processor spends on a clip of ``samples`` at 16 kHz.

    The encoders' downsampling, written out from the real models: mel frames are 10 ms (160 samples), a started
    frame counts; Qwen2-Audio and Qwen2.5-Omni pad and cut every clip to their window (30 s, 300 s) and halve
    twice (a stride-2 convolution, then pooling: 25 tokens per second); Qwen3-Omni spends 13 tokens per full
    100-frame chunk and three stride-2 convolutions on the rest. Qwen3-Omni's processor pads only to the longest
    clip of the call (``longest``, default this clip) and drops that clip's last started frame: a clip's count
    can depend on its batch mates unless clip lengths are multiples of 160 samples.
    """
    spec = family(family_name)
    frames = -(-samples // 160)
    if spec.name == "qwen3-omni":
        frames = min(frames, max(samples, longest or 0) // 160)
        rest = frames % 100
        return frames // 100 * 13 + (((rest - 1) // 2 + 1 - 1) // 2 + 1 - 1) // 2 + 1
    frames = min(frames, spec.chunk_length * 100)
    return ((frames - 1) // 2 + 1 - 2) // 2 + 1


def tiny_checkpoint(family_name: str, out_dir: str | Path, seed: int = 0, **options: Any) -> Path:
    """Write a tiny random-weight checkpoint of ``family_name`` (any family of ``testing.families``) to
    ``out_dir`` and return the folder. The same ``seed`` writes the same weights. The Qwen families take
    ``thinker_only`` (an Omni family's thinker-only folder instead of the real checkpoints' full layout) and
    ``head_dim`` (the text model's attention head size, default 16; vLLM's CPU attention needs 64)."""
    return TINY.get(tiny_name(family_name)).write(Path(out_dir), seed, **options)


def tiny_name(name: str) -> str:
    """The ``TINY`` name of a family given by that name or by a ``config.json`` model type it covers
    (``qwen2_audio`` as ``qwen2-audio``: ``audioicl models`` lists the model types). A family whose tiny
    checkpoint cannot be written here says why."""
    from audioicl.backends.families import FAMILIES
    from audioicl.testing.registry import UNAVAILABLE

    family = next((f for n, f in FAMILIES.items() if name == n or name in f.model_types), None)
    found = family.name if family is not None else name
    if found in TINY:
        return found
    if found in UNAVAILABLE:
        raise ValueError(f"the tiny checkpoint of {name!r} {UNAVAILABLE[found]}")
    known = sorted({t for n, f in FAMILIES.items() if n in TINY for t in (n, *f.model_types)})
    raise ValueError(f"unknown model family {name!r} (known: {', '.join(known)})")


def full_size_config(family_name: str, *, num_layers: int | None = None):
    """A Qwen family's real full-size configuration (the thinker's, for the Omni families) as a transformers
    config. ``num_layers`` overrides the depth of the text model and of the audio and vision encoders."""
    return config_from(full_config(family(family_name), num_layers))


def full_size_model(
    family_name: str,
    device: Any = "cuda",
    dtype: Any = None,
    *,
    num_layers: int | None = None,
    seed: int = 0,
):
    """``(model, processor)``: the full-size model with random weights made on ``device``, and its processor.

    The weights are created on the device directly (no CPU copy of 30 B parameters), in ``dtype`` (default
    bfloat16). The processor's tokenizer is the tiny one, with the special tokens at the real ids, so prompts
    rendered by it are valid input for the full-size model (their ordinary text uses only the first ids of the
    vocabulary). ``device="meta"`` builds the structure without memory.
    """
    import torch

    build = TINY.get(family_name).full_size
    if build is None:
        raise ValueError(f"{family_name}: no full-size builder")
    return build(device, dtype or torch.bfloat16, num_layers=num_layers, seed=seed)
