"""Fun-Audio-Chat (``FunAudioChatForConditionalGeneration``, FunAudioLLM): a Qwen3 language model with a continuous
(Whisper-mel) and a discrete audio encoder, served by vLLM only.

transformers has no Fun-Audio-Chat (its checkpoint's ``model_type`` ``funaudiochat`` is vLLM's own config class).
vLLM 0.32 ``model_executor/models/funaudiochat.py``: any number of clips (``get_supported_mm_limits``: ``"audio":
None``); each clip is ``<|audio_bos|><|AUDIO|><|audio_eos|>`` in the prompt (``get_placeholder_str``), its
``<|AUDIO|>`` expanded to the clip's tokens (``_get_prompt_updates``); the discrete encoder groups 25 Hz frames by 5
(5 tokens a second) and takes up to 1,500 tokens (``max_source_positions``: 300 s a clip).
"""

from .base import AudioFamily, VllmSupport
from .registry import register

FAMILY = register(
    AudioFamily(
        name="funaudiochat",
        display="Fun-Audio-Chat",
        model_types=("funaudiochat",),
        rendering="inline",
        placeholder="<|audio_bos|><|AUDIO|><|audio_eos|>",
        audio_token="<|AUDIO|>",
        max_clip_seconds=300.0,
        audio_tokens_per_second=5.0,
        min_transformers="-",
        hf=False,
        verified="untested",
        checkpoints=("FunAudioLLM/Fun-Audio-Chat-8B",),
        vllm=VllmSupport("FunAudioChatForConditionalGeneration"),
        notes=(
            "vLLM only (no transformers implementation). Each clip is written <|audio_bos|><|AUDIO|><|audio_eos|> in "
            "the message text, as vLLM's placeholder. A voice-chat model (speech in, text and speech out); the "
            "benchmark reads its text. Untested here: no tiny checkpoint (its config and processor are not in "
            "transformers)."
        ),
    )
)
