"""Tiny random-weight checkpoints (and full-size builders) of the families beyond the three Qwen ones.

Each module here registers one ``TinyFamily`` under the name of its ``backends.families`` family: ``write``
makes, offline and in seconds, a folder that loads like the real checkpoint (the real config, processor and
feature-extractor classes, the real special tokens and chat template, 2 small layers); ``full_size`` builds the
real full-size configuration with random weights on a device, for the GPU measurements; ``model_card_inputs``
is how the family's model card turns a conversation into model inputs, the reference of the parity test
(default: the processor's ``apply_chat_template(..., tokenize=True, return_dict=True)``).
Importing the package imports every module in it. Needs the ``hf`` extra.
"""

from __future__ import annotations

import pkgutil
from importlib import import_module

from audioicl.testing.registry import TINY, TinyFamily, card_inputs, register, unavailable

__all__ = ["TINY", "TORCHAUDIO", "TinyFamily", "card_inputs", "register", "unavailable"]

TORCHAUDIO = (
    "needs torchaudio, which is not installed (pip install --no-deps torchaudio: scripts/test.sh says which)"
)

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    import_module(f"{__name__}.{_module}")
