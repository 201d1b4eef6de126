"""Fun-ASR-Nano (``FunAsrNanoForConditionalGeneration``), a speech recogniser: one clip a prompt.

From transformers 5.25: ``FunAsrNanoFeatureExtractor`` stacks 7 fbank frames every 6 (one LFR frame per 60 ms)
and pads a call's clips to the longest; one ``<|object_ref_start|>`` token per LFR frame (``_process_audio``:
``num_audio_tokens = input_features_mask.sum(-1)``, 16.7 a second). The encoder's sinusoidal positions hold
``max_position_embeddings=2049`` rows read from row 1 (``FunAsrNanoPositionEmbedding.forward``): 2048 LFR frames,
122.88 s, is the longest clip. ``validate_inputs`` takes texts and clips 1:1. A clip's features do not depend on
the call, but the model's answer does: batched with a longer clip, the same prompt's last logits move by 0.19
(fp32, the tiny checkpoint; the encoder reads the padded frames), so each prompt is its own call.

The chat template (``convert_fun_asr_nano_to_hf.py``'s ``CHAT_TEMPLATE``) makes a user message with audio the
checkpoint's Chinese transcription prompt, its text as the "context" lines; it needs ``torchaudio`` (the feature
extractor's Kaldi fbank).
"""

from .base import AudioFamily
from .registry import register

FAMILY = register(
    AudioFamily(
        name="fun_asr_nano",
        display="Fun-ASR-Nano",
        model_types=("fun_asr_nano",),
        model_class="FunAsrNanoForConditionalGeneration",
        max_clip_seconds=122.88,
        max_clips=1,
        audio_tokens_per_second=1000 / 60,
        asr_only=True,
        prompts_per_call=1,
        min_transformers="unknown",
        checkpoints=("FunAudioLLM/Fun-ASR-Nano-2512",),
        verified="ci",  # CI installs torchaudio 2.11.1 beside torch 2.14.1 (scripts/test.sh)
        notes=(
            "A speech recogniser (transcription only). One clip per prompt (the processor takes texts and clips "
            "1:1), the prompt's text shown as context of a Chinese transcription request. Needs torchaudio. "
            "Each prompt is its own processor call and generate (batching changes its answer). vLLM registers FunASRForConditionalGeneration for the original FunASR layout, not this "
            "transformers conversion."
        ),
    )
)
