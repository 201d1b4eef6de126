"""Gemma 4 with audio (``Gemma4ForConditionalGeneration``, the E2B and E4B checkpoints): 30 s per clip, cut silently.

Limits, from transformers 5.25: ``Gemma4AudioFeatureExtractor.__call__`` truncates every clip to
``max_length=480_000`` samples (30 s at 16 kHz, ``truncation=True``) without a word, and the processor
(``processing_gemma4.py``) caps a clip at ``audio_seq_length=750`` tokens; ``replace_audio_token`` writes
``<|audio>`` + one ``<|audio|>`` per valid 40 ms (the mel mask after two stride-2 steps: 25 a second) +
``<audio|>``. The 26B-A4B and 31B checkpoints have no audio tower (``convert_gemma4_weights.py``).
"""

from dataclasses import dataclass
from typing import Any

from audioicl.prompts.chat import Chat, message_text

from .base import AudioFamily, VllmSupport
from .registry import register


class StringSystemFamily(AudioFamily):
    """A family whose chat template writes the system message's content with ``| trim``: it must be a string."""

    def template_messages(self, chat: Chat) -> list[dict[str, Any]]:
        """As the parts rendering, the system message's content as its text (a list would be printed as a
        Python list)."""
        messages = super().template_messages(chat)
        if chat.messages and chat.messages[0].role == "system":
            messages[0] = {"role": "system", "content": message_text(chat.messages[0])}
        return messages


@dataclass(frozen=True)
class Gemma4Family(StringSystemFamily):
    """Gemma 4 (and Gemma 4 Unified) on the fast path (reuse.py's Gemma 4 parts): its template writes
    ``<|audio|>`` for a clip, which ``replace_audio_token`` expands to ``boa`` + one ``<|audio|>`` per token +
    ``eoa``; a clip's features at its valid frames are the same whatever its call's longest clip, and the audio
    tower masks the frames past a clip's end (Unified's projects each frame alone), so each clip is extracted
    and encoded alone. Equal to ``generate`` in fp32 on the CPU; on an H100 5.1x ``reuse=off`` on the 20-episode
    mix, its first-token logits as near fp32's as ``reuse=off``'s (docs/performance.md). A sampling call takes
    ``generate`` over the fast path's own inputs, ``mm_token_type_ids`` included as the processor makes them."""

    placeholder: str = "<|audio|>"
    audio_token: str = "<|audio|>"
    continuation_placeholder: str | None = "<|audio|>"  # what the template writes, the processor expands
    feature_keys: tuple[str, str] = ("input_features", "input_features_mask")
    features_frames_first: bool = True
    encoder_reads_valid_frames: bool = True
    features_independent_of_batch: bool = True

    def expansion(self, processor: Any, tokens: int) -> str:
        return processor.boa_token + self.audio_token * tokens + processor.eoa_token


FAMILY = register(
    Gemma4Family(
        name="gemma4",
        verified="gpu",  # full size, random weights: docs/measurements.md
        display="Gemma 4",
        model_types=("gemma4",),
        model_class="Gemma4ForConditionalGeneration",
        max_clip_seconds=30.0,  # feature_extraction_gemma4.py: max_length=480_000, truncation=True
        audio_tokens_per_second=25.0,  # processing_gemma4.py: audio_ms_per_token=40
        eager_towers=("audio_config",),  # transformers 5.25: Gemma4AudioModel refuses sdpa at load
        min_transformers="5.25",  # the release tested here; the first with Gemma 4 is unknown (see notes)
        checkpoints=("google/gemma-4-E2B-it", "google/gemma-4-E4B-it"),
        vllm=VllmSupport("Gemma4ForConditionalGeneration"),
        notes=(
            "Audio only in the E2B and E4B checkpoints (26B-A4B and 31B have no audio tower). A clip over 30 s is "
            "cut silently by the feature extractor (audioicl refuses such clips instead). The chat template "
            "trims each text part and takes the system message as a string; thinking stays off (no "
            "enable_thinking). transformers >= 5.25 is the release tested; the first release with Gemma 4 was "
            "not checked. The hf fast path (each clip encoded once, an episode's prefix computed once) is the "
            "default: equal to generate in fp32 on the CPU, 5.1x reuse=off on an H100."
        ),
    )
)
