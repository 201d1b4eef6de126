"""Each fast-path family's parts as the reuse path calls them (``ModelParts``): its text decoder, head and audio
encoder, found in its transformers model; ``PARTS`` maps a family to the function that finds them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import StaticCache
from transformers.cache_utils import StaticLayer
from transformers.masking_utils import create_bidirectional_mask

from .attention import PREFILL_ATTRIBUTE, attention_in_force, batched_windows, prefill_shape
from .rows import Layout, additive_mask

# --------------------------------------------------------------------------- the model's parts


@dataclass(frozen=True)
class ModelParts:
    """What the reuse path calls: the text decoder (embeddings and layers, no head), the head, and the
    family's audio encoder as ``encode(features, valid, tokens) -> one [tokens, hidden] per clip``
    (``features`` [clips, bins, frames] padded, ``valid`` frames and ``tokens`` audio tokens per clip);
    ``windowed_tower``: the audio encoder whose attention windows ``encode`` batches, if any."""

    decoder: Any
    head: Any
    encode: Callable[[torch.Tensor, torch.Tensor, Sequence[int]], list[torch.Tensor]]
    text_config: Any
    windowed_tower: Any = None
    # what else the decoder reads of a prompt's token ids when it is given embeddings (Gemma 4's per-layer
    # inputs), as keyword arguments
    read_inputs: Callable[[torch.Tensor], dict[str, torch.Tensor]] | None = None

    def attention(self) -> dict[str, Any]:
        """What this path's calls attend through, for the record."""
        return attention_in_force(self.text_config, self.windowed_tower)

    @property
    def sliding_window(self) -> int | None:
        """The window of the decoder's sliding-attention layers, where it has some (Gemma 4's)."""
        layer_types = getattr(self.text_config, "layer_types", None) or ()
        return self.text_config.sliding_window if "sliding_attention" in layer_types else None

    def masks(
        self,
        plan: Layout,
        queries: slice,
        rows: slice,
        dtype: torch.dtype,
        prefill: bool = False,
    ) -> dict[str, torch.Tensor]:
        """The additive masks of ``queries`` in ``rows`` by layer type: ``full_attention`` (``Layout.visible``)
        and, for a decoder with sliding layers, ``sliding_attention``: also no key ``sliding_window``
        positions or more before the query (by position ids, as transformers' sliding mask counts them).
        ``prefill`` (``queries`` a read's positions): the full mask also carries its ``attention.PrefillShape``
        (its causal head, the keys it reads)."""
        visible = plan.visible(queries, rows)
        made = {"full_attention": additive_mask(visible, dtype)}
        if prefill:
            setattr(made["full_attention"], PREFILL_ATTRIBUTE, prefill_shape(visible, queries))
        window = self.sliding_window
        if window is not None:
            positions = plan.positions[rows]
            distance = positions[:, queries, None] - positions[:, None, :]
            made["sliding_attention"] = additive_mask(visible & (distance < window), dtype)
        return made

    def cache(self, length: int) -> Any:
        """A static KV cache of ``length`` positions for every layer: sliding layers keep every position too
        (transformers' sliding layers keep a ring of the window, which the rows' layout cannot index; their
        masks keep the window). Each layer's write position starts on the decoder's device: transformers
        makes it on the CPU and copies it over at the layer's first write, a copy that waits for every kernel
        queued before it (once a layer a read: the host could not queue more than a layer ahead of the GPU)."""
        cache = StaticCache(config=self.text_config, max_cache_len=length)
        device = self.decoder.get_input_embeddings().weight.device
        for at, layer in enumerate(cache.layers):
            if getattr(layer, "is_sliding", False):
                cache.layers[at] = layer = StaticLayer(max_cache_len=length)
            written = getattr(layer, "cumulative_length", None)
            if isinstance(written, torch.Tensor) and written.device != device:
                layer.cumulative_length = torch.zeros_like(written, device=device)
        return cache


