"""Model weights for the test checkpoints: a config object from config.json content, and a model of a class
with weights drawn from a seed. Shared by ``build`` (the Qwen families) and ``families`` (the others)."""

from __future__ import annotations

import copy
from typing import Any


def config_from(data: dict[str, Any]):
    """A transformers config object from config.json content (its ``model_type`` picks the class)."""
    from transformers import AutoConfig

    data = copy.deepcopy(data)
    return AutoConfig.for_model(data.pop("model_type"), **data)


def seeded_model(cls, config, seed: int, dtype: Any = None, device: Any = None):
    """``cls(config)`` with weights drawn from torch's generator seeded with ``seed``; the global state is kept.

    Parameters that transformers' own initialisation leaves as allocated memory (transformers 5.24 does so for
    the Qwen3-Omni talker's experts) would make the weights differ from run to run: they are allocated as NaN
    (torch's deterministic mode) and then drawn from N(0, 0.02) like the rest.
    """
    import torch

    deterministic = torch.are_deterministic_algorithms_enabled()
    with torch.random.fork_rng(devices=[]), torch.device(device or "cpu"):
        torch.manual_seed(seed)
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            model = cls._from_config(config, dtype=dtype or torch.float32)
        finally:
            torch.use_deterministic_algorithms(deterministic)
        if device != "meta":
            with torch.no_grad():
                for tensor in (*model.parameters(), *model.buffers()):
                    if tensor.is_floating_point() and bool(tensor.isnan().any()):
                        tensor.normal_(0.0, 0.02)
    return model.eval()
