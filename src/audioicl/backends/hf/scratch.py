"""Every prompt from scratch through transformers' ``generate`` (``-o reuse=off``, sampling, and every family
without the fast path): a window sorted by length and run in micro-batches with left padding; a ``parts``
family's inputs are exactly what its own processor makes of a micro-batch (``processed``)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ..base import GenerationConfig, GenerationStopped, Response
from .features import feature_batch
from .processed import Rendered, model_inputs


class FromScratch:
    """transformers' ``generate`` over the backend's (``owner``) prompts, a micro-batch at a time."""

    def __init__(self, owner: Any, kv_cache: str):
        self.owner = owner
        self.kv_cache = kv_cache  # transformers' cache_implementation: dynamic grows by concatenation

    def answer(self, prepared: list[Any], config: GenerationConfig) -> dict[int, Response]:
        prepared = sorted(prepared, key=lambda item: item.length, reverse=True)  # similar lengths together
        size = max(config.batch_size, 1)
        if self.owner.processed and self.owner.model_family.prompts_per_call is not None:
            size = min(size, self.owner.model_family.prompts_per_call)  # its processor pads prompts together
        responses: dict[int, Response] = {}
        for start in range(0, len(prepared), size):
            if self.owner.halted:
                raise GenerationStopped(responses)
            batch = prepared[start : start + size]
            responses.update(
                self.owner.halving(
                    batch, lambda b: self._generate_batch(b, config), lambda item: [item.index]
                )
            )
        return responses

    def _inputs(self, batch: Sequence[Any]) -> dict[str, Any]:
        """Model inputs for a micro-batch: tokens left-padded; the fast path's clips as one feature row each,
        padded with zeros to the longest row, and the feature mask marking the valid frames; each token's modality
        where the family's processor makes them (``mm_token_type_ids``, as its own call does); a parts
        family's, the processor's own call over the batch (a family that tokenizes chats: over their chats,
        ``PromptReady.chat``)."""
        if self.owner.processed or self.owner.model_family.tokenizes_chat:
            return self.model_inputs(batch)  # type: ignore[arg-type]
        processor = self.owner.processor
        inputs = dict(processor.tokenizer([item.text for item in batch], return_tensors="pt", padding=True))
        if getattr(processor, "return_mm_token_type_ids", False):  # Gemma 4's processor adds them to its call
            inputs["mm_token_type_ids"] = torch.tensor(
                processor.create_mm_token_type_ids(inputs["input_ids"])
            )
        clips = [clip for item in batch for clip in item.clips]
        if clips:
            features, mask = feature_batch(clips, self.owner.model_family, self.owner.model.dtype)
            if self.owner.model_family.features_frames_first:  # the processor's [clips, frames, bins]
                features = features.transpose(1, 2)
            inputs.update(zip(self.owner.model_family.feature_keys, (features, mask), strict=True))
        return {key: value.to(self.owner.device) for key, value in inputs.items()}

    def model_inputs(self, batch: Sequence[Rendered]) -> dict[str, Any]:
        """What ``generate`` gets for rendered prompts of a parts family (``processed.model_inputs``)."""
        started = time.perf_counter()
        inputs = model_inputs(
            self.owner.processor,
            self.owner.model_family,
            batch,
            sampling_rate=self.owner.sampling_rate,
            names=self.owner.forward_names,
            audio_token_id=self.owner.audio_token_id,
            device=self.owner.device,
            dtype=self.owner.model.dtype,
        )
        self.owner.seconds["features"] += time.perf_counter() - started
        return inputs

    def _generate_batch(self, batch: Sequence[Any], config: GenerationConfig) -> dict[int, Response]:
        """transformers' ``generate`` over the batch, every prompt from scratch (``reuse=off``, sampling, and
        every parts family). A prompt whose tokens do not fit the context gets an error response; the rest of
        the batch runs without it."""
        inputs = self._inputs(batch)
        too_long = self._over_context(batch, inputs, config.max_new_tokens)
        if too_long:
            kept = [item for item in batch if item.index not in too_long]
            return {**too_long, **(self._generate_batch(kept, config) if kept else {})}
        sampling = config.temperature > 0
        if sampling:
            torch.manual_seed(config.seed)
        started = time.perf_counter()
        with torch.inference_mode():
            out = self.owner.model.generate(**inputs, **self._generation_kwargs(config))
        sequences = out if isinstance(out, torch.Tensor) else out.sequences
        self.owner.seconds["generate"] += time.perf_counter() - started
        prompt_length = inputs["input_ids"].shape[1]
        new_tokens = sequences[:, prompt_length:].tolist()
        input_tokens = inputs["attention_mask"].sum(dim=1).tolist()
        audio_tokens = (
            (inputs["input_ids"] == self.owner.audio_token_id).sum(dim=1).tolist()
            if self.owner.audio_token_id is not None
            else [0] * len(batch)
        )
        responses = {}
        for item, tokens, n_in, n_audio in zip(batch, new_tokens, input_tokens, audio_tokens, strict=True):
            responses[item.index] = self.owner.respond(tokens, int(n_in), int(n_audio), config)
            self.owner.work["lm_tokens"] += int(n_in) + responses[item.index].usage.output_tokens
        self.owner.work["encoded_clips"] += sum(len(item.clips) for item in batch)
        self.owner.work["encoded_audio_tokens"] += sum(audio_tokens)
        return responses

    def _generation_kwargs(self, config: GenerationConfig) -> dict[str, Any]:
        """``generate``'s settings: greedy (no sampling flag: transformers warns of one on every greedy call),
        or plain temperature sampling as vLLM's (no top-k, no top-p; an argument left None would take
        transformers' default top-k of 50)."""
        sampling = config.temperature > 0
        return {
            "max_new_tokens": config.max_new_tokens,
            "do_sample": sampling,
            **({"temperature": config.temperature, "top_p": 1.0, "top_k": 0} if sampling else {}),
            "num_beams": 1,
            "eos_token_id": self.owner.stop_ids,
            "pad_token_id": self.owner.pad_token_id,
            **({"suppress_tokens": [self.owner.audio_token_id]} if self.owner.suppresses_audio_token else {}),
            **({"cache_implementation": self.kv_cache} if self.kv_cache != "dynamic" else {}),
        }

    def _over_context(
        self, batch: Sequence[Any], inputs: Mapping[str, Any], new_tokens: int
    ) -> dict[int, Response]:
        """Error responses for the prompts of ``batch`` whose inputs do not fit the context."""
        if self.owner.context_tokens is None:
            return {}
        lengths = inputs["attention_mask"].sum(dim=1).tolist()
        return {
            item.index: self.owner.context_error(int(length), new_tokens)
            for item, length in zip(batch, lengths, strict=True)
            if int(length) + new_tokens > self.owner.context_tokens
        }
