"""The registry of model families, filled by the family modules at import."""

from audioicl.registry import Registry

from .base import AudioFamily

FAMILIES: Registry[AudioFamily] = Registry("model family")


def register(family: AudioFamily) -> AudioFamily:
    return FAMILIES.add(family.name, family)


def family_of(model_type: str) -> AudioFamily | None:
    """The registered family whose ``model_types`` hold ``model_type``, or None."""
    return next((f for _, f in FAMILIES.items() if model_type in f.model_types), None)


def _verified(state: str) -> str:
    return {"ci": "tiny checkpoint in CI", "gpu": "full size on GPU + CI", "untested": "untested"}[state]


def _seconds(family: AudioFamily) -> str:
    """The per-clip limit: the family's, else its feature extractor's window (hf; any where it has none), else
    the engine's."""
    if family.max_clip_seconds is not None:
        return f"{family.max_clip_seconds:g}"
    if not family.windowed:
        return "any"
    return "window" if family.hf else "engine's"


def model_rows() -> list[dict[str, str]]:
    """One row per family for ``audioicl models`` and ``docs/models.md``: backends, limits, what is verified."""
    rows = []
    for _, family in FAMILIES.items():
        backends = [name for name, on in (("hf", family.hf), ("vllm", family.vllm is not None)) if on]
        backends += [f"{family.served_by}: {_verified(family.verified)}"] if family.served_by else []
        clips = family.max_clips
        vllm_clips = family.vllm.max_clips if family.vllm is not None else None
        rows.append(
            {
                "family": family.label + (" (ASR only)" if family.asr_only else ""),
                "model_type": ", ".join(family.model_types),
                "backends": ", ".join(backends),
                "clips per prompt": ("any" if clips is None else str(clips))
                + (f" (vllm: {vllm_clips})" if vllm_clips is not None else ""),
                "s per clip": _seconds(family),
                "audio tokens/s": "-"
                if family.audio_tokens_per_second is None
                else f"{family.audio_tokens_per_second:g}",
                "hf": _verified(family.verified) if family.hf else "-",
                "vllm": _verified(family.vllm.verified) if family.vllm is not None else "-",
                "transformers": f">= {family.min_transformers}" if family.hf else "-",
                # the name testing.tiny_checkpoint takes (the family's model type) where CI writes one
                "tiny": family.model_types[0] if family.hf and family.verified in ("ci", "gpu") else "-",
                "checkpoints": ", ".join(
                    f"{name} (base)" if name in family.base_checkpoints else name
                    for name in family.checkpoints
                ),
            }
        )
    return rows


def declared_clip_limit(kind: str, name: str) -> tuple[AudioFamily, int] | None:
    """The family of a local checkpoint folder and the clips per prompt it takes on backend ``kind``, read
    from its ``config.json`` before anything loads; None where the folder, its family or a limit is unknown."""
    import json
    from pathlib import Path

    config = Path(name).expanduser() / "config.json"
    if kind not in ("hf", "vllm") or not config.is_file():
        return None
    try:
        model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None  # the backend's own load reports an unreadable config
    family = family_of(model_type) if isinstance(model_type, str) else None
    if family is None:
        return None
    limit = family.vllm.max_clips if kind == "vllm" and family.vllm is not None else None
    limit = limit if limit is not None else family.max_clips
    return None if limit is None else (family, limit)
