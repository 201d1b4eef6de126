"""MiniCPM-o (``MiniCPMO``, openbmb): omni model (image, video, audio in), served by vLLM only.

transformers has no MiniCPM-o (remote code). vLLM 0.32 ``model_executor/models/minicpmo.py``: any number of clips
(``get_supported_mm_limits``: ``"audio": None``); each clip is the text ``(<audio>./</audio>)`` in the prompt
(``MiniCPMOProcessingInfo.audio_pattern``, ``get_placeholder_str``), which vLLM's vendored ``MiniCPMOProcessor``
expands to the clip's ``<audio>``...``</audio>`` slots. The checkpoint's ChatML template takes string contents. Audio
tokens a second depend on the version's ``audio_pool_step`` (2 for 2.6: 25 a second; 5 for 4.5: 10 a second).
"""

from .base import AudioFamily, VllmSupport
from .registry import register

FAMILY = register(
    AudioFamily(
        name="minicpmo",
        display="MiniCPM-o",
        model_types=("minicpmo",),
        rendering="inline",
        placeholder="(<audio>./</audio>)",
        min_transformers="-",
        hf=False,
        verified="untested",
        checkpoints=("openbmb/MiniCPM-o-2_6",),
        vllm=VllmSupport("MiniCPMO", placeholder="(<audio>./</audio>)"),
        notes=(
            "vLLM only (no transformers implementation). Needs -o trust_remote_code=true (remote config, processor "
            "and tokenizer). The engine also reserves memory for images and video. Untested here: no tiny "
            "checkpoint (remote code)."
        ),
    )
)
