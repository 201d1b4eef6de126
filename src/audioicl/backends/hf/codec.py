"""A model's audio codec made cheaper to call, every code it makes unchanged.

Apertus 1.5 turns each clip into WavTokenizer codes, one clip a call at its own length (transformers: "batch
padding would change its codes"). transformers' ``WavTokenizerConv1d`` computes its padding from three 0-dim
tensors it keeps on the model's device (each conversion to a Python int a wait for the GPU: 72 a clip), and its
weight-normalised convolution computes its weight from ``g`` and ``v`` again at every call (18 a clip).
Measured on an H100 through ``audioicl run`` (issue 41): 34.9 s for the 1,372 clips of the 20-episode mix,
~25 ms a clip on the preparing thread, which the model's thread waited 33.8 s for.

``prepare_codecs`` keeps those three numbers on the CPU (the same int64 and float32 arithmetic, so the same
padding, with no wait; no longer buffers, so that moving the model does not take them back to the device) and
computes each weight once at load (the same ``torch._weight_norm`` of the same tensors), so that a clip's codes
are bit for bit those of the model's own code.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.utils import parametrize

PADDING_NUMBERS = ("stride", "kernel_size", "padding_total")  # WavTokenizerConv1d's 0-dim int64 buffers


def prepare_codecs(model: Any) -> int:
    """Every ``WavTokenizerConv1d`` of ``model`` prepared in place (its padding numbers on the CPU, its weight
    norm computed once); the number prepared (0 for a model without one, or a transformers without it)."""
    try:
        from transformers.models.wavtokenizer.modeling_wavtokenizer import WavTokenizerConv1d
    except ImportError:
        return 0
    prepared = 0
    for module in model.modules():
        if not isinstance(module, WavTokenizerConv1d):
            continue
        for name in PADDING_NUMBERS:  # plain attributes now: no later ``.to(device)`` moves them back
            number = torch.tensor(getattr(module, name).item(), dtype=torch.int64)  # not an nn.Buffer
            delattr(module, name)
            setattr(module, name, number)
        if parametrize.is_parametrized(module.conv, "weight"):
            parametrize.remove_parametrizations(module.conv, "weight", leave_parametrized=True)
        prepared += 1
    return prepared
