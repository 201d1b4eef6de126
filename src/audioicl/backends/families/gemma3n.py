"""Gemma 3n (``Gemma3nForConditionalGeneration``): 30 s per clip, silently cut; 188 audio tokens per clip.

Limits, from transformers 5.25: ``Gemma3nAudioFeatureExtractor.__call__`` pads the call's clips to the longest
and truncates every clip to ``max_length=480_000`` samples (30 s at 16 kHz) with ``truncation=True`` by default,
without a word; the processor (``processing_gemma3n.py``, ``full_audio_sequence``) writes a fixed
``audio_seq_length=188`` ``<audio_soft_token>`` between ``<start_of_audio>`` and ``<end_of_audio>`` (each side
``\\n\\n``) whatever the clip's length, and the model (``Gemma3nModel.forward``) fills the tokens past a clip's
end with the embedding of the last audio vocabulary entry: a clip costs 188 tokens, 6.27 a second at 30 s.
"""

from .base import AudioFamily, VllmSupport
from .registry import register

FAMILY = register(
    AudioFamily(
        prompts_per_call=1,  # its extractor pads a call's clips together: a clip's last frames depend on them
        name="gemma3n",
        verified="gpu",  # full size, random weights: docs/measurements.md
        display="Gemma 3n",
        model_types=("gemma3n",),
        model_class="Gemma3nForConditionalGeneration",
        max_clip_seconds=30.0,  # feature_extraction_gemma3n.py: max_length=480_000, truncation=True
        audio_tokens_per_second=None,  # 188 per clip, whatever its length
        min_transformers="4.53",
        checkpoints=("google/gemma-3n-E2B-it", "google/gemma-3n-E4B-it"),
        vllm=VllmSupport("Gemma3nForConditionalGeneration"),
        notes=(
            "Every clip costs 188 audio tokens whatever its length, and a clip over 30 s is cut silently by the "
            "feature extractor (audioicl refuses such clips instead). The chat template trims each text part and "
            "writes the system message as the first user turn's prefix. A clip's features depend on the other "
            "clips of the processor call (padded to the longest, up to 3 more mel frames count as valid): its "
            "last audio token and the number of valid ones can change, so prompts must be processed one by one "
            "for batch-independent answers. Needs timm (the vision tower is a timm model, built even for audio-only use)."
        ),
    )
)
