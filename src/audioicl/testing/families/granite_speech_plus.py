"""Granite Speech Plus (``ibm-granite/granite-speech-4.1-2b-plus``): a tiny checkpoint.

Granite Speech's tiny checkpoint (``granite_speech``: the real processor and feature extractor classes, the Granite
``GPT2Tokenizer`` with ``<|audio|>``) around the Plus model: the ``granite_speech_plus`` config, whose encoder hands
the projector its last hidden states concatenated with those of ``cat_hidden_layers`` (here the first layer),
the projector's input that many encoder widths. The chat template is Granite 3.3's (reconstructed, as Granite
Speech's): the 4.1 checkpoint's own was not found offline. No full-size builder: the 4.1 checkpoint's config was
not found either.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path
from typing import Any

from audioicl.testing.weights import config_from as _config
from audioicl.testing.weights import seeded_model as _seeded_model

from . import TORCHAUDIO, TinyFamily, register, unavailable
from .audioflamingo3 import save
from .granite_speech import (
    TINY_ENCODER,
    TINY_PROJECTOR,
    TINY_TEXT,
    _generation,
    _model_config,
    _processor,
    model_card_inputs,
)

CAT_HIDDEN_LAYERS = [0]  # the encoder layers whose outputs join the last one's


def _plus_config(tokenizer) -> dict[str, Any]:
    data = _model_config(tokenizer, len(tokenizer), TINY_TEXT, TINY_ENCODER, TINY_PROJECTOR)
    width = TINY_ENCODER["hidden_dim"] * (len(CAT_HIDDEN_LAYERS) + 1)
    return {
        **data,
        "model_type": "granite_speech_plus",
        "architectures": ["GraniteSpeechPlusForConditionalGeneration"],
        "encoder_config": {
            **data["encoder_config"],
            "model_type": "granite_speech_plus_encoder",
            "cat_hidden_layers": CAT_HIDDEN_LAYERS,
        },
        "projector_config": {**data["projector_config"], "encoder_hidden_size": width},
    }


def write(out_dir: Path, seed: int) -> Path:
    from transformers import GraniteSpeechPlusForConditionalGeneration

    processor = _processor(real_ids=False)
    model = _seeded_model(
        GraniteSpeechPlusForConditionalGeneration, _config(_plus_config(processor.tokenizer)), seed
    )
    return save(Path(out_dir), model, processor, _generation())


# As Granite Speech's: its feature extractor needs torchaudio.
if find_spec("torchaudio") is not None:
    register(
        TinyFamily(
            name="granite-speech-plus",
            write=write,
            model_card_inputs=model_card_inputs,
            template_source="RECONSTRUCTED: Granite Speech's tiny template (Granite 3.3's); the 4.1 Plus "
            "checkpoint's own chat template was not found offline",
        )
    )
else:
    unavailable("granite-speech-plus", TORCHAUDIO)