def _qwen2_audio_parts(model: Any, encoder: str = "valid") -> ModelParts:
    inner = model.model
    tower, projector = inner.audio_tower, inner.multi_modal_projector

    def encode(features: torch.Tensor, valid: torch.Tensor, tokens: Sequence[int]) -> list[torch.Tensor]:
        """The clips through the encoder and projector as ``Qwen2AudioModel.forward`` runs them (the
        padding frames masked out of attention), with ``encoder="window"`` over the whole 30 s window, with
        ``"valid"`` over only the frames the kept outputs depend on (``_valid_frames``)."""
        lengths, _ = tower._get_feat_extract_output_lengths(valid)
        if encoder == "valid":
            features = features[..., : _valid_frames(int(lengths.max()), features.shape[-1])]
        frames = (features.shape[-1] - 1) // 2 + 1
        mask_2d = (torch.arange(frames, device=features.device)[None, :] < lengths[:, None]).long()
        dummy = torch.zeros((features.shape[0], frames, 1), dtype=features.dtype, device=features.device)
        mask = create_bidirectional_mask(config=tower.config, inputs_embeds=dummy, attention_mask=mask_2d)
        if encoder == "valid":
            hidden = _qwen2_audio_encoder(tower, features, mask)
        else:
            hidden = tower(features, attention_mask=mask).last_hidden_state
        out = projector(hidden)
        return [out[clip, :count] for clip, count in enumerate(tokens)]

    return ModelParts(inner.language_model, model.lm_head, encode, model.config.text_config)


def _valid_frames(positions: int, window: int) -> int:
    """Mel frames to keep so that the encoder's first ``positions`` positions come out as over the whole
    ``window``: position j reads, through conv1 (kernel 3) and conv2 (kernel 3, stride 2), mel frames up to
    2j + 2, so 2 * positions + 2 frames leave every kept position's inputs untouched by the cut."""
    return min(window, 2 * positions + 2)


def _qwen2_audio_encoder(tower: Any, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``Qwen2AudioEncoder.forward`` (eval) over a window shorter than 30 s: the same layers, the position
    embeddings of the first positions. Its own forward refuses any input but the full window."""
    hidden = torch.nn.functional.gelu(tower.conv1(features.to(tower.conv1.weight.dtype)))
    hidden = torch.nn.functional.gelu(tower.conv2(hidden)).permute(0, 2, 1)
    hidden = hidden + tower.embed_positions.weight[: hidden.shape[1]]
    for layer in tower.layers:
        hidden = layer(hidden, mask)
    hidden = tower.avg_pooler(hidden.permute(0, 2, 1)).permute(0, 2, 1)
    return tower.layer_norm(hidden)


def _omni_thinker_parts(model: Any, encoder: str = "valid") -> ModelParts:
    tower = getattr(model, "audio_tower", None) or model.model.audio_tower  # moved under .model in 5.2x

    def encode(features: torch.Tensor, valid: torch.Tensor, tokens: Sequence[int]) -> list[torch.Tensor]:
        """The clips through the thinker's ``get_audio_features`` (valid frames only, every attention window
        of every clip in one call: ``attention.batched_windows``), split per clip."""
        frames = torch.arange(features.shape[-1], device=features.device)
        mask = (frames[None, :] < valid[:, None]).long()
        with batched_windows(tower):
            flat = model.get_audio_features(features, mask).last_hidden_state
        if flat.shape[0] != sum(tokens):
            raise ValueError(
                f"the audio encoder made {flat.shape[0]} embeddings for {sum(tokens)} audio tokens"
            )
        return list(torch.split(flat, list(tokens)))

    return ModelParts(model.model, model.lm_head, encode, model.config.text_config, windowed_tower=tower)


def _apertus_parts(model: Any, encoder: str = "valid") -> ModelParts:
    inner = model.model

    def encode(features: torch.Tensor, valid: torch.Tensor, tokens: Sequence[int]) -> list[torch.Tensor]:
        """Each clip's waveform ([clips, 1, samples], float32) through the WavTokenizer at its own length and
        its codes through the text embedding table (``Apertus1p5Model.get_audio_features``)."""
        samples = torch.arange(features.shape[-1], device=features.device)
        mask = (samples[None, :] < valid[:, None]).long()
        out = list(inner.get_audio_features(features.to(torch.float32), mask).pooler_output)
        if [len(clip) for clip in out] != list(tokens):
            raise ValueError(
                f"the audio tokenizer made {[len(c) for c in out]} codes for {list(tokens)} tokens"
            )
        return out

    return ModelParts(inner.language_model, model.lm_head, encode, model.config.text_config)


def _voxtral_parts(model: Any, encoder: str = "valid") -> ModelParts:
    inner = model.model
    frames = inner.audio_tower.config.max_source_positions * 2  # mel frames of one 30 s window (3000)

    def encode(features: torch.Tensor, valid: torch.Tensor, tokens: Sequence[int]) -> list[torch.Tensor]:
        """Each clip's 30 s windows (laid end to end in its feature row, the processor's padding included:
        the encoder reads every window whole) through the encoder and projector together, as
        ``VoxtralModel.get_audio_features`` takes a call's windows, split per clip."""
        bins = features.shape[1]
        windows = torch.cat(
            [
                features[clip, :, : int(count)].reshape(bins, -1, frames).transpose(0, 1)
                for clip, count in enumerate(valid.tolist())
            ]
        )
        flat = inner.get_audio_features(windows.to(inner.audio_tower.dtype)).pooler_output
        if flat.shape[0] != sum(tokens):
            raise ValueError(
                f"the audio encoder made {flat.shape[0]} embeddings for {sum(tokens)} audio tokens"
            )
        return list(torch.split(flat, list(tokens)))

    return ModelParts(inner.language_model, model.lm_head, encode, model.config.text_config)


