"""Audio-language model families: one module per family, each registering an ``AudioFamily`` (``base``).

Importing the package imports every module in it (sorted by name), and each registers its family: a new family
is one file here (``docs/models.md`` says how to write one).
"""

import pkgutil
from importlib import import_module

from .base import AudioFamily, VllmSupport, content_parts, merge_system
from .registry import FAMILIES, family_of, register

_INFRASTRUCTURE = {"base", "registry"}
for _module in sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _INFRASTRUCTURE):
    import_module(f"{__name__}.{_module}")

__all__ = ["FAMILIES", "AudioFamily", "VllmSupport", "content_parts", "family_of", "merge_system", "register"]
