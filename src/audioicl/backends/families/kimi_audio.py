"""Kimi-Audio (``MoonshotKimiaForCausalLM``, Moonshot AI): served by vLLM only, as a speech recogniser, one clip.

transformers has no Kimi-Audio (remote code, a tiktoken tokenizer, no processor or chat template). vLLM 0.32
``model_executor/models/kimi_audio.py`` serves it through its transcription API: ``get_supported_mm_limits`` is
``{"audio": 1}``, the prompt is written by ``get_generation_prompt`` in Kimi's own tokens
(``<|im_kimia_user_msg_start|>`` ... ``<|im_media_begin|><|im_kimia_text_blank|><|im_media_end|>`` ...
``<|im_kimia_assistant_msg_start|>``), and vLLM's ``KimiAudioProcessor`` builds its Whisper features
(``whisper-large-v3`` subfolder).
"""

from .base import AudioFamily, VllmSupport
from .registry import register

FAMILY = register(
    AudioFamily(
        name="kimi_audio",
        display="Kimi-Audio",
        model_types=("kimi_audio",),
        max_clips=1,
        asr_only=True,
        min_transformers="-",
        hf=False,
        verified="untested",
        checkpoints=("moonshotai/Kimi-Audio-7B-Instruct", "moonshotai/Kimi-Audio-7B"),
        base_checkpoints=("moonshotai/Kimi-Audio-7B",),
        vllm=VllmSupport(
            "MoonshotKimiaForCausalLM",
            placeholder="<|im_media_begin|><|im_kimia_text_blank|><|im_media_end|>",
            max_clips=1,
        ),
        notes=(
            "vLLM serves it as a speech recogniser (its transcription API), one clip per prompt, so no in-context "
            "prompt (demos and a query: two clips or more) can reach it: the vllm backend refuses such prompts. "
            "It has no transformers processor or chat template, which the vllm backend renders prompts with, so "
            "audioicl cannot run it today (vllm serve's /v1/audio/transcriptions can). As a general audio "
            "model (instruct) and as a base model by continuation, its authors run it with their own package "
            "(kimia_infer, installed from github.com/MoonshotAI/Kimi-Audio, not a package registry) and message "
            "format; no engine serves it that way, so neither is reachable here. Untested."
        ),
    )
)
