"""Music Flamingo (``MusicFlamingoForConditionalGeneration``): Audio Flamingo 3 with a rotary time embedding.

Limits, from transformers 5.25 ``processing_musicflamingo.py``: the AF3 windowing (30 s windows padded whole,
at most ``max_audio_len // chunk_length``, ``max_audio_len=1200``: a longer clip silently keeps its first 1200 s)
and the rotary time embedding's 1200 s (``MusicFlamingoConfig.default_theta``); 750 ``<sound>`` tokens a window,
between ``<|sound_bos|>`` and ``<|sound_eos|>``. One clip a prompt, as AF3 (``validate_inputs``: texts and
clips 1:1; the template writes one ``<sound>`` per message).
"""

from .base import AudioFamily
from .registry import register

FAMILY = register(
    AudioFamily(
        pad_call=False,  # as Audio Flamingo 3: Whisper windows taken whole
        name="musicflamingo",
        verified="gpu",  # full size, random weights: docs/measurements.md
        display="Music Flamingo",
        model_types=("musicflamingo",),
        model_class="MusicFlamingoForConditionalGeneration",
        max_clip_seconds=1200.0,
        max_clips=1,
        audio_tokens_per_second=25.0,
        min_transformers="unknown",
        checkpoints=("nvidia/music-flamingo-2601-hf", "nvidia/music-flamingo-hf"),
        notes=(
            "One clip per prompt through transformers (as Audio Flamingo 3). Clips are cut into 30 s windows, "
            "1200 s at most. Without a system message its template writes Music Flamingo's own system prompt. "
            "Not listed for vLLM: only vLLM releases up to 0.24 had MusicFlamingoForConditionalGeneration."
        ),
    )
)
