"""Audio Flamingo 3 (``AudioFlamingo3ForConditionalGeneration``, in none of the Auto classes): one clip a prompt.

Limits, from transformers 5.25 ``processing_audioflamingo3.py``: ``_process_audio`` cuts a clip into
``feature_extractor.chunk_length`` (30 s) windows, at most ``max_audio_len // chunk_length`` of them
(``max_audio_len=600``), and silently keeps the first 600 s of a longer clip (a logged warning); every window is
padded to 30 s, so a clip's features do not depend on its batch mates. Each window costs 750 ``<sound>`` tokens
(``_get_audio_token_length``: stride-2 convolution, then a stride-2 pooling: 25 a second). One clip a prompt:
``validate_inputs`` refuses any call whose texts and clips are not 1:1, and the chat template writes one
``<sound>`` per message however many audio parts it holds.
"""

from .base import AudioFamily, VllmSupport
from .registry import register

FAMILY = register(
    AudioFamily(
        pad_call=False,  # padding=True would pad each 30 s window to the call's longest clip
        name="audioflamingo3",
        verified="gpu",  # full size, random weights: docs/measurements.md
        display="Audio Flamingo 3",
        model_types=("audioflamingo3",),
        model_class="AudioFlamingo3ForConditionalGeneration",
        max_clip_seconds=600.0,
        max_clips=1,
        audio_tokens_per_second=25.0,
        min_transformers="5.0",
        checkpoints=("nvidia/audio-flamingo-3-hf",),
        vllm=VllmSupport(
            "AudioFlamingo3ForConditionalGeneration", placeholder="<sound>", max_clips=1, verified="ci"
        ),
        notes=(
            "One clip per prompt through transformers (the processor takes texts and clips 1:1 and the template "
            "writes one <sound> per message), so in-context demonstrations with audio cannot reach it; the "
            "original (non-transformers) AF3-Chat code takes several. A clip is cut into 30 s windows, 600 s at "
            "most. Its chat template puts the clip before the message's text, whatever the order of the parts. "
            "vLLM takes one clip per prompt too (its processing info declares 1); the CPU engine runs the tiny "
            "checkpoint in the tests, in the single-clip layout, with the same answers as hf in fp32."
        ),
    )
)
