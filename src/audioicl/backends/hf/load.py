"""Loading a checkpoint for the ``hf`` backend: its class (the family's, for Qwen2.5-Omni and Qwen3-Omni the
*Thinker*, which makes text and needs no speaker file, also from a full Omni checkpoint: its config's
``thinker_config``, weights under ``thinker.``; for a family without a class, the config's ``architectures``,
then the Auto classes where one takes its config), its processor, its speech LoRA where it ships one, the CUDA
allocator's segments, and the options that depend on the family, checked once the family is known."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import transformers

from audioicl.errors import AudioICLError

from ..families import FAMILIES, AudioFamily, family_of
from ..kinds import Settings
from ..rendering import check_chat_layout, config_sha256, generic_family, load_processor
from .codec import prepare_codecs
from .reuse.parts import PARTS

log = logging.getLogger("audioicl.backends")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
GENERIC_AUTO_CLASSES = (
    "AutoModelForMultimodalLM",
    "AutoModelForImageTextToText",
    "AutoModelForSpeechSeq2Seq",
)
GENERATION_TOKEN_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")


def torch_device(settings: Settings) -> torch.device:
    """``device``: auto is cuda where there is one, else cpu."""
    if settings.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(settings.device)
    except RuntimeError as exc:
        raise AudioICLError(f"backend option device: {exc}") from None


def torch_dtype(settings: Settings, device: torch.device) -> torch.dtype:
    """``dtype``: auto is bf16 on a GPU that has it, else fp32."""
    if settings.dtype != "auto":
        return DTYPES[settings.dtype]
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def reuse_for(settings: Settings, family: AudioFamily) -> str:
    """The reuse mode a run of ``family`` gets, the options that depend on it checked: as asked, else prefix
    where the family has the fast path (and attention it can take). ``cache`` is transformers' and applies
    only without the fast path; ``pack`` packs the fast path's rows and does nothing without it."""
    has_path = family.name in PARTS
    if settings.reuse is not None and settings.reuse != "off" and not has_path:
        raise AudioICLError(f"backend option reuse={settings.reuse}: not available for {family.name}")
    if settings.reuse not in (None, "off") and settings.attn == "flash_attention_2":
        raise AudioICLError("backend option reuse=audio|prefix needs attn=sdpa or eager (its masks are 4D)")
    default = "prefix" if has_path and settings.attn != "flash_attention_2" else "off"
    reuse = settings.reuse or default
    if settings.cache != "dynamic" and reuse != "off":
        raise AudioICLError(
            f"backend option cache applies to transformers' generate (reuse=off); {family.name} runs "
            f"reuse={reuse} here: add -o reuse=off"
        )
    if settings.pack == "on" and reuse == "off":
        why = "without reuse=off" if has_path else f"{family.name} has no fast path"
        raise AudioICLError(
            f"backend option pack=on packs the rows of the fast path (reuse=audio|prefix): {why}"
        )
    return reuse


def configure_allocator(asked: str, device: torch.device) -> dict[str, str]:
    """Set the CUDA caching allocator's segments for the run; what was asked and used, for the record.

    ``expandable`` (what ``auto`` picks on a CUDA device) lets the allocator grow a segment in place instead of
    caching blocks of fixed sizes: a run near the card's memory (Qwen3-Omni's 61 GB of weights on an 80 GB
    card) otherwise fails allocations on fragments it holds, and every attempt that runs out of memory is
    work thrown away (docs/measurements.md). A ``PYTORCH_CUDA_ALLOC_CONF`` the user set is left as it is by
    ``auto``. Answers do not depend on it."""
    made = {"asked": asked, "used": "default"}
    if asked == "default":
        return made
    if device.type != "cuda":
        if asked == "expandable":
            made["fallback"] = f"expandable segments are for CUDA devices, this run is on {device}"
            log.warning("hf backend: allocator=expandable left out: %s", made["fallback"])
        return made
    user = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
    if asked == "auto" and user:
        return {**made, "used": f"PYTORCH_CUDA_ALLOC_CONF={user}"}
    setting = getattr(torch._C, "_accelerator_setAllocatorSettings", None)  # torch >= 2.9; before, cuda's
    (setting or torch.cuda.memory._set_allocator_settings)("expandable_segments:True")
    return {**made, "used": "expandable_segments"}


@dataclass
class Loaded:
    model: Any
    processor: Any
    family: AudioFamily
    model_type: str
    config_sha256: str
    adapter: str | None = None  # the speech LoRA loaded, where the family has one
    codec_convs: int = 0  # the audio codec's convolutions made cheaper to call at load (``codec``)


def _model_class(model_type: str, family: AudioFamily | None, config: Any) -> Any:
    """The family's class, else the first of the config's ``architectures`` transformers has, else the Auto
    class that takes the config."""
    names = [family.model_class] if family is not None and family.model_class else []
    names += list(getattr(config, "architectures", None) or [])
    for name in names:
        found = getattr(transformers, name, None)
        if found is not None:
            return found
    for auto_name in GENERIC_AUTO_CLASSES:
        auto = getattr(transformers, auto_name, None)
        if auto is not None and type(config) in auto._model_mapping:
            return auto
    raise AudioICLError(
        f"model_type {model_type!r} is not an audio chat model audioicl can run through transformers "
        f"(supported: {', '.join(_known_types())}; others need a class in one of "
        f"{', '.join(GENERIC_AUTO_CLASSES)})"
    )


