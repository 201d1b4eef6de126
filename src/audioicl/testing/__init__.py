"""Random-weight checkpoints of the 17 model families, for tests and GPU measurements: the real layouts, chat
templates, special tokens and encoder downsampling, with weights that do not matter.

Every family is one module of ``testing.families`` registering one ``TinyFamily`` (``TINY``), named as its
``backends.families`` adapter: ``tiny_checkpoint(name, dir)`` writes its 2-layer checkpoint folder offline,
``full_size_model(name)`` builds the real full size with random weights; ``audio_tokens`` counts the
placeholder tokens a clip costs a Qwen family and ``family`` gives a Qwen family's spec. The modules:
``templates`` (chat templates, tiny tokenizers), ``configs`` (the Qwen specs' form), ``build`` (the shared
writers), ``weights``. Importing the package is cheap; torch and transformers (the ``hf`` extra) load when a
checkpoint or model is built.
"""

from __future__ import annotations

from audioicl.testing.build import audio_tokens, family, full_size_config, full_size_model, tiny_checkpoint
from audioicl.testing.configs import Family
from audioicl.testing.families import TINY  # registers every family
from audioicl.testing.qwen import FAMILY_SPECS

# the Qwen families, whose test models share the builders of ``build`` (their specs: ``family``)
QWEN_FAMILIES: tuple[str, ...] = tuple(sorted(FAMILY_SPECS))

__all__ = [
    "QWEN_FAMILIES",
    "TINY",
    "FAMILY_SPECS",
    "Family",
    "audio_tokens",
    "family",
    "full_size_config",
    "full_size_model",
    "tiny_checkpoint",
]
