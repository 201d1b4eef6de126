"""MiDashengLM (``MiDashengLMModel``, Xiaomi): a Dasheng audio encoder and a Qwen2.5 language model, vLLM only.

transformers has no MiDashengLM (remote code). vLLM 0.32 ``model_executor/models/midashenglm.py`` takes any number of
clips (``get_supported_mm_limits``: ``"audio": None``), calls the checkpoint's own processor on the prompt text and
replaces each ``<|AUDIO|>`` token with the clip's features (``_get_prompt_updates``); its placeholder is
``<|audio_bos|><|AUDIO|><|audio_eos|>`` (``get_placeholder_str``), which the checkpoint's chat template writes for
an audio part, so the chat is rendered as its model card does it (content parts).
"""

from .base import AudioFamily, VllmSupport
from .registry import register

FAMILY = register(
    AudioFamily(
        name="midashenglm",
        display="MiDashengLM",
        model_types=("midashenglm",),
        audio_token="<|AUDIO|>",
        min_transformers="-",
        hf=False,
        verified="untested",
        checkpoints=("mispeech/midashenglm-7b",),
        vllm=VllmSupport("MiDashengLMModel"),
        notes=(
            "vLLM only (no transformers implementation). Needs -o trust_remote_code=true (remote processor). vLLM "
            "profiles clips of 0.2 to 10 s (get_min_audio_len, get_max_audio_len); the longest clip the model "
            "takes is not established here. Untested here: no tiny checkpoint (remote code)."
        ),
    )
)
