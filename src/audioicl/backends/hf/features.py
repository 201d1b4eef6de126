"""Each clip through the family's feature extractor once, for the ``hf`` backend's fast paths.

A clip's features come from the processor's own call over that clip alone (a clip's features never depend on
its batch mates: Qwen3-Omni's processor pads a call to its longest clip), or from the family's
``clip_features`` where they proved equal to that call on the first clips asked. Where the encoder reads
only valid frames, a call pads to the longest clip plus a margin instead of the whole window (30 s,
Qwen2.5-Omni's 300 s): the frames kept are the same for far less work. Features are cached by content digest
(``lru.BoundedLRU``), so an episode's k prompts extract their shared clips once.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from audioicl.errors import AudioICLError
from audioicl.lru import BoundedLRU
from audioicl.prompts.chat import AudioPart

from ..families import AudioFamily
from ..rendering import audio_extractor
from .processed import PlaceholderMismatch

log = logging.getLogger("audioicl.backends")
PREFETCH_CLIPS = 64  # clips per processor call when extracting ahead
# A trimmed extraction pads a call's clips with this many zero samples past the longest instead of to the
# window (and keeps this many frames past each clip's valid ones): every frame the encoder's kept outputs
# read then comes out as over the whole window (tests/backends/hf/test_reuse.py compares them).
TRIM_MARGIN_SAMPLES = 4000
TRIM_KEEP_FRAMES = 8


@dataclass(frozen=True)
class ClipFeatures:
    """One clip as the processor makes it: ``features`` [mel bins, frames] (float32, on the CPU), ``valid``
    frames of them real audio (the rest the processor's padding, kept where the encoder sees it), and the
    number of audio tokens its placeholder becomes."""

    features: torch.Tensor
    valid: int
    tokens: int

    @property
    def nbytes(self) -> int:
        return self.features.numel() * self.features.element_size()


def _differs(made: tuple[Any, Any, list[int]], reference: tuple[Any, Any, list[int]]) -> str:
    """Why ``made`` (features, mask, tokens) is not ``reference``; empty where they are equal."""
    for name, ours, theirs in zip(("features", "valid frames"), made[:2], reference[:2], strict=True):
        if ours.shape != theirs.shape or not torch.equal(ours, theirs.to(ours.dtype)):
            return f"its clip_features' {name} differ from the processor's call"
    if list(made[2]) != list(reference[2]):
        return f"its clip_features count {list(made[2])} audio tokens, the processor {list(reference[2])}"
    return ""


def feature_batch(
    clips: Sequence[ClipFeatures], family: AudioFamily, model_dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """The clips' features as one tensor padded with zeros to the longest (``model_dtype``, but float32 where
    the family reads them so), and the mask of their valid frames."""
    bins = clips[0].features.shape[0]
    frames = max(clip.features.shape[1] for clip in clips)
    dtype = family.input_dtype(family.feature_keys[0], model_dtype)
    features = torch.zeros(len(clips), bins, frames, dtype=dtype)
    mask = torch.zeros(len(clips), frames, dtype=torch.int32)
    for row, clip in enumerate(clips):
        features[row, :, : clip.features.shape[1]] = clip.features
        mask[row, : clip.valid] = 1
    return features, mask


class SideStream:
    """The preparing thread's GPU work on a stream of its own (where there is one): the extractor's copy back to
    the host, and the encoder ahead, would otherwise wait behind every kernel the model's calls queued on the
    default stream (the runner prepares while the model runs)."""

    def __init__(self, device: torch.device, wanted: bool):
        self._side_stream = torch.cuda.Stream(device) if device.type == "cuda" and wanted else None

    @contextmanager
    def on(self) -> Iterator[None]:
        """The block's GPU work on the side stream where there is one, finished when the block ends (what
        the preparing thread leaves on the GPU is done before another stream reads it)."""
        if self._side_stream is None:
            yield
            return
        with torch.cuda.stream(self._side_stream):
            yield
        self._side_stream.synchronize()


class ClipFeaturizer:
    """A family's clips as its encoder reads them (``ClipFeatures``), cached by content digest; ``seconds``
    (the backend's) counts the time under ``features``."""

    def __init__(
        self,
        name: str,
        processor: Any,
        family: AudioFamily,
        device: torch.device,
        audio_token_id: int | None,
        seconds: dict[str, float],
        cache_bytes: int,
    ):
        self.name, self.processor, self.model_family, self.device = name, processor, family, device
        self.audio_token_id, self.seconds = audio_token_id, seconds
        self.extractor = audio_extractor(processor)
        self.sampling_rate = int(self.extractor.sampling_rate)
        # the feature extractor computes on the model's GPU where it takes a ``device`` (Whisper's does)
        self.on_device = (
            device.type == "cuda" and "device" in inspect.signature(self.extractor.__call__).parameters
        )
        self.features: BoundedLRU[str, ClipFeatures] = BoundedLRU(cache_bytes, lambda clip: clip.nbytes)
        self.lock = threading.Lock()  # ``prefetch`` runs in the runner's preparing thread
        self._direct_features: bool | None = None  # the family's clip_features in use (None: not checked yet)
        self.trim_to: int | None = None  # set by the backend where the encoder reads only valid frames
        self.stream = SideStream(device, False)

    def trim(self, reads_valid: bool) -> None:
        """Pad to the longest clip of a call instead of the window where the encoder reads only valid frames
        and the family's features do not depend on their batch."""
        window = getattr(self.extractor, "n_samples", None)
        self.trim_to = window if reads_valid and self.model_family.features_independent_of_batch else None

    def of(self, clip: AudioPart) -> ClipFeatures:
        """The clip's features, from the cache or extracted now."""
        with self.lock:
            return self.features.fetch(clip.digest, lambda: self._clip_features(clip))

    def _clip_features(self, clip: AudioPart) -> ClipFeatures:
        """The processor's own output for the clip alone: its feature row and how many audio tokens its
        placeholder became. Alone, so a clip's features never depend on its batch mates (Qwen3-Omni's
        processor pads a call to its longest clip, and a clip's token count then depends on the others)."""
        if self.model_family.tokenizes_chat:
            started = time.perf_counter()
            features, tokens = self.model_family.clip_inputs(self.processor, clip.wave, self.sampling_rate)
            self.seconds["features"] += time.perf_counter() - started
            return ClipFeatures(features, features.shape[-1], tokens)
        return self.extract([clip])[0]

    def extract(self, clips: Sequence[AudioPart]) -> list[ClipFeatures]:
        """One processor call over ``clips``, each with its own one-placeholder text (or the family's
        ``clip_features``, the same features without the text)."""
        started = time.perf_counter()
        with self.stream.on():
            features, mask, tokens = self._features_of(clips)
        made = []
        for row, count in enumerate(tokens):
            if count < 1:
                raise PlaceholderMismatch(f"the processor of {self.name} made no audio tokens for a clip")
            valid = int(mask[row].sum())
            kept = features[row].to(torch.float32)
            if self.model_family.features_frames_first:
                kept = kept.T  # [bins, frames], as every family's
            if self.model_family.encoder_reads_valid_frames:
                kept = kept[:, :valid]
            elif self.trim_to is not None:
                kept = kept[:, : valid + TRIM_KEEP_FRAMES]
            made.append(ClipFeatures(kept.clone(), valid, count))
        self.seconds["features"] += time.perf_counter() - started
        return made

    def _features_of(self, clips: Sequence[AudioPart]) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        """The clips' features (one row each), the masks of their valid frames and their audio tokens: the
        family's ``clip_features`` where it has them and they proved equal to the processor's own call on
        the first clips asked (``_direct_features``), else that call."""
        on_device = {"device": str(self.device)} if self.on_device else {}  # mel on the GPU
        waves = [clip.wave for clip in clips]
        if self.trim_to is None and self._direct_features is not False:
            made = self._direct(waves, on_device)
            if made is not None:
                return made
        return self._processor_features(waves, on_device)

    def _direct(self, waves: list[Any], on_device: dict[str, str]) -> Any:
        """The family's ``clip_features`` of ``waves``, checked once against the processor's call: a
        transformers release whose processor makes them otherwise (other kwargs, another token count) or
        cannot make them so turns them off for the run, said once in the log."""
        if self._direct_features:
            return self.model_family.clip_features(self.processor, waves, self.sampling_rate, **on_device)
        try:  # the errors caught: another transformers release, another helper or signature
            made = self.model_family.clip_features(self.processor, waves, self.sampling_rate, **on_device)
        except (ImportError, AttributeError, TypeError) as exc:
            made, why = None, f"{type(exc).__name__}: {exc}"
        else:
            why = "" if made is None else _differs(made, self._processor_features(waves, on_device))
        self._direct_features = made is not None and not why
        if why:
            log.warning("hf backend: %s features through its processor's call: %s", self.name, why)
        return made if self._direct_features else None

    def _processor_features(
        self, waves: list[Any], on_device: dict[str, str]
    ) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        """One processor call over ``waves``, each with its own one-placeholder text."""
        trim = {}
        if self.trim_to is not None:
            longest = max(len(wave) for wave in waves)
            trim = {"audio_kwargs": {"max_length": min(self.trim_to, longest + TRIM_MARGIN_SAMPLES)}}
        out = self.processor(
            text=[self.model_family.placeholder] * len(waves),
            audio=waves,
            sampling_rate=self.sampling_rate,
            return_tensors="pt",
            padding=True,
            **on_device,
            **trim,
        )
        features_key, mask_key = self.model_family.feature_keys
        if out.get(mask_key) is None or features_key not in out:
            raise PlaceholderMismatch(f"the processor of {self.name} returned no audio features for a clip")
        tokens = (out["input_ids"] == self.audio_token_id).sum(dim=1).tolist()
        return out[features_key], out[mask_key], tokens

    def prefetch(self, clips: Sequence[AudioPart]) -> None:
        """Extract the uncached ``clips`` together where a call's clips cannot change each other's features:
        all of them where the family's processor pads every clip to the window, else those of one length (a
        processor that pads a call to its longest clip, Qwen3-Omni's, then pads none of them; the others are
        extracted alone when their prompt is prepared). A failed call leaves its clips to be extracted one by
        one, so that a bad clip fails only its own prompt."""
        if self.model_family.tokenizes_chat:  # each clip through a call of its own (``clip_inputs``)
            return
        todo = list({clip.digest: clip for clip in clips if clip.digest not in self.features}.values())
        if self.model_family.features_independent_of_batch:
            groups = [todo]
        else:
            by_length: dict[int, list[AudioPart]] = {}
            for clip in todo:
                by_length.setdefault(len(clip.wave), []).append(clip)
            groups = [group for group in by_length.values() if len(group) > 1]
        for group in groups:  # longest first: a call pads its clips to its longest, so near lengths share one
            group = sorted(group, key=lambda clip: len(clip.wave), reverse=True)
            for start in range(0, len(group), PREFETCH_CLIPS):
                chunk = group[start : start + PREFETCH_CLIPS]
                try:
                    made = self.extract(chunk)
                except (AudioICLError, RuntimeError, ValueError):
                    continue
                with self.lock:
                    for clip, features in zip(chunk, made, strict=True):
                        self.features.put(clip.digest, features)
