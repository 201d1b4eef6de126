"""Apertus 1.5 (``Apertus1p5ForConditionalGeneration``): discrete audio tokens, any number of clips a prompt.

From transformers 5.25 ``processing_apertus1p5.py`` and ``modeling_apertus1p5.py``: the processor takes clips at
24 kHz (a ``sampling_rate`` other than 24000 is refused) and expands each ``<|audio|>`` placeholder to ``boa`` +
``ceil(samples / 600)`` ``<|audio|>`` tokens + ``eoa`` (40 a second), with no limit on a clip's length or on the
clips of a prompt (flat lists are consumed in placeholder order). The model runs the WavTokenizer encoder on each
clip alone at its own length ("batch padding would change its codes") and embeds the codes with the text
embedding table: a clip's tokens do not depend on the call. Every clip is peak-normalised to -3 dBFS first, so its
loudness does not reach the model. The LM head is pruned to the text ids: an answer never holds a media token.
"""

from typing import Any

from .base import AudioFamily
from .registry import register


class WrappedAudioFamily(AudioFamily):
    """A fast-path family whose processor wraps a clip's audio tokens in its ``boa_token`` / ``eoa_token``."""

    def expansion(self, processor: Any, tokens: int) -> str:
        return processor.boa_token + self.audio_token * tokens + processor.eoa_token


FAMILY = register(
    WrappedAudioFamily(
        # The fast path (each clip through the processor and the WavTokenizer once, an episode's shared prefix
        # computed once): the processor pads a call's clips to the longest, the model tokenizes each clip at
        # its own length, so a clip's valid samples alone make its codes.
        rendering="inline",
        placeholder="<|audio|>",
        audio_token="<|audio|>",
        feature_keys=("input_values", "padding_mask"),
        encoder_reads_valid_frames=True,
        features_independent_of_batch=True,
        name="apertus1p5",
        display="Apertus 1.5",
        model_types=("apertus1p5",),
        model_class="Apertus1p5ForConditionalGeneration",
        eager_towers=("vision_config", "audio_config"),  # transformers refuses sdpa for both tokenizers
        float32_inputs=("input_values",),  # the waveforms, for its fp32 WavTokenizer: bf16 would flip codes
        max_clip_seconds=None,
        windowed=False,  # WavTokenizer's extractor pads a call to its longest clip and cuts nothing
        audio_tokens_per_second=40.0,
        min_transformers="5.24",
        checkpoints=("swiss-ai/Apertus-v1.5-8B",),
        verified="ci",
        notes=(
            "Audio as discrete WavTokenizer codes (24 kHz, 40 a second) in the text model's own vocabulary, any "
            "number of clips a prompt, no clip limit: a 30-clip MorseCode prompt is about 40 tokens a second of "
            "its audio. The chat template here is reconstructed (the 1.5 tokenizer's is on the hub only): "
            "Apertus-8B-Instruct's turns with audio parts as <|audio|>. vLLM has no Apertus 1.5 implementation."
        ),
    )
)
