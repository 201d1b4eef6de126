"""MiMo-Audio (Xiaomi, "Audio Language Models are Few-Shot Learners", arXiv 2512.23808): the base model whose
few-shot learning by continuation is the field's headline audio in-context-learning result, and its instruct
model.

Neither transformers nor vLLM implements it: its checkpoints say ``model_type: qwen2`` with the architecture
``MiMoAudioForCausalLM`` of the authors' own code (github.com/XiaomiMiMo/MiMo-Audio), which reads audio as the
codes of its own tokenizer (``XiaomiMiMo/MiMo-Audio-Tokenizer``, 8 RVQ channels at 25 Hz) rather than encoder
features. vLLM-Omni serves it through an OpenAI-compatible chat server (``vllm serve
XiaomiMiMo/MiMo-Audio-7B-Instruct --omni --chat-template examples/online_serving/mimo_audio/chat_template.jinja``
with ``MIMO_AUDIO_TOKENIZER_PATH`` set, per vLLM-Omni's example), which audioicl's ``openai`` backend can ask.
"""

from .base import AudioFamily
from .registry import register

FAMILY = register(
    AudioFamily(
        name="mimo_audio",
        display="MiMo-Audio",
        model_types=(),  # its config says qwen2: nothing here may claim that type for it
        hf=False,
        min_transformers="-",
        verified="untested",
        served_by="openai (vLLM-Omni)",
        checkpoints=("XiaomiMiMo/MiMo-Audio-7B-Instruct", "XiaomiMiMo/MiMo-Audio-7B-Base"),
        base_checkpoints=("XiaomiMiMo/MiMo-Audio-7B-Base",),
        notes=(
            "Instruct: a vLLM-Omni server with the chat template of its example, then "
            "audioicl run --model openai:MiMo-Audio-7B-Instruct --base-url http://HOST:PORT/v1 (the chat layouts). "
            "Base: by continuation only, which a chat completions server cannot take (the openai backend refuses "
            "--layout continuation); its authors' MiMo-Audio-Eval runs it with their own code. Not run here: no "
            "vLLM-Omni, no GPU model, no network to fetch the tokenizer; untested."
        ),
    )
)
