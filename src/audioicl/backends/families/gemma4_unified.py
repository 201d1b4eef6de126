"""Gemma 4 Unified (``Gemma4UnifiedForConditionalGeneration``): audio without an encoder, 25 tokens a second.

From transformers 5.25: ``Gemma4UnifiedAudioFeatureExtractor`` cuts each clip into 640-sample frames (40 ms at
16 kHz, the last zero-padded) and truncates only when a ``max_length`` is passed (the processor passes none);
``Gemma4UnifiedProcessor.replace_audio_token`` writes ``<|audio>`` + one ``<|audio|>`` per frame + ``<audio|>``
without the ``audio_seq_length`` cap Gemma 4 applies; the model projects each frame on its own (RMSNorm, linear),
so a clip's tokens do not depend on the other clips of the call. No per-clip limit but the context.
"""

from .base import VllmSupport
from .gemma4 import Gemma4Family
from .registry import register

FAMILY = register(
    Gemma4Family(  # Gemma 4's fast path: each 40 ms frame is projected alone, a clip's tokens in any call
        name="gemma4_unified",
        verified="gpu",  # full size, random weights: docs/performance.md (issue 41)
        display="Gemma 4 Unified",
        model_types=("gemma4_unified",),
        model_class="Gemma4UnifiedForConditionalGeneration",
        max_clip_seconds=None,  # no cut in the processor or the model: the 262,144-token context bounds a clip
        audio_tokens_per_second=25.0,  # feature_extraction_gemma4_unified.py: audio_samples_per_token=640
        min_transformers="5.25",  # the release tested here; the first with Gemma 4 Unified is unknown (see notes)
        checkpoints=("google/gemma-4-12B-it",),
        vllm=VllmSupport(
            "Gemma4UnifiedForConditionalGeneration"
        ),  # vllm/model_executor/models/gemma4_unified.py
        notes=(
            "Takes raw audio without an encoder: each 40 ms frame is one token, so a clip costs 25 tokens a "
            "second and nothing cuts it (the 262,144-token context, about 10,000 s of audio less the prompt, is "
            "the only bound). The chat template is Gemma 4's (text parts trimmed, the system message a string). "
            "The checkpoint id is the one transformers' configuration names; transformers >= 5.25 is the release "
            "tested, the first with the family was not checked. vLLM implements it (untested here). The hf fast "
            "path (each clip projected once, an episode's prefix computed once) is the default: equal to "
            "generate in fp32 on the CPU, 4.2x reuse=off on an H100 with every answer identical in bf16."
        ),
    )
)