def _gemma4_parts(model: Any, encoder: str = "valid") -> ModelParts:
    inner = model.model
    text_model, text_config = inner.language_model, model.config.get_text_config()
    audio_id, pad_id = model.config.audio_token_id, text_config.pad_token_id

    def encode(features: torch.Tensor, valid: torch.Tensor, tokens: Sequence[int]) -> list[torch.Tensor]:
        """The clips (``features`` [clips, bins, frames], given back to the tower frames first) through the
        audio tower and its projection as ``Gemma4Model.get_audio_features`` runs them (Gemma 4 Unified's:
        each frame's projection), each clip's valid embeddings (the tower's own mask of them)."""
        frames = torch.arange(features.shape[-1], device=features.device)
        mask = frames[None, :] < valid[:, None]
        out = inner.get_audio_features(features.transpose(1, 2), mask, return_dict=True)
        kept = [out.pooler_output[clip][out.attention_mask[clip]] for clip in range(len(tokens))]
        made = [len(clip) for clip in kept]
        if made != list(tokens):
            raise ValueError(f"the audio encoder made {made} embeddings for {list(tokens)} audio tokens")
        return kept

    def read_inputs(ids: torch.Tensor) -> dict[str, torch.Tensor]:
        """The per-layer inputs (PLE) of ``ids`` with every audio token read as padding, as
        ``Gemma4Model.forward`` makes them (the decoder cannot make them from embeddings alone)."""
        if not getattr(text_config, "hidden_size_per_layer_input", None):  # Gemma 4 Unified has none
            return {}
        return {
            "per_layer_inputs": text_model.get_per_layer_inputs(torch.where(ids == audio_id, pad_id, ids))
        }

    return ModelParts(text_model, model.lm_head, encode, text_config, read_inputs=read_inputs)


# family → its parts; Omni encoders read only valid frames whatever ``encoder`` says
PARTS: dict[str, Callable[..., ModelParts]] = {
    "qwen2-audio": _qwen2_audio_parts,
    "qwen2.5-omni": _omni_thinker_parts,
    "qwen3-omni": _omni_thinker_parts,
    "apertus1p5": _apertus_parts,
    "voxtral": _voxtral_parts,
    "gemma4": _gemma4_parts,
    "gemma4_unified": _gemma4_parts,  # the same decoder; its audio "tower" projects each frame alone
}
