"""Phi-4-multimodal in its original remote-code layout (``Phi4MMForCausalLM``, model type ``phi4mm``): vLLM only.

vLLM 0.32 serves this layout (``model_executor/models/phi4mm.py``), not the transformers conversion
(``Phi4MultimodalForCausalLM``, model type ``phi4_multimodal``: ``registry.py`` lists it as supported until vLLM
0.12). Any number of clips (``get_supported_mm_limits``: ``"audio": None``), each numbered in the prompt text
``<|audio_1|>``, ``<|audio_2|>`` ... (``get_placeholder_str``); the checkpoint's template takes string contents
(``<|user|>`` ... ``<|end|><|assistant|>``). One token per 80 ms of audio (``_compute_audio_embed_size``:
``compression_rate`` 8 of 10 ms frames).
"""

from .base import AudioFamily, VllmSupport
from .registry import register

FAMILY = register(
    AudioFamily(
        name="phi4mm",
        display="Phi-4-multimodal (remote code)",
        model_types=("phi4mm",),
        rendering="inline",
        placeholder="<|audio_{i}|>",
        audio_tokens_per_second=12.5,
        min_transformers="-",
        hf=False,
        verified="untested",
        checkpoints=("microsoft/Phi-4-multimodal-instruct",),
        vllm=VllmSupport("Phi4MMForCausalLM", placeholder="<|audio_{i}|>"),
        notes=(
            "The hub checkpoint's own layout, through vLLM (needs -o trust_remote_code=true); the transformers "
            "conversion (phi4_multimodal) runs on hf: only. vLLM's example adds the checkpoint's speech LoRA "
            "(enable_lora, max_lora_rank 320, a LoRARequest for speech-lora); audioicl passes no adapter, so the "
            "base weights answer. Untested here: no tiny checkpoint (remote code)."
        ),
    )
)
