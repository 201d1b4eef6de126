"""GLM-ASR (``GlmAsrForConditionalGeneration``), a speech recogniser: one clip a prompt.

From transformers 5.25 ``processing_glmasr.py``: AF3's windowing (30 s Whisper windows padded whole, at most
``max_audio_len // chunk_length`` of them, ``max_audio_len=655``: "approximately 8192 tokens, the maximum
sequence length of the text model"; a longer clip silently keeps its first 630 s, 21 whole windows), 375
``<|pad|>`` tokens a window (``_get_audio_token_length``: two convolutions, the second of stride 2, then a merge
of 4: 12.5 a second); ``validate_inputs`` takes texts and clips 1:1. Each window is padded to 30 s, so a clip's features and the answer
do not depend on the call.

The chat template (``convert_glmasr_to_hf.py``) writes ``<|begin_of_audio|><|pad|><|end_of_audio|><|user|>``
a clip and nothing after an assistant's text: an answer ends at the generation config's eos (``<|endoftext|>``,
``<|user|>``, ``<|observation|>``). A system message is its own ``<|system|>`` turn.
"""

from .base import AudioFamily, VllmSupport
from .registry import register

FAMILY = register(
    AudioFamily(
        pad_call=False,  # as Audio Flamingo 3: Whisper windows taken whole
        name="glmasr",
        display="GLM-ASR",
        model_types=("glmasr",),
        model_class="GlmAsrForConditionalGeneration",
        max_clip_seconds=630.0,
        max_clips=1,
        audio_tokens_per_second=12.5,
        asr_only=True,
        min_transformers="unknown",
        checkpoints=("zai-org/GLM-ASR-Nano-2512",),
        verified="gpu",
        vllm=VllmSupport(
            "GlmAsrForConditionalGeneration", placeholder="<|begin_of_audio|><|pad|><|end_of_audio|>"
        ),
        notes=(
            "A speech recogniser (transcription only). One clip per prompt (the processor takes texts and clips "
            "1:1). 21 whole 30 s windows at most (max_audio_len 655 s, windows counted whole)."
        ),
    )
)
