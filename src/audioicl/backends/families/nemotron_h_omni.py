"""Nemotron-H Omni (``NemotronH_Omni_Reasoning_V3``): Parakeet audio into a hybrid Mamba/MoE model, 12.5 tokens a second.

From transformers 5.25: the processor (``processing_nemotron_h_omni.py``) extracts a call's clips together with
``ParakeetFeatureExtractor`` (``padding="longest"``, no ``max_length``, ``truncation=False``: nothing is cut) and
writes ``<so_start>`` + ``_estimate_audio_num_embeddings`` ``<so_embedding>`` + ``<so_end>`` per clip
(``1 + samples // 160`` mel frames, then three stride-2 convolutions: one token per 80 ms). The encoder masks the
padding between its convolutions and in attention, and the relative positions it uses are computed for any
length: no per-clip limit but the context (the model card quotes audio up to an hour).
"""

from typing import Any

from audioicl.errors import AudioICLError

from .base import VllmSupport
from .gemma4 import StringSystemFamily
from .registry import register


class NemotronOmniFamily(StringSystemFamily):
    """The system message as a string (the template concatenates it), and a check that the template wrote the
    parts as text: the text model's template writes a list content with ``| string``."""

    def process(self, processor: Any, texts, waves, sampling_rate: int) -> Any:
        """As the default, refusing a text whose template printed a content list instead of its parts."""
        for text in texts:
            if "{'type': " in text:
                raise AudioICLError(
                    "the checkpoint's chat template printed a message's content list instead of its parts; "
                    "give it a template that writes audio parts as <so_embedding> (see docs/models.md)"
                )
        return super().process(processor, texts, waves, sampling_rate)


FAMILY = register(
    NemotronOmniFamily(
        name="nemotron_h_omni",
        display="Nemotron-H Omni",
        model_types=("nemotron_h_omni",),
        model_class="NemotronH_Omni_Reasoning_V3",  # the hub config's architectures name the remote-code class
        max_clip_seconds=None,
        audio_tokens_per_second=12.5,  # audio_hop_length=160, audio_subsampling_factor=8
        min_transformers="5.25",  # the release tested here; the first with the family is unknown (see notes)
        checkpoints=("nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-BF16",),
        vllm=VllmSupport("NemotronH_Nano_Omni_Reasoning_V3", placeholder="<so_embedding>"),
        notes=(
            "A reasoning model: its chat template opens the answer with <think> (thinking on unless "
            "enable_thinking is false), so answers hold the reasoning trace. The checkpoint's own chat template "
            "was not found: the text model's writes a list content as a Python list, and audioicl refuses such "
            "prompts; the tiny test checkpoint's template writes audio parts as <so_embedding>. Clips are not cut "
            "(one token per 80 ms; the context bounds them). Mamba layers need the mamba-ssm kernels on GPU for "
            "speed; transformers' torch path runs them elsewhere. transformers >= 5.25 is the release tested; the "
            "hub config names the remote-code architecture NemotronH_Nano_Omni_Reasoning_V3, which vLLM serves."
        ),
    )
)
