"""Ultravox (``UltravoxModel``, fixie-ai): a Whisper encoder and a Llama 3 language model, served by vLLM only.

transformers has no Ultravox (its checkpoints carry remote code). vLLM 0.32 ``model_executor/models/ultravox.py``:
``get_supported_mm_limits`` takes any number of clips; ``UltravoxProcessingInfo.get_hf_processor`` sets the
processor's ``audio_token_replacement`` to ``<|audio|>`` and ``_get_prompt_updates`` replaces that text in the
prompt, one clip per occurrence (``get_placeholder_str``: ``<|audio|>``). The checkpoint's Llama 3 chat template
takes string contents, so each clip is ``<|audio|>`` in the message's text, as vLLM's own example writes it. A clip
longer than 30 s is cut into 30 s Whisper windows (``audio_num_chunks``), and 8 encoder frames are stacked into one
token (``StackAudioFrames``: 6.25 tokens a second).
"""

from .base import AudioFamily, VllmSupport
from .registry import register

FAMILY = register(
    AudioFamily(
        name="ultravox",
        display="Ultravox",
        model_types=("ultravox",),
        rendering="inline",
        placeholder="<|audio|>",
        audio_token="<|audio|>",
        audio_tokens_per_second=6.25,
        min_transformers="-",
        hf=False,
        verified="untested",
        checkpoints=(
            "fixie-ai/ultravox-v0_5-llama-3_2-1b",
            "fixie-ai/ultravox-v0_5-llama-3_1-8b",
        ),
        vllm=VllmSupport("UltravoxModel", placeholder="<|audio|>"),
        notes=(
            "vLLM only (no transformers implementation). Needs -o trust_remote_code=true (the checkpoint's config "
            "and processor are remote code). Each clip is written <|audio|> in the message text. Untested here: no "
            "tiny checkpoint (its processor is remote code, which transformers cannot build offline)."
        ),
    )
)