def _known_types() -> list[str]:
    return [t for _, f in FAMILIES.items() for t in f.model_types]


def load_checkpoint(name: str, settings: Settings, device: torch.device, chats: bool = True) -> Loaded:
    """Model (eval mode, on ``device``), processor and family of the checkpoint ``name``. ``chats``: the
    run's prompts are chats (``Workload.chats``): a checkpoint with no chat template is refused before its
    weights load, and a known base model is said to get a chat format it was not trained on."""
    try:
        config = transformers.AutoConfig.from_pretrained(name, trust_remote_code=settings.trust_remote_code)
    except (OSError, ValueError) as exc:
        raise AudioICLError(f"cannot load the checkpoint {name}: {exc}") from exc
    model_type = config.model_type
    known = family_of(model_type)
    processor = load_processor(name, settings.trust_remote_code)
    family = known or generic_family(model_type, processor)
    reuse_for(settings, family)  # options that do not fit the family, refused before any weight loads
    if chats:
        check_chat_layout(name, family, processor)
    cls = _model_class(model_type, known, config)
    load_kwargs: dict[str, Any] = {
        "dtype": torch_dtype(settings, device),
        "attn_implementation": attention_implementation(family, settings.attn),
        "trust_remote_code": settings.trust_remote_code,
        "device_map": {"": str(device)},
        # transformers >= 5.25 swaps layers for kernels fetched from the hub unless told not to: other numerics
        # than the checkpoint's own code, and a network fetch (a machine without network cannot load at all).
        # Off unless asked (-o hub_kernels=on), and recorded (backend_info).
        **(
            {"use_kernels": settings.hub_kernels == "on"}
            if hasattr(transformers.PreTrainedModel, "use_kernels")
            else {}
        ),
    }
    if known is not None and model_type in known.thinker_of:
        load_kwargs["config"] = config.thinker_config
        load_kwargs["key_mapping"] = {r"^thinker\.": ""}
    verbosity = transformers.logging.get_verbosity()
    if load_kwargs.get("key_mapping"):  # the talker and vocoder weights are left out on purpose: no report
        transformers.logging.set_verbosity_error()
    try:
        model = cls.from_pretrained(name, **load_kwargs)
    except (OSError, ValueError) as exc:
        raise AudioICLError(f"cannot load the weights of {name}: {exc}") from exc
    finally:
        transformers.logging.set_verbosity(verbosity)
    adapter = _load_speech_adapter(model, name, family)
    model.eval()
    codec_convs = prepare_codecs(model)
    return Loaded(model, processor, family, model_type, config_sha256(name, config), adapter, codec_convs)


def attention_implementation(family: AudioFamily, asked: str) -> str | dict[str, str]:
    """What ``from_pretrained`` gets for ``attn_implementation``: the family's own where it needs one, else the
    run's, per sub-config where some of the family's towers take eager attention only."""
    if family.attn is not None:
        return family.attn
    if family.eager_towers:
        return {"text_config": asked, **dict.fromkeys(family.eager_towers, "eager")}
    return asked


def _load_speech_adapter(model: Any, name: str, family: AudioFamily) -> str | None:
    """The family's speech LoRA loaded into ``model`` and made active, where the checkpoint folder holds one
    (the model card does the same; without it the model runs without its speech training): its folder."""
    if family.adapter is None:
        return None
    folder = Path(name).expanduser() / family.adapter
    if not (folder / "adapter_config.json").is_file():
        return None
    try:
        import peft  # noqa: F401  (transformers' load_adapter needs it)
    except ModuleNotFoundError:
        raise AudioICLError(
            f"{name}: the checkpoint ships a speech LoRA ({folder / 'adapter_config.json'}) that {family.label} "
            "needs to hear; install peft (pip install peft) to load it"
        ) from None
    model.load_adapter(str(folder), adapter_name="speech")
    model.set_adapter("speech")
    return str(folder)


def set_aside_generation_settings(model: Any) -> dict[str, Any]:
    """Leave the model's generation config only its token ids; return the settings set aside.

    A checkpoint's ``generation_config.json`` may carry sampling and penalty settings (a repetition penalty,
    top-p, ...) that transformers' ``generate`` applies to every call, even greedy ones with arguments left
    unset; the reuse path and vLLM take plain argmax. The protocol is plain greedy (SPEC §4), so every
    path gets the same answers only without them."""
    current = getattr(model, "generation_config", None)
    if current is None:
        return {}
    diff = current.to_diff_dict()
    set_aside = {
        key: value
        for key, value in diff.items()
        if key not in GENERATION_TOKEN_FIELDS and key != "transformers_version"
    }
    kept = {key: diff[key] for key in GENERATION_TOKEN_FIELDS if diff.get(key) is not None}
    model.generation_config = transformers.GenerationConfig(**kept)
    return set_aside


def backend_info(loaded: Loaded, settings: Settings, device: torch.device) -> dict[str, Any]:
    return {
        "model_type": loaded.model_type,
        "class": type(loaded.model).__name__,
        "config_sha256": loaded.config_sha256,
        "dtype": str(loaded.model.dtype).removeprefix("torch."),
        "device": str(device),
        "attn": attention_implementation(loaded.family, settings.attn),
        "hub_kernels": settings.hub_kernels if hasattr(transformers.PreTrainedModel, "use_kernels") else None,
        "adapter": loaded.adapter,
        "codec_convs": loaded.codec_convs,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
    }
