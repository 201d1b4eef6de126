"""Random-weight checkpoints of the three model families (Qwen2-Audio, Qwen2.5-Omni, Qwen3-Omni), for tests
and GPU measurements: the real layouts, chat templates, special tokens and encoder downsampling, with weights
that do not matter.

``tiny_checkpoint`` writes a 2-layer checkpoint folder offline, ``full_size_model`` / ``full_size_config``
give the real full-size model with random weights, ``audio_tokens`` the placeholder tokens a clip costs and
``family`` a family's spec. The modules: ``templates`` (chat templates, tiny tokenizer), ``configs`` (family
specs, config.json contents), ``build`` (the models, processors and checkpoint folders). Importing the package
is cheap; torch and transformers (the ``hf`` extra) load when a checkpoint or model is built.
"""

from __future__ import annotations

from audioicl.testing.build import audio_tokens, full_size_config, full_size_model, tiny_checkpoint
from audioicl.testing.configs import FAMILIES, FAMILY_SPECS, Family, family

__all__ = [
    "FAMILIES",
    "FAMILY_SPECS",
    "Family",
    "audio_tokens",
    "family",
    "full_size_config",
    "full_size_model",
    "tiny_checkpoint",
]
